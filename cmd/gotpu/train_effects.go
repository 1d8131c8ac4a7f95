package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/internal/atomicfile"
	"github.com/gotpu/gotpu/internal/cli"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/trainer"
)

// This file gives `gotpu train` run_clm.py's script-level arguments (issue #39): the refusals
// that come before anything is loaded (checkTrainArgs), those that depend on the model
// (checkModelArgs), and do_eval's final evaluation with run_clm's result files (finalEvaluate).

// flagGiven reports whether the command line set a flag (not the --args file).
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	if fs != nil {
		fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	}
	return given
}

// checkTrainArgs refuses, before any file is read or model loaded, every argument `gotpu train`
// cannot honour (trainer.ArgumentPolicies): the model/data arguments of other scripts, the
// script-level do_predict and do_train false, and the TrainingArguments Validate refuses
// (gradient_checkpointing, HF fields gotpu does not implement…), checked here on a copy so that a
// refusal costs no model load.
func (r *runArgs) checkTrainArgs() error {
	if err := r.md.RefusedForTraining(); err != nil {
		return cli.UsageError("%v", err)
	}
	if err := r.train.ScriptArgsForTraining(flagGiven(r.fs, "do_train")); err != nil {
		return cli.UsageError("%v", err)
	}
	a := r.train
	if err := a.Finalize(); err != nil {
		return err
	}
	return a.Validate()
}

// checkEvalArgs refuses for `gotpu eval` what it cannot honour among the model/data arguments
// (the other scripts' arguments, as for train). validation_split_percentage holds out part of
// the training data, which eval does not read: it evaluates --validation_file or the dataset's
// validation split.
func (r *runArgs) checkEvalArgs() error {
	if err := r.md.RefusedForTraining(); err != nil {
		return cli.UsageError("%v", err)
	}
	if r.md.ValidationSplitPercentage != nil && *r.md.ValidationSplitPercentage != 0 {
		return cli.UsageError("--validation_split_percentage: gotpu eval does not hold out part of the training data; " +
			"it evaluates --validation_file or the validation split of --dataset_name (--validation_split): " +
			"to evaluate the held-out rows, train with --do_eval and the same percentage")
	}
	return nil
}

// checkModelArgs refuses the arguments the loaded model does not use: a causal LM has no use
// for run_glue's max_seq_length, text_column_names and label_column_name.
func (r *runArgs) checkModelArgs(model models.Model) error {
	if _, ok := model.(models.CausalLM); !ok {
		return nil
	}
	if err := r.md.RefusedForCausalLM(); err != nil {
		return cli.UsageError("%v", err)
	}
	return nil
}

// evalWanted is whether the run evaluates: do_eval (run_clm's final evaluation), which
// Finalize also sets for an eval_strategy other than "no", as HF's __post_init__ does.
func (r *runArgs) evalWanted() bool {
	return r.train.DoEval || r.train.EvalStrategy != "no"
}

// requireEvalData refuses do_eval without evaluation data: run_clm.py would evaluate on the
// train[:validation_split_percentage%] split; gotpu says what to give instead of evaluating on
// nothing.
func (r *runArgs) requireEvalData(eval data.Dataset) error {
	if !r.train.DoEval || (eval != nil && eval.Len() > 0) {
		return nil
	}
	return cli.UsageError("--do_eval: there is no evaluation data: give --validation_file, a --dataset_name with a validation split " +
		"(or --validation_split), or --validation_split_percentage N to hold out N%% of the training data (run_clm.py's default is 5); or remove --do_eval")
}

// trainSamples adds run_clm.py's train_samples (the training examples after grouping and
// max_train_samples) to the train metrics.
func trainSamples(metrics map[string]float64, train data.Dataset) {
	if train != nil {
		metrics["train_samples"] = float64(train.Len())
	}
}

// finalEvaluate is run_clm.py's `if training_args.do_eval:` block after training: evaluate,
// add eval_samples (the evaluation examples after max_eval_samples) and perplexity =
// exp(eval_loss) (inf on overflow), print the metrics and save them as trainer.save_metrics
// does: eval_results.json, merged into all_results.json.
func finalEvaluate(ctx context.Context, tr *trainer.Trainer, eval data.Dataset, stdout io.Writer) (map[string]float64, error) {
	metrics, err := tr.Evaluate(ctx)
	if err != nil {
		return nil, fmt.Errorf("--do_eval: final evaluation: %w", err)
	}
	metrics["eval_samples"] = float64(eval.Len())
	if loss, ok := metrics["eval_loss"]; ok {
		metrics["perplexity"] = math.Exp(loss) // +Inf on overflow, as run_clm's OverflowError branch
	}
	out := tr.Args().OutputDir
	if err := writePyMetrics(filepath.Join(out, "eval_results.json"), metrics); err != nil {
		return nil, err
	}
	if err := mergeAllResults(out, metrics); err != nil {
		return nil, err
	}
	fmt.Fprintf(stdout, "eval: eval_loss %.4f, perplexity %.4f (%d examples); eval_results.json and all_results.json in %s\n",
		metrics["eval_loss"], metrics["perplexity"], eval.Len(), out)
	return metrics, nil
}

// mergeAllResults updates output_dir/all_results.json with metrics, as HF's
// save_metrics(combined=True) does: the existing file's keys are kept unless metrics has them.
func mergeAllResults(outputDir string, metrics map[string]float64) error {
	path := filepath.Join(outputDir, "all_results.json")
	all := map[string]float64{}
	if b, err := os.ReadFile(path); err == nil {
		if err := decodePyMetrics(b, all); err != nil {
			return fmt.Errorf("%s: %w (remove it to start afresh)", path, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for k, v := range metrics {
		all[k] = v
	}
	return writePyMetrics(path, all)
}

// writePyMetrics writes metrics as HF's save_metrics does (json.dump(indent=4, sort_keys=True)),
// with Python's Infinity and NaN for non-finite values (encoding/json refuses them).
func writePyMetrics(path string, metrics map[string]float64) error {
	keys := make([]string, 0, len(metrics))
	for k := range metrics {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b bytes.Buffer
	b.WriteString("{\n")
	for i, k := range keys {
		kb, err := json.Marshal(k)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "    %s: %s", kb, pyFloat(metrics[k]))
		if i < len(keys)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("}\n")
	if err := atomicfile.MkdirAll(filepath.Dir(path)); err != nil {
		return err
	}
	return atomicfile.WriteFileBytes(path, b.Bytes())
}

func pyFloat(x float64) string {
	switch {
	case math.IsInf(x, 1):
		return "Infinity"
	case math.IsInf(x, -1):
		return "-Infinity"
	case math.IsNaN(x):
		return "NaN"
	}
	b, _ := json.Marshal(x)
	return string(b)
}

// decodePyMetrics reads a flat JSON object of numbers, with Python's Infinity/NaN.
func decodePyMetrics(b []byte, into map[string]float64) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(pyNonFinite(b), &raw); err != nil {
		return err
	}
	for k, v := range raw {
		var s string
		if json.Unmarshal(v, &s) == nil {
			f, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return fmt.Errorf("%s: %q is not a number", k, s)
			}
			into[k] = f
			continue
		}
		var f float64
		if err := json.Unmarshal(v, &f); err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		into[k] = f
	}
	return nil
}

// pyNonFinite quotes Python's bare Infinity, -Infinity and NaN values so encoding/json reads them.
func pyNonFinite(b []byte) []byte {
	for _, w := range []string{"-Infinity", "Infinity", "NaN"} {
		b = bytes.ReplaceAll(b, []byte(": "+w), []byte(`: "`+w+`"`))
	}
	return b
}
