package core

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"

	"github.com/gotpu/gotpu/internal/atomicfile"
	"github.com/gotpu/gotpu/internal/safetensors"
)

// SplitShards groups tensors (in order) into shards the way huggingface_hub's
// split_state_dict_into_shards does: a tensor larger than maxSize gets a shard of its own; otherwise
// a tensor that would push the current shard over maxSize starts a new one.
func SplitShards(tensors []safetensors.Tensor, maxSize int64) [][]safetensors.Tensor {
	var shards [][]safetensors.Tensor
	var cur []safetensors.Tensor
	var curSize int64
	for _, t := range tensors {
		size := t.Size()
		if size > maxSize {
			shards = append(shards, []safetensors.Tensor{t})
			continue
		}
		if curSize+size > maxSize && len(cur) > 0 {
			shards = append(shards, cur)
			cur, curSize = nil, 0
		}
		cur = append(cur, t)
		curSize += size
	}
	if len(cur) > 0 {
		shards = append(shards, cur)
	}
	return shards
}

// WriteShards writes the tensors as model.safetensors, or as model-0000i-of-0000N.safetensors plus
// model.safetensors.index.json, and returns the file names written.
func WriteShards(dir string, tensors []safetensors.Tensor, maxSize int64) ([]string, error) {
	md := map[string]string{"format": "pt"}
	shards := SplitShards(tensors, maxSize)
	if len(shards) <= 1 {
		if err := safetensors.WriteFile(filepath.Join(dir, WeightsFile), tensors, md); err != nil {
			return nil, err
		}
		return []string{WeightsFile}, nil
	}
	weightMap := map[string]string{}
	var total int64
	var names []string
	for i, shard := range shards {
		name := fmt.Sprintf(shardNameFormat, i+1, len(shards))
		if err := safetensors.WriteFile(filepath.Join(dir, name), shard, md); err != nil {
			return nil, err
		}
		for _, t := range shard {
			weightMap[t.Name] = name
			total += t.Size()
		}
		names = append(names, name)
	}
	// transformers writes the index with json.dumps(index, indent=2, sort_keys=True) + "\n";
	// encoding/json's map ordering is also sorted.
	idx := struct {
		Metadata  map[string]int64  `json:"metadata"`
		WeightMap map[string]string `json:"weight_map"`
	}{map[string]int64{"total_size": total}, weightMap}
	b, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := writeFileAtomic(filepath.Join(dir, WeightsIndex), append(b, '\n')); err != nil {
		return nil, err
	}
	return append(names, WeightsIndex), nil
}

var staleWeights = regexp.MustCompile(`^model(-\d{5}-of-\d{5})?\.safetensors(\.index\.json)?$`)

// removeStaleWeights deletes weight files of an earlier save that this save did not write, so a
// directory never holds both a single file and shards (loaders would pick the wrong one).
func removeStaleWeights(dir string, written []string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	removed := false
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !staleWeights.MatchString(n) || slices.Contains(written, n) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, n)); err != nil {
			return err
		}
		removed = true
	}
	if removed {
		// Durable like the files written: after a crash the directory must not come back with a
		// stale weight file next to the new ones.
		return atomicfile.SyncDir(dir)
	}
	return nil
}
