package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/internal/cli"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/trainer"
	"github.com/gotpu/gotpu/xla"
)

// runArgs are the arguments of train and eval: HF TrainingArguments and run_clm/run_glue's
// model/data arguments, from flags layered over an optional --args FILE.json.
type runArgs struct {
	train trainer.TrainingArguments
	md    trainer.ModelDataArguments
}

// parseRunArgs registers every HF flag, parses, and merges flags over --args.
func parseRunArgs(name string, args []string, stderr io.Writer, synopsis string) (*runArgs, error) {
	fs := newFlagSet(name)
	flagged := trainer.DefaultTrainingArguments()
	var flaggedMD trainer.ModelDataArguments
	flagged.RegisterFlags(fs)
	flagged.RegisterUnsupportedFlags(fs)
	flaggedMD.RegisterFlags(fs)
	argsFile := fs.String("args", "", "JSON file of TrainingArguments (as to_json_string() writes) and model/data arguments; flags override it")
	if err := parse(fs, args, stderr, synopsis); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, cli.UsageError("unexpected arguments %q", fs.Args())
	}
	r := &runArgs{train: trainer.DefaultTrainingArguments()}
	if *argsFile != "" {
		a, md, err := trainer.LoadTrainingArguments(*argsFile)
		if err != nil {
			return nil, err
		}
		r.train, r.md = *a, *md
	}
	r.train.MergeFlags(&flagged, fs)
	r.md.MergeFlags(&flaggedMD, fs)
	return r, nil
}

func (r *runArgs) openRuntime(ctx context.Context) (*xla.Runtime, error) {
	cfg := xla.DefaultConfig()
	if r.train.Device != "" {
		cfg.Device = r.train.Device
	}
	cfg.NumDevices = r.train.NumDevices
	return xla.Open(ctx, cfg)
}

func (r *runArgs) loadModel(ctx context.Context, rt *xla.Runtime) (models.Model, error) {
	if r.md.ModelNameOrPath == nil || *r.md.ModelNameOrPath == "" {
		return nil, cli.UsageError("--model_name_or_path: required (a Hugging Face model directory)")
	}
	opts := models.LoadOptions{}
	if r.md.TorchDtype != nil {
		opts.DType = *r.md.TorchDtype
	}
	return models.Load(ctx, rt, *r.md.ModelNameOrPath, opts)
}

// openDataset opens a data file. Pre-tokenized JSON lines (input_ids, attention_mask,
// token_type_ids, labels: what HF datasets store after tokenization) are read as they are.
func openDataset(flagName string, path *string, maxSamples *int) (data.Dataset, func(), error) {
	if path == nil || *path == "" {
		return nil, func() {}, nil
	}
	ext := strings.ToLower(filepath.Ext(*path))
	if ext != ".jsonl" && ext != ".json" {
		return nil, nil, fmt.Errorf("--%s %s: gotpu train reads pre-tokenized JSON lines ({\"input_ids\": [...], ...} per line); "+
			"text files need a tokenizer (--tokenizer_name), which this command does not take yet", flagName, *path)
	}
	ds, err := data.OpenJSONL(*path)
	if err != nil {
		return nil, nil, fmt.Errorf("--%s: %w", flagName, err)
	}
	if err := ds.Validate(); err != nil {
		ds.Close()
		return nil, nil, fmt.Errorf("--%s: %w", flagName, err)
	}
	var out data.Dataset = ds
	if maxSamples != nil && *maxSamples > 0 && *maxSamples < ds.Len() {
		out = firstN{ds, *maxSamples}
	}
	return out, func() { ds.Close() }, nil
}

// firstN is the first n examples of a dataset (HF's max_train_samples / max_eval_samples).
type firstN struct {
	data.Dataset
	n int
}

func (f firstN) Len() int { return f.n }

// runTrain implements `gotpu train`: HF's run_clm.py / run_glue.py training in one command.
//
// It loads --model_name_or_path, trains on --train_file (and evaluates on --validation_file per
// --eval_strategy) with the TrainingArguments given as flags or --args, then, as HF's
// trainer.save_model() and trainer.save_state() do, writes the final model (config.json,
// model.safetensors) and trainer_state.json to --output_dir, plus train_results.json.
func runTrain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	r, err := parseRunArgs("train", args, stderr, "--model_name_or_path DIR --train_file FILE.jsonl --output_dir DIR [HF TrainingArguments flags] [--args FILE.json]")
	if err != nil {
		return err
	}
	if r.md.TrainFile == nil || *r.md.TrainFile == "" {
		return cli.UsageError("--train_file: required")
	}
	train, closeTrain, err := openDataset("train_file", r.md.TrainFile, r.md.MaxTrainSamples)
	if err != nil {
		return err
	}
	defer closeTrain()
	eval, closeEval, err := openDataset("validation_file", r.md.ValidationFile, r.md.MaxEvalSamples)
	if err != nil {
		return err
	}
	defer closeEval()
	rt, err := r.openRuntime(ctx)
	if err != nil {
		return err
	}
	defer rt.Close()
	model, err := r.loadModel(ctx, rt)
	if err != nil {
		return err
	}
	tr, err := trainer.New(r.train, model, train, eval, trainer.Options{Runtime: rt})
	if err != nil {
		return err
	}
	out, trainErr := tr.Train(ctx)
	if trainErr != nil && !errors.Is(trainErr, context.Canceled) {
		return trainErr
	}
	a := tr.Args()
	if err := tr.SaveModel(a.OutputDir); err != nil {
		return err
	}
	if err := tr.SaveState(); err != nil {
		return err
	}
	if err := writeResults(filepath.Join(a.OutputDir, "train_results.json"), out.Metrics); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "trained %d steps, train_loss %.4f; model and trainer_state.json in %s\n",
		out.GlobalStep, out.TrainingLoss, a.OutputDir)
	return trainErr
}

// runEval implements `gotpu eval`: evaluate --model_name_or_path on --validation_file and print
// the metrics as one JSON object (also written to output_dir/eval_results.json).
func runEval(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	r, err := parseRunArgs("eval", args, stderr, "--model_name_or_path DIR --validation_file FILE.jsonl [--per_device_eval_batch_size N] [--output_dir DIR]")
	if err != nil {
		return err
	}
	if r.md.ValidationFile == nil || *r.md.ValidationFile == "" {
		return cli.UsageError("--validation_file: required")
	}
	eval, closeEval, err := openDataset("validation_file", r.md.ValidationFile, r.md.MaxEvalSamples)
	if err != nil {
		return err
	}
	defer closeEval()
	rt, err := r.openRuntime(ctx)
	if err != nil {
		return err
	}
	defer rt.Close()
	model, err := r.loadModel(ctx, rt)
	if err != nil {
		return err
	}
	tr, err := trainer.New(r.train, model, nil, eval, trainer.Options{Runtime: rt})
	if err != nil {
		return err
	}
	metrics, err := tr.Evaluate(ctx)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(tr.Args().OutputDir, 0o755); err != nil {
		return err
	}
	if err := writeResults(filepath.Join(tr.Args().OutputDir, "eval_results.json"), metrics); err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(metrics)
}

// writeResults writes metrics as HF's save_metrics does (indent 4, sorted keys).
func writeResults(path string, metrics map[string]float64) error {
	b, err := json.MarshalIndent(metrics, "", "    ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
