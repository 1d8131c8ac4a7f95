package trainer

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

// scheduleTypes are HF's SchedulerType values (transformers 4.5x/5.x).
var scheduleTypes = []string{
	"linear", "cosine", "cosine_with_restarts", "polynomial", "constant", "constant_with_warmup",
	"inverse_sqrt", "reduce_lr_on_plateau", "cosine_with_min_lr", "cosine_warmup_with_min_lr",
	"warmup_stable_decay",
}

// ErrSchedule marks a schedule that cannot be built from its parameters.
var ErrSchedule = errors.New("invalid learning-rate schedule")

// ScheduleSpec holds the parameters of one of transformers/optimization.py's schedule functions.
// Nil optional fields take that function's default, noted on each field.
type ScheduleSpec struct {
	Type          SchedulerType // e.g. SchedulerLinear
	BaseLR        float64       // the optimizer's lr (LambdaLR's base_lr and polynomial's lr_init)
	WarmupSteps   int           // num_warmup_steps
	TrainingSteps int           // num_training_steps

	// NumCycles: cosine, cosine_with_min_lr, cosine_warmup_with_min_lr and warmup_stable_decay
	// default 0.5 (half a cosine wave); cosine_with_restarts 1 (restarts; may be fractional).
	NumCycles *float64
	Power     *float64 // polynomial: 1.0
	LREnd     *float64 // polynomial: 1e-7; must be below BaseLR
	// MinLR or MinLRRate (exactly one) for cosine_with_min_lr and cosine_warmup_with_min_lr:
	// the floor as an absolute lr, or as a ratio of BaseLR.
	MinLR        *float64
	MinLRRate    *float64
	WarmupLRRate *float64 // cosine_warmup_with_min_lr: None → warmup (step+1)/warmup
	Timescale    *int     // inverse_sqrt: num_warmup_steps, or 10000 when that is 0
	// warmup_stable_decay: NumDecaySteps is required; NumStableSteps defaults to
	// TrainingSteps - WarmupSteps - NumDecaySteps.
	NumStableSteps *int
	NumDecaySteps  *int
	WarmupType     string   // warmup_stable_decay: "linear" (default), "cosine" or "1-sqrt"
	DecayType      string   // warmup_stable_decay: "cosine" (default), "linear" or "1-sqrt"
	MinLRRatio     *float64 // warmup_stable_decay: 0
}

// Schedule is a learning-rate schedule with the semantics of HF's LambdaLR schedules. It is an
// immutable value, safe for concurrent use.
//
// Step indexing: LambdaLR applies lambda(0) when it is built and the Trainer calls
// scheduler.step() after every optimizer update, so the update with 0-based index k uses
// BaseLR × lambda(k) = LR(k), and after s updates scheduler.get_last_lr() is LR(s).
type Schedule struct {
	spec   ScheduleSpec
	lambda func(step int) float64
}

// Spec returns the parameters with every default filled in.
func (s Schedule) Spec() ScheduleSpec { return s.spec }

// Lambda returns the multiplier LambdaLR applies at step (negative steps are treated as 0).
func (s Schedule) Lambda(step int) float64 {
	if s.lambda == nil {
		return 1
	}
	return s.lambda(max(step, 0))
}

// LR returns the learning rate of the update with 0-based index step: BaseLR × lambda(step),
// computed as LambdaLR does (base_lr * lmbda(last_epoch)).
func (s Schedule) LR(step int) float64 { return s.spec.BaseLR * s.Lambda(step) }

// LastLR returns scheduler.get_last_lr() after globalStep updates: LR(globalStep).
func (s Schedule) LastLR(globalStep int) float64 { return s.LR(globalStep) }

// LoggedLR returns the learning_rate HF's Trainer logs at global step globalStep (≥ 1).
// transformers ≥ 4.46 (and 5.x) reads the rate after optimizer.step() and before
// scheduler.step(), i.e. the rate the update that completed globalStep used: LR(globalStep-1).
// Older versions logged LastLR(globalStep). The real trainer_state.json files in
// testdata/hf-files show the former exactly.
func (s Schedule) LoggedLR(globalStep int) float64 { return s.LR(globalStep - 1) }

// NewSchedule builds a schedule as the optimization.py function for spec.Type does, with that
// function's defaults and errors.
func NewSchedule(spec ScheduleSpec) (Schedule, error) {
	fail := func(format string, args ...any) (Schedule, error) {
		return Schedule{}, fmt.Errorf("%w: %s: %s", ErrSchedule, spec.Type, fmt.Sprintf(format, args...))
	}
	if math.IsNaN(spec.BaseLR) || math.IsInf(spec.BaseLR, 0) || spec.BaseLR < 0 {
		return fail("learning rate %s is not a non-negative number", fmtFloat(spec.BaseLR))
	}
	if spec.WarmupSteps < 0 || spec.TrainingSteps < 0 {
		return fail("warmup steps (%d) and training steps (%d) must not be negative", spec.WarmupSteps, spec.TrainingSteps)
	}
	f64 := func(p *float64, def float64) float64 {
		if p == nil {
			return def
		}
		return *p
	}
	w, t := spec.WarmupSteps, spec.TrainingSteps
	out := Schedule{spec: spec}
	switch spec.Type {
	case "linear":
		out.lambda = func(s int) float64 { return linearLambda(s, w, t) }
	case "cosine":
		nc := f64(spec.NumCycles, 0.5)
		out.spec.NumCycles = &nc
		out.lambda = func(s int) float64 { return cosineLambda(s, w, t, nc, 0) }
	case "cosine_with_restarts":
		nc := f64(spec.NumCycles, 1)
		out.spec.NumCycles = &nc
		out.lambda = func(s int) float64 { return hardRestartsLambda(s, w, t, nc) }
	case "polynomial":
		power, lrEnd, lrInit := f64(spec.Power, 1.0), f64(spec.LREnd, 1e-7), spec.BaseLR
		if !(lrInit > lrEnd) {
			return fail("lr_end (%s) must be smaller than the initial lr (%s)", fmtFloat(lrEnd), fmtFloat(lrInit))
		}
		out.spec.Power, out.spec.LREnd = &power, &lrEnd
		out.lambda = func(s int) float64 { return polynomialLambda(s, w, t, lrEnd, power, lrInit) }
	case "constant":
		out.lambda = func(int) float64 { return 1 }
	case "constant_with_warmup":
		out.lambda = func(s int) float64 {
			if s < w {
				return float64(s) / math.Max(1, float64(w))
			}
			return 1
		}
	case "inverse_sqrt":
		ts := w
		if ts == 0 {
			ts = 10_000
		}
		if spec.Timescale != nil {
			ts = *spec.Timescale
		}
		if ts <= 0 {
			return fail("timescale %d must be positive", ts)
		}
		out.spec.Timescale = &ts
		out.lambda = func(s int) float64 {
			if s < w {
				return float64(s) / float64(max(1, w))
			}
			shift := ts - w
			return 1.0 / math.Sqrt(float64(s+shift)/float64(ts))
		}
	case "cosine_with_min_lr", "cosine_warmup_with_min_lr":
		nc := f64(spec.NumCycles, 0.5)
		out.spec.NumCycles = &nc
		var rate float64
		switch {
		case spec.MinLR != nil && spec.MinLRRate != nil:
			return fail("only one of min_lr or min_lr_rate may be set")
		case spec.MinLR != nil:
			if spec.BaseLR == 0 {
				return fail("min_lr needs a non-zero learning rate (it is divided by it)")
			}
			rate = *spec.MinLR / spec.BaseLR
		case spec.MinLRRate != nil:
			rate = *spec.MinLRRate
		default:
			return fail("one of min_lr or min_lr_rate must be set through lr_scheduler_kwargs")
		}
		if spec.Type == "cosine_with_min_lr" {
			out.lambda = func(s int) float64 { return cosineLambda(s, w, t, nc, rate) }
		} else {
			wlr := spec.WarmupLRRate
			out.lambda = func(s int) float64 { return cosineWarmupMinLRLambda(s, w, t, nc, rate, wlr) }
		}
	case "warmup_stable_decay":
		if spec.NumDecaySteps == nil {
			return fail("num_decay_steps must be set through lr_scheduler_kwargs")
		}
		decay := *spec.NumDecaySteps
		stable := t - w - decay
		if spec.NumStableSteps != nil {
			stable = *spec.NumStableSteps
		}
		wt, dt := spec.WarmupType, spec.DecayType
		if wt == "" {
			wt = "linear"
		}
		if dt == "" {
			dt = "cosine"
		}
		for _, kind := range []struct{ name, v string }{{"warmup_type", wt}, {"decay_type", dt}} {
			if !slices.Contains(wsdShapes, kind.v) {
				return fail("%s %q is not one of %s", kind.name, kind.v, strings.Join(wsdShapes, ", "))
			}
		}
		mlr, nc := f64(spec.MinLRRatio, 0), f64(spec.NumCycles, 0.5)
		out.spec.NumStableSteps, out.spec.WarmupType, out.spec.DecayType = &stable, wt, dt
		out.spec.MinLRRatio, out.spec.NumCycles = &mlr, &nc
		out.lambda = func(s int) float64 { return wsdLambda(s, w, stable, decay, wt, dt, mlr, nc) }
	case "reduce_lr_on_plateau":
		return fail("not supported: its learning rate depends on evaluation results, not on the step")
	default:
		return fail("unknown schedule type; want one of %s", strings.Join(scheduleTypes, ", "))
	}
	return out, nil
}

var wsdShapes = []string{"linear", "cosine", "1-sqrt"}

// The lambdas below follow optimization.py operation by operation, so that they round as Python
// does; where Go could fuse a multiply-add (allowed by the spec on some architectures), an
// explicit float64 conversion keeps the two roundings. Cosines and powers go through pyCos and
// pyPow, which round as the C library does (see schedule_math.go).

// linearLambda: _get_linear_schedule_with_warmup_lr_lambda.
func linearLambda(s, w, t int) float64 {
	if s < w {
		return float64(s) / float64(max(1, w))
	}
	return math.Max(0, float64(t-s)/float64(max(1, t-w)))
}

// cosineLambda: _get_cosine_schedule_with_warmup_lr_lambda (its min_lr_rate form, which
// optimization.py defines last and so also serves get_cosine_schedule_with_warmup, with 0).
func cosineLambda(s, w, t int, numCycles, minRate float64) float64 {
	if s < w {
		return float64(s) / float64(max(1, w))
	}
	progress := float64(s-w) / float64(max(1, t-w))
	factor := 0.5 * (1.0 + pyCos(math.Pi*numCycles*2.0*progress))
	factor = float64(factor*(1-minRate)) + minRate
	return math.Max(0, factor)
}

// hardRestartsLambda: _get_cosine_with_hard_restarts_schedule_with_warmup_lr_lambda.
func hardRestartsLambda(s, w, t int, numCycles float64) float64 {
	if s < w {
		return float64(s) / float64(max(1, w))
	}
	progress := float64(s-w) / float64(max(1, t-w))
	if progress >= 1.0 {
		return 0
	}
	// Python's float % has the sign of the divisor; both operands are non-negative here, where
	// it equals math.Mod.
	return math.Max(0, 0.5*(1.0+pyCos(math.Pi*math.Mod(numCycles*progress, 1.0))))
}

// polynomialLambda: _get_polynomial_decay_schedule_with_warmup_lr_lambda. HF divides by zero
// when warmup == training steps at step == training steps; this returns lr_end/lr_init there,
// the value it returns for every later step.
func polynomialLambda(s, w, t int, lrEnd, power, lrInit float64) float64 {
	switch {
	case s < w:
		return float64(s) / float64(max(1, w))
	case s > t || t == w:
		return lrEnd / lrInit
	}
	lrRange := lrInit - lrEnd
	decaySteps := t - w
	pctRemaining := 1 - float64(s-w)/float64(decaySteps)
	decay := float64(lrRange*pyPow(pctRemaining, power)) + lrEnd
	return decay / lrInit
}

// cosineWarmupMinLRLambda: _get_cosine_with_min_lr_schedule_with_warmup_lr_rate_lambda, which
// works on float steps and warms up to 1 one step early.
func cosineWarmupMinLRLambda(s, w, t int, numCycles, minRate float64, warmupRate *float64) float64 {
	cs, fw, ft := float64(s), float64(w), float64(t)
	if cs < fw {
		if warmupRate == nil {
			return (cs + 1) / math.Max(1, fw)
		}
		r := *warmupRate
		return r + (1.0-r)*cs/math.Max(1, fw-1)
	}
	progress := (cs - fw + 1) / math.Max(1, ft-fw)
	factor := 0.5 * (1.0 + pyCos(math.Pi*numCycles*2.0*progress))
	factor = float64(factor*(1-minRate)) + minRate
	return math.Max(0, factor)
}

// wsdLambda: _get_wsd_scheduler_lambda (warmup from min_lr_ratio, stable at 1, decay back to
// min_lr_ratio, then min_lr_ratio).
func wsdLambda(s, w, stable, decay int, warmupType, decayType string, minRatio, numCycles float64) float64 {
	if s < w {
		progress := float64(s) / float64(max(1, w))
		var factor float64
		switch warmupType {
		case "linear":
			factor = progress
		case "cosine":
			factor = 0.5 * (1.0 - pyCos(math.Pi*progress))
		case "1-sqrt":
			factor = 1.0 - math.Sqrt(1.0-progress)
		}
		factor = float64(factor*(1.0-minRatio)) + minRatio
		return math.Max(0, factor)
	}
	if s < w+stable {
		return 1
	}
	if s < w+stable+decay {
		progress := float64(s-w-stable) / float64(max(1, decay))
		var factor float64
		switch decayType {
		case "linear":
			factor = 1.0 - progress
		case "cosine":
			factor = 0.5 * (1.0 + pyCos(math.Pi*numCycles*2.0*progress))
		case "1-sqrt":
			factor = 1.0 - math.Sqrt(progress)
		}
		factor = float64(factor*(1.0-minRatio)) + minRatio
		return math.Max(0, factor)
	}
	return minRatio
}

// scheduleKwargs lists the lr_scheduler_kwargs HF's get_scheduler passes to each schedule
// function. get_scheduler drops the kwargs entirely for constant, constant_with_warmup and
// inverse_sqrt (so inverse_sqrt's timescale cannot be set from TrainingArguments).
var scheduleKwargs = map[SchedulerType][]string{
	"linear":                    {},
	"cosine":                    {"num_cycles"},
	"cosine_with_restarts":      {"num_cycles"},
	"polynomial":                {"lr_end", "power"},
	"constant":                  nil,
	"constant_with_warmup":      nil,
	"inverse_sqrt":              nil,
	"cosine_with_min_lr":        {"num_cycles", "min_lr", "min_lr_rate"},
	"cosine_warmup_with_min_lr": {"num_cycles", "min_lr", "min_lr_rate", "warmup_lr_rate"},
	"warmup_stable_decay":       {"num_decay_steps", "num_stable_steps", "warmup_type", "decay_type", "min_lr_ratio", "num_cycles"},
}

// ScheduleSpecFromKwargs builds the spec HF's get_scheduler(name, optimizer, num_warmup_steps,
// num_training_steps, scheduler_specific_kwargs=lr_scheduler_kwargs) would use. A keyword the
// schedule function does not take is an error (Python raises TypeError). Keywords for constant,
// constant_with_warmup and inverse_sqrt are refused too: get_scheduler silently drops them, and
// a run that appears to set them but does not is better refused.
func ScheduleSpecFromKwargs(typ SchedulerType, baseLR float64, warmup, total int, kwargs map[string]any) (ScheduleSpec, error) {
	spec := ScheduleSpec{Type: typ, BaseLR: baseLR, WarmupSteps: warmup, TrainingSteps: total}
	allowed, known := scheduleKwargs[typ]
	if !known {
		if typ == "reduce_lr_on_plateau" {
			return spec, fmt.Errorf("%w: reduce_lr_on_plateau is not supported", ErrSchedule)
		}
		return spec, fmt.Errorf("%w: unknown schedule type %q", ErrSchedule, typ)
	}
	keys := make([]string, 0, len(kwargs))
	for k := range kwargs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := kwargs[k]
		if allowed == nil {
			return spec, fmt.Errorf("%w: HF's get_scheduler ignores lr_scheduler_kwargs for %s, so %s would have no effect; remove it",
				ErrSchedule, typ, k)
		}
		if !slices.Contains(allowed, k) {
			want := "none"
			if len(allowed) > 0 {
				want = strings.Join(allowed, ", ")
			}
			return spec, fmt.Errorf("%w: %s takes no keyword %q (it takes: %s)", ErrSchedule, typ, k, want)
		}
		if err := setScheduleKwarg(&spec, k, v); err != nil {
			return spec, fmt.Errorf("%w: %s: %s", ErrSchedule, k, err.Error())
		}
	}
	return spec, nil
}

func setScheduleKwarg(spec *ScheduleSpec, key string, v any) error {
	num := func() (float64, error) {
		switch x := v.(type) {
		case float64:
			return x, nil
		case int64:
			return float64(x), nil
		case int:
			return float64(x), nil
		}
		return 0, fmt.Errorf("%v is a %T, want a number", v, v)
	}
	integer := func() (int, error) {
		f, err := num()
		if err != nil {
			return 0, err
		}
		if f != math.Trunc(f) || math.Abs(f) > 1<<53 {
			return 0, fmt.Errorf("%v is not an integer", v)
		}
		return int(f), nil
	}
	str := func() (string, error) {
		if s, ok := v.(string); ok {
			return s, nil
		}
		return "", fmt.Errorf("%v is a %T, want a string", v, v)
	}
	var err error
	setF := func(dst **float64) {
		var f float64
		if f, err = num(); err == nil {
			*dst = &f
		}
	}
	setI := func(dst **int) {
		var i int
		if i, err = integer(); err == nil {
			*dst = &i
		}
	}
	switch key {
	case "num_cycles":
		setF(&spec.NumCycles)
	case "power":
		setF(&spec.Power)
	case "lr_end":
		setF(&spec.LREnd)
	case "min_lr":
		setF(&spec.MinLR)
	case "min_lr_rate":
		setF(&spec.MinLRRate)
	case "warmup_lr_rate":
		setF(&spec.WarmupLRRate)
	case "min_lr_ratio":
		setF(&spec.MinLRRatio)
	case "num_decay_steps":
		setI(&spec.NumDecaySteps)
	case "num_stable_steps":
		setI(&spec.NumStableSteps)
	case "warmup_type":
		spec.WarmupType, err = str()
	case "decay_type":
		spec.DecayType, err = str()
	}
	return err
}

// NewScheduleFromKwargs is ScheduleSpecFromKwargs followed by NewSchedule.
func NewScheduleFromKwargs(typ SchedulerType, baseLR float64, warmup, total int, kwargs map[string]any) (Schedule, error) {
	spec, err := ScheduleSpecFromKwargs(typ, baseLR, warmup, total, kwargs)
	if err != nil {
		return Schedule{}, err
	}
	return NewSchedule(spec)
}
