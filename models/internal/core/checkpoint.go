package core

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gotpu/gotpu/internal/safetensors"
)

// File names of a Hugging Face model directory.
const (
	ConfigFile      = "config.json"
	WeightsFile     = "model.safetensors"
	WeightsIndex    = "model.safetensors.index.json"
	GenerationFile  = "generation_config.json"
	shardNameFormat = "model-%05d-of-%05d.safetensors"
)

// ErrPickle is wrapped by the error for a directory that only has PyTorch pickle weights.
var ErrPickle = errors.New("only PyTorch pickle weights found")

// pickleFiles are weight files gotpu recognises but refuses: loading a pickle runs arbitrary code.
var pickleFiles = []string{"pytorch_model.bin", "pytorch_model.bin.index.json", "tf_model.h5", "flax_model.msgpack",
	"model.ckpt.index"}

// Entry locates one tensor of a checkpoint.
type Entry struct {
	File *safetensors.File
	Info safetensors.TensorInfo
}

// Checkpoint is the set of safetensors files of a model directory, opened and validated.
type Checkpoint struct {
	Dir     string
	Files   []*safetensors.File
	Tensors map[string]Entry
	// Order lists tensor names in file order then offset order (stable across runs).
	Order []string
	// Index is the path of model.safetensors.index.json for a sharded checkpoint.
	Index string
}

// OpenCheckpoint opens dir's model.safetensors, or the shards listed by model.safetensors.index.json.
func OpenCheckpoint(dir string) (*Checkpoint, error) {
	single := filepath.Join(dir, WeightsFile)
	index := filepath.Join(dir, WeightsIndex)
	ck := &Checkpoint{Dir: dir, Tensors: map[string]Entry{}}
	switch {
	case fileExists(single):
		f, err := safetensors.Open(single)
		if err != nil {
			return nil, err
		}
		ck.Files = []*safetensors.File{f}
		for _, name := range f.Names() {
			info, _ := f.Info(name)
			ck.Tensors[name] = Entry{File: f, Info: info}
			ck.Order = append(ck.Order, name)
		}
		return ck, nil
	case fileExists(index):
		ck.Index = index
		if err := ck.openSharded(index); err != nil {
			ck.Close()
			return nil, err
		}
		return ck, nil
	}
	for _, p := range pickleFiles {
		if fileExists(filepath.Join(dir, p)) {
			return nil, fmt.Errorf("%s: %w (%s): gotpu reads only safetensors (%s or %s), because loading a "+
				"pickle can run arbitrary code; convert it once in Python, e.g. "+
				"model.save_pretrained(dir, safe_serialization=True)", dir, ErrPickle, p, WeightsFile, WeightsIndex)
		}
	}
	if _, err := os.Stat(dir); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("%s: no %s or %s", dir, WeightsFile, WeightsIndex)
}

// ShardIndex is model.safetensors.index.json.
type ShardIndex struct {
	Metadata  map[string]any    `json:"metadata"`
	WeightMap map[string]string `json:"weight_map"`
}

// MaxIndexSize bounds model.safetensors.index.json (Llama 3 405B's is ~100 KB); ResolvePretrained
// downloads none larger.
const MaxIndexSize = 16 << 20

// ReadShardIndex reads model.safetensors.index.json and returns it with the shard file names it
// lists, once each, sorted, refusing any that is not a plain file name: an index must never make
// gotpu read (or fetch) outside the model directory.
func ReadShardIndex(indexPath string) (idx ShardIndex, shards []string, err error) {
	f, err := os.Open(indexPath)
	if err != nil {
		return idx, nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > MaxIndexSize {
		return idx, nil, fmt.Errorf("%s: %d bytes, more than the %d an index may have", indexPath, st.Size(), MaxIndexSize)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxIndexSize+1))
	if err != nil {
		return idx, nil, err
	}
	if err := json.Unmarshal(b, &idx); err != nil {
		return idx, nil, fmt.Errorf("%s: %w", indexPath, err)
	}
	if len(idx.WeightMap) == 0 {
		return idx, nil, fmt.Errorf("%s: field \"weight_map\" is missing or empty", indexPath)
	}
	seen := map[string]bool{}
	for _, s := range idx.WeightMap {
		if !seen[s] {
			seen[s] = true
			shards = append(shards, s)
		}
	}
	slices.Sort(shards)
	for _, s := range shards {
		if s == "" || s != filepath.Base(s) || s == "." || s == ".." || strings.ContainsAny(s, `/\`) {
			return idx, nil, fmt.Errorf("%s: weight_map names shard %q, which is not a file name in the model directory", indexPath, s)
		}
	}
	return idx, shards, nil
}

func (ck *Checkpoint) openSharded(indexPath string) error {
	idx, shards, err := ReadShardIndex(indexPath)
	if err != nil {
		return err
	}
	// Open each shard once, in name order.
	shardOf := map[string]*safetensors.File{}
	for _, s := range shards {
		p := filepath.Join(ck.Dir, s)
		if !fileExists(p) {
			return fmt.Errorf("%s: weight_map points to shard %s, which does not exist", indexPath, p)
		}
		f, err := safetensors.Open(p)
		if err != nil {
			return err
		}
		shardOf[s] = f
		ck.Files = append(ck.Files, f)
	}
	for _, f := range ck.Files {
		for _, name := range f.Names() {
			want, listed := idx.WeightMap[name]
			if !listed {
				return fmt.Errorf("%s: tensor %q is not listed in %s", f.Path(), name, indexPath)
			}
			if shardOf[want] != f {
				return fmt.Errorf("%s: tensor %q is in %s but the index says %s", indexPath, name, filepath.Base(f.Path()), want)
			}
			info, _ := f.Info(name)
			ck.Tensors[name] = Entry{File: f, Info: info}
			ck.Order = append(ck.Order, name)
		}
	}
	names := make([]string, 0, len(idx.WeightMap))
	for n := range idx.WeightMap {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if _, ok := ck.Tensors[n]; !ok {
			return fmt.Errorf("%s: tensor %q listed for shard %s is not in that file", indexPath, n, idx.WeightMap[n])
		}
	}
	return nil
}

// Source names the checkpoint for errors: the single weights file, or the index of a sharded one.
func (ck *Checkpoint) Source() string {
	if ck.Index != "" {
		return ck.Index
	}
	if len(ck.Files) == 1 {
		return ck.Files[0].Path()
	}
	return ck.Dir
}

// Close closes every file.
func (ck *Checkpoint) Close() error {
	var errs []error
	for _, f := range ck.Files {
		errs = append(errs, f.Close())
	}
	return errors.Join(errs...)
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}
