package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"

	"github.com/gotpu/gotpu/checkpoint"
	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/data/tokenizer"
	"github.com/gotpu/gotpu/examples/internal/gocorpus"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/llama"
	"github.com/gotpu/gotpu/trainer"
	"github.com/gotpu/gotpu/xla"
)

type options struct {
	maxSteps, blockSize, batch, gradAccum, vocab int
	evalEvery, saveEvery, trainBytes, evalBlocks int
	lr, warmupRatio                              float64
	bf16                                         bool
	corpus, modelPath, resume                    string
	outputDir, tokenizerPath, device             string
	numDevices                                   int
	seed                                         uint64
	logger                                       *slog.Logger // nil: slog.Default()
	quiet                                        bool         // no progress bar (tests)
	interruptAt                                  int          // tests: cancel the run after this step, as Ctrl-C does
}

// result is what a run measured.
type result struct {
	trainTokens, evalTokens int
	otherRate               float64 // share of training tokens outside the compact vocabulary
	startStep               int     // the step training began at (the checkpoint's, when resuming)
	firstStep               int     // the first step this process trained
	steps                   int     // the global step at the end
	interrupted             bool
	checkpoint              string // the checkpoint an interrupted run saved
	before, after           float64
	beforeStep              int // the step the "before" evaluation ran at (0: the initial model)
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
	trainDocs, evalDocs, err := gocorpus.Documents(gocorpus.GoRootSrc(), o.corpus, o.trainBytes)
	if err != nil {
		return nil, err
	}
	trainIDs, err := gocorpus.Tokenize(ctx, tok, trainDocs)
	if err != nil {
		return nil, err
	}
	evalIDs, err := gocorpus.Tokenize(ctx, tok, evalDocs)
	if err != nil {
		return nil, err
	}
	vm, err := vocabulary(o, tok, trainIDs)
	if err != nil {
		return nil, err
	}
	train, eval, err := gocorpus.Examples(vm, trainIDs, evalIDs, o.blockSize, o.evalBlocks, o.trainBytes)
	if err != nil {
		return nil, err
	}
	res := &result{trainTokens: len(train) * o.blockSize, evalTokens: len(eval) * o.blockSize, otherRate: vm.OtherRate(trainIDs)}
	log.Info("corpus", "kind", o.corpus, "train_docs", len(trainDocs), "held_out_docs", len(evalDocs),
		"train_blocks", len(train), "eval_blocks", len(eval), "other_token_rate", res.otherRate)

	cfg := xla.DefaultConfig()
	cfg.Device, cfg.NumDevices = o.device, o.numDevices
	rt, err := xla.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer rt.Close()
	model, err := openModel(ctx, rt, o, vm, tok)
	if err != nil {
		return nil, err
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	obs := &observer{res: res, interruptAt: o.interruptAt, cancel: cancel}
	tr, err := trainer.New(trainingArguments(o), model, data.SliceDataset(train), data.SliceDataset(eval),
		trainer.Options{Callbacks: []trainer.Callback{obs}, Logger: o.logger})
	if err != nil {
		return nil, err
	}
	if o.resume == "" {
		// The initial model's held-out loss, logged at step 0: a resumed run finds it in the
		// checkpoint's log history instead.
		if _, err := tr.Evaluate(runCtx); err != nil {
			return nil, err
		}
	}
	_, err = tr.Train(runCtx)
	res.steps = tr.State().GlobalStep
	if errors.Is(err, context.Canceled) {
		res.interrupted = true
		if e, lerr := checkpoint.Latest(o.outputDir); lerr == nil {
			res.checkpoint = e.Dir
		}
		return res, nil
	}
	if err != nil {
		return nil, err
	}
	last, err := tr.Evaluate(ctx)
	if err != nil {
		return nil, err
	}
	res.after = last["eval_loss"]
	res.before, res.beforeStep = math.NaN(), -1
	for _, e := range tr.State().LogHistory {
		if l, ok := e.EvalLoss(); ok {
			res.before, res.beforeStep = l, stepOf(e)
			break
		}
	}
	if err := tr.SaveModel(o.outputDir); err != nil {
		return nil, err
	}
	return res, tr.SaveState()
}

// vocabulary picks the token map: the fine-tuned model's own when -model_name_or_path has one,
// none when that model has the tokenizer's full vocabulary, else a new one from the training
// tokens. It is written to output_dir before training, and a resumed run must find the same.
func vocabulary(o options, tok *tokenizer.Pipeline, trainIDs []uint32) (*gocorpus.VocabMap, error) {
	var vm *gocorpus.VocabMap
	var err error
	if o.modelPath != "" {
		if vm, err = gocorpus.LoadVocabMap(filepath.Join(o.modelPath, gocorpus.VocabFile)); err != nil {
			return nil, err
		}
	} else if vm, err = gocorpus.NewVocabMap(trainIDs, gocorpus.SpecialIDs(tok), o.vocab); err != nil {
		return nil, err
	}
	path := filepath.Join(o.outputDir, gocorpus.VocabFile)
	if o.resume != "" {
		prev, err := gocorpus.LoadVocabMap(path)
		if err != nil {
			return nil, err
		}
		if !prev.Equal(vm) {
			return nil, fmt.Errorf("-resume_from_checkpoint: %s was written for other data, -vocab or -model_name_or_path; "+
				"resume with the flags of the interrupted run", path)
		}
	}
	if vm == nil {
		return nil, nil
	}
	if err := os.MkdirAll(o.outputDir, 0o755); err != nil {
		return nil, err
	}
	return vm, vm.Save(path)
}

// openModel loads -model_name_or_path (any causal LM gotpu reads) or initialises a Llama of the
// llama-tiny fixture's shape, seeded, with the vocabulary's size.
func openModel(ctx context.Context, rt *xla.Runtime, o options, vm *gocorpus.VocabMap, tok *tokenizer.Pipeline) (models.Model, error) {
	need := vm.ModelVocabSize(tok)
	if o.modelPath == "" {
		return models.New(ctx, rt, llamaConfig(need, o.blockSize), models.NewOptions{Seed: o.seed})
	}
	m, err := models.Load(ctx, rt, o.modelPath, models.LoadOptions{})
	if err != nil {
		return nil, err
	}
	if err := gocorpus.CheckModel("-model_name_or_path "+o.modelPath, m, need, o.blockSize); err != nil {
		return nil, err
	}
	return m, nil
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

func trainingArguments(o options) trainer.TrainingArguments {
	a := trainer.DefaultTrainingArguments()
	a.OutputDir, a.MaxSteps, a.Seed = o.outputDir, o.maxSteps, int(o.seed)
	a.PerDeviceTrainBatchSize, a.PerDeviceEvalBatchSize = o.batch, o.batch
	a.GradientAccumulationSteps = o.gradAccum
	a.BF16 = o.bf16
	a.LearningRate, a.WeightDecay = o.lr, 0.1
	a.LRSchedulerType, a.WarmupRatio = trainer.SchedulerCosine, o.warmupRatio
	a.LoggingSteps = 5
	a.EvalStrategy = trainer.IntervalSteps
	a.SetEvalSteps(float64(o.evalEvery))
	a.SaveStrategy, a.SaveSteps = trainer.SaveSteps, float64(o.saveEvery)
	a.ResumeFromCheckpoint = o.resume
	if o.quiet {
		a.SetDisableTqdm(true)
	}
	return a
}

func stepOf(e trainer.LogEntry) int {
	for _, m := range e.Members() {
		if m.Key == "step" {
			if f, ok := m.Value.Float(); ok {
				return int(f)
			}
		}
	}
	return -1
}

// observer records where training began and, for tests, interrupts the run after a given step
// exactly as Ctrl-C does (the context is cancelled; the trainer saves a checkpoint and stops).
type observer struct {
	trainer.BaseCallback
	res         *result
	interruptAt int
	cancel      context.CancelFunc
}

func (c *observer) OnTrainBegin(_ context.Context, e *trainer.Event) error {
	c.res.startStep = e.State.GlobalStep
	return nil
}

func (c *observer) OnStepEnd(_ context.Context, e *trainer.Event) error {
	if c.res.firstStep == 0 {
		c.res.firstStep = e.State.GlobalStep
	}
	if c.interruptAt > 0 && e.State.GlobalStep == c.interruptAt {
		c.cancel()
	}
	return nil
}

func (r *result) print(w io.Writer) {
	if r.interrupted {
		fmt.Fprintf(w, "interrupted at step %d; checkpoint: %s\ncontinue with the same flags plus -resume_from_checkpoint true (or that directory)\n",
			r.steps, r.checkpoint)
		return
	}
	if r.startStep > 0 {
		fmt.Fprintf(w, "resumed at step %d, trained steps %d to %d\n", r.startStep, r.firstStep, r.steps)
	}
	fmt.Fprintf(w, "held-out loss %.3f (perplexity %.1f) at step %d, %.3f (perplexity %.1f) after step %d: perplexity %.1fx lower\n",
		r.before, math.Exp(r.before), r.beforeStep, r.after, math.Exp(r.after), r.steps, math.Exp(r.before-r.after))
}
