package step

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/xla"
)

// reference is the part of a fixture's reference.json these tests use.
type reference struct {
	InputIDs      [][]int32       `json:"input_ids"`
	AttentionMask [][]int32       `json:"attention_mask"`
	TokenTypeIDs  [][]int32       `json:"token_type_ids"`
	Labels        json.RawMessage `json:"labels"`
	Runs          map[string]json.RawMessage
}

type adamwRun struct {
	LR          float64   `json:"lr"`
	LRPerStep   []float64 `json:"lr_per_step"`
	WeightDecay float64   `json:"weight_decay"`
	Losses      []float64 `json:"losses"`
	GradNorms   []float64 `json:"grad_norm_global_per_step"`
	GradNormsB  []float64 `json:"grad_norm_global_per_step_before_clip"`
	ParamsAfter map[string]struct {
		Sum    float64   `json:"sum"`
		L2     float64   `json:"l2"`
		First4 []float64 `json:"first4"`
	} `json:"params_after"`
}

func fixtureDir(name string) string { return filepath.Join("..", "..", "testdata", "models", name) }

func readReference(t *testing.T, fixture string) (*reference, map[string]json.RawMessage) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(fixtureDir(fixture), "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref reference
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(raw, &all); err != nil {
		t.Fatal(err)
	}
	return &ref, all
}

// hostBatch builds the fixture's batch as the data package would collate it.
func (r *reference) hostBatch(t *testing.T, causal bool) *data.Batch {
	size, seq := len(r.InputIDs), len(r.InputIDs[0])
	b := &data.Batch{Size: size, SeqLen: seq}
	for i, row := range r.InputIDs {
		b.InputIDs = append(b.InputIDs, row...)
		if r.AttentionMask != nil {
			b.AttentionMask = append(b.AttentionMask, r.AttentionMask[i]...)
		} else {
			for range row {
				b.AttentionMask = append(b.AttentionMask, 1)
			}
		}
		if r.TokenTypeIDs != nil {
			b.TokenTypeIDs = append(b.TokenTypeIDs, r.TokenTypeIDs[i]...)
		}
	}
	if causal {
		// The causal fixtures' labels are the input ids (reference.json says so in words).
		b.Labels = append([]int32(nil), b.InputIDs...)
	} else if err := json.Unmarshal(r.Labels, &b.Labels); err != nil {
		t.Fatal(err)
	}
	return b
}

func openGo(t testing.TB) *xla.Runtime { return openGoBackend(t, xla.GoBackendSimpleGo) }

// goBackends are the pure-Go backends the fixture, equivalence and precision tests run on, with
// the same tolerances.
var goBackends = []string{xla.GoBackendSimpleGo, xla.GoBackendGotpu}

func openGoBackend(t testing.TB, backend string) *xla.Runtime { return openGoDevices(t, backend, 1) }

// openGoDevices opens a pure-Go runtime with n virtual devices (n > 1 needs gotpu's backend).
func openGoDevices(t testing.TB, backend string, n int) *xla.Runtime {
	t.Helper()
	rt, err := xla.Open(context.Background(), xla.Config{Device: xla.DeviceGo, GoBackend: backend, NumDevices: n})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

// hfName maps gotpu's HF names to the fixture's (GPT-2 fixtures use the hub naming).
func hfName(name string) string { return strings.TrimPrefix(name, "transformer.") }

// TestFixtureAdamW trains every fixture for 3 steps on its batch and compares losses, gradient
// norms and every parameter's sum and L2 with the PyTorch reference (HF Trainer's decay groups,
// torch AdamW): constant LR without and with clipping, and HF's linear schedule with warmup.
func TestFixtureAdamW(t *testing.T) {
	for _, backend := range goBackends {
		t.Run(backend, func(t *testing.T) {
			fixtureAdamW(t, func(t *testing.T, fixture string, clip bool) *Stepper {
				return newFixtureStepper(t, openGoBackend(t, backend), fixture, Config{Optimizer: fixtureOptimizer(clip), NumReplicas: 1})
			})
		})
	}
}

// fixtures are the PyTorch-reference fixtures the AdamW tests train.
var fixtures = []string{"gpt2-tiny", "gpt2-tiny-affine", "llama-tiny", "bert-tiny", "qwen3-tiny", "gemma3-tiny"}

// fixtureStepper returns a stepper for fixture, at the fixture's initial weights with fresh
// optimizer state, whose optimizer is fixtureOptimizer(clip): a new one, or one already compiled
// and reset (xlacpu_test.go).
type fixtureStepper func(t *testing.T, fixture string, clip bool) *Stepper

// fixtureOptimizer is the reference runs' AdamW: weight decay 0.01, clipping at 1 or none.
func fixtureOptimizer(clip bool) Optimizer {
	opt := DefaultAdamW()
	opt.WeightDecay = 0.01
	opt.MaxGradNorm = 0
	if clip {
		opt.MaxGradNorm = 1
	}
	return opt
}

// newFixtureStepper loads fixture on rt and makes its stepper.
func newFixtureStepper(t *testing.T, rt *xla.Runtime, fixture string, cfg Config) *Stepper {
	t.Helper()
	m, err := models.Load(context.Background(), rt, fixtureDir(fixture), models.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(rt, m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fixtureMicro is the step's input for the fixture's batch on n replicas: the batch itself on one;
// on several, replica r gets row r mod rows (the fixtures have 2 or 4 rows, fewer than the 8
// replicas the tests use), so every row is repeated n/rows times and the global loss, the mean
// over all loss terms, and its gradients are the batch's own.
func fixtureMicro(b *data.Batch, n int) [][]*data.Batch {
	if n == 1 {
		return [][]*data.Batch{{b}}
	}
	shards := make([]*data.Batch, n)
	for r := range shards {
		shards[r] = batchRow(b, r%b.Size)
	}
	return [][]*data.Batch{shards}
}

// batchRow is row i of b as a batch of one (a classifier's labels are one per row).
func batchRow(b *data.Batch, i int) *data.Batch {
	lo, hi := i*b.SeqLen, (i+1)*b.SeqLen
	row := &data.Batch{Size: 1, SeqLen: b.SeqLen, InputIDs: b.InputIDs[lo:hi], AttentionMask: b.AttentionMask[lo:hi]}
	if b.TokenTypeIDs != nil {
		row.TokenTypeIDs = b.TokenTypeIDs[lo:hi]
	}
	if len(b.Labels) == b.Size {
		row.Labels = b.Labels[i : i+1]
	} else {
		row.Labels = b.Labels[lo:hi]
	}
	return row
}

func fixtureAdamW(t *testing.T, newStepper fixtureStepper) {
	for _, fixture := range fixtures {
		ref, all := readReference(t, fixture)
		for _, run := range []string{"adamw", "adamw_clip1", "adamw_linear_warmup", "adamw_linear_warmup_clip1"} {
			rawRun, ok := all[run]
			if !ok {
				continue
			}
			t.Run(fixture+"/"+run, func(t *testing.T) {
				var want adamwRun
				if err := json.Unmarshal(rawRun, &want); err != nil {
					t.Fatal(err)
				}
				s := newStepper(t, fixture, strings.HasSuffix(run, "clip1"))
				micro := fixtureMicro(ref.hostBatch(t, s.causal), s.cfg.NumReplicas)
				norms := want.GradNorms
				if norms == nil {
					norms = want.GradNormsB
				}
				for k := range 3 {
					lr := 1e-3
					if want.LRPerStep != nil {
						lr = want.LRPerStep[k]
					}
					res, err := s.Step(context.Background(), micro, lr)
					if err != nil {
						t.Fatal(err)
					}
					if math.Abs(res.Loss-want.Losses[k]) > 1e-5 {
						t.Errorf("step %d: loss %.8f, want %.8f", k+1, res.Loss, want.Losses[k])
					}
					if math.Abs(res.GradNorm-norms[k]) > 1e-4*norms[k] {
						t.Errorf("step %d: grad norm %.8f, want %.8f", k+1, res.GradNorm, norms[k])
					}
				}
				maxLR := 1e-3
				checkParams(t, s, want, 3*maxLR)
			})
		}
	}
}

// zeroTrueGradient lists parameters whose exact gradient is zero (attention key biases: a
// constant added to every key score of a row leaves the softmax unchanged). In float32 their
// gradient is rounding noise of ~1e-9, which AdamW normalises into steps of up to lr, so they are
// compared with an absolute tolerance: the most 3 AdamW steps can move them (maxMove per element).
// It returns how many of the parameter's n elements are such (BERT's key.bias: all; GPT-2's fused
// c_attn.bias: its key third).
func zeroTrueGradient(name string, n int) int {
	switch {
	case strings.HasSuffix(name, "attention.self.key.bias"):
		return n
	case strings.HasSuffix(name, "attn.c_attn.bias"):
		return n / 3
	}
	return 0
}

// checkParams compares the stepper's parameters, whole (ExportState gathers replicated and
// sharded ones alike), with the reference's sums and L2 norms.
func checkParams(t *testing.T, s *Stepper, want adamwRun, maxMove float64) {
	t.Helper()
	params := exportedParams(t, s)
	for _, p := range s.model.Params() {
		w, ok := want.ParamsAfter[hfName(p.Name)]
		if !ok {
			w, ok = want.ParamsAfter[p.Name]
		}
		if !ok {
			if p.Name == "lm_head.weight" || strings.HasSuffix(p.Name, "attn.bias") {
				continue
			}
			t.Errorf("%s: not in the reference", p.Name)
			continue
		}
		vals := params[p.Name]
		var sum, sq float64
		for _, x := range vals {
			sum += x
			sq += x * x
		}
		l2 := math.Sqrt(sq)
		if n := float64(zeroTrueGradient(p.Name, len(vals))); n > 0 {
			if math.Abs(sum-w.Sum) > maxMove*n || math.Abs(l2-w.L2) > maxMove*math.Sqrt(n) {
				t.Errorf("%s: sum %.8g l2 %.8g, want %.8g %.8g within the zero-gradient bound", p.Name, sum, l2, w.Sum, w.L2)
			}
			if int(n) < len(vals) {
				// The leading (query) elements have real but tiny gradients (norm ~5e-4), which
				// AdamW normalises: compare them to 1e-3 of the largest step.
				for i, x := range w.First4 {
					if math.Abs(vals[i]-x) > 1e-3*maxMove {
						t.Errorf("%s[%d] = %.8g, want %.8g", p.Name, i, vals[i], x)
					}
				}
			}
			continue
		}
		// Sums near zero (zero-mean biases) are compared against the L2 scale instead.
		if math.Abs(sum-w.Sum) > 1e-4*math.Max(math.Abs(w.Sum), w.L2) || math.Abs(l2-w.L2) > 1e-4*w.L2 {
			t.Errorf("%s: sum %.8g l2 %.8g, want %.8g %.8g", p.Name, sum, l2, w.Sum, w.L2)
		}
	}
}

// exportedParams returns the stepper's parameters by name, read with ExportState.
func exportedParams(t *testing.T, s *Stepper) map[string][]float64 {
	t.Helper()
	st, err := s.ExportState(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	params := map[string][]float64{}
	for _, h := range st.Params {
		params[h.Name] = hostFloats(t, h)
	}
	return params
}

func floats(t *testing.T, x *tensors.Tensor) []float64 {
	t.Helper()
	switch v := x.Value().(type) {
	default:
		flat := tensors.MustCopyFlatData[float32](x)
		out := make([]float64, len(flat))
		for i, f := range flat {
			out[i] = float64(f)
		}
		_ = v
		return out
	}
}

// randomBatch makes a causal-LM batch of random tokens with some padding.
func randomBatch(rng *rand.Rand, size, seq, vocab int) *data.Batch {
	b := &data.Batch{Size: size, SeqLen: seq}
	for i := range size {
		valid := seq - rng.IntN(seq/3)
		for j := range seq {
			id := int32(rng.IntN(vocab))
			mask, label := int32(1), id
			if j >= valid {
				mask, label = 0, data.IgnoreIndex
			}
			_ = i
			b.InputIDs = append(b.InputIDs, id)
			b.AttentionMask = append(b.AttentionMask, mask)
			b.Labels = append(b.Labels, label)
		}
	}
	return b
}

// split cuts a batch into n shards of consecutive rows.
func split(b *data.Batch, n int) []*data.Batch {
	per := b.Size / n
	out := make([]*data.Batch, n)
	for r := range n {
		lo, hi := r*per*b.SeqLen, (r+1)*per*b.SeqLen
		out[r] = &data.Batch{Size: per, SeqLen: b.SeqLen, InputIDs: b.InputIDs[lo:hi],
			AttentionMask: b.AttentionMask[lo:hi], Labels: b.Labels[lo:hi]}
	}
	return out
}

// TestReplicaEquivalence: 8 replicas × batch 1, 1 replica × batch 8, 2 replicas × 4 accumulation
// steps × batch 1 and 1 replica × 8 accumulation steps make the same updates (within 1e-5
// relative after 5 steps), with padding, so rows have different numbers of loss terms. Several
// replicas run as one SPMD program on as many virtual devices, through the in-graph all-reduce
// (gotpu's backend only: simplego has one device and no collectives). It uses the Llama fixture:
// GPT-2 and BERT have attention key biases whose true gradient is zero, and AdamW turns the
// rounding noise of each layout into different full-size steps there (see zeroTrueGradient).
func TestReplicaEquivalence(t *testing.T) {
	for _, backend := range goBackends {
		t.Run(backend, func(t *testing.T) { replicaEquivalence(t, backend) })
	}
}

func replicaEquivalence(t *testing.T, backend string) {
	rng := rand.New(rand.NewPCG(3, 4))
	const steps = 5
	batches := make([]*data.Batch, steps)
	for i := range batches {
		batches[i] = randomBatch(rng, 8, 16, 512)
	}
	layouts := []struct {
		name        string
		replicas    int
		accumulate  int
		microAndRep func(b *data.Batch) [][]*data.Batch
	}{
		{"1x8", 1, 1, func(b *data.Batch) [][]*data.Batch { return [][]*data.Batch{{b}} }},
		{"8x1", 8, 1, func(b *data.Batch) [][]*data.Batch { return [][]*data.Batch{split(b, 8)} }},
		{"2x1 accum 4", 2, 4, func(b *data.Batch) [][]*data.Batch {
			rows := split(b, 8)
			out := make([][]*data.Batch, 4)
			for a := range 4 { // micro-batch a holds rows 2a (replica 0) and 2a+1 (replica 1)
				out[a] = []*data.Batch{rows[2*a], rows[2*a+1]}
			}
			return out
		}},
		{"1x1 accum 8", 1, 8, func(b *data.Batch) [][]*data.Batch {
			out := make([][]*data.Batch, 8)
			for a, row := range split(b, 8) {
				out[a] = []*data.Batch{row}
			}
			return out
		}},
	}
	var base map[string][]float64
	var baseLosses []float64
	for _, l := range layouts {
		if l.replicas > 1 && backend == xla.GoBackendSimpleGo {
			continue
		}
		rt := openGoDevices(t, backend, l.replicas)
		m, err := models.Load(context.Background(), rt, fixtureDir("llama-tiny"), models.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		opt := DefaultAdamW()
		opt.WeightDecay = 0.01
		s, err := New(rt, m, Config{Optimizer: opt, NumReplicas: l.replicas})
		if err != nil {
			t.Fatal(err)
		}
		var losses []float64
		for _, b := range batches {
			res, err := s.Step(context.Background(), l.microAndRep(b), 1e-3)
			if err != nil {
				t.Fatal(err)
			}
			losses = append(losses, res.Loss)
		}
		if l.replicas > 1 {
			identicalShards(t, m, l.replicas)
		}
		params := map[string][]float64{}
		for _, p := range m.Params() {
			params[p.Name] = floats(t, m.Context().GetVariableByScopeAndName(p.Scope(), p.Var()).MustValue())
		}
		if base == nil {
			base, baseLosses = params, losses
			continue
		}
		for i := range losses {
			if math.Abs(losses[i]-baseLosses[i]) > 1e-5*baseLosses[i] {
				t.Errorf("%s: step %d loss %.8f, 1x8 has %.8f", l.name, i+1, losses[i], baseLosses[i])
			}
		}
		rel, _ := relDiffs(params, base) // Llama has no zero-true-gradient parameter to leave out
		w, where := worst(rel)
		t.Logf("%s vs 1x8: max relative parameter difference %.2e (%s)", l.name, w, where)
		if w > 1e-5 {
			t.Errorf("%s: parameters differ from 1x8 by %.2e relative (%s)", l.name, w, where)
		}
	}
}

// identicalShards checks that every variable of the context (parameters, optimizer state, RNG
// state) holds the same bytes on all n devices after SPMD steps: the replicas did not diverge.
func identicalShards(t *testing.T, m models.Model, n int) {
	t.Helper()
	checked := 0
	for v := range m.Context().IterVariables() {
		dv, err := v.DistributedValue()
		if err != nil {
			t.Fatalf("%s: %v", v.ScopeAndName(), err)
		}
		shards := dv.Shards()
		if len(shards) != n {
			t.Fatalf("%s: %d shards, want %d", v.ScopeAndName(), len(shards), n)
		}
		raw := func(x *tensors.Tensor) []byte {
			var out []byte
			if err := x.ConstBytes(func(b []byte) { out = bytes.Clone(b) }); err != nil {
				t.Fatal(err)
			}
			return out
		}
		first := raw(shards[0])
		for r, sh := range shards[1:] {
			if !bytes.Equal(raw(sh), first) {
				t.Errorf("%s: replica %d differs from replica 0", v.ScopeAndName(), r+1)
			}
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no variables")
	}
}
