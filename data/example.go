package data

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
)

// IgnoreIndex is the label value the loss skips (PyTorch's CrossEntropyLoss ignore_index, which
// Hugging Face uses for padding and for positions without a target).
const IgnoreIndex = -100

// Example is one tokenized example, with Hugging Face's column names.
type Example struct {
	InputIDs      []int32 `json:"input_ids"`
	AttentionMask []int32 `json:"attention_mask,omitempty"` // nil: all ones
	TokenTypeIDs  []int32 `json:"token_type_ids,omitempty"` // nil: all zeros
	// PositionIDs are per-token positions; nil means 0..n-1. A packed example (PackBFD) holds
	// several examples one after another, each restarting at 0, which is how a causal model
	// knows where one ends (block-diagonal attention, positions restarting) — TRL's
	// padding-free position_ids. Each id is 0 (an example starts) or the previous id plus one.
	PositionIDs []int32 `json:"position_ids,omitempty"`
	// Labels are per-token targets (causal LM); nil means "the input ids" for a causal LM.
	Labels []int32 `json:"-"`
	// Label is a sequence-level target (classification), valid when HasLabel.
	Label    int32 `json:"-"`
	HasLabel bool  `json:"-"`
}

// exampleJSON is the on-disk form: `labels` is either a list (per token) or a number (sequence).
type exampleJSON struct {
	InputIDs      []int64         `json:"input_ids"`
	AttentionMask []int64         `json:"attention_mask"`
	TokenTypeIDs  []int64         `json:"token_type_ids"`
	PositionIDs   []int64         `json:"position_ids"`
	Labels        json.RawMessage `json:"labels"`
	Label         json.RawMessage `json:"label"`
}

// ParseExample parses one JSON object with HF's pre-tokenized columns: `{"input_ids": [...],
// "attention_mask"?: [...], "token_type_ids"?: [...], "position_ids"?: [...], "labels"?: [...] |
// n}` (`label` is accepted for a sequence label, as HF datasets name it; position_ids are checked
// by CheckPositionIDs). Other keys are ignored, as HF's remove_unused_columns does. Errors name
// the field.
func ParseExample(line []byte) (Example, error) {
	var raw exampleJSON
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := dec.Decode(&raw); err != nil {
		return Example{}, fmt.Errorf("not a JSON object with input_ids: %w", err)
	}
	if dec.More() {
		return Example{}, fmt.Errorf("trailing data after the JSON object")
	}
	if len(raw.InputIDs) == 0 {
		return Example{}, fmt.Errorf("input_ids: missing or empty")
	}
	var ex Example
	var err error
	if ex.InputIDs, err = toInt32("input_ids", raw.InputIDs, 0); err != nil {
		return Example{}, err
	}
	n := len(ex.InputIDs)
	if raw.AttentionMask != nil {
		if ex.AttentionMask, err = toInt32("attention_mask", raw.AttentionMask, n); err != nil {
			return Example{}, err
		}
		for i, m := range ex.AttentionMask {
			if m != 0 && m != 1 {
				return Example{}, fmt.Errorf("attention_mask[%d]: %d is not 0 or 1", i, m)
			}
		}
	}
	if raw.TokenTypeIDs != nil {
		if ex.TokenTypeIDs, err = toInt32("token_type_ids", raw.TokenTypeIDs, n); err != nil {
			return Example{}, err
		}
	}
	if raw.PositionIDs != nil {
		if ex.PositionIDs, err = toInt32("position_ids", raw.PositionIDs, n); err != nil {
			return Example{}, err
		}
		if err := CheckPositionIDs(ex.PositionIDs); err != nil {
			return Example{}, fmt.Errorf("position_ids: %w", err)
		}
	}
	labels := raw.Labels
	name := "labels"
	if len(labels) == 0 || string(labels) == "null" {
		labels, name = raw.Label, "label"
	}
	if len(labels) > 0 && string(labels) != "null" {
		if labels[0] == '[' {
			var ls []int64
			if err := json.Unmarshal(labels, &ls); err != nil {
				return Example{}, fmt.Errorf("%s: %w", name, err)
			}
			if ex.Labels, err = toInt32(name, ls, n); err != nil {
				return Example{}, err
			}
		} else {
			var l int64
			if err := json.Unmarshal(labels, &l); err != nil {
				return Example{}, fmt.Errorf("%s: want an integer or a list of integers: %w", name, err)
			}
			if l < math.MinInt32 || l > math.MaxInt32 {
				return Example{}, fmt.Errorf("%s: %d out of range", name, l)
			}
			ex.Label, ex.HasLabel = int32(l), true
		}
	}
	return ex, nil
}

// CheckPositionIDs reports position ids a causal model cannot read as packed examples: the first
// must be 0 and each next one either 0 (an example starts) or the previous id plus one. The
// models find which tokens belong to the same example from i - position[i] (constant along an
// example, unique per example only under this rule), so any other sequence would let examples
// attend to each other without an error; and it keeps every id below the row's length, so a
// learned position table (GPT-2's wpe) is never read past its end.
func CheckPositionIDs(pos []int32) error {
	for i, p := range pos {
		switch {
		case p < 0:
			return fmt.Errorf("[%d]: %d is negative", i, p)
		case i == 0 && p != 0:
			return fmt.Errorf("[0]: %d, want 0: the first token starts an example", p)
		case i > 0 && p != 0 && p != pos[i-1]+1:
			return fmt.Errorf("[%d]: %d after %d: a position id must restart at 0 or continue the previous one by 1", i, p, pos[i-1])
		}
	}
	return nil
}

func toInt32(field string, v []int64, wantLen int) ([]int32, error) {
	if wantLen > 0 && len(v) != wantLen {
		return nil, fmt.Errorf("%s: %d values, input_ids has %d", field, len(v), wantLen)
	}
	out := make([]int32, len(v))
	for i, x := range v {
		if x < math.MinInt32 || x > math.MaxInt32 {
			return nil, fmt.Errorf("%s[%d]: %d out of range", field, i, x)
		}
		out[i] = int32(x)
	}
	return out, nil
}
