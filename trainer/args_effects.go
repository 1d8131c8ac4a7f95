package trainer

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gotpu/gotpu/checkpoint"
	"github.com/gotpu/gotpu/data"
)

// This file gives three TrainingArguments their effect on a run (issue #39: nothing an HF user
// asks for is silently ignored): the evaluation settings that need evaluation data
// (checkEvalData), ignore_data_skip (resumeLoaderState) and save_only_model (modelOnlyFiles,
// refuseModelOnlyResume).

// checkEvalData refuses, as HF's Trainer.__init__ does, evaluation settings that have nothing
// to evaluate: an eval_strategy other than "no" without evaluation data ("You have set
// args.eval_strategy to steps but you didn't pass an eval_dataset to Trainer. Either set
// args.eval_strategy to no or pass an eval_dataset."). load_best_model_at_end and
// save_strategy "best" pick checkpoints by evaluation results, so without evaluation data they
// would silently do nothing: gotpu refuses them too. eval_on_start is refused when training
// starts (Train), where HF's first evaluation fails.
func checkEvalData(a *TrainingArguments, eval data.Dataset) error {
	if eval != nil && eval.Len() > 0 {
		return nil
	}
	var l errorList
	if a.EvalStrategy != "no" {
		l.invalid("eval_strategy", "%q, but there is no evaluation data (an eval dataset; gotpu train: --validation_file, "+
			"--dataset_name with a validation split, or --validation_split_percentage): set eval_strategy to no or give evaluation data", a.EvalStrategy)
	}
	if a.LoadBestModelAtEnd {
		l.invalid("load_best_model_at_end", "the best checkpoint is chosen by evaluation, but there is no evaluation data: give evaluation data or remove it")
	}
	if a.SaveStrategy == "best" {
		l.invalid("save_strategy", `"best" saves when an evaluation finds a new best metric, but there is no evaluation data: give evaluation data or use steps or epoch`)
	}
	return l.err("", "")
}

// checkTokenAveraging refuses average_tokens_across_devices false on more than one device. gotpu
// divides the step's summed loss by the token count of all devices (HF's true, the 5.x
// default); HF's false divides each device's loss by its own count and averages the devices'
// gradients, which differs whenever devices hold different numbers of tokens, and gotpu does not
// implement it. On one device the two are the same (4.x forced false there), so false is
// accepted.
func checkTokenAveraging(a *TrainingArguments, replicas int) error {
	if a.AverageTokensAcrossDevices || replicas <= 1 {
		return nil
	}
	var l errorList
	l.invalid("average_tokens_across_devices", "false on %d devices: gotpu normalizes the loss by the token count of all "+
		"devices (HF's true, the 5.x default); per-device normalization is not implemented: set it to true", replicas)
	return l.err("", "")
}

// resumeLoaderState is where the data resumes after a checkpoint: the saved position (the
// batches already seen are skipped, HF's default), or, with ignore_data_skip, the beginning of
// the saved epoch. HF then still starts at the epoch it reached (epochs_trained) but sets
// steps_trained_in_current_epoch to 0, so the epoch's batches are drawn again from its first.
func (t *Trainer) resumeLoaderState(saved data.State) data.State {
	if !t.args.IgnoreDataSkip || saved.Batch == 0 {
		return saved
	}
	t.log.Info("ignore_data_skip: the data restarts at the beginning of the epoch", "epoch", saved.Epoch,
		"batches_not_skipped", saved.Batch)
	return data.State{Epoch: saved.Epoch, Batch: 0, Seed: saved.Seed}
}

// modelOnlyFiles drops what save_only_model leaves out of a checkpoint: HF's optimizer.pt,
// scheduler.pt and rng_state.pth, here optimizer.safetensors, scheduler.json,
// rng_state.safetensors and gotpu_state.json (the data position). The weights, config,
// trainer_state.json and training_args.json stay.
func (t *Trainer) modelOnlyFiles(files []checkpoint.File) []checkpoint.File {
	if !t.args.SaveOnlyModel {
		return files
	}
	out := files[:0:0]
	for _, f := range files {
		switch f.Name {
		case optimizerFile, schedulerFile, rngFile, runFile:
			continue
		}
		out = append(out, f)
	}
	return out
}

// ErrModelOnlyCheckpoint is returned when resume_from_checkpoint names a checkpoint saved with
// save_only_model: it holds no optimizer, scheduler or RNG state, so training cannot continue
// from it (HF documents "you won't be able to resume training from checkpoint").
var ErrModelOnlyCheckpoint = errors.New("the checkpoint was saved with save_only_model=true")

// refuseModelOnlyResume explains why a checkpoint cannot be resumed when it was saved with
// save_only_model (its training_args.json says so and its optimizer state is absent); it returns
// nil for any other checkpoint, whose problem the caller reports. The file is read as untrusted
// input: only a boolean is taken from it.
func refuseModelOnlyResume(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, optimizerFile)); err == nil {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(dir, argsFile))
	if err != nil || len(b) > 1<<20 {
		return nil
	}
	var saved struct {
		SaveOnlyModel *bool `json:"save_only_model"`
	}
	if json.Unmarshal(b, &saved) != nil || saved.SaveOnlyModel == nil || !*saved.SaveOnlyModel {
		return nil
	}
	return fmt.Errorf("trainer.TrainingArguments.resume_from_checkpoint: %s: %w: it holds the model only (no %s, %s, %s or %s), "+
		"so training cannot resume from it; start a new run from its weights (--model_name_or_path %s), "+
		"or keep save_only_model false in the runs you mean to resume",
		dir, ErrModelOnlyCheckpoint, optimizerFile, schedulerFile, rngFile, runFile, dir)
}
