package trainer_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/trainer"
)

// TestFSDPExactResume: with fsdp full_shard on 8 devices and hybrid_shard on a 2 × 4 mesh, 20
// steps straight and 10 + resume + 10 on the same mesh give bitwise-identical model,
// optimizer and RNG files and the same logged losses.
func TestFSDPExactResume(t *testing.T) {
	for _, c := range []resumeCase{
		{devices: 8, perDevice: 1, accumulation: 1, fsdp: []string{"full_shard"}},
		{devices: 8, perDevice: 1, accumulation: 2, fsdp: []string{"hybrid_shard"}, mesh: []int{2, 4}},
	} {
		t.Run(fmt.Sprintf("%v%v,accumulation=%d", c.fsdp, c.mesh, c.accumulation), func(t *testing.T) {
			straight, split := t.TempDir(), t.TempDir()
			a := c.train(t, c.devices, c.perDevice, straight, 0, false)
			c.train(t, c.devices, c.perDevice, split, 10, false)
			b := c.train(t, c.devices, c.perDevice, split, 0, true)
			sameRun(t, straight, split, 20, a, b)
		})
	}
}

// TestFSDPResumeAcrossMeshes: 30 steps with fsdp full_shard on 8 devices, against 10 steps
// there, resumed for 10 on a 2 × 4 hybrid_shard mesh, then for 10 on 1 device (same global
// batch): the final parameters and optimizer state are within 1e-6 (float32 rounding of the
// gradient sums in other orders, as TestResumeOnOtherDeviceCount measures for data parallelism).
func TestFSDPResumeAcrossMeshes(t *testing.T) {
	full := resumeCase{accumulation: 1, lr: 1e-3, fsdp: []string{"full_shard"}}
	hybrid := resumeCase{accumulation: 1, lr: 1e-3, fsdp: []string{"hybrid_shard"}, mesh: []int{2, 4}}
	one := resumeCase{accumulation: 1, lr: 1e-3}
	straight, split := t.TempDir(), t.TempDir()
	steps30 := func(c resumeCase) resumeCase { c.maxSteps = 30; return c }
	steps30(full).train(t, 8, 1, straight, 0, false)
	steps30(full).train(t, 8, 1, split, 10, false)
	steps30(hybrid).train(t, 8, 1, split, 20, true)
	steps30(one).train(t, 1, 8, split, 0, true)
	for _, f := range []string{"model.safetensors", "optimizer.safetensors"} {
		worst := maxAbsDiffF32(t, filepath.Join(straight, "checkpoint-30", f), filepath.Join(split, "checkpoint-30", f))
		t.Logf("%s: max |8 devices full_shard - (8 full_shard, then 2×4 hybrid_shard, then 1 device)| = %g", f, worst)
		if worst > 1e-6 {
			t.Errorf("%s: max difference %g > 1e-6", f, worst)
		}
	}
}

// TestFSDPEvaluateAndLoadBest: evaluation during an FSDP run (8 devices, full_shard) gives the
// eval losses of the data-parallel run within float32 rounding, load_best_model_at_end reloads
// the best checkpoint into a sharded stepper, and after training each device still holds only
// its shards (the evaluation's gathered copy does not stay on the devices; device 0 holds the
// reloaded best model, as with data parallelism).
func TestFSDPEvaluateAndLoadBest(t *testing.T) {
	run := func(fsdp []string) (map[int64]float64, []int64) {
		rt := openRT(t, 8)
		c := resumeCase{accumulation: 1, lr: 1e-3, fsdp: fsdp, perDevice: 1}
		a := c.args(t.TempDir())
		a.EvalStrategy, a.SaveSteps, a.MaxSteps = "steps", 5, 15
		five := 5.0
		a.EvalSteps = &five
		a.LoadBestModelAtEnd = true
		tr, err := trainer.New(a, gpt2With(t, rt, 0), counting(40, 0), counting(16, 7), trainer.Options{Runtime: rt, Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tr.Train(context.Background()); err != nil {
			t.Fatal(err)
		}
		evals := map[int64]float64{}
		for _, e := range tr.State().LogHistory {
			l, ok1 := e.Get("eval_loss")
			s, ok2 := e.Get("step")
			if ok1 && ok2 {
				lf, _ := l.Float()
				sf, _ := s.Float()
				evals[int64(sf)] = lf
			}
		}
		b, _ := rt.DeviceBytes()
		return evals, b
	}
	dpEvals, dpBytes := run(nil)
	fsEvals, fsBytes := run([]string{"full_shard"})
	if len(fsEvals) != 3 || len(dpEvals) != 3 {
		t.Fatalf("eval losses: fsdp %v, data parallel %v; want 3 each", fsEvals, dpEvals)
	}
	for s, want := range dpEvals {
		if got := fsEvals[s]; math.Abs(got-want) > 1e-6*math.Abs(want) {
			t.Errorf("step %d: eval_loss %v with FSDP, %v data parallel", s, got, want)
		}
	}
	t.Logf("per-device bytes after training with evaluation: data parallel %v, full_shard %v", dpBytes, fsBytes)
	for d := 1; d < len(fsBytes); d++ {
		if fsBytes[d]*4 > dpBytes[d] {
			t.Errorf("device %d holds %d bytes with FSDP, %d data parallel: not sharded", d, fsBytes[d], dpBytes[d])
		}
	}
	// Device 0 also holds the best model load_best_model_at_end reloaded there whole (not stepped
	// since); data parallelism holds the same extra.
	if extra, dpExtra := fsBytes[0]-fsBytes[1], dpBytes[0]-dpBytes[1]; extra > dpExtra {
		t.Errorf("device 0 holds %d bytes more than device 1 with FSDP, %d data parallel", extra, dpExtra)
	}
}

// TestFSDPLayerClassChecked: transformer_layer_cls_to_wrap must name the model's layer class, as
// accelerate requires; the right one trains.
func TestFSDPLayerClassChecked(t *testing.T) {
	rt := openRT(t, 8)
	c := resumeCase{accumulation: 1, perDevice: 1, fsdp: []string{"full_shard", "auto_wrap"}}
	a := c.args(t.TempDir())
	a.MaxSteps, a.SaveStrategy = 2, "no"
	a.FSDPConfig.TransformerLayerClsToWrap = []string{"LlamaDecoderLayer"}
	_, err := trainer.New(a, gpt2With(t, rt, 0), counting(40, 0), nil, trainer.Options{Runtime: rt, Logger: quiet()})
	if err == nil || !strings.Contains(err.Error(), `"LlamaDecoderLayer" is not a layer of this gpt2 model (its layer class is "GPT2Block")`) {
		t.Fatalf("wrong class: %v", err)
	}
	a.FSDPConfig.TransformerLayerClsToWrap = []string{"GPT2Block"}
	tr, err := trainer.New(a, gpt2With(t, rt, 0), counting(40, 0), nil, trainer.Options{Runtime: rt, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
}
