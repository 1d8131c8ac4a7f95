package models

import (
	stdctx "context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sort"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/gotpu/gotpu/models/internal/core"
	"github.com/gotpu/gotpu/xla"
)

// GenerateOptions control Generate. DefaultGenerateOptions has HF GenerationConfig's defaults;
// Validate says which values Generate accepts: MaxNewTokens must be at least 1; when sampling,
// Temperature must be above 0 and TopP in (0, 1]; TopK 0 and RepetitionPenalty 0 or 1 switch
// those processors off. Greedy decoding ignores Temperature, TopK and TopP (as HF does), but a
// value that is never valid (negative, NaN, infinite, top_p above 1) is refused in both modes.
type GenerateOptions struct {
	// MaxNewTokens bounds the tokens generated (the model's positions bound them too); ≥ 1.
	MaxNewTokens int
	// DoSample samples from the (processed) distribution; false decodes greedily.
	DoSample bool
	// Temperature divides the logits before sampling (1: unchanged); > 0 when sampling.
	Temperature float64
	// TopK keeps the k most likely tokens (ties at the k-th value kept, as HF does; 0: off).
	TopK int
	// TopP keeps the smallest set of tokens whose probability reaches p (1: off); in (0, 1]
	// when sampling.
	TopP float64
	// RepetitionPenalty divides positive (multiplies negative) logits of tokens already in the
	// sequence, HF's RepetitionPenaltyLogitsProcessor (0 or 1: off).
	RepetitionPenalty float64
	// Seed of the sampling stream.
	Seed uint64
	// EOSTokenIDs stop generation (the stop token is returned). nil: the model's eos_token_id.
	EOSTokenIDs []int
}

// GenerateOptionError is what Validate returns: the option's HF name (max_new_tokens, top_k,
// temperature, top_p, repetition_penalty, eos_token_id — also the gotpu generate flag), its
// value and why it is refused.
type GenerateOptionError struct {
	Field  string
	Value  any
	Reason string
}

func (e *GenerateOptionError) Error() string {
	return fmt.Sprintf("models.GenerateOptions: %s %v: %s", e.Field, e.Value, e.Reason)
}

// Validate checks the options before anything is built, so a bad value is an error naming the
// option instead of a GoMLX shape error or a silent misuse (HF's GenerationConfig.validate and
// logits-warper checks). It returns the first problem as a *GenerateOptionError.
func (o GenerateOptions) Validate() error {
	bad := func(field string, v any, reason string) error {
		return &GenerateOptionError{Field: field, Value: v, Reason: reason}
	}
	finite := func(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
	switch {
	case o.MaxNewTokens < 1:
		return bad("max_new_tokens", o.MaxNewTokens, "must be at least 1")
	case o.TopK < 0:
		return bad("top_k", o.TopK, "must be ≥ 0 (0: off)")
	case !finite(o.Temperature) || o.Temperature < 0:
		return bad("temperature", o.Temperature, "must be a finite number > 0")
	case o.DoSample && o.Temperature == 0:
		return bad("temperature", o.Temperature, "must be > 0 when sampling (do_sample); for greedy decoding leave do_sample off")
	case !finite(o.TopP) || o.TopP < 0 || o.TopP > 1:
		return bad("top_p", o.TopP, "must be in (0, 1] (1: off)")
	case o.DoSample && o.TopP == 0:
		return bad("top_p", o.TopP, "must be in (0, 1] when sampling (1: off)")
	case !finite(o.RepetitionPenalty) || o.RepetitionPenalty < 0:
		return bad("repetition_penalty", o.RepetitionPenalty, "must be a finite number ≥ 0 (0 or 1: off)")
	}
	for i, id := range o.EOSTokenIDs {
		if id < 0 {
			return bad(fmt.Sprintf("eos_token_id[%d]", i), id, "is not a token id")
		}
	}
	return nil
}

// DefaultGenerateOptions are GenerationConfig's defaults with max_new_tokens 20.
func DefaultGenerateOptions() GenerateOptions {
	return GenerateOptions{MaxNewTokens: 20, Temperature: 1, TopK: 50, TopP: 1, RepetitionPenalty: 1}
}

// ReadGenerationConfig reads a generation_config.json over DefaultGenerateOptions: do_sample,
// temperature, top_k, top_p, repetition_penalty, max_new_tokens (or max_length minus promptLen),
// eos_token_id (an int or a list). Other fields are ignored. The values are not validated here,
// so that a caller can override them first (gotpu generate's flags); Generate validates.
func ReadGenerationConfig(path string, promptLen int) (GenerateOptions, error) {
	o := DefaultGenerateOptions()
	raw, err := core.ReadRawConfig(path)
	if err != nil {
		return o, err
	}
	if err := raw.Bool("do_sample", &o.DoSample); err != nil {
		return o, err
	}
	for _, f := range []struct {
		key string
		dst *float64
	}{{"temperature", &o.Temperature}, {"top_p", &o.TopP}, {"repetition_penalty", &o.RepetitionPenalty}} {
		if err := raw.Float(f.key, f.dst); err != nil {
			return o, err
		}
	}
	if err := raw.Int("top_k", &o.TopK); err != nil {
		return o, err
	}
	if !raw.IsNull("max_new_tokens") {
		if err := raw.Int("max_new_tokens", &o.MaxNewTokens); err != nil {
			return o, err
		}
	} else if !raw.IsNull("max_length") {
		var ml int
		if err := raw.Int("max_length", &ml); err != nil {
			return o, err
		}
		o.MaxNewTokens = max(ml-promptLen, 0)
	}
	if raw.Has("eos_token_id") {
		if o.EOSTokenIDs, err = raw.TokenIDs("eos_token_id"); err != nil {
			return o, err
		}
	}
	return o, nil
}

// Generate continues prompt with m and returns the new tokens, decoding with a KV cache: the prompt
// runs once (prefill), then one token per step against the cache. Token choice happens on the host
// with HF's logits processors in HF's order (repetition penalty, temperature, top-k, top-p).
func Generate(ctx stdctx.Context, rt *xla.Runtime, m CausalLM, prompt []int, opts GenerateOptions) (out []int, err error) {
	defer xla.Recover(&err, "models.Generate")
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("models.Generate: %w", err)
	}
	P := len(prompt)
	if P == 0 {
		return nil, fmt.Errorf("models.Generate: empty prompt")
	}
	for i, id := range prompt {
		if id < 0 || id >= m.VocabSize() {
			return nil, fmt.Errorf("models.Generate: prompt[%d]: token %d is outside the vocabulary [0, %d)", i, id, m.VocabSize())
		}
	}
	if P > m.MaxPositions() {
		return nil, fmt.Errorf("models.Generate: prompt of %d tokens exceeds the model's %d positions", P, m.MaxPositions())
	}
	// Capped before adding: P+MaxNewTokens overflows for a limit near MaxInt.
	L := P + min(opts.MaxNewTokens, m.MaxPositions()-P)
	if L == P {
		return nil, nil
	}
	eos := opts.EOSTokenIDs
	if eos == nil {
		eos = m.EOSTokenIDs()
	}
	dims := m.CacheDims()
	dt := dtypes.Float32
	if b, ok := m.(interface{ DType() dtypes.DType }); ok {
		dt = b.DType()
	}
	exec, err := mlctx.NewExec(rt.Backend(), m.Context(), func(c *mlctx.Context, in []*Node) []*Node {
		ids, offset := in[0], in[1]
		n := dims.Layers
		cache := &core.KVCache{K: slices.Clone(in[2 : 2+n]), V: slices.Clone(in[2+n : 2+2*n])}
		logits := m.ForwardCached(c, ids, offset, cache)
		T := ids.Shape().Dim(1)
		last := Reshape(SliceAxis(logits, 1, AxisElem(T-1)), m.VocabSize())
		return append(append([]*Node{ConvertDType(last, dtypes.Float32)}, cache.K...), cache.V...)
	})
	if err != nil {
		return nil, err
	}
	exec.WithName("gotpu_generate") // the program's name in XLA dumps and the compilation cache
	defer exec.Finalize()
	cache := make([]*tensors.Tensor, 2*dims.Layers)
	for i := range cache {
		cache[i] = tensors.FromShape(shapes.Make(dt, 1, L, dims.KVHeads, dims.HeadDim))
	}
	defer func() {
		for _, t := range cache {
			t.FinalizeAll()
		}
	}()
	rng := newRNG(opts.Seed)
	seq := slices.Clone(prompt)
	step := prompt
	for len(seq) < L {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		args := []any{ints(step, 1, len(step)), int32(len(seq) - len(step))}
		for _, t := range cache {
			args = append(args, t)
		}
		outs, err := exec.Exec(args...)
		if err != nil {
			return out, err
		}
		for _, t := range cache {
			t.FinalizeAll()
		}
		copy(cache, outs[1:])
		logits := tensors.MustCopyFlatData[float32](outs[0])
		outs[0].FinalizeAll()
		next := chooseToken(logits, seq, opts, rng)
		out = append(out, next)
		seq = append(seq, next)
		if slices.Contains(eos, next) {
			break
		}
		step = []int{next}
	}
	return out, nil
}

// chooseToken applies HF's logits processors and picks greedily or by sampling.
func chooseToken(logits []float32, seq []int, o GenerateOptions, rng *rand.Rand) int {
	s := make([]float64, len(logits))
	for i, v := range logits {
		s[i] = float64(v)
	}
	if o.RepetitionPenalty > 0 && o.RepetitionPenalty != 1 {
		seen := map[int]bool{}
		for _, id := range seq {
			if seen[id] {
				continue
			}
			seen[id] = true
			if s[id] < 0 {
				s[id] *= o.RepetitionPenalty
			} else {
				s[id] /= o.RepetitionPenalty
			}
		}
	}
	if !o.DoSample {
		best := 0
		for i, v := range s {
			if v > s[best] {
				best = i // first maximum, as torch.argmax
			}
		}
		return best
	}
	if o.Temperature > 0 && o.Temperature != 1 {
		for i := range s {
			s[i] /= o.Temperature
		}
	}
	if o.TopK > 0 && o.TopK < len(s) {
		sorted := slices.Clone(s)
		sort.Sort(sort.Reverse(sort.Float64Slice(sorted)))
		kth := sorted[o.TopK-1]
		for i := range s {
			if s[i] < kth {
				s[i] = math.Inf(-1)
			}
		}
	}
	if o.TopP > 0 && o.TopP < 1 {
		// TopPLogitsWarper: sort ascending, drop the tokens whose cumulative probability stays
		// <= 1 - top_p, always keeping the most likely one.
		idx := make([]int, len(s))
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(a, b int) bool { return s[idx[a]] < s[idx[b]] })
		probs := softmax(s)
		cum := 0.0
		for j, i := range idx {
			cum += probs[i]
			if cum <= 1-o.TopP && j < len(idx)-1 {
				s[i] = math.Inf(-1)
			}
		}
	}
	probs := softmax(s)
	u := rng.Float64()
	acc := 0.0
	last := 0
	for i, p := range probs {
		if p == 0 {
			continue
		}
		acc += p
		last = i
		if u < acc {
			return i
		}
	}
	return last
}

func softmax(s []float64) []float64 {
	m := math.Inf(-1)
	for _, v := range s {
		m = math.Max(m, v)
	}
	out := make([]float64, len(s))
	sum := 0.0
	for i, v := range s {
		out[i] = math.Exp(v - m)
		sum += out[i]
	}
	for i := range out {
		out[i] /= sum
	}
	return out
}

// GenerationConfigPath is where a model directory keeps its generation_config.json.
func GenerationConfigPath(dir string) string { return filepath.Join(dir, core.GenerationFile) }

// newRNG is the sampling stream for a seed.
func newRNG(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x853c49e6748fea9b)) }
