package trainer

import (
	"bytes"
	"flag"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// The typed constants are exactly the values Validate and the schedule builder accept: a
// constant that is refused, or an accepted value without a constant, fails here.
func TestEnumConstantsMatchAcceptedValues(t *testing.T) {
	intervals := []IntervalStrategy{IntervalNo, IntervalSteps, IntervalEpoch}
	saves := []SaveStrategy{SaveNo, SaveSteps, SaveEpoch, SaveBest}
	schedulers := []SchedulerType{SchedulerLinear, SchedulerCosine, SchedulerCosineWithRestarts,
		SchedulerPolynomial, SchedulerConstant, SchedulerConstantWithWarmup, SchedulerInverseSqrt,
		SchedulerReduceLROnPlateau, SchedulerCosineWithMinLR, SchedulerCosineWarmupWithMinLR,
		SchedulerWarmupStableDecay}
	optims := []OptimizerName{OptimAdamWTorch, OptimAdamWTorchFused, OptimAdamWHF, OptimAdamWTorchXLA, OptimAdafactor}

	names := func(vs any) []string {
		v := reflect.ValueOf(vs)
		out := make([]string, v.Len())
		for i := range out {
			out[i] = v.Index(i).String()
		}
		return out
	}
	for _, c := range []struct {
		field string
		typed any
		table []string
	}{
		{"eval_strategy", intervals, intervalStrategies},
		{"save_strategy", saves, saveStrategies},
		{"lr_scheduler_type", schedulers, scheduleTypes},
		{"optim", optims, supportedOptimizers},
	} {
		if got := names(c.typed); !slices.Equal(got, c.table) {
			t.Errorf("%s: constants %v, accepted values %v", c.field, got, c.table)
		}
	}

	// Each schedule constant builds (kwargs a schedule requires are given), except
	// reduce_lr_on_plateau, which Validate refuses naming the field.
	required := map[SchedulerType]map[string]any{
		SchedulerCosineWithMinLR:       {"min_lr_rate": 0.1},
		SchedulerCosineWarmupWithMinLR: {"min_lr_rate": 0.1},
		SchedulerWarmupStableDecay:     {"num_decay_steps": int64(2)},
	}
	for _, s := range schedulers {
		a := DefaultTrainingArguments()
		a.LRSchedulerType, a.LRSchedulerKwargs = s, required[s]
		err := a.Validate()
		if s == SchedulerReduceLROnPlateau {
			if err == nil || !strings.Contains(err.Error(), "lr_scheduler_type") {
				t.Errorf("%s: Validate = %v, want a refusal naming lr_scheduler_type", s, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: Validate: %v", s, err)
			continue
		}
		sched, err := NewScheduleFromKwargs(s, 1e-3, 2, 10, required[s])
		if err != nil {
			t.Errorf("%s: %v", s, err)
		} else if lr := sched.LR(2); !(lr > 0 && lr <= 1e-3) {
			t.Errorf("%s: lr after warmup = %g, want in (0, 1e-3]", s, lr)
		}
	}
}

// Typed fields keep HF's words on every path in and out: flags, JSON and ToJSON; a value outside
// the constants is refused naming the field.
func TestEnumFieldsFlagsAndJSON(t *testing.T) {
	a := DefaultTrainingArguments()
	fs := flag.NewFlagSet("train", flag.ContinueOnError)
	a.RegisterFlags(fs)
	err := fs.Parse([]string{"--eval_strategy", "epoch", "--logging_strategy=no", "--save_strategy", "best",
		"--lr_scheduler_type", "cosine_with_restarts", "--optim", "adafactor"})
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultTrainingArguments()
	want.EvalStrategy, want.LoggingStrategy, want.SaveStrategy = IntervalEpoch, IntervalNo, SaveBest
	want.LRSchedulerType, want.Optim = SchedulerCosineWithRestarts, OptimAdafactor
	if !reflect.DeepEqual(a, want) {
		t.Fatalf("flags: got %+v", a)
	}

	out := a.ToJSON()
	for _, kv := range []string{`"eval_strategy": "epoch"`, `"logging_strategy": "no"`, `"save_strategy": "best"`,
		`"lr_scheduler_type": "cosine_with_restarts"`, `"optim": "adafactor"`} {
		if !bytes.Contains(out, []byte(kv)) {
			t.Errorf("ToJSON lacks %s", kv)
		}
	}
	back, _, err := ParseTrainingArgumentsJSON(out, "roundtrip.json")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*back, a) {
		t.Errorf("JSON round trip changed the arguments:\n%s", back.ToJSON())
	}

	if _, _, err := ParseTrainingArgumentsJSON([]byte(`{"lr_scheduler_type": 3}`), "bad.json"); err == nil ||
		!strings.Contains(err.Error(), "lr_scheduler_type") {
		t.Errorf("a number for lr_scheduler_type: err = %v, want one naming the field", err)
	}
	if _, _, err := ParseTrainingArgumentsJSON([]byte(`{"eval_strategy": "sometimes"}`), "bad.json"); err == nil ||
		!strings.Contains(err.Error(), `eval_strategy: "sometimes" is not one of no, steps, epoch`) {
		t.Errorf("eval_strategy sometimes: err = %v", err)
	}
	// Set in Go, a value outside the constants compiles (the types are strings) and Validate
	// names it.
	bad := DefaultTrainingArguments()
	bad.SaveStrategy = "sometimes"
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), `save_strategy: "sometimes" is not one of no, steps, epoch, best`) {
		t.Errorf("Validate = %v", err)
	}
}

// Every optional (pointer) field has a setter Set<Field>(value) that stores the value (HF's
// keyword argument), written by ToJSON under the HF name and read back; unset, it is None (null).
// A pointer field added without a setter fails here.
func TestOptionalFieldSetters(t *testing.T) {
	typ := reflect.TypeFor[TrainingArguments]()
	ptrType := reflect.TypeFor[*TrainingArguments]()
	defaults := DefaultTrainingArguments()
	defJSON := string(defaults.ToJSON())
	n := 0
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Type.Kind() != reflect.Pointer {
			continue
		}
		n++
		hfName, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		m, ok := ptrType.MethodByName("Set" + f.Name)
		if !ok {
			t.Errorf("%s (%s) has no setter Set%s", f.Name, hfName, f.Name)
			continue
		}
		elem := f.Type.Elem()
		if m.Type.NumIn() != 2 || m.Type.In(1) != elem || m.Type.NumOut() != 0 {
			t.Errorf("Set%s is %s, want func(%s)", f.Name, m.Type, elem)
			continue
		}
		if !strings.Contains(defJSON, fmt.Sprintf("%q: null", hfName)) {
			t.Errorf("default %s is not null (HF's None)", hfName)
		}
		var v reflect.Value
		var lit string
		switch elem.Kind() {
		case reflect.Int:
			v, lit = reflect.ValueOf(3), "3"
		case reflect.Float64:
			v, lit = reflect.ValueOf(0.25), "0.25"
		case reflect.Bool:
			v, lit = reflect.ValueOf(true), "true"
		default:
			t.Fatalf("%s: no test value for %s", f.Name, elem)
		}
		a := DefaultTrainingArguments()
		reflect.ValueOf(&a).MethodByName("Set" + f.Name).Call([]reflect.Value{v})
		got := reflect.ValueOf(a).Field(i)
		if got.IsNil() || !got.Elem().Equal(v) {
			t.Errorf("Set%s(%v): field = %v", f.Name, v, got)
			continue
		}
		if js := string(a.ToJSON()); !strings.Contains(js, fmt.Sprintf("%q: %s", hfName, lit)) {
			t.Errorf("Set%s(%v): ToJSON lacks %q: %s", f.Name, v, hfName, lit)
		}
		back, _, err := ParseTrainingArgumentsJSON(a.ToJSON(), "setters.json")
		if err != nil || !reflect.DeepEqual(*back, a) {
			t.Errorf("Set%s: JSON round trip: %v", f.Name, err)
		}
		// A copy made before the call keeps None: the setter does not write through a shared
		// pointer.
		if !reflect.ValueOf(defaults).Field(i).IsNil() {
			t.Errorf("Set%s changed DefaultTrainingArguments' copy", f.Name)
		}
	}
	if n < 8 {
		t.Errorf("found %d optional fields, want at least the 8 HF None-default ones", n)
	}
}
