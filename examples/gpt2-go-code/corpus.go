package main

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/data/tokenizer"
)

// goSources lists the Go standard library's non-test sources, split into training and held-out
// files by a hash of their path (1 in 20 held out), sorted, with the training set cut to budget
// bytes. The same GOROOT gives the same corpus on every run.
func goSources(budget int) (train, heldOut []string, err error) {
	//lint:ignore SA1019 the fallback when the go command is not on PATH: the GOROOT of the build
	root := runtime.GOROOT()
	if out, err := exec.Command("go", "env", "GOROOT").Output(); err == nil {
		root = strings.TrimSpace(string(out))
	}
	src := filepath.Join(root, "src")
	var files []string
	err = filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "vendor") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("reading the Go sources under %s: %w", src, err)
	}
	sort.Strings(files)
	size := 0
	for _, f := range files {
		h := fnv.New32a()
		h.Write([]byte(strings.TrimPrefix(f, src)))
		if h.Sum32()%20 == 0 {
			if len(heldOut) < 200 {
				heldOut = append(heldOut, f)
			}
			continue
		}
		if size < budget {
			info, err := os.Stat(f)
			if err != nil {
				return nil, nil, err
			}
			size += int(info.Size())
			train = append(train, f)
		}
	}
	if len(train) == 0 || len(heldOut) == 0 {
		return nil, nil, fmt.Errorf("no Go sources found under %s", src)
	}
	return train, heldOut, nil
}

// tokenize encodes whole files (run_clm's group_texts with one document per file).
func tokenize(ctx context.Context, tok tokenizer.Tokenizer, files []string) ([]uint32, error) {
	var ids []uint32
	for doc, err := range data.TextFiles(files) {
		if err != nil {
			return nil, err
		}
		enc, err := tok.Encode(doc, true)
		if err != nil {
			return nil, err
		}
		ids = append(ids, enc.IDs...)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// blocks cuts a token stream into training examples of n tokens (the remainder is dropped).
func blocks(ids []int32, n int) []data.Example {
	var out []data.Example
	for i := 0; i+n <= len(ids); i += n {
		out = append(out, data.Example{InputIDs: ids[i : i+n : i+n]})
	}
	return out
}

// vocabMap maps GPT-2 token ids to a compact vocabulary: the size-1 most frequent ids of the
// training data, then one id for everything else.
type vocabMap struct {
	toCompact map[uint32]int32
	toGPT2    []uint32
}

func newVocabMap(train []uint32, size int) *vocabMap {
	counts := map[uint32]int{}
	for _, id := range train {
		counts[id]++
	}
	ids := make([]uint32, 0, len(counts))
	for id := range counts {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		if counts[ids[i]] != counts[ids[j]] {
			return counts[ids[i]] > counts[ids[j]]
		}
		return ids[i] < ids[j]
	})
	if len(ids) > size-1 {
		ids = ids[:size-1]
	}
	m := &vocabMap{toCompact: map[uint32]int32{}, toGPT2: ids}
	for i, id := range ids {
		m.toCompact[id] = int32(i)
	}
	return m
}

func (m *vocabMap) unknown() int32 { return int32(len(m.toGPT2)) }

func (m *vocabMap) apply(ids []uint32) []int32 {
	out := make([]int32, len(ids))
	for i, id := range ids {
		c, ok := m.toCompact[id]
		if !ok {
			c = m.unknown()
		}
		out[i] = c
	}
	return out
}

func (m *vocabMap) applyIDs(ids []uint32) []int {
	out := make([]int, len(ids))
	for i, c := range m.apply(ids) {
		out[i] = int(c)
	}
	return out
}

func (m *vocabMap) invert(ids []int) []uint32 {
	var out []uint32
	for _, c := range ids {
		if c >= 0 && c < len(m.toGPT2) {
			out = append(out, m.toGPT2[c])
		}
	}
	return out
}

func (m *vocabMap) unknownRate(ids []uint32) float64 {
	unk := 0
	for _, id := range ids {
		if _, ok := m.toCompact[id]; !ok {
			unk++
		}
	}
	return float64(unk) / float64(max(len(ids), 1))
}

func (m *vocabMap) save(path string) error {
	b, err := json.Marshal(map[string]any{"gpt2_ids_by_compact_id": m.toGPT2, "unknown_id": m.unknown()})
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
