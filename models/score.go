package models

import (
	"bufio"
	"bytes"
	stdctx "context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive
	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/gotpu/gotpu/internal/safetensors"
	"github.com/gotpu/gotpu/models/internal/core"
	"github.com/gotpu/gotpu/xla"
)

// ScoreExample is one input line of ScoreJSONLines.
type ScoreExample struct {
	InputIDs      []int `json:"input_ids"`
	AttentionMask []int `json:"attention_mask,omitempty"`
	TokenTypeIDs  []int `json:"token_type_ids,omitempty"`
	// Labels: causal LMs a list of token ids (-100 ignored; default: input_ids, shifted inside as HF
	// does); classifiers an integer class, a float (regression) or a list of floats (multi-label).
	Labels json.RawMessage `json:"labels,omitempty"`
}

// ScoreResult is one output line of ScoreJSONLines: the example's loss (HF's, as the model's
// Forward computes it for a batch of one), null when the example has no labels (or every label is
// ignored).
type ScoreResult struct {
	Loss *float64 `json:"loss"`
}

// maxScoreLine bounds one input line (16 MiB): a very long line is an error, not an allocation.
const maxScoreLine = 16 << 20

// ScoreJSONLines scores one example per non-blank line of r (a JSON object with input_ids and
// optionally attention_mask, token_type_ids, labels; other fields are ignored) and writes one
// ScoreResult JSON line per example to w, in order. Each example runs alone (batch of one, its own
// length), so its loss is exactly HF's for that example.
//
// With logitsPath set it also writes a safetensors file with one F32 tensor "logits":
// [examples, max_seq, vocab] for causal LMs, [examples, num_labels] for classifiers,
// [examples, max_seq, hidden] (last_hidden_state) for the bare BertModel. Positions past an
// example's length are zero. The file is streamed, one example at a time, and replaced atomically.
// All lines are read and validated before anything runs; errors name the line.
func ScoreJSONLines(ctx stdctx.Context, rt *xla.Runtime, m Model, r io.Reader, w io.Writer, logitsPath string) (err error) {
	defer xla.Recover(&err, "models.ScoreJSONLines")
	s, err := newScorer(rt, m)
	if err != nil {
		return err
	}
	defer s.close()
	examples, lines, err := s.read(r)
	if err != nil {
		return err
	}
	maxT := 0
	for _, e := range examples {
		maxT = max(maxT, len(e.InputIDs))
	}
	bw := bufio.NewWriter(w)
	process := func(emit func(logits *tensors.Tensor, T int) error) error {
		for i, e := range examples {
			if err := ctx.Err(); err != nil {
				return err
			}
			res, logits, err := s.score(e)
			if err != nil {
				return fmt.Errorf("line %d: %w", lines[i], err)
			}
			b, _ := json.Marshal(res)
			bw.Write(append(b, '\n'))
			if emit != nil {
				if err := emit(logits, len(e.InputIDs)); err != nil {
					logits.FinalizeAll()
					return fmt.Errorf("line %d: writing logits: %w", lines[i], err)
				}
			}
			logits.FinalizeAll()
		}
		return bw.Flush()
	}
	if logitsPath == "" {
		return process(nil)
	}
	shape := append([]int{len(examples)}, s.logitsDims(maxT)...)
	stream := func(out io.Writer) error {
		return process(func(logits *tensors.Tensor, T int) error {
			b, err := core.TensorBytes(logits, safetensors.F32)
			if err != nil {
				return err
			}
			if _, err := out.Write(b); err != nil {
				return err
			}
			if len(shape) == 3 { // pad the rows past this example's length
				_, err = out.Write(make([]byte, (maxT-T)*shape[2]*4))
			}
			return err
		})
	}
	return safetensors.WriteFile(logitsPath, []safetensors.Tensor{{Name: "logits", DType: safetensors.F32, Shape: shape, Stream: stream}},
		map[string]string{"format": "pt"})
}

// scorer holds what scoring needs about the model, and the compiled graphs.
type scorer struct {
	rt                    *xla.Runtime
	m                     Model
	vocab, hidden, maxPos int
	causal                bool
	numLabels             int // 0: bare encoder
	problem               string
	execs                 map[bool]*mlctx.Exec // by "has labels"
}

func newScorer(rt *xla.Runtime, m Model) (*scorer, error) {
	params := m.Params()
	if f, ok := m.(Frozen); ok {
		// An adapted model's Params are the adapter's; the base's table has the embedding.
		params = f.FrozenParams()
	}
	emb := params[0].Shape // the token embedding comes first in every table
	s := &scorer{rt: rt, m: m, vocab: emb[0], hidden: emb[1], execs: map[bool]*mlctx.Exec{}}
	if lm, ok := m.(CausalLM); ok {
		s.causal, s.maxPos = true, lm.MaxPositions()
		return s, nil
	}
	if mp, ok := m.(interface{ MaxPositions() int }); ok {
		s.maxPos = mp.MaxPositions()
	}
	if c, ok := m.(SequenceClassifier); ok {
		s.numLabels = c.NumLabels()
	}
	if p, ok := m.(interface{ ProblemType() string }); ok {
		s.problem = p.ProblemType()
	}
	return s, nil
}

func (s *scorer) close() {
	for _, e := range s.execs {
		e.Finalize()
	}
}

// logitsDims are the per-example logits dimensions in the logits file.
func (s *scorer) logitsDims(maxT int) []int {
	switch {
	case s.causal:
		return []int{maxT, s.vocab}
	case s.numLabels > 0:
		return []int{s.numLabels}
	}
	return []int{maxT, s.hidden}
}

// read parses and validates every line first, so a bad line fails before any work is done.
func (s *scorer) read(r io.Reader) ([]ScoreExample, []int, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxScoreLine)
	var out []ScoreExample
	var lines []int
	n := 0
	for sc.Scan() {
		n++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var e ScoreExample
		if err := json.Unmarshal(line, &e); err != nil {
			return nil, nil, fmt.Errorf("line %d: %w", n, err)
		}
		if err := s.validate(&e); err != nil {
			return nil, nil, fmt.Errorf("line %d: %w", n, err)
		}
		out = append(out, e)
		lines = append(lines, n)
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("line %d: %w", n+1, err)
	}
	if len(out) == 0 {
		return nil, nil, fmt.Errorf("no examples in the input")
	}
	return out, lines, nil
}

func (s *scorer) validate(e *ScoreExample) error {
	T := len(e.InputIDs)
	if T == 0 {
		return fmt.Errorf("field \"input_ids\" is missing or empty")
	}
	if s.maxPos > 0 && T > s.maxPos {
		return fmt.Errorf("field \"input_ids\": %d tokens, more than the model's %d positions", T, s.maxPos)
	}
	for i, id := range e.InputIDs {
		if id < 0 || id >= s.vocab {
			return fmt.Errorf("field \"input_ids\"[%d]: token %d is outside the vocabulary [0, %d)", i, id, s.vocab)
		}
	}
	for _, f := range []struct {
		name string
		v    []int
	}{{"attention_mask", e.AttentionMask}, {"token_type_ids", e.TokenTypeIDs}} {
		if f.v != nil && len(f.v) != T {
			return fmt.Errorf("field %q has %d values for %d input_ids", f.name, len(f.v), T)
		}
	}
	if len(e.Labels) == 0 || string(e.Labels) == "null" {
		return nil
	}
	switch {
	case s.causal:
		var l []int
		if err := json.Unmarshal(e.Labels, &l); err != nil || len(l) != T {
			return fmt.Errorf("field \"labels\" must be a list of %d token ids (or absent: input_ids)", T)
		}
		for i, v := range l {
			if v != core.IgnoreIndex && (v < 0 || v >= s.vocab) {
				return fmt.Errorf("field \"labels\"[%d]: %d is neither -100 nor a token id", i, v)
			}
		}
	case s.numLabels == 0:
		return fmt.Errorf("field \"labels\": the bare encoder has no loss")
	default:
		return s.validateClassLabel(e.Labels)
	}
	return nil
}

func (s *scorer) validateClassLabel(raw json.RawMessage) error {
	trimmed := strings.TrimSpace(string(raw))
	switch {
	case strings.HasPrefix(trimmed, "["):
		var l []float64
		if err := json.Unmarshal(raw, &l); err != nil || len(l) != s.numLabels {
			return fmt.Errorf("field \"labels\": a list must hold %d floats (multi-label)", s.numLabels)
		}
	case s.problem == core.Regression || s.numLabels == 1:
		var f float64
		if err := json.Unmarshal(raw, &f); err != nil {
			return fmt.Errorf("field \"labels\": want a number (regression): %w", err)
		}
	default:
		var c int
		if err := json.Unmarshal(raw, &c); err != nil {
			return fmt.Errorf("field \"labels\": want an integer class: %w", err)
		}
		if c != core.IgnoreIndex && (c < 0 || c >= s.numLabels) {
			return fmt.Errorf("field \"labels\": class %d is outside [0, %d)", c, s.numLabels)
		}
	}
	return nil
}

// labelsTensor builds the labels of one example (nil when it has none).
func (s *scorer) labelsTensor(e ScoreExample) *tensors.Tensor {
	if s.causal {
		l := e.InputIDs
		if len(e.Labels) > 0 && string(e.Labels) != "null" {
			l = nil
			_ = json.Unmarshal(e.Labels, &l)
		}
		return ints(l, 1, len(l))
	}
	if s.numLabels == 0 || len(e.Labels) == 0 || string(e.Labels) == "null" {
		return nil
	}
	trimmed := strings.TrimSpace(string(e.Labels))
	switch {
	case strings.HasPrefix(trimmed, "["):
		var l []float32
		_ = json.Unmarshal(e.Labels, &l)
		return tensors.FromFlatDataAndDimensions(l, 1, len(l))
	case s.problem == core.Regression || s.numLabels == 1:
		var f float32
		_ = json.Unmarshal(e.Labels, &f)
		return tensors.FromFlatDataAndDimensions([]float32{f}, 1)
	}
	var c int
	_ = json.Unmarshal(e.Labels, &c)
	return ints([]int{c}, 1)
}

func ints(v []int, dims ...int) *tensors.Tensor {
	flat := make([]int32, len(v))
	for i, x := range v {
		flat[i] = int32(x)
	}
	return tensors.FromFlatDataAndDimensions(flat, dims...)
}

// score runs one example: its result line and its logits (batch dimension of one removed).
func (s *scorer) score(e ScoreExample) (ScoreResult, *tensors.Tensor, error) {
	T := len(e.InputIDs)
	mask, types := e.AttentionMask, e.TokenTypeIDs
	if mask == nil {
		mask = make([]int, T)
		for i := range mask {
			mask[i] = 1
		}
	}
	if types == nil {
		types = make([]int, T)
	}
	labels := s.labelsTensor(e)
	hasLabels := labels != nil
	exec, err := s.exec(hasLabels)
	if err != nil {
		return ScoreResult{}, nil, err
	}
	args := []any{ints(e.InputIDs, 1, T), ints(mask, 1, T), ints(types, 1, T)}
	if hasLabels {
		args = append(args, labels)
	}
	outs, err := exec.Exec(args...)
	if err != nil {
		return ScoreResult{}, nil, err
	}
	var res ScoreResult
	if hasLabels {
		var loss float64
		outs[1].MustConstFlatData(func(flat any) {
			switch f := flat.(type) {
			case []float32:
				loss = float64(f[0])
			case []float64:
				loss = f[0]
			}
		})
		outs[1].FinalizeAll()
		if !math.IsNaN(loss) && !math.IsInf(loss, 0) {
			res.Loss = &loss
		}
	}
	return res, outs[0], nil
}

// exec returns the (cached) executor for examples with or without labels.
func (s *scorer) exec(hasLabels bool) (*mlctx.Exec, error) {
	if e, ok := s.execs[hasLabels]; ok {
		return e, nil
	}
	fn := func(c *mlctx.Context, in []*Node) []*Node {
		b := Batch{InputIDs: in[0], AttentionMask: in[1], TokenTypeIDs: in[2]}
		if hasLabels {
			b.Labels = in[3]
		}
		loss, logits := s.m.Forward(c, b)
		// Drop the batch dimension of one: [1, ...] -> [...].
		logits = Reshape(logits, logits.Shape().Dimensions[1:]...)
		if loss != nil {
			return []*Node{logits, loss}
		}
		return []*Node{logits}
	}
	e, err := mlctx.NewExec(s.rt.Backend(), s.m.Context(), fn)
	if err != nil {
		return nil, err
	}
	e.WithName("gotpu_score") // the program's name in XLA dumps and the compilation cache
	s.execs[hasLabels] = e
	return e, nil
}
