package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/data/tokenizer"
	"github.com/gotpu/gotpu/hub"
	"github.com/gotpu/gotpu/internal/atomicfile"
	"github.com/gotpu/gotpu/internal/cli"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/peft"
	"github.com/gotpu/gotpu/trainer"
	"github.com/gotpu/gotpu/xla"
)

// runArgs are the arguments of train and eval: HF TrainingArguments and run_clm/run_glue's
// model/data arguments, from flags layered over an optional --args FILE.json.
type runArgs struct {
	train trainer.TrainingArguments
	md    trainer.ModelDataArguments
	// pluginPath is --plugin_path, as devices/score/generate take it (not a TrainingArguments
	// field: where the plugin lives is a property of the machine, not of the run).
	pluginPath string
	// goBackend is --go_backend, likewise a property of the machine rather than of the run.
	goBackend string
	// cache is --compilation_cache_dir and --compilation_cache_max_bytes (machine properties too).
	cache cacheFlags
	// stderr gets the Hub's download progress bars (drawn only on a terminal).
	stderr io.Writer
	// hubc is the Hub client, made on first use (hub): a run that names only local paths never
	// reads the Hub's settings.
	hubc *hub.Client
	// sft is set once a split took TRL's SFT preparation (sft.go).
	sft *sftRun
	// fs is the parsed command line: which flags were given (train_effects.go).
	fs *flag.FlagSet
}

// hub returns the run's Hub client: the environment as huggingface_hub reads it (HF_ENDPOINT,
// HF_HUB_CACHE, HF_HOME, HF_TOKEN, HF_HUB_OFFLINE), with --cache_dir and --token over it.
func (r *runArgs) hub() (*hub.Client, error) {
	if r.hubc != nil {
		return r.hubc, nil
	}
	c, err := newHubClient(hubFlags{cacheDir: stringOr(r.md.CacheDir, ""), token: stringOr(r.md.Token, "")}, r.stderr)
	if err != nil {
		return nil, err
	}
	r.hubc = c
	return c, nil
}

// parseRunArgs registers every HF flag, parses, and merges flags over --args.
func parseRunArgs(name string, args []string, stderr io.Writer, synopsis string) (*runArgs, error) {
	fs := newFlagSet(name)
	flagged := trainer.DefaultTrainingArguments()
	var flaggedMD trainer.ModelDataArguments
	flagged.RegisterFlags(fs)
	flagged.RegisterUnsupportedFlags(fs)
	flaggedMD.RegisterFlags(fs)
	pluginPath := fs.String("plugin_path", "", "PJRT plugin file or directory to use instead of searching")
	var goBackend string
	registerGoBackend(fs, &goBackend)
	var cache cacheFlags
	cache.register(fs)
	argsFile := fs.String("args", "", "JSON file of TrainingArguments (as to_json_string() writes) and model/data arguments; flags override it")
	if err := parse(fs, args, stderr, synopsis); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, cli.UsageError("unexpected arguments %q", fs.Args())
	}
	r := &runArgs{train: trainer.DefaultTrainingArguments(), pluginPath: *pluginPath, goBackend: goBackend, cache: cache, stderr: stderr, fs: fs}
	// Flags override the file, including its refused settings (--args X.json --fp16 false).
	a, md, err := trainer.LoadArgumentsWithFlags(*argsFile, &flagged, &flaggedMD, fs)
	if err != nil {
		return nil, err
	}
	r.train, r.md = *a, *md
	return r, nil
}

func (r *runArgs) openRuntime(ctx context.Context) (*xla.Runtime, error) {
	cfg := xla.DefaultConfig()
	if r.train.Device != "" {
		cfg.Device = r.train.Device
	}
	cfg.NumDevices = r.train.NumDevices
	cfg.PluginPath = r.pluginPath
	cfg.GoBackend = r.goBackend
	if err := r.cache.apply(&cfg); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, cli.UsageError("%v", err)
	}
	rt, err := xla.Open(ctx, cfg)
	if err == nil {
		r.cache.opened(rt)
	}
	return rt, err
}

// openModel opens the runtime and loads --model_name_or_path on it; the caller closes the runtime.
func (r *runArgs) openModel(ctx context.Context) (*xla.Runtime, models.Model, error) {
	rt, err := r.openRuntime(ctx)
	if err != nil {
		return nil, nil, err
	}
	model, err := r.loadModel(ctx, rt)
	if err != nil {
		rt.Close()
		return nil, nil, err
	}
	return rt, model, nil
}

func (r *runArgs) loadModel(ctx context.Context, rt *xla.Runtime) (models.Model, error) {
	if m, scratch, err := r.scratchModel(ctx, rt); scratch || err != nil { // scratch.go: --config_name / --model_type
		return m, err
	}
	if r.md.ModelNameOrPath == nil || *r.md.ModelNameOrPath == "" {
		return nil, cli.UsageError("--model_name_or_path: required (a Hugging Face model directory or Hub repo id)")
	}
	opts := models.LoadOptions{Revision: stringOr(r.md.ModelRevision, "")}
	if r.md.TorchDtype != nil {
		opts.DType = *r.md.TorchDtype
	}
	if !isLocal(*r.md.ModelNameOrPath) {
		c, err := r.hub()
		if err != nil {
			return nil, err
		}
		opts.Hub = c
	}
	base, err := models.Load(ctx, rt, *r.md.ModelNameOrPath, opts)
	if err != nil {
		return nil, err
	}
	return r.adapt(ctx, rt, base)
}

// adapt attaches the LoRA adapter the PEFT flags ask for: --adapter_name_or_path loads one (its
// adapter_config.json gives r, alpha and the targets; training continues it), --use_peft alone
// attaches a new one drawn from --seed (TRL's flags: --lora_r, --lora_alpha, --lora_dropout,
// --lora_target_modules, --use_rslora).
func (r *runArgs) adapt(ctx context.Context, rt *xla.Runtime, base models.Model) (models.Model, error) {
	cfg, use, err := r.md.PeftConfig()
	if err != nil {
		return nil, cli.UsageError("%v", err)
	}
	if r.md.AdapterNameOrPath != nil && *r.md.AdapterNameOrPath != "" {
		dir := *r.md.AdapterNameOrPath
		if !isLocal(dir) {
			c, err := r.hub()
			if err != nil {
				return nil, err
			}
			if dir, err = peft.ResolveAdapter(ctx, dir, base.Config(), models.HubOptions{Hub: c}); err != nil {
				return nil, err
			}
		}
		m, err := peft.Load(ctx, rt, base, dir, peft.Options{})
		if err != nil {
			return nil, err
		}
		ad, _ := peft.Of(m)
		if err := r.md.AdapterConflicts(ad.LoraConfig(), *r.md.AdapterNameOrPath); err != nil {
			return nil, cli.UsageError("%v", err)
		}
		return m, nil
	}
	if !use {
		return base, nil
	}
	cfg.BaseModelNameOrPath = *r.md.ModelNameOrPath
	m, err := peft.New(ctx, rt, base, cfg, peft.Options{Seed: uint64(r.train.Seed)})
	if err != nil {
		return nil, cli.UsageError("--use_peft: %v", err)
	}
	return m, nil
}

// openDataset opens a split the way HF's run_clm.py / run_glue.py would prepare it:
//   - pre-tokenized rows ({"input_ids": [...], ...}: what HF datasets store after tokenization)
//     are used as they are: JSON lines indexed in place, other formats (Parquet, Arrow, CSV, a
//     JSON array) streamed into a disk-backed token store;
//   - for a causal LM, text (a .txt file, one document per line, or one column of JSON lines
//     or a table, by run_clm's rule for every format: --text_column_name, else "text", else the
//     first column, logged) is tokenized and grouped into --block_size blocks;
//   - for a classifier, JSON lines with --text_column_name (default "sentence"), an optional
//     second text column (--text_column_names "a,b") and --label_column_name (default "label")
//     are tokenized with truncation to --max_seq_length (default 128).
//
// labels maps classification labels to ids; the training file defines it (nil) and the
// validation file reuses it.
func (r *runArgs) openDataset(ctx context.Context, src *dataSource, maxSamples *int, model models.Model,
	labels map[string]int32) (data.Dataset, map[string]int32, func(), error) {
	if src == nil {
		return nil, labels, func() {}, nil
	}
	var out data.Dataset
	var closeFn func()
	if sftData, err := r.useSFT(src, model); err != nil {
		return nil, nil, nil, err
	} else if sftData {
		if src.span != nil {
			return nil, nil, nil, cli.UsageError("%s: --validation_split_percentage does not split SFT data; give --validation_file or a --dataset_name validation split", src.what)
		}
		if out, err = r.openSFTDataset(ctx, src, model); err != nil {
			return nil, nil, nil, err
		}
		if maxSamples != nil && *maxSamples > 0 && *maxSamples < out.Len() {
			out = firstN{out, *maxSamples}
		}
		return out, labels, func() {}, nil
	} else if err := r.md.SFTOnlyArgs(); err != nil {
		return nil, nil, nil, cli.UsageError("%v", err)
	}
	tabular, err := isTableSource(src)
	if err != nil {
		return nil, nil, nil, err
	}
	if tabular {
		ds, closeDS, err := r.openTableDataset(ctx, src, model)
		if err != nil {
			return nil, nil, nil, err
		}
		out, closeFn = ds, closeDS
	} else if out, labels, closeFn, err = r.openFileDataset(ctx, src, model, labels); err != nil {
		return nil, nil, nil, err
	}
	if maxSamples != nil && *maxSamples > 0 && *maxSamples < out.Len() {
		out = firstN{out, *maxSamples}
	}
	return out, labels, closeFn, nil
}

// openFileDataset reads one .jsonl/.json (JSON lines) or .txt file with the readers gotpu has
// always had for them (see openDataset).
func (r *runArgs) openFileDataset(ctx context.Context, src *dataSource, model models.Model,
	labels map[string]int32) (data.Dataset, map[string]int32, func(), error) {
	path, _ := src.single()
	pretokenized := false
	if stringOr(r.md.TextColumnName, "") == "" { // a named text column is tokenized even beside input_ids
		var err error
		if pretokenized, err = isPretokenized(path); err != nil {
			return nil, nil, nil, fmt.Errorf("%s: %w", src.what, err)
		}
	}
	if pretokenized {
		ds, err := data.OpenJSONLWith(path, jsonlLimits(model))
		if err != nil {
			return nil, nil, nil, fmt.Errorf("%s: %w", src.what, err)
		}
		if err := ds.Validate(); err != nil {
			ds.Close()
			return nil, nil, nil, fmt.Errorf("%s: %w", src.what, err)
		}
		return src.spanDataset(ds), labels, func() { ds.Close() }, nil
	}
	tok, err := r.tokenizer(ctx)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s is text: %w", src.what, err)
	}
	if lm, ok := model.(models.CausalLM); ok {
		docs := r.textLines(path) // keep_linebreaks
		if ext := strings.ToLower(filepath.Ext(path)); ext == ".jsonl" || ext == ".json" {
			col, err := r.jsonlTextColumn(ctx, src.what, path) // textcolumn.go: run_clm's one rule
			if err != nil {
				return nil, nil, nil, fmt.Errorf("%s: %w", src.what, err)
			}
			docs = data.JSONLTextField(path, col)
		}
		blocks, err := r.groupTexts(ctx, tok, src.spanDocs(docs), lm) // validation_split_percentage
		if err != nil {
			return nil, nil, nil, fmt.Errorf("%s: %w", src.what, err)
		}
		return blocks, labels, func() { blocks.Close() }, nil
	}
	textCol, pairCol := stringOr(r.md.TextColumnName, "sentence"), ""
	if r.md.TextColumnNames != nil && *r.md.TextColumnNames != "" {
		cols := strings.Split(*r.md.TextColumnNames, ",")
		textCol = cols[0]
		if len(cols) > 1 {
			pairCol = cols[1]
		}
	}
	recs, err := data.ReadLabeledJSONL(path, textCol, pairCol, stringOr(r.md.LabelColumnName, "label"))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w", src.what, err)
	}
	recs = spanSlice(src, recs)
	if labels == nil {
		labels, _ = data.Labels(recs)
	}
	maxLen := 128
	if r.md.MaxSeqLength != nil && *r.md.MaxSeqLength > 0 {
		maxLen = *r.md.MaxSeqLength
	}
	ttok, err := tok.WithTruncation(&tokenizer.Truncation{MaxLength: maxLen})
	if err != nil {
		return nil, nil, nil, err
	}
	ds, err := data.TokenizeLabeled(ctx, ttok, recs, labels, maxLen)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w", src.what, err)
	}
	return ds, labels, func() {}, nil
}

// sources picks the training split (when training) and the evaluation split: --train_file and
// --validation_file, or --dataset_name's splits (never both kinds, as run_clm refuses).
func (r *runArgs) sources(ctx context.Context, training bool) (train, eval *dataSource, err error) {
	byName := stringOr(r.md.DatasetName, "") != ""
	byFile := stringOr(r.md.TrainFile, "") != "" || stringOr(r.md.ValidationFile, "") != ""
	switch {
	case byName && byFile:
		return nil, nil, cli.UsageError("--dataset_name and --train_file/--validation_file both given: name the data one way")
	case byName:
		evalWanted := !training || r.train.EvalStrategy != "no" || r.train.DoEval
		if train, eval, err = r.datasetSplits(ctx, training, evalWanted); err != nil {
			return nil, nil, err
		}
		if !training && eval == nil {
			return nil, nil, cli.UsageError("--dataset_name %s has no validation split: name one with --validation_split", *r.md.DatasetName)
		}
		return train, eval, nil
	}
	train, eval = fileSource("train_file", r.md.TrainFile), fileSource("validation_file", r.md.ValidationFile)
	if training && train == nil {
		return nil, nil, cli.UsageError("--train_file or --dataset_name: required")
	}
	if !training && eval == nil {
		return nil, nil, cli.UsageError("--validation_file or --dataset_name: required")
	}
	return r.percentSplit(train, eval, training) // datasource.go
}

// jsonlLimits refuses examples longer than the model takes while the file is indexed, before a
// line is held or decoded (the resource budget).
func jsonlLimits(model models.Model) data.JSONLOptions {
	fp, err := models.EstimateFootprint(model.Config())
	if err != nil || fp.MaxPositions > math.MaxInt32 {
		return data.JSONLOptions{}
	}
	return data.JSONLOptions{MaxSeqLength: int(fp.MaxPositions)}
}

// isPretokenized tells whether path is JSON lines whose first record has input_ids. Only the
// record's keys are read (data.FirstRecordKeys streams the line), so a line of millions of ids is
// not held here before the length limits see it.
func isPretokenized(path string) (bool, error) {
	if ext := strings.ToLower(filepath.Ext(path)); ext != ".jsonl" && ext != ".json" {
		return false, nil
	}
	keys, err := data.FirstRecordKeys(path)
	if err != nil {
		return false, err
	}
	return slices.Contains(keys, "input_ids"), nil
}

// tokenizer loads --tokenizer_name, or the tokenizer.json of --model_name_or_path: a local file
// or directory, or a Hub repo id (--model_revision applies to both, as in run_clm).
func (r *runArgs) tokenizer(ctx context.Context) (*tokenizer.Pipeline, error) {
	path := stringOr(r.md.TokenizerName, "")
	if path == "" {
		path = stringOr(r.md.ModelNameOrPath, "")
	}
	opts := tokenizer.HubOptions{Revision: stringOr(r.md.ModelRevision, "")}
	if !isLocal(path) {
		c, err := r.hub()
		if err != nil {
			return nil, err
		}
		opts.Hub = c
	}
	tok, err := tokenizer.FromPretrained(ctx, path, opts)
	if err != nil {
		return nil, fmt.Errorf("a tokenizer is needed (--tokenizer_name, or tokenizer.json in the model directory): %w", err)
	}
	return tok, nil
}

// isLocal tells a path that exists here (which wins over a Hub repo id of the same spelling, as in
// transformers) from a name to look up on the Hub.
func isLocal(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func stringOr(p *string, def string) string {
	if p == nil || *p == "" {
		return def
	}
	return *p
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
	r, err := parseRunArgs("train", args, stderr, "--model_name_or_path DIR_OR_REPO (--train_file FILE | --dataset_name DIR_OR_REPO) --output_dir DIR [HF TrainingArguments flags] [--args FILE.json]")
	if err != nil {
		return err
	}
	if err := r.checkTrainArgs(); err != nil { // train_effects.go
		return err
	}
	if err := checkOutputDir(&r.train, slog.Default()); err != nil {
		return err
	}
	trainSrc, evalSrc, err := r.sources(ctx, true)
	if err != nil {
		return err
	}
	rt, model, err := r.openModel(ctx)
	if err != nil {
		return err
	}
	defer rt.Close()
	if err := r.checkModelArgs(model); err != nil {
		return err
	}
	train, labels, closeTrain, err := r.openDataset(ctx, trainSrc, r.md.MaxTrainSamples, model, nil)
	if err != nil {
		return err
	}
	defer closeTrain()
	eval, _, closeEval, err := r.openDataset(ctx, evalSrc, r.md.MaxEvalSamples, model, labels)
	if err != nil {
		return err
	}
	defer closeEval()
	collator, err := r.sftCollator(model)
	if err != nil {
		return err
	}
	if err := r.requireEvalData(eval); err != nil {
		return err
	}
	tokFiles, noTokenizer, err := r.savedTokenizer(ctx) // saved with the model and checkpoints (processing_class)
	if err != nil {
		return err
	}
	tr, err := trainer.New(r.train, model, train, eval, trainer.Options{Runtime: rt, Collator: collator, Tokenizer: tokFiles})
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
	if noTokenizer != nil {
		slog.Warn("the model is saved without a tokenizer: it had none (give --tokenizer_name to save one with it)",
			"output_dir", a.OutputDir, "why", noTokenizer)
	}
	if err := tr.SaveState(); err != nil {
		return err
	}
	trainSamples(out.Metrics, train)
	if err := writeResults(filepath.Join(a.OutputDir, "train_results.json"), out.Metrics); err != nil {
		return err
	}
	if err := mergeAllResults(a.OutputDir, out.Metrics); err != nil {
		return err
	}
	if errors.Is(trainErr, context.Canceled) {
		// SIGTERM/SIGINT (preemption): the trainer finished the current step and committed a
		// checkpoint there; stopping on request is a success.
		fmt.Fprintf(stdout, "interrupted after step %d; checkpoint and model in %s (resume with --resume_from_checkpoint true)\n",
			out.GlobalStep, a.OutputDir)
		return nil
	}
	saved := "model"
	if _, ok := peft.Of(tr.Model()); ok {
		saved = "adapter (adapter_model.safetensors, adapter_config.json)"
	}
	fmt.Fprintf(stdout, "trained %d steps, train_loss %.4f; %s and trainer_state.json in %s\n",
		out.GlobalStep, out.TrainingLoss, saved, a.OutputDir)
	if trainErr == nil && a.DoEval { // run_clm.py's final evaluation (train_effects.go)
		_, trainErr = finalEvaluate(ctx, tr, eval, stdout)
	}
	return trainErr
}

// runEval implements `gotpu eval`: evaluate --model_name_or_path on --validation_file and print
// the metrics, with run_clm's eval_samples and perplexity, as one JSON line: the only output on
// stdout (logs and bars go to stderr). They are also written to output_dir/eval_results.json.
func runEval(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	r, err := parseRunArgs("eval", args, stderr, "--model_name_or_path DIR_OR_REPO (--validation_file FILE | --dataset_name DIR_OR_REPO) [--per_device_eval_batch_size N] [--output_dir DIR]")
	if err != nil {
		return err
	}
	if err := r.checkEvalArgs(); err != nil { // train_effects.go
		return err
	}
	_, evalSrc, err := r.sources(ctx, false)
	if err != nil {
		return err
	}
	rt, model, err := r.openModel(ctx)
	if err != nil {
		return err
	}
	defer rt.Close()
	if err := r.checkModelArgs(model); err != nil {
		return err
	}
	eval, _, closeEval, err := r.openDataset(ctx, evalSrc, r.md.MaxEvalSamples, model, nil)
	if err != nil {
		return err
	}
	defer closeEval()
	collator, err := r.sftCollator(model)
	if err != nil {
		return err
	}
	tr, err := trainer.New(r.train, model, nil, eval, trainer.Options{Runtime: rt, Collator: collator})
	if err != nil {
		return err
	}
	metrics, err := tr.Evaluate(ctx)
	if err != nil {
		return err
	}
	if err := atomicfile.MkdirAll(tr.Args().OutputDir); err != nil {
		return err
	}
	addEvalResults(metrics, eval.Len()) // run_clm's eval_samples and perplexity (evalresults.go)
	return writeEvalResults(filepath.Join(tr.Args().OutputDir, "eval_results.json"), stdout, metrics)
}

// writeResults writes metrics as HF's save_metrics does (indent 4, sorted keys).
func writeResults(path string, metrics map[string]float64) error {
	b, err := json.MarshalIndent(metrics, "", "    ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFileBytes(path, append(b, '\n'))
}
