// Package reftest reads the fixtures' reference.json and compares gotpu's numbers with it. It is
// test support for the architecture packages (not imported by production code).
package reftest

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes/bfloat16"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// Dir is the fixtures folder, testdata/models at the repository root.
func Dir(t testing.TB) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate reftest source")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "testdata", "models")
}

// Reference is the part of a fixture's reference.json the model tests use.
type Reference struct {
	InputIDs      [][]int         `json:"input_ids"`
	AttentionMask [][]int         `json:"attention_mask"`
	TokenTypeIDs  [][]int         `json:"token_type_ids"`
	RawLabels     json.RawMessage `json:"labels"`
	Logits        struct {
		Shape  []int           `json:"shape"`
		Values json.RawMessage `json:"values"`
	} `json:"logits"`
	LogitsNoTokenTypes struct {
		Values json.RawMessage `json:"values"`
	} `json:"logits_without_token_type_ids"`
	PoolerOutput struct {
		Values json.RawMessage `json:"values"`
	} `json:"pooler_output"`
	LastHiddenState struct {
		Shape  []int           `json:"shape"`
		Values json.RawMessage `json:"values"`
	} `json:"last_hidden_state"`
	Loss     float64            `json:"loss"`
	GradNorm map[string]float64 `json:"grad_norm"`
	AdamW    struct {
		DecayParams   []string `json:"decay_params"`
		NoDecayParams []string `json:"no_decay_params"`
	} `json:"adamw"`
	GradNotes map[string]json.RawMessage `json:"grad_notes"`
}

// Read loads testdata/models/<fixture>/reference.json.
func Read(t testing.TB, fixture string) *Reference {
	b, err := os.ReadFile(filepath.Join(Dir(t), fixture, "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r Reference
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

// ClassLabels returns the integer labels of a classification fixture (nil for LM fixtures, whose
// "labels" field is a description).
func (r *Reference) ClassLabels() []int {
	var l []int
	if json.Unmarshal(r.RawLabels, &l) != nil {
		return nil
	}
	return l
}

// FlatLogits returns the reference logits flattened row-major.
func (r *Reference) FlatLogits(t testing.TB) []float64 { return flatten(t, r.Logits.Values) }

// FlatLogitsNoTokenTypes returns logits_without_token_type_ids flattened.
func (r *Reference) FlatLogitsNoTokenTypes(t testing.TB) []float64 {
	return flatten(t, r.LogitsNoTokenTypes.Values)
}

func flatten(t testing.TB, raw json.RawMessage) []float64 {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	var out []float64
	var walk func(any)
	walk = func(x any) {
		switch y := x.(type) {
		case []any:
			for _, e := range y {
				walk(e)
			}
		case float64:
			out = append(out, y)
		}
	}
	walk(v)
	return out
}

// Flatten flattens a nested JSON array of numbers.
func Flatten(t testing.TB, raw json.RawMessage) []float64 { return flatten(t, raw) }

// Int32 turns rows into an int32 tensor [len(rows), len(rows[0])].
func Int32(rows [][]int) *tensors.Tensor {
	flat := make([]int32, 0, len(rows)*len(rows[0]))
	for _, r := range rows {
		for _, v := range r {
			flat = append(flat, int32(v))
		}
	}
	return tensors.FromFlatDataAndDimensions(flat, len(rows), len(rows[0]))
}

// Float64s copies a float tensor's values as float64.
func Float64s(t testing.TB, x *tensors.Tensor) []float64 {
	var out []float64
	x.MustConstFlatData(func(flat any) {
		switch f := flat.(type) {
		case []float32:
			for _, v := range f {
				out = append(out, float64(v))
			}
		case []float64:
			out = append(out, f...)
		case []bfloat16.BFloat16:
			for _, v := range f {
				out = append(out, float64(v.Float32()))
			}
		default:
			t.Fatalf("unexpected tensor dtype %s", x.DType())
		}
	})
	return out
}

// MaxAbsDiff of two equally long slices (Inf when the lengths differ).
func MaxAbsDiff(a, b []float64) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	m := 0.0
	for i := range a {
		d := math.Abs(a[i] - b[i])
		if d > m || math.IsNaN(d) {
			m = d
		}
	}
	return m
}

// Norm is the L2 norm of a tensor.
func Norm(t testing.TB, x *tensors.Tensor) float64 {
	s := 0.0
	for _, v := range Float64s(t, x) {
		s += v * v
	}
	return math.Sqrt(s)
}

// GradCheck compares gradient norms: relative tolerance rel, except for parameters whose true
// gradient is zero (reference norm below 1e-12: attention key biases), compared with absolute
// tolerance abs. name maps a reference name to gotpu's parameter name. It returns the worst relative
// difference and the worst absolute difference on the zero-gradient parameters.
func GradCheck(t testing.TB, ref map[string]float64, got map[string]*tensors.Tensor, name func(string) string, rel, abs float64) (worstRel, worstAbs float64) {
	keys := make([]string, 0, len(ref))
	for k := range ref {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(got) != len(ref) {
		t.Errorf("%d gradients, reference has %d", len(got), len(ref))
	}
	for _, k := range keys {
		g, ok := got[name(k)]
		if !ok {
			t.Errorf("no gradient for %s (%s)", k, name(k))
			continue
		}
		n := Norm(t, g)
		want := ref[k]
		if want < 1e-12 {
			d := math.Abs(n - want)
			worstAbs = math.Max(worstAbs, d)
			if d > abs {
				t.Errorf("grad norm %s: %.3g, want %.3g (absolute tolerance %g)", k, n, want, abs)
			}
			continue
		}
		r := math.Abs(n-want) / want
		worstRel = math.Max(worstRel, r)
		if r > rel || math.IsNaN(r) {
			t.Errorf("grad norm %s: %.9g, want %.9g (relative diff %.3g > %g)", k, n, want, r, rel)
		}
	}
	return worstRel, worstAbs
}
