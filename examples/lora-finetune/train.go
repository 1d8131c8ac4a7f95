package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/data/tokenizer"
	"github.com/gotpu/gotpu/examples/internal/gocorpus"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/llama"
	"github.com/gotpu/gotpu/models/peft"
	"github.com/gotpu/gotpu/trainer"
	"github.com/gotpu/gotpu/xla"
)

type options struct {
	baseSteps, maxSteps, blockSize, batch, gradAccum, vocab int
	evalEvery, saveEvery, trainBytes, evalBlocks            int
	baseLR, lr                                              float64
	loraR                                                   int
	loraAlpha, loraDropout                                  float64
	targets                                                 string // comma-separated, or all-linear
	baseCorpus, corpus, modelPath                           string
	outputDir, tokenizerPath, device                        string
	seed                                                    uint64
	logger                                                  *slog.Logger // nil: slog.Default()
	quiet                                                   bool         // no progress bar (tests)
}

// result is what a run measured.
type result struct {
	baseSteps, steps int
	newBase          bool   // the base model was made here (trained for baseSteps), not loaded
	baseDir          string // the base model the adapter was trained on
	adapterDir       string // adapter_config.json + adapter_model.safetensors
	mergedDir        string // the merged model: config.json + model.safetensors
	targets          []string
	// trainable and all are the LoRA run's parameter counts (PEFT's print_trainable_parameters).
	trainable, all int64
	// loraOptBytes is the LoRA run's optimizer state; fullOptBytes the full fine-tuning run's on
	// the same model (the base phase), or 0 when the base was loaded rather than trained here.
	loraOptBytes, fullOptBytes int64
	// Held-out losses on the fine-tuning corpus: the base model (the adapter starts as a no-op),
	// the adapted model after training, the adapter reloaded from its files with peft.Load onto
	// the base reloaded from disk, and the merged model reloaded with models.Load as a plain model.
	before, after, reloaded, merged float64
	baseTime, loraTime              time.Duration
}

func run(ctx context.Context, o options) (*result, error) {
	log := o.logger
	if log == nil {
		log = slog.Default()
	}
	tok, err := tokenizer.FromFile(o.tokenizerPath)
	if err != nil {
		return nil, fmt.Errorf("%w (run from the repository root, or pass -tokenizer)", err)
	}
	ftTrain, ftEval, err := corpusIDs(ctx, tok, o.corpus, o.trainBytes)
	if err != nil {
		return nil, err
	}
	var baseTrain []uint32
	if o.modelPath == "" && o.baseSteps > 0 {
		if baseTrain, _, err = corpusIDs(ctx, tok, o.baseCorpus, o.trainBytes); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(o.outputDir, 0o755); err != nil {
		return nil, err
	}
	res := &result{baseDir: o.modelPath, adapterDir: filepath.Join(o.outputDir, "adapter"), mergedDir: filepath.Join(o.outputDir, "merged")}
	if res.baseDir == "" {
		res.baseDir = filepath.Join(o.outputDir, "base")
	}
	vm, err := vocabulary(o, tok, slices.Concat(baseTrain, ftTrain))
	if err != nil {
		return nil, err
	}
	train, eval, err := gocorpus.Examples(vm, ftTrain, ftEval, o.blockSize, o.evalBlocks, o.trainBytes)
	if err != nil {
		return nil, err
	}
	log.Info("fine-tuning corpus", "kind", o.corpus, "train_blocks", len(train), "eval_blocks", len(eval), "other_token_rate", vm.OtherRate(ftTrain))

	cfg := xla.DefaultConfig()
	cfg.Device, cfg.NumDevices = o.device, 1
	rt, err := xla.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer rt.Close()

	// 1. The base model: loaded, or trained here in full (every weight, AdamW state for each) on
	// the base corpus: a stand-in for a pretrained model, none small enough shipping with the repo.
	if o.modelPath == "" {
		res.newBase = true
		start := time.Now()
		if err := pretrain(ctx, rt, o, vm, baseTrain, res); err != nil {
			return nil, err
		}
		res.baseTime = time.Since(start)
	}
	base, err := loadBase(ctx, rt, res.baseDir, vm, tok, o.blockSize)
	if err != nil {
		return nil, err
	}

	// 2. LoRA: the trainer attaches a new adapter (trainer.Options.PeftConfig, TRL's peft_config)
	// and trains only it; the base stays frozen.
	lcfg, err := loraConfig(o)
	if err != nil {
		return nil, err
	}
	// PEFT records the base model's name_or_path (a local directory here) in adapter_config.json:
	// what PeftModel.from_pretrained and AutoPeftModel load the adapter onto.
	lcfg.BaseModelNameOrPath = res.baseDir
	start := time.Now()
	tr, err := trainer.New(loraArguments(o, res.adapterDir), base, data.SliceDataset(train), data.SliceDataset(eval),
		trainer.Options{Logger: o.logger, PeftConfig: &lcfg})
	if err != nil {
		return nil, err
	}
	defer tr.Close()
	res.trainable, res.all = tr.ParamCounts()
	res.loraOptBytes = tr.OptimizerStateBytes()
	ad, _ := peft.Of(tr.Model())
	for _, t := range ad.TargetModules() {
		res.targets = append(res.targets, t.Module)
	}
	// With lora_B = 0 the adapted model is the base model: this is the base's held-out loss.
	first, err := tr.Evaluate(ctx)
	if err != nil {
		return nil, err
	}
	res.before = first["eval_loss"]
	if _, err := tr.Train(ctx); err != nil {
		return nil, err
	}
	res.steps = tr.State().GlobalStep
	last, err := tr.Evaluate(ctx)
	if err != nil {
		return nil, err
	}
	res.after = last["eval_loss"]
	res.loraTime = time.Since(start)
	// The adapter alone, as PeftModel.save_pretrained writes it.
	if err := tr.SaveModel(res.adapterDir); err != nil {
		return nil, err
	}
	if err := tr.SaveState(); err != nil {
		return nil, err
	}

	// 3. The saved adapter, attached with peft.Load to the base read again from disk, is the
	// model just trained.
	if res.reloaded, err = evalReloadedAdapter(ctx, rt, o, res, vm, tok, eval); err != nil {
		return nil, err
	}

	// 4. Merge (merge_and_unload): W += B·A·scaling in every adapted layer; the result is the base
	// architecture with no adapter, saved and reloaded as a plain model.
	merged, err := peft.Merge(ctx, tr.Model())
	if err != nil {
		return nil, err
	}
	if err := merged.Save(res.mergedDir, models.SaveOptions{}); err != nil {
		return nil, err
	}
	if vm != nil {
		if err := vm.Save(filepath.Join(res.mergedDir, gocorpus.VocabFile)); err != nil {
			return nil, err
		}
	}
	plain, err := models.Load(ctx, rt, res.mergedDir, models.LoadOptions{})
	if err != nil {
		return nil, err
	}
	if _, ok := peft.Of(plain); ok {
		return nil, fmt.Errorf("%s loaded with an adapter", res.mergedDir)
	}
	if res.merged, err = evalOnly(ctx, o, plain, eval); err != nil {
		return nil, err
	}
	return res, nil
}

// corpusIDs reads and tokenizes one corpus: the training side and the held-out side.
func corpusIDs(ctx context.Context, tok tokenizer.Tokenizer, kind string, budget int) (train, heldOut []uint32, err error) {
	trainDocs, evalDocs, err := gocorpus.Documents(gocorpus.GoRootSrc(), kind, budget)
	if err != nil {
		return nil, nil, err
	}
	if train, err = gocorpus.Tokenize(ctx, tok, trainDocs); err != nil {
		return nil, nil, err
	}
	if heldOut, err = gocorpus.Tokenize(ctx, tok, evalDocs); err != nil {
		return nil, nil, err
	}
	return train, heldOut, nil
}

// vocabulary is the base model's vocabulary map (-model_name_or_path's vocab_map.json, none if it
// has none), or a new one from the training tokens of both corpora, so that the base model knows
// the fine-tuning corpus's frequent tokens too.
func vocabulary(o options, tok *tokenizer.Pipeline, trainIDs []uint32) (*gocorpus.VocabMap, error) {
	if o.modelPath != "" {
		return gocorpus.LoadVocabMap(filepath.Join(o.modelPath, gocorpus.VocabFile))
	}
	return gocorpus.NewVocabMap(trainIDs, gocorpus.SpecialIDs(tok), o.vocab)
}

// pretrain trains a new Llama of the llama-tiny fixture's shape on the base corpus, every weight
// trained, and saves it with its vocabulary map to res.baseDir. With -base_steps 0 the base is
// the random initialisation.
func pretrain(ctx context.Context, rt *xla.Runtime, o options, vm *gocorpus.VocabMap, ids []uint32, res *result) error {
	m, err := models.New(ctx, rt, llamaConfig(vm.Size(), o.blockSize), models.NewOptions{Seed: o.seed})
	if err != nil {
		return err
	}
	if o.baseSteps > 0 {
		train := gocorpus.Blocks(vm.Apply(ids), o.blockSize)
		if len(train) == 0 {
			return fmt.Errorf("-train_bytes %d gives no training block of %d tokens for the base model", o.trainBytes, o.blockSize)
		}
		a := commonArguments(o, filepath.Join(o.outputDir, "base-run"))
		a.MaxSteps, a.LearningRate, a.WeightDecay = o.baseSteps, o.baseLR, 0.1
		a.SaveStrategy = trainer.SaveNo
		tr, err := trainer.New(a, m, data.SliceDataset(train), nil, trainer.Options{Logger: o.logger})
		if err != nil {
			return err
		}
		defer tr.Close()
		res.fullOptBytes = tr.OptimizerStateBytes()
		if _, err := tr.Train(ctx); err != nil {
			return err
		}
		res.baseSteps = tr.State().GlobalStep
	}
	if err := m.Save(res.baseDir, models.SaveOptions{}); err != nil {
		return err
	}
	return vm.Save(filepath.Join(res.baseDir, gocorpus.VocabFile))
}

// loadBase reads the base model from disk (the one pretrain saved, or -model_name_or_path) and
// checks it fits the data.
func loadBase(ctx context.Context, rt *xla.Runtime, dir string, vm *gocorpus.VocabMap, tok *tokenizer.Pipeline, blockSize int) (models.Model, error) {
	m, err := models.Load(ctx, rt, dir, models.LoadOptions{})
	if err != nil {
		return nil, err
	}
	if err := gocorpus.CheckModel(dir, m, vm.ModelVocabSize(tok), blockSize); err != nil {
		return nil, err
	}
	return m, nil
}

// evalReloadedAdapter loads the base model and the saved adapter from disk and evaluates them.
func evalReloadedAdapter(ctx context.Context, rt *xla.Runtime, o options, res *result, vm *gocorpus.VocabMap, tok *tokenizer.Pipeline, eval []data.Example) (float64, error) {
	base, err := loadBase(ctx, rt, res.baseDir, vm, tok, o.blockSize)
	if err != nil {
		return 0, err
	}
	m, err := peft.Load(ctx, rt, base, res.adapterDir, peft.Options{Log: o.logger})
	if err != nil {
		return 0, err
	}
	return evalOnly(ctx, o, m, eval)
}

// evalOnly is the held-out loss of m through a trainer's Evaluate, with the LoRA run's batch size
// (the same batches). Its output_dir (the log history) is temporary.
func evalOnly(ctx context.Context, o options, m models.Model, eval []data.Example) (float64, error) {
	dir, err := os.MkdirTemp("", "lora-finetune-eval-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	tr, err := trainer.New(commonArguments(o, dir), m, nil, data.SliceDataset(eval), trainer.Options{Logger: o.logger})
	if err != nil {
		return 0, err
	}
	defer tr.Close()
	met, err := tr.Evaluate(ctx)
	if err != nil {
		return 0, err
	}
	return met["eval_loss"], nil
}

// loraConfig is PEFT's LoraConfig for a causal LM with the flags' r, alpha, dropout and targets.
func loraConfig(o options) (peft.LoraConfig, error) {
	c := peft.DefaultLoraConfig()
	c.R, c.LoraAlpha, c.LoraDropout = o.loraR, o.loraAlpha, o.loraDropout
	var names []string
	for _, t := range strings.Split(o.targets, ",") {
		if t = strings.TrimSpace(t); t != "" {
			names = append(names, t)
		}
	}
	c.TargetModules, c.TargetModulesRegex = peft.CommandLineTargets(names)
	return c, c.Validate()
}

// llamaConfig is the llama-tiny fixture's shape (hidden 64, 2 layers, 4 query and 2 key/value
// heads of 16, SiLU MLP of 128, RoPE θ 10000, untied head) with HF's initializer_range 0.02.
func llamaConfig(vocab, positions int) *llama.Config {
	c := llama.DefaultConfig(llama.TypeLlama)
	c.VocabSize, c.HiddenSize, c.IntermediateSize, c.NumHiddenLayers = vocab, 64, 128, 2
	c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim = 4, 2, 16
	c.MaxPositionEmbeddings = positions
	return c
}

// commonArguments are the settings both phases share: float32 (the pure-Go backend has no
// bfloat16 arithmetic, so bf16 only slows a CPU run down), batches, a cosine schedule.
func commonArguments(o options, dir string) trainer.TrainingArguments {
	a := trainer.DefaultTrainingArguments()
	a.OutputDir, a.Seed = dir, int(o.seed)
	a.PerDeviceTrainBatchSize, a.PerDeviceEvalBatchSize = o.batch, o.batch
	a.GradientAccumulationSteps = o.gradAccum
	a.LRSchedulerType, a.WarmupRatio = trainer.SchedulerCosine, 0.1
	a.LoggingSteps = 10
	if o.quiet {
		a.SetDisableTqdm(true)
	}
	return a
}

// loraArguments: the adapter's learning rate, no weight decay (PEFT's examples train adapters
// without it), held-out evaluation and an adapter checkpoint every so many updates.
func loraArguments(o options, dir string) trainer.TrainingArguments {
	a := commonArguments(o, dir)
	a.MaxSteps, a.LearningRate, a.WeightDecay = o.maxSteps, o.lr, 0
	a.EvalStrategy = trainer.IntervalSteps
	a.SetEvalSteps(float64(o.evalEvery))
	a.SaveStrategy, a.SaveSteps = trainer.SaveSteps, float64(o.saveEvery)
	return a
}

// print writes the run's figures; the perplexity is exp of the held-out loss (mean token
// cross-entropy), as run_clm.py reports it.
func (r *result) print(w io.Writer) {
	ppl := math.Exp
	switch {
	case r.newBase && r.baseSteps > 0:
		fmt.Fprintf(w, "base model: trained in full for %d steps (%s), saved to %s\n", r.baseSteps, r.baseTime.Round(time.Second), r.baseDir)
	case r.newBase:
		fmt.Fprintf(w, "base model: the random initialisation (-base_steps 0), saved to %s\n", r.baseDir)
	default:
		fmt.Fprintf(w, "base model: %s\n", r.baseDir)
	}
	fmt.Fprintf(w, "LoRA on %d layers (%s)\n", len(r.targets), strings.Join(r.targets, ", "))
	fmt.Fprintf(w, "trainable params: %s || all params: %s || trainable%%: %.4f\n",
		thousands(r.trainable), thousands(r.all), 100*float64(r.trainable)/float64(r.all))
	if r.fullOptBytes > 0 {
		fmt.Fprintf(w, "optimizer state: %s bytes with LoRA, %s bytes for full fine-tuning of the same model (%.2f%% less)\n",
			thousands(r.loraOptBytes), thousands(r.fullOptBytes), 100*(1-float64(r.loraOptBytes)/float64(r.fullOptBytes)))
	} else {
		fmt.Fprintf(w, "optimizer state: %s bytes with LoRA\n", thousands(r.loraOptBytes))
	}
	fmt.Fprintf(w, "held-out perplexity: %.2f before (the base model), %.2f after %d LoRA steps (%s): %.2fx lower\n",
		ppl(r.before), ppl(r.after), r.steps, r.loraTime.Round(time.Second), ppl(r.before-r.after))
	fmt.Fprintf(w, "adapter saved to %s; reloaded with peft.Load: perplexity %.4f (adapted %.4f)\n", r.adapterDir, ppl(r.reloaded), ppl(r.after))
	fmt.Fprintf(w, "merged model saved to %s; reloaded with models.Load: perplexity %.4f (held-out loss %.7f, adapted %.7f, difference %.1e)\n",
		r.mergedDir, ppl(r.merged), r.merged, r.after, r.merged-r.after)
}

// thousands formats n with comma separators, as PEFT's print_trainable_parameters does.
func thousands(n int64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
