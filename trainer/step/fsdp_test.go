package step

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/xla"
)

// fsdpLayout is one way of running the same global batches: devices, the FSDP mesh (nil: data
// parallel or one device), accumulation micro-batches.
type fsdpLayout struct {
	name       string
	devices    int
	fsdp       *FSDP
	accumulate int
	perReplica int
}

// micro cuts a global batch of rows into accumulate micro-batches × devices shards, rows in order:
// micro-batch a, replica r gets rows [(a·devices + r)·per, …).
func (l fsdpLayout) micro(b *data.Batch) [][]*data.Batch {
	rows := split(b, b.Size/l.perReplica)
	out := make([][]*data.Batch, l.accumulate)
	for a := range out {
		for r := range l.devices {
			out[a] = append(out[a], rows[a*l.devices+r])
		}
	}
	return out
}

// fsdpRun trains fixture for len(batches) steps in layout l with AdamW, weight decay and clipping
// and returns the losses, the parameters by name and the stepper.
func fsdpRun(t *testing.T, fixture string, l fsdpLayout, batches []*data.Batch) ([]float64, map[string][]float64, *Stepper) {
	t.Helper()
	opt := DefaultAdamW()
	opt.WeightDecay = 0.01
	opt.MaxGradNorm = 0.5
	s := newFixtureStepper(t, openGoDevices(t, xla.GoBackendGotpu, l.devices), fixture,
		Config{Optimizer: opt, NumReplicas: l.devices, FSDP: l.fsdp})
	var losses []float64
	for _, b := range batches {
		res, err := s.Step(context.Background(), l.micro(b), 1e-3)
		if err != nil {
			t.Fatalf("%s: %v", l.name, err)
		}
		losses = append(losses, res.Loss)
	}
	return losses, exportedParams(t, s), s
}

// relDiffs returns ‖a − b‖ / ‖b‖ per parameter, leaving out the elements whose exact gradient
// is zero (GPT-2's attention key biases, zeroTrueGradient: their float32 gradient is rounding
// noise that AdamW normalises into steps of up to lr, different in every layout), whose largest
// absolute difference is returned as noise.
func relDiffs(a, b map[string][]float64) (rel map[string]float64, noise float64) {
	rel = map[string]float64{}
	for name, vals := range a {
		lo, hi := 0, 0 // [lo, hi): the key third of a fused c_attn.bias
		if k := zeroTrueGradient(name, len(vals)); k > 0 {
			lo, hi = (len(vals)-k)/2, (len(vals)-k)/2+k
			if k == len(vals) {
				lo, hi = 0, k
			}
		}
		var diff, norm float64
		for i, v := range vals {
			d := v - b[name][i]
			if i >= lo && i < hi {
				noise = math.Max(noise, math.Abs(d))
				continue
			}
			diff += d * d
			norm += b[name][i] * b[name][i]
		}
		rel[name] = math.Sqrt(diff) / math.Max(math.Sqrt(norm), 1e-12)
	}
	return rel, noise
}

// worst returns the largest of rel and its parameter.
func worst(rel map[string]float64) (float64, string) {
	w, where := 0.0, ""
	for name, r := range rel {
		if r > w {
			w, where = r, name
		}
	}
	return w, where
}

// TestFSDPEquivalence: 10 steps of the GPT-2 and Llama fixtures with AdamW, weight decay and
// clipping on 8 virtual devices with fsdp full_shard (1 × 8 mesh), hybrid_shard (2 × 4), and
// full_shard with 4 accumulation micro-batches, against one device on the same global batches.
//
// full_shard and hybrid_shard are element for element the data-parallel run on the same 8
// devices and the 1-device run that takes the same per-device batch in 8 accumulation
// micro-batches (the reduce-scatter is the data-parallel all-reduce, the norm is computed from
// the whole sums in its order, and gotpu's all-reduce adds replicas in the order accumulation adds
// micro-batches). Against the 1-device run that takes the whole global batch at once, every
// parameter is within 1e-6 for Llama, with logged losses equal to 4 decimals in every layout. For
// GPT-2 data parallelism itself is not within 1e-6 there: its fixture's biases start at zero and
// summing the batch in another order (per replica, then all-reduced) moves some tensors by 1–2e-6
// relative after 10 AdamW steps; FSDP is held to data parallelism's own difference plus 1e-6,
// tensor by tensor. The key part of GPT-2's fused attention bias, whose exact gradient is zero, is
// compared with an absolute bound (relDiffs).
func TestFSDPEquivalence(t *testing.T) {
	for _, fixture := range []string{"gpt2-tiny", "llama-tiny"} {
		t.Run(fixture, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(17, 4))
			const steps = 10
			batches := make([]*data.Batch, steps)
			for i := range batches {
				batches[i] = randomBatch(rng, 32, 16, 512)
			}
			baseLosses, baseParams, _ := fsdpRun(t, fixture, fsdpLayout{name: "1 device", devices: 1, accumulate: 1, perReplica: 32}, batches)
			_, accParams, _ := fsdpRun(t, fixture, fsdpLayout{name: "1 device, 8 micro-batches", devices: 1, accumulate: 8, perReplica: 4}, batches)
			_, dpParams, _ := fsdpRun(t, fixture, fsdpLayout{name: "data parallel 8", devices: 8, accumulate: 1, perReplica: 4}, batches)
			identical := func(name string, a, b map[string][]float64) {
				t.Helper()
				rel, noise := relDiffs(a, b)
				if w, where := worst(rel); w != 0 || noise != 0 {
					t.Errorf("%s: differs by %.2e relative (%s), %.2e in zero-gradient elements; want equal element for element", name, w, where, noise)
				}
			}
			identical("data parallel 8 vs 1 device with 8 micro-batches", dpParams, accParams)
			dpRel, _ := relDiffs(dpParams, baseParams)
			w, where := worst(dpRel)
			t.Logf("%s data parallel 8 vs 1 device (control): max relative parameter difference %.2e (%s)", fixture, w, where)
			for _, l := range []fsdpLayout{
				{name: "full_shard 8", devices: 8, fsdp: &FSDP{Data: 1, Shard: 8}, accumulate: 1, perReplica: 4},
				{name: "hybrid_shard 2x4", devices: 8, fsdp: &FSDP{Data: 2, Shard: 4}, accumulate: 1, perReplica: 4},
				{name: "full_shard 8 accum 4", devices: 8, fsdp: &FSDP{Data: 1, Shard: 8}, accumulate: 4, perReplica: 1},
			} {
				losses, params, _ := fsdpRun(t, fixture, l, batches)
				if l.accumulate == 1 {
					identical(l.name+" vs data parallel 8", params, dpParams)
					identical(l.name+" vs 1 device with 8 micro-batches", params, accParams)
				}
				for i := range losses {
					if a, b := fmt.Sprintf("%.4f", losses[i]), fmt.Sprintf("%.4f", baseLosses[i]); a != b {
						t.Errorf("%s: step %d loss %s, 1 device %s", l.name, i+1, a, b)
					}
				}
				rel, noise := relDiffs(params, baseParams)
				w, where := worst(rel)
				t.Logf("%s %s vs 1 device: max relative parameter difference %.2e (%s); zero-true-gradient elements differ by at most %.2e",
					fixture, l.name, w, where, noise)
				for name, r := range rel {
					bound := 1e-6
					if fixture == "gpt2-tiny" {
						bound += dpRel[name]
					}
					if r > bound {
						t.Errorf("%s: %s differs from 1 device by %.2e relative (bound %.2e; data parallel: %.2e)", l.name, name, r, bound, dpRel[name])
					}
				}
				// Each of the 10 AdamW steps moves an element by at most about lr (1e-3), and two
				// runs can move it in opposite directions.
				if noise > 2*steps*1e-3 {
					t.Errorf("%s: zero-true-gradient elements differ by %.2e, more than 10 AdamW steps can move them", l.name, noise)
				}
			}
		})
	}
}

// hostFloats decodes a float32 HostTensor.
func hostFloats(t *testing.T, h HostTensor) []float64 {
	t.Helper()
	if h.DType.Size() != 4 {
		t.Fatalf("%s: %s is not float32", h.Name, h.DType)
	}
	out := make([]float64, len(h.Bytes)/4)
	for i := range out {
		b := h.Bytes[4*i:]
		out[i] = float64(math.Float32frombits(uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24))
	}
	return out
}

// persistentBytes measures, from gotpu's backend's own buffer accounting, what each device holds
// after the given layout's steps (everything dispatched has been read, so the live buffers are
// the variables' shards, the window table and counters, and the fsdp coordinates), and computes
// from the stepper's plan what the parameters and optimizer state alone should take per device,
// split into sharded and replicated.
func persistentBytes(t *testing.T, fixture string, l fsdpLayout) (measured []int64, sharded, replicated int64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(5, 6))
	batches := []*data.Batch{randomBatch(rng, 8*l.perReplica, 16, 512)}
	_, _, s := fsdpRun(t, fixture, l, batches)
	for i, p := range s.params {
		elems := int64(1)
		for _, d := range p.Shape {
			elems *= int64(d)
		}
		perDevice := elems
		isSharded := false
		if s.fsdp != nil && s.fsdp.layouts[i].Sharded() {
			perDevice, isSharded = s.fsdp.layouts[i].ShardElements(), true
		}
		bytes := perDevice * 4 * 3 // float32 parameter, AdamW m and v
		if isSharded {
			sharded += bytes
		} else {
			replicated += bytes
		}
	}
	got, ok := s.rt.DeviceBytes()
	if !ok {
		t.Fatal("gotpu's backend keeps no buffer accounting")
	}
	return got[:l.devices], sharded, replicated
}

// TestFSDPPersistentBytes: between steps, each of 8 devices holds at most 1/8 of what one device
// holds for the whole model, plus the tensors that stay replicated and the step's small
// per-device inputs (window table, counters) — measured from the backend's buffer accounting.
func TestFSDPPersistentBytes(t *testing.T) {
	for _, fixture := range []string{"gpt2-tiny", "llama-tiny"} {
		one, _, _ := persistentBytes(t, fixture, fsdpLayout{name: "1 device", devices: 1, accumulate: 1, perReplica: 8})
		dp, _, _ := persistentBytes(t, fixture, fsdpLayout{name: "data parallel", devices: 8, accumulate: 1, perReplica: 1})
		fs, sharded, replicated := persistentBytes(t, fixture, fsdpLayout{name: "full_shard", devices: 8, fsdp: &FSDP{Data: 1, Shard: 8}, accumulate: 1, perReplica: 1})
		// The step's own per-device inputs: the window table (1 row × 5 float32 for Window 1),
		// the counter (3 int32) and the fsdp coordinate (1 int32).
		const small = 5*4 + 3*4 + 4
		t.Logf("%s: per-device bytes: 1 device %d; data parallel ×8 %v; full_shard ×8 %v (parameters + AdamW state: sharded %d + replicated %d)",
			fixture, one[0], dp, fs, sharded, replicated)
		for d, b := range fs {
			if bound := one[0]/8 + replicated + small; b > bound {
				t.Errorf("%s: device %d holds %d bytes, more than 1/8 of one device's %d plus %d replicated and %d step inputs",
					fixture, d, b, one[0], replicated, small)
			}
			if b < sharded {
				t.Errorf("%s: device %d holds %d bytes, less than its shards' %d: the accounting misses buffers", fixture, d, b, sharded)
			}
		}
	}
}

// TestFSDPStateSourceMatchesExport: staging the sharded state tensor by tensor (what a checkpoint
// writes) gives the bytes ExportState's whole host copy has, for full_shard and hybrid_shard.
func TestFSDPStateSourceMatchesExport(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	batches := []*data.Batch{randomBatch(rng, 8, 16, 512), randomBatch(rng, 8, 16, 512)}
	for _, l := range []fsdpLayout{
		{name: "full_shard", devices: 8, fsdp: &FSDP{Data: 1, Shard: 8}, accumulate: 1, perReplica: 1},
		{name: "hybrid_shard", devices: 8, fsdp: &FSDP{Data: 2, Shard: 4}, accumulate: 1, perReplica: 1},
	} {
		_, _, s := fsdpRun(t, "llama-tiny", l, batches)
		st, err := s.ExportState(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		src, err := s.StateSource(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for part, want := range [][]HostTensor{st.Params, st.Optimizer, st.Other} {
			got := src.Tensors(part)
			if len(got) != len(want) {
				t.Fatalf("%s part %d: %d tensors, ExportState has %d", l.name, part, len(got), len(want))
			}
			for i, g := range got {
				dst := make([]byte, g.Bytes())
				if err := src.Stage(context.Background(), part, i, dst); err != nil {
					t.Fatal(err)
				}
				if g.Name != want[i].Name || !bytes.Equal(dst, want[i].Bytes) {
					t.Errorf("%s: %s staged differs from ExportState's %s", l.name, g.Name, want[i].Name)
				}
			}
		}
	}
}
