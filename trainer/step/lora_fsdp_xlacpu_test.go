//go:build !noxla

package step

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/xla"
)

// LoRA on a sharded base on XLA's CPU plugin: the AutoSharding program with the frozen base's
// variables annotated with their layouts (fsdp_frozen.go), partitioned by XLA.

// xlaLoRARun trains the Llama fixture's adapter (base in dtype) on rt in layout l for the given
// global batches and returns the losses, the adapter by name and the stepper.
func xlaLoRARun(t *testing.T, rt *xla.Runtime, dtype string, l loraLayout, batches []*data.Batch) ([]float64, map[string][]float64, *Stepper) {
	t.Helper()
	losses, s := loraRunOn(t, rt, "llama-tiny", dtype, l, batches)
	return losses, exportedParams(t, s), s
}

// TestLoRAFSDPOnXLACPU: an all-linear LoRA adapter on the Llama fixture, float32 and bfloat16
// base, 5 AdamW steps (weight decay, clipping) on a global batch of 8 × 16, trained on XLA's CPU
// plugin with the base sharded — full_shard over 2 and 8 devices, hybrid_shard 2 × 4 — against
// LoRA on one plugin device taking the global batch at once (CI: float32 on 8 devices; all of it
// with GOTPU_XLACPU_ALL=1). Float32: logged losses equal to 4
// decimals, every adapter weight within 1e-5 or within data parallelism's own difference (the
// control, the base replicated, on the same devices: the partitioned program sums the batch in
// another order). Bfloat16: the differences are stated and held to 5e-3 (losses, evaluation
// loss): XLA partitions the sharded bfloat16 base's products as it chooses, and where it splits a
// contraction (a product over the weight's sharded dimension, as the backward pass's dY·W) it adds
// bfloat16 partial products across devices; data parallelism, whose base is whole on every
// device, stays within 1e-4 of one device. gotpu's backend gathers the base exactly and is
// element for element data parallelism there (TestLoRAFSDPEquivalence).
//
// XLA's compiled memory figures of the train program (Stepper.MemoryStats) show the base sharded:
// on 8 devices each device's arguments are its shards of the base and of the adapter's state plus
// the batch and the step's scalars — 1/8 of one device's — and its outputs the adapter's shards
// and moments only (no frozen weight and no gradient is returned). Evaluation after training,
// an AutoSharding program over the sharded weights, gives the one-device loss.
func TestLoRAFSDPOnXLACPU(t *testing.T) {
	rts := map[int]*xla.Runtime{1: openXLACPU(t, 1), 2: openXLACPU(t, 2), 8: openXLACPU(t, 8)}
	rng := rand.New(rand.NewPCG(40, 2))
	const steps = 5
	batches := make([]*data.Batch, steps)
	for i := range batches {
		batches[i] = randomBatch(rng, 8, 16, 512)
	}
	evalBatch := randomBatch(rng, 4, 16, 512)
	// CI runs float32 on 8 devices (1 device, data parallel, full_shard): each XLA compile costs
	// seconds on two cores. GOTPU_XLACPU_ALL=1 adds 2 devices, hybrid_shard and the bfloat16 base.
	all := os.Getenv("GOTPU_XLACPU_ALL") == "1"
	dtypes, counts := []string{""}, []int{8}
	if all {
		dtypes, counts = []string{"", "bfloat16"}, []int{2, 8}
	}
	for _, dtype := range dtypes {
		t.Run(fmt.Sprintf("dtype=%q", dtype), func(t *testing.T) {
			oneLosses, oneParams, one := xlaLoRARun(t, rts[1], dtype, loraLayout{name: "1 device", devices: 1}, batches)
			oneStats, err := one.MemoryStats()
			if err != nil {
				t.Fatal(err)
			}
			oneSum, oneTerms, l, err := one.Evaluate(context.Background(), evalBatch)
			if err != nil {
				t.Fatal(err)
			}
			l.Release()
			_, frozenWhole := one.FrozenShardBytes()
			adapter := one.OptimizerStateBytes() / 2 * 3
			t.Logf("1 device: compiled train program %s (frozen base %d, adapter + AdamW %d)", oneStats, frozenWhole, adapter)
			if d := oneStats.Argument - frozenWhole - adapter; d < 0 || d > 4096 {
				t.Errorf("1 device: arguments %d bytes, %d beyond the base and the adapter state", oneStats.Argument, d)
			}
			for _, devices := range counts {
				_, dpParams, _ := xlaLoRARun(t, rts[devices], dtype, loraLayout{name: fmt.Sprintf("data parallel %d", devices), devices: devices}, batches)
				dpWorst, _ := maxAbsDiff(t, dpParams, oneParams)
				layouts := []loraLayout{{name: fmt.Sprintf("full_shard %d", devices), devices: devices, fsdp: &FSDP{Data: 1, Shard: devices}}}
				if devices == 8 && all {
					layouts = append(layouts, loraLayout{name: "hybrid_shard 2x4", devices: 8, fsdp: &FSDP{Data: 2, Shard: 4}})
				}
				for _, l := range layouts {
					losses, params, s := xlaLoRARun(t, rts[devices], dtype, l, batches)
					var lossDiff float64
					for i := range losses {
						lossDiff = max(lossDiff, math.Abs(losses[i]-oneLosses[i]))
					}
					w, where := maxAbsDiff(t, params, oneParams)
					t.Logf("%s: losses %.4f; against 1 device: max |loss diff| %.2e, max |adapter diff| %.2e (%s; data parallel %d: %.2e)",
						l.name, losses, lossDiff, w, where, devices, dpWorst)
					if dtype == "" {
						for i := range losses {
							if a, b := fmt.Sprintf("%.4f", losses[i]), fmt.Sprintf("%.4f", oneLosses[i]); a != b {
								t.Errorf("%s: step %d loss %s, 1 device %s", l.name, i+1, a, b)
							}
						}
						if w > max(1e-5, dpWorst) {
							t.Errorf("%s: adapter weight %s differs from 1 device by %.2e (bound 1e-5; data parallel %.2e)", l.name, where, w, dpWorst)
						}
					} else if lossDiff > 5e-3 {
						t.Errorf("%s: losses differ from 1 device by %.2e (bound 5e-3 for a bfloat16 base)", l.name, lossDiff)
					}
					st, err := s.MemoryStats()
					if err != nil {
						t.Fatal(err)
					}
					frozenShard, _ := s.FrozenShardBytes()
					var adapterShard int64
					for i := range s.params {
						adapterShard += s.fsdp.layouts[i].ShardElements() * 4 * 3
					}
					t.Logf("%s: compiled train program per device %s (frozen shards %d, adapter shards + AdamW %d)", l.name, st, frozenShard, adapterShard)
					if d := st.Argument - frozenShard - adapterShard; d < 0 || d > 4096 {
						t.Errorf("%s: arguments %d bytes per device, %d beyond the base's and the adapter state's shards (%d + %d)",
							l.name, st.Argument, d, frozenShard, adapterShard)
					}
					if d := st.Output - adapterShard; d < 0 || d > 1024 {
						t.Errorf("%s: outputs %d bytes per device, %d beyond the adapter state's shards %d: a frozen weight or a gradient is returned",
							l.name, st.Output, d, adapterShard)
					}
					sum, terms, lg, err := s.Evaluate(context.Background(), evalBatch)
					if err != nil {
						t.Fatal(err)
					}
					lg.Release()
					tol := 1e-5
					if dtype != "" {
						tol = 5e-3
					}
					if terms != oneTerms || math.Abs(sum/terms-oneSum/oneTerms) > tol {
						t.Errorf("%s: evaluation loss %.7f (%v terms), 1 device %.7f (%v)", l.name, sum/terms, terms, oneSum/oneTerms, oneTerms)
					}
				}
			}
		})
	}
}
