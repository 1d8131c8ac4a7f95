package trainer

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/internal/membudget"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/gpt2"
	"github.com/gotpu/gotpu/models/llama"
	"github.com/gotpu/gotpu/xla"
)

func budgetArgs() TrainingArguments {
	a := DefaultTrainingArguments()
	a.PerDeviceTrainBatchSize, a.PerDeviceEvalBatchSize = 8, 8
	return a
}

var testHost = membudget.Host{Available: 18 << 30, Known: true, Source: "test"}

// TestBudgetBatchAgainstDataset: a global batch larger than the training set is a FieldError
// naming per_device_train_batch_size and the largest value that fits; equal is fine.
func TestBudgetBatchAgainstDataset(t *testing.T) {
	a := budgetArgs()
	req := BudgetRequest{Model: gpt2.DefaultConfig(), Args: a, SeqLen: 64, TrainExamples: 20}
	for _, c := range []struct {
		batch, replicas int
		want            string
	}{
		{1_000_000_000, 1, "at most 20"},
		{11, 2, "at most 10"},
		{1, 21, "at most 20 devices"},
		{1 << 62, 8, "at most 2"},
	} {
		req.Args.PerDeviceTrainBatchSize, req.Replicas = c.batch, c.replicas
		_, err := checkBudget(req, testHost)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != "per_device_train_batch_size" || !errors.Is(err, ErrInvalidArgument) ||
			!strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "20 examples") {
			t.Errorf("batch %d × %d replicas: %v", c.batch, c.replicas, err)
		}
	}
	req.Args.PerDeviceTrainBatchSize, req.Replicas = 10, 2
	if _, err := checkBudget(req, testHost); err != nil {
		t.Errorf("batch 10 × 2 on 20 examples: %v", err)
	}
}

// TestBudgetError: a run that does not fit names what it needs, by part, what is available and
// the setting to change, and matches ErrOverBudget.
func TestBudgetError(t *testing.T) {
	a := budgetArgs()
	a.PerDeviceTrainBatchSize = 64
	req := BudgetRequest{Model: gpt2.DefaultConfig(), Args: a, SeqLen: 1024, OnHost: true}
	est, err := checkBudget(req, membudget.Host{Available: 2 << 30, Known: true, Source: "test"})
	var be *BudgetError
	if !errors.As(err, &be) || !errors.Is(err, ErrOverBudget) {
		t.Fatalf("err = %v", err)
	}
	msg := err.Error()
	for _, want := range []string{"trainer: ", "need about", "parameters 0.5, gradients 0.5, optimizer 0.9, activations",
		"but 2.0 GiB are available on the host (test)", "lower per_device_train_batch_size or the sequence length"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
	if be.Need != est.Host || est.Activations <= est.Parameters {
		t.Errorf("need %d, estimate %+v", be.Need, est)
	}
	// The model already allocated is not needed again.
	req.Allocated = est.Host - (1 << 30)
	if _, err := checkBudget(req, membudget.Host{Available: 2 << 30, Known: true, Source: "test"}); err != nil {
		t.Errorf("with all but 1 GiB allocated: %v", err)
	}
	// An unknown host is not guessed.
	if _, err := checkBudget(req, membudget.Host{}); err != nil {
		t.Errorf("unknown host: %v", err)
	}
}

// TestEstimateMemoryParts: the optimizer state follows optim, gradients double with
// accumulation, the pure-Go backend multiplies per-replica state by the replicas, and bf16 halves
// activations on a PJRT device only.
func TestEstimateMemoryParts(t *testing.T) {
	cfg := llama.DefaultConfig(llama.TypeLlama)
	cfg.VocabSize, cfg.HiddenSize, cfg.IntermediateSize, cfg.NumHiddenLayers, cfg.NumAttentionHeads, cfg.NumKeyValueHeads, cfg.HeadDim =
		1000, 256, 512, 4, 4, 4, 64
	fp, err := models.EstimateFootprint(cfg)
	if err != nil {
		t.Fatal(err)
	}
	base := BudgetRequest{Model: cfg, Args: budgetArgs(), SeqLen: 128}
	est, err := EstimateMemory(base)
	if err != nil {
		t.Fatal(err)
	}
	if est.Parameters != 4*fp.Params || est.Gradients != 4*fp.Params || est.Optimizer != 8*fp.Params || est.Host != est.Inputs ||
		est.Device != est.Parameters+est.Gradients+est.Optimizer+est.Activations {
		t.Errorf("adamw on a device: %+v (params %d)", est, fp.Params)
	}

	r := base
	r.Args.Optim = "adafactor"
	r.Args.GradientAccumulationSteps = 4
	r.ParamBytes = 2
	e2, _ := EstimateMemory(r)
	if e2.Optimizer != 4*fp.AdafactorState || e2.Gradients != 8*fp.Params || e2.Parameters != 2*fp.Params {
		t.Errorf("adafactor, accumulation, bf16 weights: %+v", e2)
	}

	r = base
	r.OnHost, r.Replicas = true, 4
	e3, _ := EstimateMemory(r)
	if e3.Device != 0 || e3.Host != 4*(est.Parameters+est.Gradients+est.Optimizer+est.Activations)+4*est.Inputs {
		t.Errorf("4 virtual devices: %+v against %+v", e3, est)
	}

	r = base
	r.Args.BF16 = true
	onDevice, _ := EstimateMemory(r)
	r.OnHost = true
	onHost, _ := EstimateMemory(r)
	if onDevice.Activations >= est.Activations || onHost.Activations != est.Activations {
		t.Errorf("bf16 activations: device %d, host %d, float32 %d", onDevice.Activations, onHost.Activations, est.Activations)
	}

	// Evaluation batches are clipped to the evaluation set, and counted only with one.
	r = base
	r.Args.PerDeviceEvalBatchSize = 1 << 40
	if _, err := EstimateMemory(r); err != nil {
		t.Errorf("an eval batch with no eval set: %v", err)
	}
	r.EvalExamples = 3
	if e, err := EstimateMemory(r); err != nil || e.ActivationsFromEval {
		t.Errorf("an eval batch clipped to 3 examples: %+v, %v", e, err)
	}
	r.EvalExamples = -1
	if _, err := EstimateMemory(r); err == nil || !strings.Contains(err.Error(), "overflows") {
		t.Errorf("an eval batch of 2^40 on an eval set of unknown size: %v", err)
	}
}

// TestBudgetAbsurdConfig: the model's absurd dimensions are refused by name, before anything is
// estimated from them.
func TestBudgetAbsurdConfig(t *testing.T) {
	cfg := gpt2.DefaultConfig()
	cfg.NEmbd, cfg.NHead = 1<<30, 1
	_, err := checkBudget(BudgetRequest{Model: cfg, Args: budgetArgs()}, testHost)
	if !errors.Is(err, models.ErrTooLarge) || !strings.Contains(err.Error(), `field "n_embd"`) {
		t.Errorf("n_embd 2^30: %v", err)
	}
	if _, err := checkBudget(BudgetRequest{Args: budgetArgs()}, testHost); err == nil {
		t.Error("a request without a model was accepted")
	}
}

// TestNewChecksTheBudget: trainer.New refuses a batch larger than the training set before it
// builds the step (on the code before the budget, New accepted it and Train allocated the
// global batch's indices: 8 GB for 10^9).
func TestNewChecksTheBudget(t *testing.T) {
	rt, err := xla.Open(context.Background(), xla.Config{Device: "go"})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	cfg := gpt2.DefaultConfig()
	cfg.VocabSize, cfg.NEmbd, cfg.NLayer, cfg.NHead, cfg.NPositions = 64, 32, 1, 2, 16
	m, err := models.New(context.Background(), rt, cfg, models.NewOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var ds data.SliceDataset
	for range 20 {
		ds = append(ds, data.Example{InputIDs: make([]int32, 16)})
	}
	a := budgetArgs()
	noBar := true
	a.DisableTqdm = &noBar
	a.PerDeviceTrainBatchSize = 1_000_000_000
	if _, err := New(a, m, ds, nil, Options{Runtime: rt}); !errors.Is(err, ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "per_device_train_batch_size") {
		t.Errorf("New with a batch of 10^9 on 20 examples: %v", err)
	}
	a.PerDeviceTrainBatchSize = 20
	if _, err := New(a, m, ds, ds, Options{Runtime: rt}); err != nil {
		t.Errorf("New with a batch of 20 on 20 examples: %v", err)
	}
	// The service's call: the request from a config before anything is built.
	if _, err := CheckBudget(rt, BudgetRequest{Model: cfg, Args: a, SeqLen: 16, TrainExamples: 20}); err != nil {
		t.Errorf("CheckBudget: %v", err)
	}
	if _, err := CheckBudget(rt, BudgetRequest{Model: gpt2.DefaultConfig(), Args: a, HostAvailable: 1 << 20}); !errors.Is(err, ErrOverBudget) ||
		!strings.Contains(err.Error(), "(HostAvailable)") {
		t.Errorf("CheckBudget with 1 MiB: %v", err)
	}
}
