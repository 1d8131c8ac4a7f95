package trainer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gotpu/gotpu/checkpoint"
	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/data/tokenizer"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/peft"
	"github.com/gotpu/gotpu/trainer/step"
	"github.com/gotpu/gotpu/xla"
)

// Options are the Trainer's dependencies and choices beyond TrainingArguments.
type Options struct {
	// Runtime is the device runtime to train on; its devices are the replicas unless
	// TrainingArguments.NumDevices asks for fewer. nil: the model's own (models.RuntimeOf: the
	// runtime models.Load or models.New was given); a different runtime from the model's is
	// refused, since the model's weights live on its runtime.
	Runtime *xla.Runtime
	// Collator builds batches; nil picks one for the model: fixed-length blocks for a causal LM
	// (the longest training example), length buckets for a classifier.
	Collator data.Collator
	// Callbacks run in order after gotpu's own bookkeeping at each event.
	Callbacks []Callback
	// ComputeMetrics is HF's compute_metrics (e.g. Accuracy): Evaluate and Predict pass it the
	// logits and labels of the whole set and report what it returns, "eval_"/"test_"-prefixed.
	// nil: only the loss.
	ComputeMetrics ComputeMetrics
	// Logger receives the run's logs; nil means slog.Default().
	Logger *slog.Logger
	// SyncCheckpoints makes each save write its checkpoint before training continues (default:
	// the save is staged to host memory and written in the background).
	SyncCheckpoints bool
	// NonFiniteAt is a fault-injection hook for tests: when it returns true for an update (its
	// 1-based global step), that update's gradients are made non-finite, exercising the skip path
	// (weights and optimizer state unchanged) and max_consecutive_nonfinite. nil in production.
	NonFiniteAt func(step int) bool
	// Lockstep turns the pipeline off, for benchmarks that measure what it saves: batches are
	// read, collated and transferred inside the loop (no prefetch), and each step's results
	// are read as soon as it is dispatched, so host and device take turns. Results are the same.
	Lockstep bool
	// PeftConfig attaches a new LoRA adapter (models/peft) to the model, initialised from
	// TrainingArguments.seed, and trains only it (TRL's peft_config). An adapter attached
	// beforehand (peft.New, peft.Load) is trained the same way without it.
	PeftConfig *peft.LoraConfig
	// Tokenizer is the processing_class: HF's Trainer saves it beside the model in save_model
	// and in every checkpoint-N (tokenizer.json, tokenizer_config.json, chat template, ...), so
	// a saved directory loads and generates on its own. nil: none is saved.
	Tokenizer *tokenizer.Files
}

// Trainer trains and evaluates a models.Model with Hugging Face Trainer semantics. It is not safe
// for concurrent use.
type Trainer struct {
	args      TrainingArguments
	model     models.Model
	train     data.Dataset
	eval      data.Dataset
	rt        *xla.Runtime
	collator  data.Collator
	callbacks Callbacks
	log       *slog.Logger
	metricsFn ComputeMetrics

	replicas int
	stepper  *step.Stepper
	// stepCfg builds the stepper again for the model load_best_model_at_end swaps in.
	stepCfg step.Config
	state   TrainerState
	meter   *Meter
	// newBest is set by an evaluation that produced a new best metric, so that the next
	// checkpoint becomes best_model_checkpoint (HF's _save_checkpoint).
	newBest bool
	// printsLogs is set when the built-in progress callback prints log lines.
	printsLogs bool
	// closers are the built-in callbacks to close when a run ends.
	closers []interface{ Close() error }
	// ckpt is the run's single checkpoint writer (nil without output_dir); lastSaved the step of
	// the last checkpoint handed to it.
	ckpt      *checkpoint.Writer
	lastSaved int
	// loop is the running training loop's totals (nil outside Train).
	loop      *loopState
	syncSaves bool
	nonFinite func(step int) bool
	lockstep  bool
	// tokenizer is written beside the model in SaveModel and checkpoints (Options.Tokenizer).
	tokenizer *tokenizer.Files
	// compiles are the runtime's compile counters at the run's start and last report (compilelog.go).
	compiles compileMarks
}

// New validates the arguments and prepares a Trainer. train and eval may be nil when unused.
func New(args TrainingArguments, model models.Model, train, eval data.Dataset, opts Options) (*Trainer, error) {
	rt, err := models.ResolveRuntime(opts.Runtime, model, "trainer.Options.Runtime")
	if err != nil {
		return nil, err
	}
	opts.Runtime = rt
	if err := args.Finalize(); err != nil {
		return nil, err
	}
	if err := args.Validate(); err != nil {
		return nil, err
	}
	if err := checkEvalData(&args, eval); err != nil { // args_effects.go
		return nil, err
	}
	if opts.PeftConfig != nil {
		// TRL's SFTTrainer(peft_config=...): the trainer attaches a new adapter, drawn from the
		// run's seed, and trains only it.
		if _, ok := peft.Of(model); ok {
			return nil, errors.New("trainer.Options.PeftConfig: the model already has an adapter")
		}
		adapted, err := peft.New(context.Background(), opts.Runtime, model, *opts.PeftConfig, peft.Options{Seed: uint64(args.Seed), Log: opts.Logger})
		if err != nil {
			return nil, fmt.Errorf("trainer.Options.PeftConfig: %w", err)
		}
		model = adapted
	}
	replicas := opts.Runtime.NumDevices()
	if args.NumDevices > 0 {
		if args.NumDevices > replicas {
			return nil, fmt.Errorf("trainer.TrainingArguments.num_devices: %d, but the runtime has %d devices", args.NumDevices, replicas)
		}
		replicas = args.NumDevices
	}
	if err := checkTokenAveraging(&args, replicas); err != nil { // args_effects.go
		return nil, err
	}
	t := &Trainer{
		args: args, model: model, train: train, eval: eval, rt: opts.Runtime,
		collator: opts.Collator, callbacks: Callbacks(opts.Callbacks), log: opts.Logger, metricsFn: opts.ComputeMetrics,
		replicas: replicas, state: NewTrainerState(), lastSaved: -1,
		syncSaves: opts.SyncCheckpoints, nonFinite: opts.NonFiniteAt, lockstep: opts.Lockstep,
		tokenizer: opts.Tokenizer,
	}
	if t.log == nil {
		t.log = slog.Default()
	}
	// Built-in callbacks first, as HF's default callbacks run before user ones.
	lh := &logHistoryCallback{}
	builtin := Callbacks{lh}
	t.closers = append(t.closers, lh)
	if t.args.DisableTqdm == nil || !*t.args.DisableTqdm {
		pc := NewProgressCallback()
		t.log = slog.New(pc.LogHandler(t.log.Handler())) // log records go above the bar, not onto it
		builtin = append(builtin, pc)
		t.printsLogs = true
		t.closers = append(t.closers, pc)
	}
	for _, r := range t.args.ReportTo {
		if r == "tensorboard" || r == "all" {
			tb := NewTensorBoardCallback()
			builtin = append(builtin, tb)
			t.closers = append(t.closers, tb)
			break
		}
	}
	t.callbacks = append(builtin, t.callbacks...)
	if t.collator == nil {
		var err error
		if t.collator, err = defaultCollator(model, train, eval); err != nil {
			return nil, err
		}
	}
	if err := t.checkBudget(); err != nil { // the resource budget (budget.go), before optimizer state and batches
		return nil, err
	}
	opt, err := t.optimizer()
	if err != nil {
		return nil, err
	}
	// HF's set_seed(args.seed): the dropout RNG starts from the seed, so runs repeat exactly and a
	// resumed run continues the saved RNG state (rng_state.safetensors) instead of a random one.
	if err := model.Context().SetRNGStateFromSeed(int64(args.Seed)); err != nil {
		return nil, fmt.Errorf("trainer: seeding the RNG: %w", err)
	}
	t.stepCfg = step.Config{Optimizer: opt, NumReplicas: replicas, BF16: args.BF16,
		Window: stepWindow(&args), MaxConsecutiveNonfinite: args.MaxConsecutiveNonfinite,
		LabelSmoothing: args.LabelSmoothingFactor, GradientCheckpointing: args.GradientCheckpointingOn()}
	if args.NeftuneNoiseAlpha != nil { // HF: None leaves NEFTune off
		t.stepCfg.NEFTuneAlpha = *args.NeftuneNoiseAlpha
	}
	// fsdp / fsdp_config: one process is one host (FSDPPlan's hybrid_shard default).
	fp, err := args.FSDPPlan(replicas, 1)
	if err != nil {
		return nil, err
	}
	if fp.Enabled {
		// accelerate refuses a transformer_layer_cls_to_wrap entry the model has no layer of.
		class := models.LayerClass(model.Config())
		for _, c := range fp.LayerClasses {
			if c != class {
				return nil, fmt.Errorf("trainer.TrainingArguments.fsdp_config: transformer_layer_cls_to_wrap: %q is not a layer of this %s model (its layer class is %q)",
					c, model.Config().ModelType(), class)
			}
		}
		t.stepCfg.FSDP = &step.FSDP{Data: fp.Data, Shard: fp.FSDP, MinNumParams: fp.MinNumParams}
		t.log.Info("gotpu: FSDP", "mesh", fmt.Sprintf("data=%d × fsdp=%d", fp.Data, fp.FSDP), "min_num_params", fp.MinNumParams)
	}
	if t.stepper, err = step.New(opts.Runtime, model, t.stepCfg); err != nil {
		return nil, err
	}
	// PEFT's print_trainable_parameters, for runs that train part of the model (debug otherwise).
	trainable, all := t.ParamCounts()
	level := slog.LevelDebug
	if trainable < all {
		level = slog.LevelInfo
	}
	t.log.Log(context.Background(), level, "parameters", "trainable", trainable, "all", all,
		"trainable_percent", 100*float64(trainable)/float64(max(all, 1)), "optimizer_state_bytes", t.OptimizerStateBytes())
	return t, nil
}

// stepWindow is how many steps may be dispatched between host reads: the logging interval
// (logging points are reads), capped at step.MaxWindow; step.MaxWindow when logging is not by a
// fixed number of steps.
func stepWindow(a *TrainingArguments) int {
	if a.LoggingStrategy == "steps" && a.LoggingSteps >= 1 {
		return min(int(a.LoggingSteps), step.MaxWindow)
	}
	return step.MaxWindow
}

// optimizer maps HF's optim names onto the step package's update rules.
func (t *Trainer) optimizer() (step.Optimizer, error) {
	a := t.args
	o := step.Optimizer{Name: "adamw", Beta1: a.AdamBeta1, Beta2: a.AdamBeta2, Epsilon: a.AdamEpsilon,
		WeightDecay: a.WeightDecay, MaxGradNorm: a.MaxGradNorm}
	switch {
	case a.Adafactor || a.Optim == "adafactor":
		o.Name = "adafactor"
	case a.Optim == "adamw_torch" || a.Optim == "adamw_torch_fused" || a.Optim == "adamw_hf" || a.Optim == "":
	default:
		return step.Optimizer{}, fmt.Errorf("trainer.TrainingArguments.optim: %q is not implemented (adamw_torch, adafactor)", a.Optim)
	}
	return o, o.Validate()
}

// defaultCollator: a causal LM trains on fixed blocks as long as the longest example (one
// compiled shape); a classifier pads to power-of-two buckets up to its longest example.
func defaultCollator(m models.Model, datasets ...data.Dataset) (data.Collator, error) {
	longest := 0
	vocab := 0
	if lm, ok := m.(models.CausalLM); ok {
		vocab = lm.VocabSize()
	}
	for _, ds := range datasets {
		if ds == nil {
			continue
		}
		for i := range ds.Len() {
			ex, err := ds.Get(i)
			if err != nil {
				return nil, err
			}
			longest = max(longest, len(ex.InputIDs))
			for _, id := range ex.InputIDs {
				// An id outside the embedding table would be read as garbage (or clamped) by the
				// device: refuse the data instead.
				if id < 0 || (vocab > 0 && int(id) >= vocab) {
					return nil, fmt.Errorf("trainer: example %d: token id %d is outside the model's vocabulary of %d (wrong tokenizer?)", i, id, vocab)
				}
			}
		}
	}
	if longest == 0 {
		return nil, errors.New("trainer: no examples to size batches from")
	}
	if _, ok := m.(models.CausalLM); ok {
		return data.CausalLMCollator{BlockSize: longest}, nil
	}
	return data.BucketCollator{Buckets: data.DefaultBuckets(longest)}, nil
}

// Args returns the finalized arguments.
func (t *Trainer) Args() TrainingArguments { return t.args }

// State returns the trainer state (global step, log history, ...).
func (t *Trainer) State() *TrainerState { return &t.state }

// NumReplicas is the number of devices the trainer uses.
func (t *Trainer) NumReplicas() int { return t.replicas }

// TrainOutput is what Train returns (HF's TrainOutput).
type TrainOutput struct {
	GlobalStep   int
	TrainingLoss float64
	Metrics      map[string]float64
}

// ErrNonFinite is returned when more than max_consecutive_nonfinite updates in a row had
// non-finite gradients.
var ErrNonFinite = errors.New("training diverged: non-finite gradients")

// runLength derives the run's geometry from the arguments and the dataset.
type runLength struct {
	sampler          data.Sampler
	batchesPerEpoch  int // micro-batches (global) per epoch
	updatesPerEpoch  int
	maxSteps, epochs int
}

func (t *Trainer) length() (runLength, error) {
	if t.train == nil || t.train.Len() == 0 {
		return runLength{}, errors.New("trainer: no training data")
	}
	seed := uint64(t.args.Seed)
	if t.args.DataSeed != nil {
		seed = uint64(*t.args.DataSeed)
	}
	s := data.Sampler{NumExamples: t.train.Len(), GlobalBatch: t.args.PerDeviceTrainBatchSize * t.replicas,
		Seed: seed, Shuffle: true, DropLast: t.args.DataloaderDropLast}
	if err := s.Validate(); err != nil {
		return runLength{}, err
	}
	l := runLength{sampler: s, batchesPerEpoch: s.BatchesPerEpoch()}
	l.updatesPerEpoch = t.args.UpdateStepsPerEpoch(l.batchesPerEpoch)
	l.maxSteps = t.args.NumTrainingSteps(l.updatesPerEpoch)
	l.epochs = t.args.EpochsToRun(l.updatesPerEpoch)
	return l, nil
}

// Close releases the trainer's built-in callbacks (TensorBoard event file, progress bar). Train
// calls it when it ends; calling it again is harmless.
func (t *Trainer) Close() error {
	var errs []error
	for _, c := range t.closers {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// flopsPerToken estimates training FLOPs per token as 6 × parameters (the attention term needs
// the architecture's dimensions; MFU is then a slight underestimate). A frozen parameter (a LoRA
// run's base) costs 4, not 6: the forward pass and the input gradients go through it, but no
// gradient of its own is computed.
func (t *Trainer) flopsPerToken() float64 {
	n := 0
	for _, p := range t.model.Params() {
		n += p.NumElements()
	}
	frozen := 0
	if f, ok := t.model.(models.Frozen); ok {
		for _, p := range f.FrozenParams() {
			frozen += p.NumElements()
		}
	}
	return TrainingFLOPsPerToken(n, 0, 0, 0) + 4*float64(frozen)
}

// nonEmbeddingParams counts parameters outside embedding tables, as HF's
// num_parameters(exclude_embeddings=True) does for total_flos.
func (t *Trainer) nonEmbeddingParams() int64 {
	var n int64
	for _, p := range allParams(t.model) {
		if strings.Contains(p.Name, "embed") || strings.Contains(p.Name, ".wte.") || strings.Contains(p.Name, ".wpe.") ||
			strings.HasPrefix(p.Name, "wte.") || strings.HasPrefix(p.Name, "wpe.") {
			continue
		}
		n += int64(p.NumElements())
	}
	return n
}

// allParams are the model's trained parameters and its frozen ones (a LoRA run's base weights),
// which every token's forward and backward pass goes through all the same.
func allParams(m models.Model) []models.Param {
	ps := m.Params()
	if f, ok := m.(models.Frozen); ok {
		ps = append(ps, f.FrozenParams()...)
	}
	return ps
}

// ParamCounts are the trained parameters and all of them (PEFT's print_trainable_parameters).
func (t *Trainer) ParamCounts() (trainable, all int64) {
	for _, p := range t.model.Params() {
		trainable += int64(p.NumElements())
	}
	for _, p := range allParams(t.model) {
		all += int64(p.NumElements())
	}
	return trainable, all
}

// OptimizerStateBytes is the size of the optimizer state the trainer keeps per replica (AdamW's
// two float32 moments per trained parameter, Adafactor's factored moments): with a LoRA adapter,
// the adapter's only.
func (t *Trainer) OptimizerStateBytes() int64 { return t.stepper.OptimizerStateBytes() }

// Compilations is how many distinct programs (graph × input shapes: gradient, update and
// evaluation programs) the trainer's stepper has compiled so far, and the seconds their first
// runs took. A run whose batches keep one shape compiles each program once, whatever its length:
// the proof that nothing recompiled.
func (t *Trainer) Compilations() (int, float64) { return t.stepper.Compilations() }

// Train runs the training loop. Cancelling ctx stops it after the current step.
func (t *Trainer) Train(ctx context.Context) (out TrainOutput, err error) {
	defer xla.Recover(&err, "trainer.Train")
	t.compiles.begin(t.rt)
	defer func() {
		if cerr := t.Close(); err == nil {
			err = cerr
		}
	}()
	l, err := t.length()
	if err != nil {
		return TrainOutput{}, err
	}
	sched, err := t.args.Schedule(l.maxSteps)
	if err != nil {
		return TrainOutput{}, err
	}
	flow := t.args.Flow(l.maxSteps)
	if t.args.OutputDir != "" {
		// The single writer of this host; it removes the leftovers of crashed saves first.
		limit := 0
		if t.args.SaveTotalLimit != nil {
			limit = *t.args.SaveTotalLimit
		}
		if t.ckpt, err = checkpoint.NewWriter(checkpoint.WriterConfig{OutputDir: t.args.OutputDir,
			SaveTotalLimit: limit, Sync: t.syncSaves, Logger: t.log}); err != nil {
			return TrainOutput{}, err
		}
		defer func() {
			if cerr := t.ckpt.Close(); err == nil && cerr != nil {
				err = cerr
			}
			t.ckpt = nil
		}()
	}
	loaderState := data.State{Seed: l.sampler.Seed}
	var totalLoss float64 // sum of step losses (HF's tr_loss over the run)
	resumeDir, err := t.resolveResume()
	if err != nil {
		return TrainOutput{}, err
	}
	if resumeDir != "" {
		run, err := t.resume(resumeDir, l.sampler.GlobalBatch)
		if err != nil {
			return TrainOutput{}, err
		}
		loaderState, totalLoss = t.resumeLoaderState(run.Loader), run.TotalLoss
		t.lastSaved = t.state.GlobalStep
	}
	t.state.ComputeSteps(&t.args, l.maxSteps)
	t.state.MaxSteps, t.state.NumTrainEpochs = l.maxSteps, l.epochs
	bs := t.args.PerDeviceTrainBatchSize
	t.state.TrainBatchSize = &bs
	t.state.IsLocalProcessZero, t.state.IsWorldProcessZero = true, true
	if resumeDir == "" {
		epoch0 := 0.0
		t.state.Epoch = &epoch0
	}

	prefetch := 2
	if t.args.DataloaderPrefetchFactor != nil {
		prefetch = *t.args.DataloaderPrefetchFactor
	}
	if t.lockstep {
		prefetch = 0
	}
	// Cancelling ctx (SIGTERM) stops the run between updates, never inside one: the loader and
	// the step run under a context that only ends with Train, so the current update completes
	// and the checkpoint saved on the way out is exact.
	runCtx, stopRun := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRun()
	if err := t.stepper.Begin(t.state.GlobalStep, sched.LR); err != nil {
		return TrainOutput{}, err
	}
	// The loader's workers read, collate and put each batch on the devices while steps run
	// (torch_xla's MpDeviceLoader): Dispatch finds its inputs there.
	loader, err := data.NewLoader(runCtx, data.LoaderConfig{
		Dataset: t.train, Collator: t.collator, Sampler: l.sampler, NumReplicas: t.replicas,
		PrefetchFactor: prefetch, NumWorkers: t.args.DataloaderNumWorkers, DevicePrefetch: t.args.DevicePrefetchSize,
		Transfer: func(_ context.Context, s *data.Step) error {
			db, err := t.stepper.TransferBatch(s.Shards)
			s.Device = db
			return err
		},
		Release: func(s *data.Step) {
			if db, ok := s.Device.(*step.DeviceBatch); ok {
				db.Release()
			}
		},
	}, loaderState)
	if err != nil {
		return TrainOutput{}, err
	}
	defer loader.Close()

	// The backend and plugin are named here so that a run's log says where it ran: a PJRT run
	// never falls back to the pure-Go backend silently.
	backend := t.rt.Kind()
	if g := t.rt.GoBackend(); g != "" {
		backend += "/" + g
	}
	plugin := "none"
	if p, ok := t.rt.Plugin(); ok {
		plugin = p.Path
	}
	t.log.Info("training", "examples", t.train.Len(), "epochs", l.epochs, "replicas", t.replicas,
		"per_device_batch", bs, "accumulation", t.args.GradientAccumulationSteps,
		"global_batch", t.args.GlobalTrainBatchSize(t.replicas), "steps", l.maxSteps,
		"backend", backend, "plugin", plugin)
	control := TrainerControl{}
	ev := &Event{Args: &t.args, State: &t.state, Control: &control}
	if err := t.callbacks.OnTrainBegin(ctx, ev); err != nil {
		return TrainOutput{}, err
	}
	if t.args.EvalOnStart {
		// HF's eval_on_start: one evaluation before the first update (a sanity check of the
		// evaluation loop and the starting loss), through _evaluate, so it logs like any
		// evaluation but never competes for best_metric.
		if t.eval == nil || t.eval.Len() == 0 {
			return TrainOutput{}, errors.New("trainer: eval_on_start: no evaluation data")
		}
		if _, err := t.evaluate(ctx, ev, false); err != nil {
			return TrainOutput{}, fmt.Errorf("trainer: eval_on_start: %w", err)
		}
	}

	start := time.Now()
	t.meter = NewMeter(MeterConfig{FLOPsPerToken: t.flopsPerToken(), PeakFLOPS: t.peakFLOPS(),
		NumDevices: t.replicas, IncludeTokensPerSecond: true}, start)
	ls := &loopState{totalLoss: totalLoss, lastStats: t.rt.Stats(), lastStatsValid: true}
	t.loop = ls
	defer func() { t.loop = nil }()
	var waitSeen float64
	ga := max(t.args.GradientAccumulationSteps, 1)
	for t.state.GlobalStep < l.maxSteps && !control.ShouldTrainingStop {
		if err := ctx.Err(); err != nil {
			t.log.Warn("training interrupted", "step", t.state.GlobalStep, "reason", err)
			break
		}
		// Gather this update's micro-batches: gradient_accumulation_steps of them, or fewer at the
		// end of an epoch (transformers >= 4.46 updates on a partial accumulation there).
		var micro []*step.DeviceBatch
		var epochEnded bool
		samples, tokens, inputIDs := 0, 0, 0
		for len(micro) < ga {
			s, err := loader.Next(runCtx)
			if err != nil {
				for _, db := range micro {
					db.Release()
				}
				return TrainOutput{}, err
			}
			db := s.Device.(*step.DeviceBatch)
			micro = append(micro, db)
			samples += db.Samples
			tokens += db.Tokens
			inputIDs += inputIDCount(s.Shards)
			if loader.State().Batch == 0 {
				epochEnded = true
				break
			}
		}
		if len(micro) == 0 {
			break
		}
		if t.nonFinite != nil && t.nonFinite(t.state.GlobalStep+1) {
			t.stepper.PoisonNextStep() // test hook: see Options.NonFiniteAt
		}
		p, err := t.stepper.Dispatch(runCtx, micro)
		if err != nil {
			return TrainOutput{}, err
		}
		ls.pending = append(ls.pending, pendingHost{samples: samples, tokens: tokens, p: p})
		if t.lockstep {
			if err := t.sync(runCtx, ls); err != nil {
				return TrainOutput{}, err
			}
		}
		if res := t.stepper.TakeCollected(); len(res) > 0 { // a full window made Dispatch read
			if err := t.absorb(ls, res); err != nil {
				return TrainOutput{}, err
			}
		}
		stats := loader.Stats()
		t.meter.AddInputWait(time.Duration((stats.InputWaitSeconds - waitSeen) * float64(time.Second)))
		waitSeen = stats.InputWaitSeconds
		t.state.GlobalStep++
		pos := loader.State()
		epoch := float64(pos.Epoch) + float64(pos.Batch)/float64(l.batchesPerEpoch)
		t.state.Epoch = &epoch
		t.state.NumInputTokensSeen += tokensSeen(t.args.IncludeNumInputTokensSeen, inputIDs, tokens)
		ls.flosTokens += int64(tokens)

		control = flow.StepEnd(t.state.GlobalStep)
		ev.CompletedSteps = ls.completed(t.state.GlobalStep)
		if err := t.callbacks.OnStepEnd(ctx, ev); err != nil {
			return TrainOutput{}, err
		}
		if epochEnded {
			ec := flow.EpochEnd(epoch)
			control.ShouldLog = control.ShouldLog || ec.ShouldLog
			control.ShouldEvaluate = control.ShouldEvaluate || ec.ShouldEvaluate
			control.ShouldSave = control.ShouldSave || ec.ShouldSave
			if err := t.callbacks.OnEpochEnd(ctx, ev); err != nil {
				return TrainOutput{}, err
			}
		}
		if control.ShouldLog {
			// Sync point: the losses, norms and flags of every step since the last read.
			if err := t.sync(runCtx, ls); err != nil {
				return TrainOutput{}, err
			}
			ev.CompletedSteps = t.state.GlobalStep
		}
		if control.ShouldLog && ls.intervalSteps > 0 {
			entry := NewLogEntry(
				JSONMember{"loss", JSONFloatValue(PyRound(ls.intervalLoss/float64(ls.intervalSteps), 4))},
			)
			if t.args.MaxGradNorm > 0 {
				entry = entry.With("grad_norm", JSONFloatValue(ls.lastGradNorm))
			}
			entry = entry.With("learning_rate", JSONFloatValue(sched.LoggedLR(t.state.GlobalStep)))
			// gotpu's throughput metrics follow HF's keys (tokens/s, step time, input wait, compiles,
			// MFU), measured up to the last step's completion; then the pipeline's figures.
			for _, m := range t.meter.Interval(ls.lastEnd).Members() {
				entry = entry.With(m.Key, m.Value)
			}
			for _, m := range t.pipelineMembers(ls) {
				entry = entry.With(m.Key, m.Value)
			}
			if err := t.logEntry(ctx, ev, entry); err != nil {
				return TrainOutput{}, err
			}
			ls.intervalLoss, ls.intervalSteps = 0, 0
		}
		// An interruption skips or abandons a due evaluation, never the checkpoint after it: the
		// save is what a restart needs, and evaluating takes long enough to be interrupted often.
		if control.ShouldEvaluate && t.eval != nil && ctx.Err() == nil {
			if _, err := t.evaluate(ctx, ev, true); err != nil {
				if ctx.Err() == nil {
					return TrainOutput{}, err
				}
				t.log.Warn("evaluation interrupted", "step", t.state.GlobalStep, "reason", ctx.Err())
			}
		}
		if control.ShouldSave {
			// Not abandoned when ctx ends: a save that was due is what a restart resumes from.
			if err := t.saveCheckpoint(context.WithoutCancel(ctx), ev, loader, l); err != nil {
				return TrainOutput{}, err
			}
		}
	}
	// The end: read what is still on the device (train_loss needs every step's loss).
	if err := t.sync(runCtx, ls); err != nil {
		return TrainOutput{}, err
	}
	totalLoss = ls.totalLoss
	if ctx.Err() != nil && t.ckpt != nil && t.args.SaveStrategy != "no" && t.lastSaved != t.state.GlobalStep {
		// Preemption: save where the run stopped, so a restart loses nothing.
		if err := t.saveCheckpoint(context.WithoutCancel(ctx), ev, loader, l); err != nil {
			return TrainOutput{}, err
		}
	}
	if t.ckpt != nil {
		if err := t.ckpt.Wait(); err != nil {
			return TrainOutput{}, err
		}
	}
	runtime := time.Since(start).Seconds()
	trainLoss := 0.0
	if t.state.GlobalStep > 0 {
		trainLoss = totalLoss / float64(t.state.GlobalStep)
	}
	t.state.TotalFlos += EstimatedTotalFLOS(ls.flosTokens, t.nonEmbeddingParams())
	// HF's summary: speed_metrics("train", ...), then total_flos and train_loss.
	summary := t.meter.Summary(time.Now()).
		With("total_flos", JSONFloatValue(t.state.TotalFlos)).
		With("train_loss", JSONFloatValue(trainLoss))
	metrics := map[string]float64{}
	for _, m := range summary.Members() {
		if f, ok := m.Value.Float(); ok {
			metrics[m.Key] = f
		}
	}
	if err := t.logEntry(ctx, ev, summary); err != nil {
		return TrainOutput{}, err
	}
	if err := t.callbacks.OnTrainEnd(ctx, ev); err != nil {
		return TrainOutput{}, err
	}
	if ad, ok := peft.Of(t.model); ok && t.args.LoadBestModelAtEnd && t.state.BestModelCheckpoint != nil {
		// An adapter run's checkpoints hold the adapter only: its best tensors replace the current
		// ones in place, under the same frozen base, and the stepper keeps working on them.
		if err := ad.LoadWeights(*t.state.BestModelCheckpoint); err != nil {
			return TrainOutput{}, fmt.Errorf("trainer: load_best_model_at_end: %w", err)
		}
		t.log.Info("loaded the best adapter", "checkpoint", *t.state.BestModelCheckpoint, "metric", t.args.MetricForBestModel)
	} else if t.args.LoadBestModelAtEnd && t.state.BestModelCheckpoint != nil {
		best, err := models.Load(ctx, t.rt, *t.state.BestModelCheckpoint, models.LoadOptions{})
		if err != nil {
			return TrainOutput{}, fmt.Errorf("trainer: load_best_model_at_end: %w", err)
		}
		// Evaluate and Predict run through the stepper, which holds the model it was built for:
		// it must be rebuilt around the best model, or they would go on using the last weights.
		st, err := step.New(t.rt, best, t.stepCfg)
		if err != nil {
			return TrainOutput{}, fmt.Errorf("trainer: load_best_model_at_end: %w", err)
		}
		t.log.Info("loaded the best model", "checkpoint", *t.state.BestModelCheckpoint, "metric", t.args.MetricForBestModel)
		t.model, t.stepper = best, st
	}
	t.log.Info("training done", "steps", t.state.GlobalStep, "train_loss", trainLoss, "runtime_s", runtime,
		"input_wait_s", loader.Stats().InputWaitSeconds)
	t.logCompileSummary()
	return TrainOutput{GlobalStep: t.state.GlobalStep, TrainingLoss: trainLoss, Metrics: metrics}, ctx.Err()
}

// logEntry appends epoch and step as HF's Trainer.log does, records the entry in log_history,
// and runs the OnLog callbacks.
func (t *Trainer) logEntry(ctx context.Context, ev *Event, entry LogEntry) error {
	if t.state.Epoch != nil {
		entry = entry.With("epoch", JSONFloatValue(*t.state.Epoch))
	}
	entry = t.withTokensSeen(entry)
	entry = entry.With("step", JSONIntValue(int64(t.state.GlobalStep)))
	t.state.LogHistory = append(t.state.LogHistory, entry)
	attrs := []any{}
	for _, m := range entry.Members() {
		if f, ok := m.Value.Float(); ok {
			attrs = append(attrs, m.Key, f)
		}
	}
	// With the progress callback printing log lines to the console, slog gets them at debug level
	// so they are not shown twice.
	level := slog.LevelInfo
	if t.printsLogs {
		level = slog.LevelDebug
	}
	t.log.Log(ctx, level, "log", attrs...)
	ev.Logs = entry
	defer func() { ev.Logs = LogEntry{} }()
	return t.callbacks.OnLog(ctx, ev)
}

// runState is the loop's position for a checkpoint.
func (t *Trainer) runState(loader *data.Loader, l runLength, totalLoss float64) runState {
	return runState{Loader: loader.State(), GlobalBatch: l.sampler.GlobalBatch, TotalLoss: totalLoss, Replicas: t.replicas}
}

// saveCheckpoint stages output_dir/checkpoint-<step> in host memory and hands it to the writer,
// which commits it atomically (in the background unless Options.SyncCheckpoints): the model
// (HF layout), optimizer state, RNG state, trainer_state.json, training_args.json,
// scheduler.json and gotpu_state.json (loader position). OnSave runs once the snapshot is taken.
//
// It is a sync point: the state and every dispatched step's results are read together (one
// blocking read), and the results folded into the totals the checkpoint records.
func (t *Trainer) saveCheckpoint(ctx context.Context, ev *Event, loader *data.Loader, l runLength) error {
	if t.ckpt == nil {
		return errors.New("trainer: saving a checkpoint needs output_dir")
	}
	dir := filepath.Join(t.args.OutputDir, checkpoint.DirName(t.state.GlobalStep))
	if t.newBest {
		t.state.BestModelCheckpoint = &dir
		t.newBest = false
	}
	var snap checkpoint.Snapshot
	if t.stepCfg.FSDP != nil {
		// Sharded state is staged tensor by tensor while the writer writes (stage.go): Save
		// returns once it is staged, before the next step donates the shards.
		src, err := t.stepper.StateSource(ctx)
		if err != nil {
			return fmt.Errorf("trainer: checkpoint of step %d: %w", t.state.GlobalStep, err)
		}
		if err := t.absorb(t.loop, t.stepper.TakeCollected()); err != nil {
			return err
		}
		t.callbacks.SaveStates(&t.state)
		if snap, err = t.stagedSnapshot(src, t.runState(loader, l, t.loop.totalLoss)); err != nil {
			return err
		}
	} else {
		st, err := t.stepper.ExportState(ctx)
		if err != nil {
			return fmt.Errorf("trainer: checkpoint of step %d: %w", t.state.GlobalStep, err)
		}
		if err := t.absorb(t.loop, t.stepper.TakeCollected()); err != nil {
			return err
		}
		t.callbacks.SaveStates(&t.state)
		if snap, err = t.snapshot(st, t.runState(loader, l, t.loop.totalLoss)); err != nil {
			return err
		}
	}
	if err := t.ckpt.Save(ctx, snap); err != nil {
		return err
	}
	t.lastSaved = t.state.GlobalStep
	ev.CheckpointDir = dir
	defer func() { ev.CheckpointDir = "" }()
	return t.callbacks.OnSave(ctx, ev)
}

// Model returns the trained model (the best one after load_best_model_at_end).
func (t *Trainer) Model() models.Model { return t.model }

// SaveModel writes the model as an HF model directory (HF's trainer.save_model).
func (t *Trainer) SaveModel(dir string) error {
	if err := t.model.Save(dir, models.SaveOptions{}); err != nil {
		return fmt.Errorf("trainer: saving the model to %s: %w", dir, err)
	}
	return t.saveTokenizer(dir)
}

// SaveState writes trainer_state.json into output_dir (HF's trainer.save_state).
func (t *Trainer) SaveState() error {
	// 0777 less the umask: internal/atomicfile's policy, the one of models and checkpoints.
	if err := os.MkdirAll(t.args.OutputDir, 0o777); err != nil {
		return fmt.Errorf("trainer: %w", err)
	}
	return t.state.Save(filepath.Join(t.args.OutputDir, "trainer_state.json"))
}
