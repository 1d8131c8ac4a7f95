package step

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/peft"
	"github.com/gotpu/gotpu/xla"
)

// LoRA on a sharded base (fsdp_frozen.go) on gotpu's backend: the frozen base is laid out over
// the fsdp axis like the adapter, and the run equals LoRA on one device.

// loraConfig is the adapter the tests train: r 4 on every linear layer, both factors non-zero
// from the start (init_lora_weights false), so every factor gets a gradient at step 1.
func loraConfig() peft.LoraConfig {
	c := peft.DefaultLoraConfig()
	c.R, c.LoraAlpha = 4, 8
	c.TargetModulesRegex = peft.AllLinear
	c.InitLoraWeights = false
	return c
}

// newLoRAStepper loads fixture with its variables in dtype ("" float32, "bfloat16"), attaches
// loraConfig's adapter (the same seed, the same adapter) and makes its stepper.
func newLoRAStepper(t testing.TB, rt *xla.Runtime, fixture, dtype string, cfg Config) *Stepper {
	t.Helper()
	ctx := context.Background()
	base, err := models.Load(ctx, rt, fixtureDir(fixture), models.LoadOptions{DType: dtype})
	if err != nil {
		t.Fatal(err)
	}
	m, err := peft.New(ctx, rt, base, loraConfig(), peft.Options{Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(rt, m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// loraLayout is one way of running the same global batches with LoRA: over devices replicas
// (each an equal run of consecutive rows), or on one device in accumulate micro-batches of
// consecutive rows.
type loraLayout struct {
	name       string
	devices    int
	fsdp       *FSDP
	accumulate int
}

// micro cuts a global batch for the layout.
func (l loraLayout) micro(b *data.Batch) [][]*data.Batch {
	if l.accumulate > 1 {
		var out [][]*data.Batch
		for _, rows := range split(b, l.accumulate) {
			out = append(out, []*data.Batch{rows})
		}
		return out
	}
	return [][]*data.Batch{split(b, l.devices)}
}

// loraOptimizer: AdamW with weight decay (every LoRA factor is in HF's decay group) and clipping.
func loraOptimizer() Optimizer {
	opt := DefaultAdamW()
	opt.WeightDecay = 0.01
	opt.MaxGradNorm = 1
	return opt
}

// loraRun trains fixture's adapter on the global batches in layout l (each replica gets an equal
// run of consecutive rows) and returns the losses and the stepper.
func loraRun(t *testing.T, fixture, dtype string, l loraLayout, batches []*data.Batch) ([]float64, *Stepper) {
	t.Helper()
	return loraRunOn(t, openGoDevices(t, xla.GoBackendGotpu, l.devices), fixture, dtype, l, batches)
}

// loraRunOn is loraRun on runtime rt.
func loraRunOn(t *testing.T, rt *xla.Runtime, fixture, dtype string, l loraLayout, batches []*data.Batch) ([]float64, *Stepper) {
	t.Helper()
	s := newLoRAStepper(t, rt, fixture, dtype, Config{Optimizer: loraOptimizer(), NumReplicas: l.devices, FSDP: l.fsdp})
	var losses []float64
	for k, b := range batches {
		res, err := s.Step(context.Background(), l.micro(b), 1e-3)
		if err != nil {
			t.Fatalf("%s: step %d: %v", l.name, k+1, err)
		}
		if res.Skipped {
			t.Fatalf("%s: step %d skipped", l.name, k+1)
		}
		losses = append(losses, res.Loss)
	}
	return losses, s
}

// maxAbsDiff is the largest elementwise |a − b| over every tensor of a (b must have them all).
func maxAbsDiff(t *testing.T, a, b map[string][]float64) (worst float64, where string) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%d tensors against %d", len(a), len(b))
	}
	for name, va := range a {
		vb, ok := b[name]
		if !ok || len(vb) != len(va) {
			t.Fatalf("%s: missing or of another size in the other run", name)
		}
		for i := range va {
			if d := math.Abs(va[i] - vb[i]); d > worst || math.IsNaN(d) {
				worst, where = d, name
			}
		}
	}
	return worst, where
}

// frozenValues reads every frozen parameter's whole value (its shards merged on the host) as
// float64, by name, without leaving a merged copy in the variable.
func frozenValues(t *testing.T, s *Stepper) map[string][]float64 {
	t.Helper()
	out := map[string][]float64{}
	fm := s.model.(models.Frozen)
	err := s.read(context.Background(), "frozen values", func() error {
		for _, p := range fm.FrozenParams() {
			h, err := hostCopy(p.Name, s.variable(s.model.Context(), p))
			if err != nil {
				return err
			}
			out[p.Name] = hostValues(t, h)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// hostValues decodes a float32 or bfloat16 HostTensor.
func hostValues(t *testing.T, h HostTensor) []float64 {
	t.Helper()
	if h.DType.Size() == 4 {
		return hostFloats(t, h)
	}
	if h.DType.Size() != 2 {
		t.Fatalf("%s: %s", h.Name, h.DType)
	}
	out := make([]float64, len(h.Bytes)/2)
	for i := range out {
		out[i] = float64(math.Float32frombits(uint32(h.Bytes[2*i])<<16 | uint32(h.Bytes[2*i+1])<<24))
	}
	return out
}

// checkFrozenSharded: every frozen variable of s is laid out by internal/shard's rule, and the
// sharded ones hold one shard per device of the layout's shard shape and dtype.
func checkFrozenSharded(t *testing.T, s *Stepper) (sharded int) {
	t.Helper()
	if len(s.fsdp.frozen) == 0 {
		t.Fatal("the FSDP plan has no frozen parameters")
	}
	for _, fp := range s.fsdp.frozen {
		if !fp.layout.Sharded() {
			continue
		}
		sharded++
		dv, err := fp.v.DistributedValue()
		if err != nil {
			t.Fatal(err)
		}
		shards := dv.Shards()
		if len(shards) != s.cfg.NumReplicas || !slices.Equal(dv.ShardShape().Dimensions, fp.layout.ShardShape) || dv.DType() != fp.v.DType() {
			t.Errorf("frozen %s: %d shards of %s, want %d of %v %s", fp.p.Name, len(shards), dv.ShardShape(), s.cfg.NumReplicas, fp.layout.ShardShape, fp.v.DType())
		}
	}
	return sharded
}

// TestLoRAFSDPEquivalence: 5 AdamW steps (lr 1e-3, weight decay, clipping) of an all-linear
// LoRA adapter on the Llama and GPT-2 fixtures (float32 base) and on Llama with a bfloat16 base,
// the frozen base sharded — full_shard over 2 and 8 devices, hybrid_shard 2 × 4 — on a global
// batch of 8 × 16 per step, against LoRA on one device taking the same global batch:
//
//   - as one micro-batch per replica's rows (gradient accumulation): the adapter element for
//     element equal, losses within 1e-6 (accumulation's exact loss pair against the all-reduce's
//     float32 sum), as data parallelism with a replicated base is; and equal element for element,
//     losses included, to that data-parallel run — sharding the base adds exact zeros and
//     changes no arithmetic;
//   - all at once: logged losses equal to 4 decimals and every adapter weight within 1e-5 for
//     the float32 bases, except where data parallelism with a replicated base (the control, run
//     on the same devices) is itself farther: the sharded run must then equal it element for
//     element. Summing 8 rows per device or 1 row per device in another order moves an adapter
//     element whose gradient is near zero (AdamW normalises it) by up to ~1e-5 after 5 steps;
//     with a bfloat16 base every activation is rounded to bfloat16, and another batch shape per
//     device rounds differently, so only the layouts' equalities are asserted there.
//
// Every layout leaves the base bitwise unchanged.
func TestLoRAFSDPEquivalence(t *testing.T) {
	for _, tc := range []struct{ fixture, dtype string }{{"llama-tiny", ""}, {"llama-tiny", "bfloat16"}, {"gpt2-tiny", ""}} {
		t.Run(fmt.Sprintf("%s,dtype=%q", tc.fixture, tc.dtype), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(40, 1))
			const steps = 5
			batches := make([]*data.Batch, steps)
			for i := range batches {
				batches[i] = randomBatch(rng, 8, 16, 512)
			}
			type run struct {
				losses []float64
				params map[string][]float64
			}
			do := func(l loraLayout) (run, *Stepper) {
				losses, s := loraRun(t, tc.fixture, tc.dtype, l, batches)
				return run{losses, exportedParams(t, s)}, s
			}
			whole, one := do(loraLayout{name: "1 device", devices: 1})
			base := frozenValues(t, one)
			// equal: the adapters element for element, the losses too or, with lossTol, within it
			// (accumulation sums the micro-batches' losses as an exact float32 pair, the
			// all-reduce in float32: the last bit of a logged loss may differ).
			equal := func(what string, a, b run, lossTol float64) {
				t.Helper()
				d, where := maxAbsDiff(t, a.params, b.params)
				var lossDiff float64
				for i := range a.losses {
					lossDiff = max(lossDiff, math.Abs(a.losses[i]-b.losses[i]))
				}
				if d != 0 || lossDiff > lossTol {
					t.Errorf("%s: adapter differs by %.2e (%s), losses by %.2e (%v vs %v); want equal element for element", what, d, where, lossDiff, a.losses, b.losses)
				}
			}
			for _, devices := range []int{2, 8} {
				acc, _ := do(loraLayout{name: fmt.Sprintf("1 device, %d micro-batches", devices), devices: 1, accumulate: devices})
				dp, _ := do(loraLayout{name: fmt.Sprintf("data parallel %d", devices), devices: devices})
				equal(fmt.Sprintf("data parallel %d vs 1 device in %d micro-batches", devices, devices), dp, acc, 1e-6)
				dpWorst, _ := maxAbsDiff(t, dp.params, whole.params)
				layouts := []loraLayout{{name: fmt.Sprintf("full_shard %d", devices), devices: devices, fsdp: &FSDP{Data: 1, Shard: devices}}}
				if devices == 8 {
					layouts = append(layouts, loraLayout{name: "hybrid_shard 2x4", devices: 8, fsdp: &FSDP{Data: 2, Shard: 4}},
						// min_num_params keeps the adapter and the norms replicated, the base's
						// matrices sharded.
						loraLayout{name: "full_shard 8 min_num_params 1000", devices: 8, fsdp: &FSDP{Data: 1, Shard: 8, MinNumParams: 1000}})
				}
				for _, l := range layouts {
					r, s := do(l)
					n := checkFrozenSharded(t, s)
					equal(l.name+" vs 1 device in micro-batches", r, acc, 1e-6)
					equal(l.name+" vs data parallel (base replicated)", r, dp, 0)
					if d, where := maxAbsDiff(t, frozenValues(t, s), base); d != 0 {
						t.Errorf("%s: frozen base %s differs from the 1-device run's by %.2e: the base must not move", l.name, where, d)
					}
					var lossDiff float64
					for i := range r.losses {
						lossDiff = max(lossDiff, math.Abs(r.losses[i]-whole.losses[i]))
					}
					w, where := maxAbsDiff(t, r.params, whole.params)
					t.Logf("%s%s %s: %d of %d frozen tensors sharded; losses %.4f; against 1 device all at once: max |loss diff| %.2e, max |adapter diff| %.2e (%s; data parallel %d: %.2e)",
						tc.fixture, tc.dtype, l.name, n, len(s.fsdp.frozen), r.losses, lossDiff, w, where, devices, dpWorst)
					if tc.dtype != "" {
						continue
					}
					for i := range r.losses {
						if a, b := fmt.Sprintf("%.4f", r.losses[i]), fmt.Sprintf("%.4f", whole.losses[i]); a != b {
							t.Errorf("%s: step %d loss %s, 1 device %s", l.name, i+1, a, b)
						}
					}
					if w > max(1e-5, dpWorst) {
						t.Errorf("%s: adapter weight %s differs from 1 device by %.2e (bound 1e-5; data parallel %.2e)", l.name, where, w, dpWorst)
					}
				}
			}
		})
	}
}

// TestLoRAFSDPDeviceBytes: between steps each of 8 devices holds 1/8 of the frozen base (plus
// the tensors min_num_params keeps whole, none here), the adapter's shards and its AdamW
// moments, and the step's few scalars — measured from gotpu's backend's buffer accounting
// (xla.Runtime.DeviceBytes) for a float32 and a bfloat16 base. Evaluating after training gives
// the 1-device loss and leaves each device holding only its shards again (the merged copy of the
// base the one-device evaluation program read is freed).
func TestLoRAFSDPDeviceBytes(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 2))
	batches := []*data.Batch{randomBatch(rng, 8, 16, 512), randomBatch(rng, 8, 16, 512)}
	evalBatch := randomBatch(rng, 4, 16, 512)
	for _, dtype := range []string{"", "bfloat16"} {
		t.Run(fmt.Sprintf("dtype=%q", dtype), func(t *testing.T) {
			_, one := loraRun(t, "llama-tiny", dtype, loraLayout{name: "1 device", devices: 1}, batches)
			_, fs := loraRun(t, "llama-tiny", dtype, loraLayout{name: "full_shard 8", devices: 8, fsdp: &FSDP{Data: 1, Shard: 8}}, batches)
			oneBytes, ok := one.rt.DeviceBytes()
			if !ok {
				t.Fatal("gotpu's backend keeps no buffer accounting")
			}
			fsBytes, _ := fs.rt.DeviceBytes()
			frozenShard, frozenWhole := fs.FrozenShardBytes()
			adapter := fs.OptimizerStateBytes() / 2 * 3 // parameters + AdamW m and v, whole
			var adapterShard int64
			for i, p := range fs.params {
				adapterShard += fs.fsdp.layouts[i].ShardElements() * 4 * 3
				_ = p
			}
			// The step's per-device inputs: window table (1 row × 5 float32), counter (3 int32),
			// fsdp coordinate (1 int32).
			const small = 5*4 + 3*4 + 4
			t.Logf("llama-tiny LoRA, base %q: 1 device holds %d bytes (frozen base %d, adapter + AdamW %d); full_shard 8, each device: %v (frozen shards %d, adapter shards + AdamW %d)",
				dtype, oneBytes[0], frozenWhole, adapter, fsBytes[:8], frozenShard, adapterShard)
			if oneBytes[0] < frozenWhole+adapter {
				t.Errorf("1 device holds %d bytes, less than its base and adapter state %d: the accounting misses buffers", oneBytes[0], frozenWhole+adapter)
			}
			if frozenShard*8 != frozenWhole {
				t.Errorf("frozen shards %d × 8 ≠ the whole base %d: some frozen tensor is replicated", frozenShard, frozenWhole)
			}
			check := func(when string, got []int64) {
				for d, b := range got[:8] {
					if b != frozenShard+adapterShard+small {
						t.Errorf("%s: device %d holds %d bytes, want its frozen shards %d + adapter state shards %d + %d of step inputs",
							when, d, b, frozenShard, adapterShard, small)
					}
				}
			}
			check("after training", fsBytes)
			sum1, terms1, l1, err := one.Evaluate(context.Background(), evalBatch)
			if err != nil {
				t.Fatal(err)
			}
			l1.Release()
			sum8, terms8, l8, err := fs.Evaluate(context.Background(), evalBatch)
			if err != nil {
				t.Fatal(err)
			}
			l8.Release()
			if terms1 != terms8 || math.Abs(sum1/terms1-sum8/terms8) > 1e-6 {
				t.Errorf("evaluation loss %.7f (%v terms) on full_shard 8, %.7f (%v) on 1 device", sum8/terms8, terms8, sum1/terms1, terms1)
			}
			after, _ := fs.rt.DeviceBytes()
			t.Logf("eval loss 1 device %.6f, full_shard 8 %.6f; after evaluation each device holds %v", sum1/terms1, sum8/terms8, after[:8])
			// The trained parameters' merged copies stay on device 0 until the next step donates
			// them (as before); the frozen base's must be gone.
			for d, b := range after[:8] {
				if extra := b - (frozenShard + adapterShard + small); extra < 0 || extra > adapter {
					t.Errorf("after evaluation device %d holds %d bytes: %d beyond its shards (at most the adapter's merged copy, %d)", d, b, extra, adapter)
				}
			}
			// A step after evaluation runs from the shards and leaves each device its shards.
			if _, err := fs.Step(context.Background(), [][]*data.Batch{split(batches[0], 8)}, 2e-3); err != nil {
				t.Fatal(err)
			}
			next, _ := fs.rt.DeviceBytes()
			check("after a step following evaluation", next)
		})
	}
}

// weightGradientOps returns the contractions and scatters of m (top level) whose result has the
// shape of one of the given matrices (in either orientation) — a weight's gradient: a dot_general
// over the batch and sequence, or an embedding's scatter-add — split into live ones (some result
// of the program depends on them) and dead ones. The tests trace with batch shapes no weight
// shares, so no activation or attention tensor has such a shape.
//
// GoMLX's reverse-mode autodiff builds a dot_general's VJP for both operands once either needs a
// gradient, so the text of a LoRA step holds a frozen weight's VJP wherever the layer's input
// needs one; nothing reads it. Only live operations are executed: gotpu's backend runs the nodes
// its outputs depend on (xla/internal/gobackend compile.go's liveness), XLA removes dead code.
func weightGradientOps(m *xla.HLOModule, matrices [][]int) (live, dead []string) {
	want := map[string]bool{}
	for _, d := range matrices {
		want[fmt.Sprintf("tensor<%dx%dx", d[0], d[1])] = true
		want[fmt.Sprintf("tensor<%dx%dx", d[1], d[0])] = true
	}
	isLive := map[int]bool{}
	for _, r := range m.Results {
		ops, _ := m.Ancestors(r)
		for _, i := range ops {
			isLive[i] = true
		}
	}
	for i, op := range m.Ops {
		if op.Name != "stablehlo.dot_general" && op.Name != "stablehlo.scatter" && op.Name != "stablehlo.dot" {
			continue
		}
		_, res, ok := strings.Cut(op.Signature, "->")
		if !ok {
			continue
		}
		res = strings.TrimSpace(res)
		for prefix := range want {
			if strings.HasPrefix(res, prefix) {
				desc := fmt.Sprintf("%s -> %s (line %d)", op.Name, res, op.Line)
				if isLive[i] {
					live = append(live, desc)
				} else {
					dead = append(dead, desc)
				}
			}
		}
	}
	return live, dead
}

// TestLoRAFrozenBaseHasNoGradients: a LoRA step computes no gradient for a frozen weight, sharded
// or not: no operation any result of the train program depends on yields a tensor of a frozen
// matrix's shape (weightGradientOps), in the data-parallel step (base replicated) and in the FSDP
// step a PJRT plugin is given, whose StableHLO also passes the FSDP checker with every frozen
// argument annotated with its layout and none returned. The full fine-tuning step of the same
// model, traced alike, has a live one for every matrix (the control: the check can fail).
func TestLoRAFrozenBaseHasNoGradients(t *testing.T) {
	ctx := context.Background()
	rt := openGoDevices(t, xla.GoBackendGotpu, 1)
	b := BatchShape{Size: 3, SeqLen: 5} // 3 (or 24 over 8 devices) × 5 rows: no weight dimension
	fsdp8 := &FSDP{Data: 1, Shard: 8}
	lora := newLoRAStepper(t, rt, "llama-tiny", "", Config{Optimizer: loraOptimizer(), NumReplicas: 2})
	var matrices [][]int
	for _, p := range lora.model.(models.Frozen).FrozenParams() {
		if len(p.Shape) == 2 {
			matrices = append(matrices, p.Shape)
		}
	}
	trace := func(s *Stepper) (string, *xla.HLOModule) {
		t.Helper()
		var text string
		var err error
		name := "data parallel 2 (base replicated)"
		if s.fsdp != nil {
			name = "fsdp full_shard 8"
			text, err = s.FSDPStableHLO(ctx, b)
		} else {
			text, err = s.StableHLO(ctx, ProgramReplicatedStep, b)
		}
		if err != nil {
			t.Fatal(err)
		}
		m, err := xla.ParseStableHLO(text)
		if err != nil {
			t.Fatal(err)
		}
		if s.fsdp != nil {
			if errs := checkFSDPStep(m, s, 3); len(errs) > 0 {
				t.Errorf("%s: %v", name, errors.Join(errs...))
			}
		}
		return name, m
	}
	loraFS := newLoRAStepper(t, rt, "llama-tiny", "", Config{Optimizer: loraOptimizer(), NumReplicas: 8, FSDP: fsdp8})
	for _, s := range []*Stepper{lora, loraFS} {
		name, m := trace(s)
		live, dead := weightGradientOps(m, matrices)
		if len(live) > 0 {
			t.Errorf("LoRA, %s: %d live operations compute a tensor of a frozen weight's shape, e.g. %s", name, len(live), live[0])
		}
		t.Logf("LoRA, %s: %d frozen matrices; live weight-gradient operations: %d; dead ones (GoMLX's unused VJPs, never run): %d of %d operations",
			name, len(matrices), len(live), len(dead), len(m.Ops))
	}
	for _, fs := range []*FSDP{nil, fsdp8} {
		n := 2
		if fs != nil {
			n = 8
		}
		full := newFixtureStepper(t, rt, "llama-tiny", Config{Optimizer: loraOptimizer(), NumReplicas: n, FSDP: fs})
		name, m := trace(full)
		live, _ := weightGradientOps(m, matrices)
		if len(live) < len(matrices) {
			t.Errorf("full fine-tuning, %s: %d live weight-gradient operations for %d matrices: the check misses them", name, len(live), len(matrices))
		}
		t.Logf("full fine-tuning (control), %s: %d live weight-gradient operations, e.g. %v", name, len(live), live[:min(2, len(live))])
	}
}
