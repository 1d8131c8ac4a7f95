package trainer_test

import (
	"context"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/peft"
	"github.com/gotpu/gotpu/trainer"
)

// noRuntime is a Model that does not record its runtime: it hides the Runtime method of the
// model it wraps, as a Model implemented outside gotpu would.
type noRuntime struct{ models.Model }

// TestRuntimeGivenOnce: a model remembers the runtime it was built or loaded with (also through
// a PEFT adapter); trainer.New trains on it when Options.Runtime is nil, accepts the same runtime
// given again, and refuses another one or none at all, naming trainer.Options.Runtime.
func TestRuntimeGivenOnce(t *testing.T) {
	ctx := context.Background()
	rt, other := openRT(t, 2), openRT(t, 1)

	built := microGPT2(t, rt)
	loaded, err := models.Load(ctx, rt, "../testdata/models/gpt2-tiny", models.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	adapted, err := peft.New(ctx, nil, built, peft.DefaultLoraConfig(), peft.Options{Seed: 1, Log: quiet()})
	if err != nil {
		t.Fatalf("peft.New with the model's runtime: %v", err)
	}
	for name, m := range map[string]models.Model{"models.New": built, "models.Load": loaded, "peft.New": adapted} {
		if got := models.RuntimeOf(m); got != rt {
			t.Errorf("%s: RuntimeOf = %p, want the runtime it was given (%p)", name, got, rt)
		}
	}
	if _, err := peft.New(ctx, other, microGPT2(t, rt), peft.DefaultLoraConfig(), peft.Options{Log: quiet()}); err == nil ||
		!strings.Contains(err.Error(), "different runtime") {
		t.Errorf("peft.New on another runtime: err = %v, want a refusal", err)
	}
	if _, err := models.Load(ctx, nil, "../testdata/models/gpt2-tiny", models.LoadOptions{}); err == nil ||
		!strings.Contains(err.Error(), "models.Load: the runtime is nil") {
		t.Errorf("models.Load(nil runtime): err = %v", err)
	}

	// Options.Runtime left nil: the model's runtime, both of its devices, and training runs.
	a := baseArgs(t)
	a.MaxSteps, a.SaveStrategy = 2, trainer.SaveNo
	tr, err := trainer.New(a, built, counting(16, 0), nil, trainer.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if tr.NumReplicas() != 2 {
		t.Errorf("replicas = %d, want the model runtime's 2 devices", tr.NumReplicas())
	}
	out, err := tr.Train(ctx)
	if err != nil || out.GlobalStep != 2 {
		t.Fatalf("Train: step %d, %v", out.GlobalStep, err)
	}
	t.Logf("trained %d steps on the model's runtime (%d replicas), training loss %.4f", out.GlobalStep, tr.NumReplicas(), out.TrainingLoss)

	// The same runtime given again is what existing callers do: still accepted.
	if _, err := trainer.New(a, built, counting(16, 0), nil, trainer.Options{Runtime: rt, Logger: quiet()}); err != nil {
		t.Errorf("Options.Runtime = the model's runtime: %v", err)
	}
	for name, c := range map[string]struct {
		model models.Model
		opts  trainer.Options
		want  string
	}{
		"another runtime": {built, trainer.Options{Runtime: other, Logger: quiet()},
			"trainer.Options.Runtime is a different runtime from the one the model was loaded with"},
		"no runtime anywhere": {noRuntime{built}, trainer.Options{Logger: quiet()},
			"trainer.Options.Runtime is nil and the model records no runtime"},
	} {
		_, err := trainer.New(a, c.model, counting(16, 0), nil, c.opts)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", name, err, c.want)
		}
	}
	// A model without a recorded runtime trains when the runtime is given.
	if _, err := trainer.New(a, noRuntime{built}, counting(16, 0), nil, trainer.Options{Runtime: rt, Logger: quiet()}); err != nil {
		t.Errorf("noRuntime model with Options.Runtime: %v", err)
	}
}
