package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
)

// vocabFile is where the example keeps its vocabulary map, beside config.json.
const vocabFile = "vocab_map.json"

// vocabMap maps Mistral token ids to the model's compact vocabulary: the tokenizer's special
// tokens first (so <unk>, <s>, </s> keep ids 0, 1, 2, which config.json's bos/eos ids name),
// then the most frequent ids of the training data, then one id for every other token. Mistral's
// 32000-entry output layer would be most of a small model's compute on a CPU; the map keeps the
// tokens that matter for these corpora. A nil map (a base model with the full vocabulary) is the
// identity. (A copy of examples/llama-finetune's: examples are standalone programs.)
type vocabMap struct {
	// Mistral holds the Mistral id of each compact id but the last (the "other" id).
	Mistral   []uint32 `json:"mistral_ids_by_compact_id"`
	Other     int32    `json:"other_id"`
	toCompact map[uint32]int32
}

// newVocabMap keeps the specials and the size-1-len(specials) most frequent ids of train.
func newVocabMap(train []uint32, specials []uint32, size int) (*vocabMap, error) {
	if size < len(specials)+2 {
		return nil, fmt.Errorf("-vocab: %d leaves no room beside the %d special tokens", size, len(specials))
	}
	counts := map[uint32]int{}
	for _, id := range train {
		counts[id]++
	}
	keep := slices.Clone(specials)
	var ids []uint32
	for id := range counts {
		if !slices.Contains(specials, id) {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b uint32) int { return cmp.Or(cmp.Compare(counts[b], counts[a]), cmp.Compare(a, b)) })
	keep = append(keep, ids[:min(len(ids), size-1-len(specials))]...)
	m := &vocabMap{Mistral: keep, Other: int32(len(keep))}
	return m, m.index()
}

func (m *vocabMap) index() error {
	m.toCompact = make(map[uint32]int32, len(m.Mistral))
	for i, id := range m.Mistral {
		if _, dup := m.toCompact[id]; dup {
			return fmt.Errorf("mistral id %d appears twice", id)
		}
		m.toCompact[id] = int32(i)
	}
	if int(m.Other) != len(m.Mistral) {
		return fmt.Errorf("other_id %d, want %d (the number of mapped ids)", m.Other, len(m.Mistral))
	}
	return nil
}

// size is the model vocabulary the map needs.
func (m *vocabMap) size() int { return len(m.Mistral) + 1 }

func (m *vocabMap) apply(ids []uint32) []int32 {
	out := make([]int32, len(ids))
	for i, id := range ids {
		if m == nil {
			out[i] = int32(id)
			continue
		}
		c, ok := m.toCompact[id]
		if !ok {
			c = m.Other
		}
		out[i] = c
	}
	return out
}

// otherRate is the fraction of ids the map sends to the "other" id.
func (m *vocabMap) otherRate(ids []uint32) float64 {
	if m == nil || len(ids) == 0 {
		return 0
	}
	n := 0
	for _, id := range ids {
		if _, ok := m.toCompact[id]; !ok {
			n++
		}
	}
	return float64(n) / float64(len(ids))
}

func (m *vocabMap) save(path string) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// loadVocabMap reads a map written by save; a missing file is (nil, nil): the model uses the
// tokenizer's vocabulary as it is.
func loadVocabMap(path string) (*vocabMap, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var m vocabMap
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := m.index(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &m, nil
}
