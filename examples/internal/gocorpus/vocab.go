package gocorpus

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/gotpu/gotpu/data/tokenizer"
)

// VocabFile is where the examples keep a model's vocabulary map, beside its config.json.
const VocabFile = "vocab_map.json"

// VocabMap maps Mistral token ids to a model's compact vocabulary: the tokenizer's special
// tokens first (so <unk>, <s>, </s> keep ids 0, 1, 2, which config.json's bos/eos ids name),
// then the most frequent ids of the training data, then one id for every other token. Mistral's
// 32000-entry output layer would be most of a small model's compute on a CPU; the map keeps the
// tokens that matter for the corpus. A nil map (a model with the full vocabulary) is the
// identity. A map is not changed once made: its methods are safe for concurrent use.
type VocabMap struct {
	// Mistral holds the Mistral id of each compact id but the last (the "other" id).
	Mistral   []uint32 `json:"mistral_ids_by_compact_id"`
	Other     int32    `json:"other_id"`
	toCompact map[uint32]int32
}

// SpecialIDs are the ids of the tokenizer's special added tokens (Mistral's <unk>, <s>, </s>), in
// the tokenizer's order: the first ids of a new VocabMap.
func SpecialIDs(tok *tokenizer.Pipeline) []uint32 {
	var specials []uint32
	for _, a := range tok.AddedTokens() {
		if a.Special {
			specials = append(specials, a.ID)
		}
	}
	return specials
}

// NewVocabMap keeps the specials and the size-1-len(specials) most frequent ids of train (ties
// by the smaller id); every other id maps to the last compact id, so the map's Size is size, or
// less when train has fewer distinct ids.
func NewVocabMap(train []uint32, specials []uint32, size int) (*VocabMap, error) {
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
	m := &VocabMap{Mistral: keep, Other: int32(len(keep))}
	return m, m.index()
}

func (m *VocabMap) index() error {
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

// Size is the model vocabulary the map needs: its mapped ids and the "other" id.
func (m *VocabMap) Size() int { return len(m.Mistral) + 1 }

// ModelVocabSize is the vocabulary a model needs for ids mapped by m: m's Size, or with a nil map
// (the identity) the tokenizer's vocabulary with its added tokens.
func (m *VocabMap) ModelVocabSize(tok tokenizer.Tokenizer) int {
	if m == nil {
		return tok.VocabSize(true)
	}
	return m.Size()
}

// Apply maps Mistral ids to compact ids, those the map does not keep to the "other" id; a nil
// map converts them unchanged.
func (m *VocabMap) Apply(ids []uint32) []int32 {
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

// OtherRate is the fraction of ids the map sends to the "other" id (0 for a nil map).
func (m *VocabMap) OtherRate(ids []uint32) float64 {
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

// Save writes the map as JSON to path (normally VocabFile in a model's directory).
func (m *VocabMap) Save(path string) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// Equal reports whether two maps send every id to the same place (two nil maps are equal).
func (m *VocabMap) Equal(o *VocabMap) bool {
	if m == nil || o == nil {
		return m == o
	}
	return m.Other == o.Other && slices.Equal(m.Mistral, o.Mistral)
}

// LoadVocabMap reads a map written by Save; a missing file is (nil, nil): the model uses the
// tokenizer's vocabulary as it is. A map with a repeated id or an other_id that is not the
// number of mapped ids is an error naming path.
func LoadVocabMap(path string) (*VocabMap, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var m VocabMap
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := m.index(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &m, nil
}
