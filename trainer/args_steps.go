package trainer

import (
	"fmt"
	"math"
	"strings"
)

// This file holds the step arithmetic HF's Trainer derives from TrainingArguments: batch sizes,
// the number of updates, warmup, the schedule, and when to log, evaluate and save.

// GlobalTrainBatchSize is the number of examples per optimizer update:
// per_device_train_batch_size × numDevices × gradient_accumulation_steps (HF's
// total_train_batch_size). numDevices is the resolved replica count (not NumDevices' 0 = all).
func (a *TrainingArguments) GlobalTrainBatchSize(numDevices int) int {
	return a.PerDeviceTrainBatchSize * numDevices * a.GradientAccumulationSteps
}

// BatchesPerEpoch is the length of each replica's training dataloader (HF's len_dataloader)
// for numExamples examples sharded over numDevices replicas: every micro-step takes
// per_device_train_batch_size examples per replica; the last partial global batch is dropped
// with dataloader_drop_last and kept (padded across replicas, as Accelerate's even_batches does)
// otherwise.
func (a *TrainingArguments) BatchesPerEpoch(numExamples, numDevices int) int {
	global := a.PerDeviceTrainBatchSize * numDevices
	if global <= 0 || numExamples <= 0 {
		return 0
	}
	if a.DataloaderDropLast {
		return numExamples / global
	}
	return (numExamples + global - 1) / global
}

// UpdateStepsPerEpoch is HF's num_update_steps_per_epoch for a dataloader of batchesPerEpoch
// batches: ceil(batches / gradient_accumulation_steps), at least 1 (transformers ≥ 4.46 counts the
// last partial accumulation as an update; earlier versions floored).
func (a *TrainingArguments) UpdateStepsPerEpoch(batchesPerEpoch int) int {
	ga := max(a.GradientAccumulationSteps, 1)
	n := batchesPerEpoch / ga
	if batchesPerEpoch%ga > 0 {
		n++
	}
	return max(n, 1)
}

// NumTrainingSteps is the number of optimizer updates of the run (HF's max_steps): max_steps
// when positive, else ceil(num_train_epochs × updateStepsPerEpoch) — so a fractional
// num_train_epochs cuts the last epoch.
func (a *TrainingArguments) NumTrainingSteps(updateStepsPerEpoch int) int {
	if a.MaxSteps > 0 {
		return a.MaxSteps
	}
	return int(math.Ceil(a.NumTrainEpochs * float64(updateStepsPerEpoch)))
}

// EpochsToRun is the number of epochs the training loop starts (HF's num_train_epochs in
// _inner_training_loop, which TrainerState stores): with max_steps, enough epochs to reach it;
// otherwise ceil(num_train_epochs).
func (a *TrainingArguments) EpochsToRun(updateStepsPerEpoch int) int {
	if a.MaxSteps > 0 {
		u := max(updateStepsPerEpoch, 1)
		n := a.MaxSteps / u
		if a.MaxSteps%u > 0 {
			n++
		}
		return n
	}
	return int(math.Ceil(a.NumTrainEpochs))
}

// NumWarmupSteps is HF's get_warmup_steps(totalSteps):
//   - warmup_steps ≥ 1: int(warmup_steps);
//   - 0 < warmup_steps < 1 (transformers 5.x): ceil(totalSteps × warmup_steps);
//   - otherwise (4.x): ceil(totalSteps × warmup_ratio).
//
// When both warmup_steps and warmup_ratio are set, warmup_steps wins, as in 4.x. (5.0 copies a
// non-None warmup_ratio over warmup_steps in __post_init__; following it would turn every 4.x
// dump, which always holds warmup_ratio 0.0, into "no warmup".)
func (a *TrainingArguments) NumWarmupSteps(totalSteps int) int {
	switch w := a.WarmupSteps; {
	case w >= 1:
		return int(w)
	case w > 0:
		return int(math.Ceil(float64(totalSteps) * w))
	}
	return int(math.Ceil(float64(totalSteps) * a.WarmupRatio))
}

// Schedule returns the learning-rate schedule of a run of totalSteps updates, as HF's
// Trainer.create_scheduler builds it: get_scheduler(lr_scheduler_type, num_warmup_steps =
// get_warmup_steps(totalSteps), num_training_steps = totalSteps, lr_scheduler_kwargs).
func (a *TrainingArguments) Schedule(totalSteps int) (Schedule, error) {
	s, err := NewScheduleFromKwargs(a.LRSchedulerType, a.LearningRate, a.NumWarmupSteps(totalSteps), totalSteps, a.LRSchedulerKwargs)
	if err != nil {
		return Schedule{}, fmt.Errorf("trainer.TrainingArguments.lr_scheduler_type: %w", err)
	}
	return s, nil
}

// ResumeCheckpoint interprets resume_from_checkpoint: ("", false) to start fresh, ("", true)
// for "true"/"True" (the latest checkpoint in output_dir, as Trainer.train(True) does), or a
// checkpoint directory. "false"/"False" mean no resume.
func (a *TrainingArguments) ResumeCheckpoint() (dir string, latest bool) {
	switch strings.ToLower(a.ResumeFromCheckpoint) {
	case "", "false", "none":
		return "", false
	case "true":
		return "", true
	}
	return a.ResumeFromCheckpoint, false
}

// Flow decides, like HF's DefaultFlowCallback, when to log, evaluate and save. It is a value
// computed once per run from finalized arguments and the run length; safe for concurrent use.
type Flow struct {
	MaxSteps     int // updates in the run
	LoggingSteps int // resolved intervals (ratios of MaxSteps already applied)
	EvalSteps    int
	SaveSteps    int

	loggingStrategy, evalStrategy IntervalStrategy
	saveStrategy                  SaveStrategy
	loggingFirstStep              bool
	evalDelay                     float64
}

// Flow resolves the logging/eval/save intervals for a run of maxSteps updates, as
// TrainerState.compute_steps does (an interval below 1 is ceil(maxSteps × interval); an unset
// eval_steps keeps TrainerState's default of 500). Call it on finalized arguments.
func (a *TrainingArguments) Flow(maxSteps int) Flow {
	st := NewTrainerState()
	st.ComputeSteps(a, maxSteps)
	return Flow{
		MaxSteps:         maxSteps,
		LoggingSteps:     st.LoggingSteps,
		EvalSteps:        st.EvalSteps,
		SaveSteps:        st.SaveSteps,
		loggingStrategy:  a.LoggingStrategy,
		evalStrategy:     a.EvalStrategy,
		saveStrategy:     a.SaveStrategy,
		loggingFirstStep: a.LoggingFirstStep,
		evalDelay:        a.EvalDelay,
	}
}

// StepEnd returns the control flags DefaultFlowCallback.on_step_end sets after update
// globalStep (1-based): log on logging_first_step at step 1 and every logging_steps; evaluate
// every eval_steps once eval_delay steps have passed; save every save_steps; stop at max_steps,
// saving there too with save_strategy "steps". With save_strategy "best" saving follows new best
// metrics instead (the trainer decides that after evaluating).
func (f Flow) StepEnd(globalStep int) TrainerControl {
	var c TrainerControl
	if globalStep == 1 && f.loggingFirstStep {
		c.ShouldLog = true
	}
	if f.loggingStrategy == "steps" && divides(f.LoggingSteps, globalStep) {
		c.ShouldLog = true
	}
	if f.evalStrategy == "steps" && divides(f.EvalSteps, globalStep) && f.evalDelay <= float64(globalStep) {
		c.ShouldEvaluate = true
	}
	if f.saveStrategy == "steps" && f.SaveSteps > 0 && divides(f.SaveSteps, globalStep) {
		c.ShouldSave = true
	}
	if globalStep >= f.MaxSteps {
		c.ShouldTrainingStop = true
		if f.saveStrategy == "steps" {
			c.ShouldSave = true
		}
	}
	return c
}

// EpochEnd returns the flags DefaultFlowCallback.on_epoch_end sets at the end of an epoch
// (epoch is TrainerState.epoch then, e.g. 1.0, 2.0, or the fraction the run stopped at).
func (f Flow) EpochEnd(epoch float64) TrainerControl {
	return TrainerControl{
		ShouldLog:      f.loggingStrategy == "epoch",
		ShouldEvaluate: f.evalStrategy == "epoch" && f.evalDelay <= epoch,
		ShouldSave:     f.saveStrategy == "epoch",
	}
}

// ShouldLog reports whether HF logs after update globalStep (steps strategy and
// logging_first_step; epoch logging is decided by EpochEnd).
func (f Flow) ShouldLog(globalStep int) bool { return f.StepEnd(globalStep).ShouldLog }

// ShouldEvaluate reports whether HF evaluates after update globalStep (steps strategy).
func (f Flow) ShouldEvaluate(globalStep int) bool { return f.StepEnd(globalStep).ShouldEvaluate }

// ShouldSave reports whether HF saves a checkpoint after update globalStep (steps strategy,
// including the final step).
func (f Flow) ShouldSave(globalStep int) bool { return f.StepEnd(globalStep).ShouldSave }

// divides reports step % interval == 0; a zero interval (a ratio of a 0-step run), where Python
// would raise ZeroDivisionError, never fires.
func divides(interval, step int) bool { return interval > 0 && step%interval == 0 }
