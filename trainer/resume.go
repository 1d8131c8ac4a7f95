package trainer

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/gomlx/gomlx/pkg/core/dtypes"

	"github.com/gotpu/gotpu/checkpoint"
	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/internal/safetensors"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/peft"
	"github.com/gotpu/gotpu/trainer/step"
)

// Files of a gotpu checkpoint beyond HF's model directory (or PEFT's adapter directory: the
// weights and config files are the model's, models.SavedFiles).
const (
	optimizerFile = "optimizer.safetensors"
	rngFile       = "rng_state.safetensors"
	stateFile     = "trainer_state.json"
	argsFile      = "training_args.json"
	schedulerFile = "scheduler.json"
	runFile       = "gotpu_state.json"
)

// requiredFiles are what resume needs; a checkpoint without one of them is refused rather than
// silently resumed from scratch. weights and config are the model's (models.SavedFiles):
// model.safetensors and config.json, or an adapter's adapter_model.safetensors and
// adapter_config.json.
func requiredFiles(weights, config string) []string {
	return []string{weights, config, optimizerFile, rngFile, stateFile, schedulerFile, runFile}
}

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

// stagedSource adapts one part of a step.StateSource to checkpoint.TensorSource.
type stagedSource struct {
	src  *step.StateSource
	part int
	ts   []step.StagedTensor
}

func (s stagedSource) Tensors() []checkpoint.TensorInfo {
	out := make([]checkpoint.TensorInfo, len(s.ts))
	for i, t := range s.ts {
		d, _ := fileDType(t.DType) // checked by stagedSnapshot
		out[i] = checkpoint.TensorInfo{Name: t.Name, DType: string(d), Shape: t.Shape}
	}
	return out
}

func (s stagedSource) Stage(ctx context.Context, i int, dst []byte) error {
	return s.src.Stage(ctx, s.part, i, dst)
}

// stagedSnapshot is snapshot for state left on the devices (an FSDP run's shards): the three
// tensor files are Live files the writer stages one tensor at a time while it writes them.
func (t *Trainer) stagedSnapshot(src *step.StateSource, run runState) (checkpoint.Snapshot, error) {
	var files []checkpoint.File
	for _, p := range []struct {
		name string
		part int
		md   map[string]string
	}{
		{t.weightsFile(), step.PartParams, map[string]string{"format": "pt"}},
		{optimizerFile, step.PartOptimizer, map[string]string{"format": "gotpu", "step": fmt.Sprint(src.OptimizerStep)}},
		{rngFile, step.PartOther, map[string]string{"format": "gotpu"}},
	} {
		ts := src.Tensors(p.part)
		for _, x := range ts {
			if _, err := fileDType(x.DType); err != nil {
				return checkpoint.Snapshot{}, fmt.Errorf("trainer: %s: %s: %w", p.name, x.Name, err)
			}
		}
		f, err := checkpoint.SafetensorsFile(p.name, stagedSource{src, p.part, ts}, p.md)
		if err != nil {
			return checkpoint.Snapshot{}, fmt.Errorf("trainer: %w", err)
		}
		files = append(files, f)
	}
	return t.snapshotWith(files, src.OptimizerStep, run)
}

// snapshot stages a checkpoint of the current step in host memory.
func (t *Trainer) snapshot(st step.State, run runState) (checkpoint.Snapshot, error) {
	var files []checkpoint.File
	for _, p := range []struct {
		name string
		ts   []step.HostTensor
		md   map[string]string
	}{
		{t.weightsFile(), st.Params, map[string]string{"format": "pt"}},
		{optimizerFile, st.Optimizer, map[string]string{"format": "gotpu", "step": fmt.Sprint(st.OptimizerStep)}},
		{rngFile, st.Other, map[string]string{"format": "gotpu"}},
	} {
		f, err := safetensorsFile(p.name, p.ts, p.md)
		if err != nil {
			return checkpoint.Snapshot{}, err
		}
		files = append(files, f)
	}
	return t.snapshotWith(files, st.OptimizerStep, run)
}

// snapshotWith completes a snapshot of the current step around its tensor files.
func (t *Trainer) snapshotWith(files []checkpoint.File, optimizerStep int, run runState) (checkpoint.Snapshot, error) {
	run.OptimizerStep = optimizerStep
	_, configName, cfg, err := models.SavedFiles(t.model)
	if err != nil {
		return checkpoint.Snapshot{}, fmt.Errorf("trainer: %s: %w", configName, err)
	}
	snap := checkpoint.Snapshot{Step: t.state.GlobalStep, Files: files}
	sched, err := t.args.Schedule(t.state.MaxSteps)
	if err != nil {
		return snap, err
	}
	base := t.args.LearningRate
	sj, _ := json.MarshalIndent(schedulerState{LastEpoch: t.state.GlobalStep, StepCount: t.state.GlobalStep + 1,
		BaseLRs: []float64{base}, LastLR: []float64{sched.LR(t.state.GlobalStep)}}, "", "  ")
	rj, _ := json.MarshalIndent(run, "", "  ")
	snap.Files = append(snap.Files,
		checkpoint.File{Name: configName, Data: cfg},
		checkpoint.File{Name: stateFile, Data: t.state.MarshalHF()},
		checkpoint.File{Name: argsFile, Data: t.args.ToJSON()},
		checkpoint.File{Name: schedulerFile, Data: append(sj, '\n')},
		checkpoint.File{Name: runFile, Data: append(rj, '\n')},
	)
	snap.Files = append(snap.Files, t.checkpointExtras()...)
	snap.Files = t.modelOnlyFiles(snap.Files) // save_only_model
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
//
// The checkpoint's content is untrusted input: its checksums only show that whoever wrote the
// files also wrote the manifest. So the counters must agree with each other and with the
// manifest (checkCounters), best_model_checkpoint must name a checkpoint of output_dir
// (bestCheckpointDir), and the hyper-parameter search fields are dropped (dropTrialFields).
// Every check runs before the state is imported, so a refused checkpoint changes nothing.
func (t *Trainer) resume(dir string, globalBatch int) (runState, error) {
	weights, config, _, err := models.SavedFiles(t.model)
	if err != nil {
		return runState{}, err
	}
	ck, err := checkpoint.Open(dir, requiredFiles(weights, config)...)
	if err != nil {
		if merr := refuseModelOnlyResume(dir); merr != nil {
			return runState{}, merr
		}
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
	var optMeta map[string]string
	for _, f := range []struct {
		name string
		dst  *[]step.HostTensor
		md   *map[string]string
	}{{weights, &st.Params, nil}, {optimizerFile, &st.Optimizer, &optMeta}, {rngFile, &st.Other, nil}} {
		hs, md, err := readTensors(ck, f.name)
		if err != nil {
			return runState{}, err
		}
		*f.dst = hs
		if f.md != nil {
			*f.md = md
		}
	}
	if err := checkCounters(ck, ts, run, optMeta); err != nil {
		return runState{}, err
	}
	if ts.BestModelCheckpoint != nil {
		best, err := t.bestCheckpointDir(*ts.BestModelCheckpoint, filepath.Join(dir, stateFile), ts.GlobalStep)
		if err != nil {
			return runState{}, err
		}
		ts.BestModelCheckpoint = &best
	}
	t.dropTrialFields(ts, filepath.Join(dir, stateFile))
	// The weights must fit the model being trained (its config): name the file when not.
	shapes := map[string][]int{}
	what := t.model.Architecture()
	if _, ok := peft.Of(t.model); ok {
		what += " adapter"
	}
	for _, p := range t.model.Params() {
		shapes[p.Name] = p.Shape
	}
	for _, h := range st.Params {
		want, ok := shapes[h.Name]
		if !ok {
			return runState{}, fmt.Errorf("trainer: %s: tensor %s is not a parameter of this %s", filepath.Join(dir, weights), h.Name, what)
		}
		if !slices.Equal(want, h.Shape) {
			return runState{}, fmt.Errorf("trainer: %s: %s has shape %v, the model's config gives %v", filepath.Join(dir, weights), h.Name, h.Shape, want)
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

// maxResumeStep bounds the step counters a checkpoint may hold: epochs, learning rates and log
// entries are computed from them in float64, exact for integers up to 2^53, and the loop adds
// to them. No run reaches it; a larger count is a damaged or forged file.
const maxResumeStep = 1 << 53

// checkCounters checks that a checkpoint's step counters agree, as the writer wrote them
// (snapshot): trainer_state.json's global_step is the manifest's step (and the directory's, when
// it is named checkpoint-N); gotpu_state.json's optimizer_step, the optimizer's update count, is
// in [0, global_step] (skipped non-finite updates make it smaller) and equals
// optimizer.safetensors' "step" metadata; scheduler.json is at global_step (last_epoch =
// global_step, _step_count = global_step + 1, as torch's LRScheduler counts); best_global_step,
// when set, is in [0, global_step]. Errors name the file and field and wrap
// checkpoint.ErrCorrupt.
func checkCounters(ck *checkpoint.Checkpoint, ts *TrainerState, run runState, optMeta map[string]string) error {
	bad := func(file, format string, args ...any) error {
		return fmt.Errorf("trainer: %s: %s: %w", filepath.Join(ck.Dir, file), fmt.Sprintf(format, args...), checkpoint.ErrCorrupt)
	}
	g, m := ts.GlobalStep, ck.Manifest.Step
	switch {
	case g < 0 || g > maxResumeStep:
		return bad(stateFile, "global_step %d is outside [0, 2^53]", g)
	case g != m:
		return bad(stateFile, "global_step %d, but %s records step %d", g, checkpoint.ManifestFile, m)
	}
	if n, ok := checkpoint.ParseDirName(filepath.Base(filepath.Clean(ck.Dir))); ok && n != m {
		return bad(checkpoint.ManifestFile, "step %d, but the directory is named for step %d", m, n)
	}
	if o := run.OptimizerStep; o < 0 || o > g {
		return bad(runFile, "optimizer_step %d is outside [0, global_step %d]", o, g)
	}
	if s, ok := optMeta["step"]; !ok || s != strconv.Itoa(run.OptimizerStep) {
		return bad(optimizerFile, "__metadata__ step %q, but %s has optimizer_step %d", s, runFile, run.OptimizerStep)
	}
	if b := ts.BestGlobalStep; b != nil && (*b < 0 || *b > g) {
		return bad(stateFile, "best_global_step %d is outside [0, global_step %d]", *b, g)
	}
	sb, err := ck.ReadFile(schedulerFile)
	if err != nil {
		return err
	}
	// Pointers: a missing field is an error, not a zero.
	var sched struct {
		LastEpoch *int64 `json:"last_epoch"`
		StepCount *int64 `json:"_step_count"`
	}
	if err := json.Unmarshal(sb, &sched); err != nil {
		return fmt.Errorf("trainer: %s: %w: %w", filepath.Join(ck.Dir, schedulerFile), checkpoint.ErrCorrupt, err)
	}
	switch {
	case sched.LastEpoch == nil:
		return bad(schedulerFile, "last_epoch is missing")
	case *sched.LastEpoch != int64(g):
		return bad(schedulerFile, "last_epoch %d, but global_step is %d", *sched.LastEpoch, g)
	case sched.StepCount == nil:
		return bad(schedulerFile, "_step_count is missing")
	case *sched.StepCount != int64(g)+1:
		return bad(schedulerFile, "_step_count %d, want global_step + 1 = %d", *sched.StepCount, g+1)
	}
	return nil
}

// bestCheckpointDir checks best_model_checkpoint as read from a resumed trainer_state.json
// (source) and returns it as output_dir/checkpoint-N. HF trusts the path and, with
// load_best_model_at_end, loads whatever it names at the end of training (and retention spares
// it); gotpu follows it only to a checkpoint of this run: a checkpoint-N directory whose parent
// is output_dir (compared as absolute paths, then as resolved ones), with N not after
// global_step, and — when load_best_model_at_end will load it — committed there (a real
// directory, not a symlink, with a valid commit marker).
//
// Anything else is an error rather than a value dropped with a warning: dropping it would
// silently change which weights load_best_model_at_end returns and which checkpoint
// save_total_limit spares, and no writer produces it — gotpu and HF both write
// output_dir/checkpoint-N — so it means the state was edited, or the run moved to another
// output_dir, which the message names.
func (t *Trainer) bestCheckpointDir(path, source string, globalStep int) (string, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("trainer: %s: best_model_checkpoint %q %s: %w", source, path, fmt.Sprintf(format, args...), checkpoint.ErrCorrupt)
	}
	out := t.args.OutputDir
	if out == "" {
		return "", bad("cannot be followed without output_dir")
	}
	n, ok := checkpoint.ParseDirName(filepath.Base(path))
	if !ok {
		return "", bad("is not a checkpoint-N directory")
	}
	if !sameDir(filepath.Dir(path), out) {
		return "", bad("is not a checkpoint of output_dir %q (gotpu follows it only inside output_dir; was the run moved?)", out)
	}
	if n > globalStep {
		return "", bad("is later than the state's global_step %d", globalStep)
	}
	best := filepath.Join(out, checkpoint.DirName(n))
	if t.args.LoadBestModelAtEnd {
		l, err := checkpoint.List(out)
		if err != nil {
			return "", err
		}
		if !slices.ContainsFunc(l, func(e checkpoint.Entry) bool { return e.Step == n && e.Dir == best }) {
			return "", bad("is not a committed checkpoint in output_dir %q (load_best_model_at_end would load it)", out)
		}
	}
	return best, nil
}

// sameDir reports whether a and b name the same directory: equal absolute paths, or the same
// directory once symlinks are resolved (output_dir spelled through a symlink).
func sameDir(a, b string) bool {
	aa, err1 := filepath.Abs(a)
	ab, err2 := filepath.Abs(b)
	if err1 == nil && err2 == nil && aa == ab {
		return true
	}
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	if err1 != nil || err2 != nil {
		return false
	}
	aa, err1 = filepath.Abs(ra)
	ab, err2 = filepath.Abs(rb)
	return err1 == nil && err2 == nil && aa == ab
}

// dropTrialFields clears trial_name, trial_params and is_hyper_param_search of a resumed state.
// gotpu runs no hyper-parameter search, and these came from a file: trial_name is a path element
// in HF (TensorBoardCallback joins it to logging_dir; HF's search also joins it to output_dir),
// so an absolute or ../ name would send files anywhere. The next checkpoint records null.
func (t *Trainer) dropTrialFields(ts *TrainerState, source string) {
	if ts.TrialName == nil && !ts.IsHyperParamSearch && ts.TrialParams.IsNull() {
		return
	}
	name := ""
	if ts.TrialName != nil {
		name = *ts.TrialName
	}
	t.log.Warn("ignoring the hyper-parameter search fields of the resumed state (gotpu runs no search)",
		"file", source, "trial_name", name, "is_hyper_param_search", ts.IsHyperParamSearch)
	ts.TrialName, ts.IsHyperParamSearch, ts.TrialParams = nil, false, JSONNullValue()
}

// readTensors reads every tensor of a checkpoint's safetensors file to host memory, from bytes
// checked against the manifest again as they are read (not trusting the earlier verification),
// and returns the file's metadata.
func readTensors(ck *checkpoint.Checkpoint, name string) ([]step.HostTensor, map[string]string, error) {
	b, err := ck.ReadFile(name)
	if err != nil {
		return nil, nil, err
	}
	path := filepath.Join(ck.Dir, name)
	h, err := safetensors.Parse(b)
	if err != nil {
		return nil, nil, fmt.Errorf("trainer: %s: %w", path, err)
	}
	data := b[8+h.HeaderSize:]
	out := make([]step.HostTensor, 0, len(h.Tensors))
	for _, info := range h.Tensors {
		d, err := varDType(info.DType)
		if err != nil {
			return nil, nil, fmt.Errorf("trainer: %s: %s: %w", path, info.Name, err)
		}
		out = append(out, step.HostTensor{Name: info.Name, DType: d, Shape: info.Shape, Bytes: data[info.Begin:info.End:info.End]})
	}
	return out, h.Metadata, nil
}

// weightsFile is the checkpoint file of the trained weights: model.safetensors, or an adapter's
// adapter_model.safetensors.
func (t *Trainer) weightsFile() string {
	w, _, _, _ := models.SavedFiles(t.model)
	return w
}
