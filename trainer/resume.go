package trainer

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"

	"github.com/gomlx/gomlx/pkg/core/dtypes"

	"github.com/gotpu/gotpu/checkpoint"
	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/internal/safetensors"
	"github.com/gotpu/gotpu/trainer/step"
)

// Files of a gotpu checkpoint beyond HF's model directory.
const (
	modelFile     = "model.safetensors"
	configFile    = "config.json"
	optimizerFile = "optimizer.safetensors"
	rngFile       = "rng_state.safetensors"
	stateFile     = "trainer_state.json"
	argsFile      = "training_args.json"
	schedulerFile = "scheduler.json"
	runFile       = "gotpu_state.json"
)

// requiredFiles are what resume needs; a checkpoint without one of them is refused rather than
// silently resumed from scratch.
var requiredFiles = []string{modelFile, configFile, optimizerFile, rngFile, stateFile, schedulerFile, runFile}

// runState is what gotpu adds to HF's trainer_state.json for exact resume (gotpu_state.json).
type runState struct {
	OptimizerStep int        `json:"optimizer_step"`
	Loader        data.State `json:"loader"`
	// GlobalBatch is the number of examples per micro-batch over all replicas: the loader
	// position means the same examples only for the same global batch.
	GlobalBatch int `json:"global_batch"`
	// TotalLoss is the sum of step losses so far (HF's tr_loss), for train_loss at the end.
	TotalLoss float64 `json:"total_loss"`
	Replicas  int     `json:"num_replicas"`
}

// schedulerState mirrors torch's LRScheduler.state_dict() fields that describe the position; the
// schedule itself is a function of the step and the arguments.
type schedulerState struct {
	LastEpoch int       `json:"last_epoch"`
	StepCount int       `json:"_step_count"`
	BaseLRs   []float64 `json:"base_lrs"`
	LastLR    []float64 `json:"_last_lr"`
}

// fileDType maps a variable's dtype to safetensors.
func fileDType(d dtypes.DType) (safetensors.DType, error) {
	switch d {
	case dtypes.Float32:
		return safetensors.F32, nil
	case dtypes.Float64:
		return safetensors.F64, nil
	case dtypes.BFloat16:
		return safetensors.BF16, nil
	case dtypes.Float16:
		return safetensors.F16, nil
	case dtypes.Int64:
		return safetensors.I64, nil
	case dtypes.Int32:
		return safetensors.I32, nil
	case dtypes.Uint64:
		return safetensors.U64, nil
	case dtypes.Uint32:
		return safetensors.U32, nil
	case dtypes.Uint8:
		return safetensors.U8, nil
	case dtypes.Bool:
		return safetensors.BOOL, nil
	}
	return "", fmt.Errorf("dtype %s cannot be saved", d)
}

func varDType(d safetensors.DType) (dtypes.DType, error) {
	for _, c := range []dtypes.DType{dtypes.Float32, dtypes.Float64, dtypes.BFloat16, dtypes.Float16, dtypes.Int64,
		dtypes.Int32, dtypes.Uint64, dtypes.Uint32, dtypes.Uint8, dtypes.Bool} {
		if f, _ := fileDType(c); f == d {
			return c, nil
		}
	}
	return dtypes.InvalidDType, fmt.Errorf("dtype %s is not supported here", d)
}

// safetensorsFile is a checkpoint file holding host tensors, encoded when the writer writes it.
func safetensorsFile(name string, ts []step.HostTensor, md map[string]string) (checkpoint.File, error) {
	specs := make([]safetensors.Tensor, len(ts))
	for i, h := range ts {
		d, err := fileDType(h.DType)
		if err != nil {
			return checkpoint.File{}, fmt.Errorf("trainer: %s: %s: %w", name, h.Name, err)
		}
		specs[i] = safetensors.Tensor{Name: h.Name, DType: d, Shape: h.Shape, Data: h.Bytes}
	}
	if _, err := safetensors.EncodeHeader(specs, md); err != nil {
		return checkpoint.File{}, fmt.Errorf("trainer: %s: %w", name, err)
	}
	return checkpoint.File{Name: name, WriteTo: func(w io.Writer) error { return safetensors.Write(w, specs, md) }}, nil
}

// snapshot stages a checkpoint of the current step in host memory.
func (t *Trainer) snapshot(st step.State, run runState) (checkpoint.Snapshot, error) {
	run.OptimizerStep = st.OptimizerStep
	cfg, err := t.model.Config().JSON()
	if err != nil {
		return checkpoint.Snapshot{}, fmt.Errorf("trainer: config.json: %w", err)
	}
	snap := checkpoint.Snapshot{Step: t.state.GlobalStep}
	add := func(name string, ts []step.HostTensor, md map[string]string) error {
		f, err := safetensorsFile(name, ts, md)
		snap.Files = append(snap.Files, f)
		return err
	}
	if err := add(modelFile, st.Params, map[string]string{"format": "pt"}); err != nil {
		return snap, err
	}
	if err := add(optimizerFile, st.Optimizer, map[string]string{"format": "gotpu", "step": fmt.Sprint(st.OptimizerStep)}); err != nil {
		return snap, err
	}
	if err := add(rngFile, st.Other, map[string]string{"format": "gotpu"}); err != nil {
		return snap, err
	}
	sched, err := t.args.Schedule(t.state.MaxSteps)
	if err != nil {
		return snap, err
	}
	base := t.args.LearningRate
	sj, _ := json.MarshalIndent(schedulerState{LastEpoch: t.state.GlobalStep, StepCount: t.state.GlobalStep + 1,
		BaseLRs: []float64{base}, LastLR: []float64{sched.LR(t.state.GlobalStep)}}, "", "  ")
	rj, _ := json.MarshalIndent(run, "", "  ")
	snap.Files = append(snap.Files,
		checkpoint.File{Name: configFile, Data: cfg},
		checkpoint.File{Name: stateFile, Data: t.state.MarshalHF()},
		checkpoint.File{Name: argsFile, Data: t.args.ToJSON()},
		checkpoint.File{Name: schedulerFile, Data: append(sj, '\n')},
		checkpoint.File{Name: runFile, Data: append(rj, '\n')},
	)
	if t.state.BestModelCheckpoint != nil {
		snap.Keep = []string{*t.state.BestModelCheckpoint}
	}
	return snap, nil
}

// resolveResume finds the checkpoint resume_from_checkpoint names: a directory, or the latest
// committed one in output_dir for "true". "" means no resume.
func (t *Trainer) resolveResume() (string, error) {
	dir, latest := t.args.ResumeCheckpoint()
	if !latest {
		return dir, nil
	}
	e, err := checkpoint.Latest(t.args.OutputDir)
	if err != nil {
		return "", fmt.Errorf("trainer: resume_from_checkpoint=true: %w", err)
	}
	return e.Dir, nil
}

// resume restores everything from a committed checkpoint, verified before anything is used:
// weights, optimizer state and step, RNG state, trainer state (and stateful callbacks). It
// returns gotpu's run state (loader position, accumulated loss).
func (t *Trainer) resume(dir string, globalBatch int) (runState, error) {
	ck, err := checkpoint.Open(dir, requiredFiles...)
	if err != nil {
		return runState{}, fmt.Errorf("trainer: resume_from_checkpoint: %w", err)
	}
	var run runState
	rb, err := ck.ReadFile(runFile)
	if err != nil {
		return runState{}, err
	}
	if err := json.Unmarshal(rb, &run); err != nil {
		return runState{}, fmt.Errorf("trainer: %s: %w", filepath.Join(dir, runFile), err)
	}
	if run.GlobalBatch != globalBatch {
		return runState{}, fmt.Errorf("trainer: %s: global_batch %d, this run has %d (per_device_train_batch_size × devices must match to resume the data position exactly)",
			filepath.Join(dir, runFile), run.GlobalBatch, globalBatch)
	}
	sb, err := ck.ReadFile(stateFile)
	if err != nil {
		return runState{}, err
	}
	ts, err := ParseTrainerState(sb, filepath.Join(dir, stateFile))
	if err != nil {
		return runState{}, err
	}
	var st step.State
	st.OptimizerStep = run.OptimizerStep
	for _, f := range []struct {
		name string
		dst  *[]step.HostTensor
	}{{modelFile, &st.Params}, {optimizerFile, &st.Optimizer}, {rngFile, &st.Other}} {
		if *f.dst, err = readTensors(ck, f.name); err != nil {
			return runState{}, err
		}
	}
	// The weights must fit the model being trained (its config): name the file when not.
	shapes := map[string][]int{}
	for _, p := range t.model.Params() {
		shapes[p.Name] = p.Shape
	}
	for _, h := range st.Params {
		want, ok := shapes[h.Name]
		if !ok {
			return runState{}, fmt.Errorf("trainer: %s: tensor %s is not a parameter of this %s", filepath.Join(dir, modelFile), h.Name, t.model.Architecture())
		}
		if !slices.Equal(want, h.Shape) {
			return runState{}, fmt.Errorf("trainer: %s: %s has shape %v, the model's config gives %v", filepath.Join(dir, modelFile), h.Name, h.Shape, want)
		}
	}
	if err := t.stepper.ImportState(st); err != nil {
		return runState{}, fmt.Errorf("trainer: resume from %s: %w", dir, err)
	}
	t.state = *ts
	t.callbacks.LoadStates(&t.state)
	t.log.Info("resumed", "checkpoint", dir, "step", t.state.GlobalStep, "optimizer_step", run.OptimizerStep,
		"epoch", run.Loader.Epoch, "batch", run.Loader.Batch)
	return run, nil
}

// readTensors reads every tensor of a checkpoint's safetensors file to host memory, from bytes
// checked against the manifest again as they are read (not trusting the earlier verification).
func readTensors(ck *checkpoint.Checkpoint, name string) ([]step.HostTensor, error) {
	b, err := ck.ReadFile(name)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(ck.Dir, name)
	h, err := safetensors.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("trainer: %s: %w", path, err)
	}
	data := b[8+h.HeaderSize:]
	out := make([]step.HostTensor, 0, len(h.Tensors))
	for _, info := range h.Tensors {
		d, err := varDType(info.DType)
		if err != nil {
			return nil, fmt.Errorf("trainer: %s: %s: %w", path, info.Name, err)
		}
		out = append(out, step.HostTensor{Name: info.Name, DType: d, Shape: info.Shape, Bytes: data[info.Begin:info.End:info.End]})
	}
	return out, nil
}
