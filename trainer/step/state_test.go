package step

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/xla"
)

func sameState(t *testing.T, a, b State) {
	t.Helper()
	if a.OptimizerStep != b.OptimizerStep {
		t.Fatalf("optimizer step %d vs %d", a.OptimizerStep, b.OptimizerStep)
	}
	for _, part := range [][2][]HostTensor{{a.Params, b.Params}, {a.Optimizer, b.Optimizer}} {
		if len(part[0]) != len(part[1]) {
			t.Fatalf("%d vs %d tensors", len(part[0]), len(part[1]))
		}
		for i := range part[0] {
			if part[0][i].Name != part[1][i].Name || !bytes.Equal(part[0][i].Bytes, part[1][i].Bytes) {
				t.Fatalf("%s differs", part[0][i].Name)
			}
		}
	}
}

// TestExportImportState: the exported state is a host copy (later steps do not change it);
// importing it into a fresh stepper with another replica count and stepping on gives the same
// state as stepping on from the original; a poisoned step changes nothing; bad imports are
// refused by name.
func TestExportImportState(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	batches := []*data.Batch{randomBatch(rng, 4, 16, 512), randomBatch(rng, 4, 16, 512), randomBatch(rng, 4, 16, 512)}
	newStepper := func(replicas int) *Stepper {
		rt := openGoDevices(t, xla.GoBackendGotpu, replicas)
		m, err := models.Load(context.Background(), rt, fixtureDir("llama-tiny"), models.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s, err := New(rt, m, Config{Optimizer: DefaultAdamW(), NumReplicas: replicas})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	step := func(s *Stepper, b *data.Batch) Result {
		res, err := s.Step(context.Background(), [][]*data.Batch{split(b, s.cfg.NumReplicas)}, 1e-3)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	a := newStepper(2)
	step(a, batches[0])
	saved, err := a.ExportState(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	again, _ := a.ExportState(context.Background())
	a.PoisonNextStep()
	if res := step(a, batches[1]); !res.Skipped {
		t.Fatal("a poisoned step was applied")
	}
	after, _ := a.ExportState(context.Background())
	sameState(t, again, after)
	step(a, batches[1])
	step(a, batches[2])
	sameState(t, saved, again) // the host copy did not follow the device buffers

	b := newStepper(1)
	if err := b.ImportState(saved); err != nil {
		t.Fatal(err)
	}
	step(b, batches[1])
	step(b, batches[2])
	fa, _ := a.ExportState(context.Background())
	fb, _ := b.ExportState(context.Background())
	if fa.OptimizerStep != 3 || fb.OptimizerStep != 3 {
		t.Fatalf("optimizer steps %d, %d", fa.OptimizerStep, fb.OptimizerStep)
	}
	for i := range fa.Params {
		x, y := fa.Params[i].Bytes, fb.Params[i].Bytes
		if len(x) != len(y) {
			t.Fatalf("%s: sizes differ", fa.Params[i].Name)
		}
		for j := 0; j+4 <= len(x); j += 4 {
			u := math.Float32frombits(binary.LittleEndian.Uint32(x[j:]))
			v := math.Float32frombits(binary.LittleEndian.Uint32(y[j:]))
			if math.Abs(float64(u-v)) > 1e-6 {
				t.Fatalf("%s[%d]: %v (2 replicas) vs %v (resumed on 1)", fa.Params[i].Name, j/4, u, v)
			}
		}
	}

	bad := saved
	bad.Optimizer = bad.Optimizer[1:]
	if err := newStepper(1).ImportState(bad); err == nil || !strings.Contains(err.Error(), "adamw_m/") {
		t.Fatalf("import without an optimizer tensor: %v", err)
	}
	bad = saved
	bad.Params = append([]HostTensor{{Name: saved.Params[0].Name, DType: saved.Params[0].DType, Shape: []int{1}, Bytes: make([]byte, 4)}}, saved.Params[1:]...)
	if err := newStepper(1).ImportState(bad); err == nil || !strings.Contains(err.Error(), saved.Params[0].Name) {
		t.Fatalf("import of a reshaped parameter: %v", err)
	}
}
