package trainer

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gotpu/gotpu/internal/membudget"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/xla"
)

// ErrOverBudget is wrapped by the error of a run that does not fit in memory (*BudgetError).
var ErrOverBudget = errors.New("over the memory budget")

// BudgetRequest describes a training run to EstimateMemory and CheckBudget.
type BudgetRequest struct {
	// Model is the config of the model to train (required): only its dimensions are read.
	Model models.Config
	// Args are the run's arguments: per_device_train/eval_batch_size,
	// gradient_accumulation_steps, bf16, optim (or adafactor), dataloader_prefetch_factor and
	// device_prefetch_size are read.
	Args TrainingArguments
	// Replicas is the number of devices the step runs on; 0 means the runtime's (CheckBudget),
	// or 1 (EstimateMemory).
	Replicas int
	// SeqLen is the longest padded sequence of a batch (block_size, max_seq_length); 0 means the
	// model's maximum (n_positions, max_position_embeddings), which overestimates long-context
	// models: pass it when known.
	SeqLen int
	// TrainExamples is the training set's size (0: unknown); the global training batch is checked
	// against it.
	TrainExamples int
	// EvalExamples is the evaluation set's size: 0 means there is none (evaluation is not
	// counted), negative that its size is unknown. The evaluation batch is clipped to it, as
	// evaluation batches never exceed the set.
	EvalExamples int
	// ParamBytes is the size of a parameter element: 4 for float32 variables (0 means 4), 2 for
	// a model loaded as bfloat16 or float16.
	ParamBytes int
	// OnHost says the devices are the host's memory (the pure-Go backend); CheckBudget sets it
	// from the runtime.
	OnHost bool
	// TrainableParams is the number of trained parameter elements when only some are trained (a
	// LoRA adapter's, float32, beside a frozen base the config describes); 0: all of them.
	// Gradients and optimizer state are counted for these only.
	TrainableParams int64
	// Allocated is how many of the estimated bytes are already allocated on the host and so no
	// longer counted as available (trainer.New passes the model's parameters on the pure-Go
	// backend).
	Allocated int64
	// HostAvailable, when positive, replaces the measured host memory: a service that divides a
	// machine between jobs gives each its share.
	HostAvailable int64
}

// MemoryEstimate is a run's estimated memory in bytes, by part.
type MemoryEstimate struct {
	// Per replica.
	Parameters, Gradients, Optimizer, Activations int64
	// ActivationsFromEval is set when the evaluation batch, not the training batch, decides
	// Activations.
	ActivationsFromEval bool
	// Inputs are the host's batches in flight.
	Inputs int64
	// Replicas is the number of devices.
	Replicas int
	// Host is what the host must hold: everything, times Replicas but the inputs, on the pure-Go
	// backend; the inputs on a PJRT device. Device is what each PJRT device must hold (0 on the
	// pure-Go backend).
	Host, Device int64
}

// BudgetError is the error of a run that does not fit: what it needs, what is available and the
// setting to change. errors.Is(err, ErrOverBudget) matches it.
type BudgetError struct {
	Estimate MemoryEstimate
	// Need and Available are host bytes (Need less BudgetRequest.Allocated).
	Need, Available int64
	// Source names what bounded Available: "MemAvailable", "cgroup memory.max", "RLIMIT_AS",
	// "HostAvailable"…
	Source string
	// Setting is what to change first, in HF's names ("per_device_train_batch_size or block_size").
	Setting string
}

func (e *BudgetError) Error() string {
	est := e.Estimate
	g := func(b int64) string { return fmt.Sprintf("%.1f", float64(b)/(1<<30)) }
	parts := fmt.Sprintf("parameters %s, gradients %s, optimizer %s, activations %s", g(est.Parameters), g(est.Gradients),
		g(est.Optimizer), g(est.Activations))
	if est.Replicas > 1 {
		parts += fmt.Sprintf(" per replica × %d replicas", est.Replicas)
	}
	parts += ", input batches " + g(est.Inputs)
	return fmt.Sprintf("trainer: %v: the model and batch need about %s (%s) but %s are available on the host (%s): %s",
		ErrOverBudget, membudget.GiB(e.Need), parts, membudget.GiB(e.Available), e.Source, e.Setting)
}

// Unwrap returns ErrOverBudget.
func (e *BudgetError) Unwrap() error { return ErrOverBudget }

// EstimateMemory estimates req's run: the resource budget that trainer.New checks (CheckBudget)
// before it allocates optimizer state or reads a batch, and that a service may check itself with
// a job's config and arguments before it accepts the job. An error names the config field whose
// dimensions are absurd (models.ErrTooLarge), or the argument whose product overflows.
//
// What is estimated, per replica:
//   - parameters: the config's parameter count (models.EstimateFootprint, exact: it equals the
//     sum of Params()) × the variables' element size (4, or 2 for a model loaded as bfloat16);
//   - gradients: one float32 set, two with gradient_accumulation_steps > 1 (the accumulators
//     plus the micro-batch's);
//   - optimizer state: AdamW's two moments in the parameters' dtype when that is bfloat16 or
//     float16 (4 bytes a parameter, as torch keeps them), else float32 (8 bytes), or Adafactor's
//     float32 factored second moments (a row and a column vector per matrix);
//   - activations: models.Footprint.ActivationBytes for per_device_train_batch_size sequences of
//     the longest padded length (on a PJRT device bf16 halves all but the float32 logits and
//     loss; gotpu's pure-Go backend computes in float32, where bf16 saves little), or for the
//     evaluation batch if that is larger;
//   - input batches: the batches in flight on the host (dataloader_prefetch_factor +
//     device_prefetch_size + the one in use), 16 bytes a token and 24 an example.
//
// On the pure-Go backend the devices are the host: each virtual device holds its own copy of the
// parameters, gradients, optimizer state and activations (the step is replicated), and all of it
// plus the input batches is compared with the host's available memory (internal/membudget:
// MemAvailable, bounded by the cgroup limit and RLIMIT_AS). On a PJRT device only the input
// batches are checked against the host: the PJRT plugins gotpu loads (go-xla) do not report a
// device's free memory, so the device side is not checked rather than guessed.
//
// Known error: parameters, gradients and optimizer state are exact; activations are an estimate
// of what GoMLX's reverse-mode graph keeps, calibrated to be 4-20% above the peak RSS measured
// on the pure-Go backend (models.Footprint.ActivationBytes) and higher under XLA, which fuses
// and rematerialises more. Memory taken by other processes after the check is not foreseen:
// fitting is necessary, not sufficient.
func EstimateMemory(req BudgetRequest) (MemoryEstimate, error) {
	if req.Model == nil {
		return MemoryEstimate{}, errors.New("trainer.BudgetRequest.Model: nil")
	}
	fp, err := models.EstimateFootprint(req.Model)
	if err != nil {
		return MemoryEstimate{}, fmt.Errorf("trainer: %w", err)
	}
	a := req.Args
	replicas := int64(max(req.Replicas, 1))
	paramBytes := int64(req.ParamBytes)
	if paramBytes <= 0 {
		paramBytes = 4
	}
	seq := int64(req.SeqLen)
	if seq <= 0 {
		seq = fp.MaxPositions
	}
	// bf16 halves the compute activations on a PJRT device. gotpu's pure-Go backend computes in
	// float32 and converts, so there bf16 saves little (measured: 908 MB against 976 MB).
	compute := int64(4)
	if a.BF16 && !req.OnHost {
		compute = 2
	}
	var c membudget.Acc
	est := MemoryEstimate{Replicas: int(replicas)}
	est.Parameters = c.Mul(fp.Params, paramBytes)
	trained := fp.Params
	if req.TrainableParams > 0 {
		// An adapter: float32 tensors beside the frozen base, the only ones with gradients and
		// optimizer state (Adafactor's factored state is bounded by AdamW's there).
		trained = req.TrainableParams
		est.Parameters = c.Add(est.Parameters, c.Mul(trained, 4))
	}
	gradSets := int64(1)
	if a.GradientAccumulationSteps > 1 {
		gradSets = 2
	}
	est.Gradients = c.Mul(trained, 4, gradSets)
	switch {
	case req.TrainableParams > 0:
		est.Optimizer = c.Mul(trained, 8)
	case a.Adafactor || a.Optim == "adafactor":
		est.Optimizer = c.Mul(fp.AdafactorState, 4)
	case paramBytes == 2:
		// torch.optim.AdamW keeps a bf16 (float16) parameter's moments in its dtype (step.Stepper
		// does too): 2 moments × 2 bytes.
		est.Optimizer = c.Mul(fp.Params, 4)
	default:
		est.Optimizer = c.Mul(fp.Params, 8)
	}

	trainBatch := int64(max(a.PerDeviceTrainBatchSize, 1))
	evalBatch := int64(max(a.PerDeviceEvalBatchSize, 1))
	if req.EvalExamples > 0 {
		evalBatch = min(evalBatch, (int64(req.EvalExamples)+replicas-1)/replicas)
	}
	trainAct, ok1 := fp.ActivationBytes(trainBatch, seq, compute, true)
	if a.GradientCheckpointingOn() {
		trainAct, ok1 = fp.CheckpointedActivationBytes(trainBatch, seq, compute)
	}
	evalAct, ok2 := fp.ActivationBytes(evalBatch, seq, compute, false)
	if req.EvalExamples == 0 {
		evalAct, ok2, evalBatch = 0, true, 0
	}
	if !ok1 || !ok2 {
		return MemoryEstimate{}, overflowError(a)
	}
	est.Activations = trainAct
	if evalAct > trainAct {
		est.Activations, est.ActivationsFromEval = evalAct, true
	}

	prefetch := int64(2)
	if a.DataloaderPrefetchFactor != nil {
		prefetch = int64(max(*a.DataloaderPrefetchFactor, 0))
	}
	inFlight := c.Add(prefetch, int64(max(a.DevicePrefetchSize, 0)), 1)
	perExample := c.Add(c.Mul(seq, 16), 24)
	est.Inputs = c.Mul(inFlight, max(trainBatch, evalBatch), replicas, perExample)

	perReplica := c.Add(est.Parameters, est.Gradients, est.Optimizer, est.Activations)
	if req.OnHost {
		est.Host = c.Add(c.Mul(perReplica, replicas), est.Inputs)
	} else {
		est.Device, est.Host = perReplica, est.Inputs
	}
	if c.Overflowed() {
		return MemoryEstimate{}, overflowError(a)
	}
	return est, nil
}

func overflowError(a TrainingArguments) error {
	return &FieldError{Struct: "TrainingArguments", Field: "per_device_train_batch_size", Kind: ErrInvalidArgument,
		Msg: fmt.Sprintf("%d (per_device_eval_batch_size %d): the memory of a batch overflows int64",
			a.PerDeviceTrainBatchSize, a.PerDeviceEvalBatchSize)}
}

// CheckBudget checks req's run against rt and the host before anything is allocated: the global
// batch against the training set, then the memory estimate (EstimateMemory) against the host's
// available memory.
//
// The global batch, per_device_train_batch_size × replicas, may not exceed the training set.
// Hugging Face's DataLoader would yield one smaller batch; gotpu gives every step the same shape
// (even_batches), so such a batch would repeat examples within itself, and a batch of 10^9 on 20
// examples would allocate gigabytes of indices before the first step. It is refused, naming the
// largest per-device batch that fits.
//
// CheckBudget fills Replicas (when 0) and OnHost from rt. The error is a *FieldError for the
// batch (ErrInvalidArgument), a *BudgetError (ErrOverBudget) for memory, or names the config
// field whose dimensions are absurd (models.ErrTooLarge). Architectures without a footprint
// (models.ErrUnsupported) skip the memory comparison. The estimate is returned whenever it could
// be computed, for logging.
func CheckBudget(rt *xla.Runtime, req BudgetRequest) (MemoryEstimate, error) {
	if rt == nil {
		return MemoryEstimate{}, errors.New("trainer.CheckBudget: nil *xla.Runtime")
	}
	if req.Replicas <= 0 {
		req.Replicas = rt.NumDevices()
	}
	req.OnHost = rt.Kind() == xla.DeviceGo
	host := membudget.Host{Available: req.HostAvailable, Known: true, Source: "HostAvailable"}
	if req.HostAvailable <= 0 {
		host = membudget.Probe()
	}
	return checkBudget(req, host)
}

// checkBudget is CheckBudget with the host's memory given (tests, the fuzz target).
func checkBudget(req BudgetRequest, host membudget.Host) (MemoryEstimate, error) {
	if err := checkBatch(req); err != nil {
		return MemoryEstimate{}, err
	}
	est, err := EstimateMemory(req)
	if errors.Is(err, models.ErrUnsupported) {
		return MemoryEstimate{}, nil // an architecture without a footprint: nothing to compare
	}
	if err != nil {
		return MemoryEstimate{}, err
	}
	if !host.Known {
		return est, nil
	}
	need := est.Host
	if req.OnHost {
		need = max(need-max(req.Allocated, 0), 0)
	}
	if need <= host.Available {
		return est, nil
	}
	return est, &BudgetError{Estimate: est, Need: need, Available: host.Available, Source: host.Source,
		Setting: budgetSetting(req, est)}
}

// checkBatch refuses a global training batch larger than the training set.
func checkBatch(req BudgetRequest) error {
	a := req.Args
	if req.TrainExamples <= 0 {
		return nil
	}
	replicas := int64(max(req.Replicas, 1))
	global, ok := membudget.Mul(int64(max(a.PerDeviceTrainBatchSize, 0)), replicas)
	if ok && global <= int64(req.TrainExamples) {
		return nil
	}
	perDevice := int64(req.TrainExamples) / replicas
	fix := fmt.Sprintf("lower per_device_train_batch_size to at most %d", perDevice)
	if perDevice == 0 {
		fix = fmt.Sprintf("use at most %d devices (num_devices) or more data", req.TrainExamples)
	}
	return &FieldError{Struct: "TrainingArguments", Field: "per_device_train_batch_size", Kind: ErrInvalidArgument,
		Msg: fmt.Sprintf("%d examples per device × %d %s is more than the %d examples of the training set: %s "+
			"(Hugging Face's DataLoader would yield one smaller batch; gotpu keeps every step's shape, so the batch would repeat examples)",
			a.PerDeviceTrainBatchSize, replicas, plural(replicas, "device", "devices"), req.TrainExamples, fix)}
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// budgetSetting names what to change, from the largest part of the estimate.
func budgetSetting(req BudgetRequest, est MemoryEstimate) string {
	state := est.Parameters + est.Gradients + est.Optimizer
	var s []string
	switch {
	case est.Activations >= state && est.Activations >= est.Inputs && est.ActivationsFromEval:
		s = append(s, "lower per_device_eval_batch_size or the sequence length (block_size, max_seq_length)")
	case est.Activations >= state && est.Activations >= est.Inputs:
		s = append(s, "lower per_device_train_batch_size or the sequence length (block_size, max_seq_length)")
		if !req.Args.GradientCheckpointingOn() {
			s = append(s, "set gradient_checkpointing (each layer's activations recomputed in the backward pass)")
		}
		if !req.Args.BF16 && !req.OnHost { // the pure-Go backend computes in float32 anyway
			s = append(s, "set bf16")
		}
	case est.Inputs >= state:
		s = append(s, "lower per_device_train_batch_size or dataloader_prefetch_factor")
	default:
		s = append(s, "use a smaller model")
		if est.Optimizer > est.Parameters && !(req.Args.Adafactor || req.Args.Optim == "adafactor") {
			s = append(s, "optim adafactor (factored optimizer state)")
		}
	}
	if req.OnHost && est.Replicas > 1 {
		s = append(s, "fewer num_devices (each virtual device holds a copy)")
	}
	return strings.Join(s, ", or ")
}

// checkBudget is trainer.New's budget check: the model is built (its parameters are allocated
// once), the optimizer state and batches are not yet.
func (t *Trainer) checkBudget() error {
	req := BudgetRequest{Model: t.model.Config(), Args: t.args, Replicas: t.replicas}
	if t.train != nil {
		req.TrainExamples = t.train.Len()
	}
	if t.eval != nil {
		req.EvalExamples = t.eval.Len()
	}
	for _, s := range t.collator.Shapes(max(t.args.PerDeviceTrainBatchSize, t.args.PerDeviceEvalBatchSize)) {
		req.SeqLen = max(req.SeqLen, s[1])
	}
	sizeOf := func(ps []models.Param) (elems, bytes int64) {
		for _, p := range ps {
			n := int64(p.NumElements())
			size := int64(4)
			if v := t.model.Context().GetVariableByScopeAndName(p.Scope(), p.Var()); v != nil {
				size = int64(v.Shape().DType.Size())
			}
			elems += n
			bytes += n * size
		}
		return elems, bytes
	}
	elems, bytes := sizeOf(t.model.Params())
	if f, ok := t.model.(models.Frozen); ok {
		// The config describes the frozen base; the trained parameters are the adapter's.
		req.TrainableParams = elems
		fe, fb := sizeOf(f.FrozenParams())
		elems, bytes = fe, fb+bytes
		if fe > 0 {
			req.ParamBytes = int((fb + fe - 1) / fe)
		}
	} else if elems > 0 {
		req.ParamBytes = int((bytes + elems - 1) / elems)
	}
	if t.rt.Kind() == xla.DeviceGo {
		req.Allocated = bytes
	}
	est, err := CheckBudget(t.rt, req)
	if err != nil {
		return err
	}
	t.log.Debug("memory budget", "host_bytes", est.Host, "device_bytes", est.Device, "parameters", est.Parameters,
		"optimizer", est.Optimizer, "activations", est.Activations, "inputs", est.Inputs)
	return nil
}
