package trainer

import (
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/gotpu/gotpu/internal/membudget"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/bert"
	"github.com/gotpu/gotpu/models/gpt2"
	"github.com/gotpu/gotpu/models/llama"
)

// budgetAllocBound is the most the budget may allocate for one input, whatever the arguments
// and the model's dimensions: it computes a few dozen int64s and, on refusal, formats one error.
// Measured with runtime.MemStats around the calls (TotalAlloc, which also counts the fuzzing
// engine's goroutines, hence the margin); typical inputs allocate 1-3 KiB.
const budgetAllocBound = 256 << 10

// fuzzModel builds a model config of the chosen architecture from raw dimensions, which may be
// zero, negative or absurd: the budget must refuse them by name, never allocate from them.
func fuzzModel(arch uint8, vocab, hidden, layers, heads, inner, positions int64) models.Config {
	switch arch % 4 {
	case 0:
		c := gpt2.DefaultConfig()
		n := int(inner)
		c.VocabSize, c.NEmbd, c.NLayer, c.NHead, c.NPositions, c.NInner = int(vocab), int(hidden), int(layers), int(heads), int(positions), &n
		return c
	case 1, 2:
		c := llama.DefaultConfig(llama.TypeLlama)
		if arch%4 == 2 {
			c = llama.DefaultConfig(llama.TypeQwen2)
		}
		c.VocabSize, c.HiddenSize, c.NumHiddenLayers, c.NumAttentionHeads, c.IntermediateSize = int(vocab), int(hidden), int(layers), int(heads), int(inner)
		c.NumKeyValueHeads, c.HeadDim, c.MaxPositionEmbeddings = int(heads), int(inner), int(positions)
		c.TieWordEmbeddings = arch&4 != 0
		return c
	}
	c := bert.DefaultConfig()
	c.VocabSize, c.HiddenSize, c.NumHiddenLayers, c.NumAttentionHeads, c.IntermediateSize, c.MaxPositionEmbeddings =
		int(vocab), int(hidden), int(layers), int(heads), int(inner), int(positions)
	return c
}

// FuzzBudget drives TrainingArguments JSON and one flag, then a model config of any of the
// architectures, through the resource budget (checkBudget, EstimateMemory) against a 16 GiB
// host: no panic, no allocation above budgetAllocBound per input, and a consistent verdict (an
// accepted run fits; a BudgetError's need exceeds what is available).
//
//	go test -run '^$' -fuzz FuzzBudget -fuzztime 60s ./trainer/
func FuzzBudget(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(argsDir, "*.json"))
	for i, p := range files {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data, uint16(i), "8", uint8(i), int64(50257), int64(768), int64(12), int64(12), int64(3072), int64(1024), int64(512), uint8(1), int32(1000), int32(10))
		}
	}
	f.Add([]byte(`{"per_device_train_batch_size": 1000000000}`), uint16(0), "", uint8(0), int64(50257), int64(768), int64(12), int64(12), int64(3072), int64(1024), int64(64), uint8(1), int32(20), int32(0))
	f.Add([]byte(`{"bf16": true, "optim": "adafactor", "gradient_accumulation_steps": 4}`), uint16(3), "True", uint8(1), int64(32000), int64(4096), int64(32), int64(32), int64(11008), int64(4096), int64(2048), uint8(8), int32(100000), int32(-1))
	f.Add([]byte(`{}`), uint16(7), "1e9", uint8(0), int64(50257), int64(1<<30), int64(12), int64(1), int64(4<<30), int64(1024), int64(0), uint8(0), int32(0), int32(0))
	f.Add([]byte(`{"dataloader_prefetch_factor": 1000000}`), uint16(9), "-1", uint8(3), int64(-1), int64(0), int64(1<<40), int64(7), int64(1), int64(9223372036854775807), int64(-5), uint8(255), int32(-7), int32(3))
	host := membudget.Host{Available: 16 << 30, Known: true, Source: "fuzz"}
	f.Fuzz(func(t *testing.T, argsJSON []byte, which uint16, value string, arch uint8,
		vocab, hidden, layers, heads, inner, positions, seq int64, replicas uint8, trainN, evalN int32) {
		a := DefaultTrainingArguments()
		if parsed, _, err := ParseTrainingArgumentsJSON(argsJSON, "fuzz"); err == nil {
			a = *parsed
		}
		fs := flag.NewFlagSet("fuzz", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		a.RegisterFlags(fs)
		var all []*flag.Flag
		fs.VisitAll(func(fl *flag.Flag) { all = append(all, fl) })
		_ = all[int(which)%len(all)].Value.Set(value)
		// trainer.New's order; the budget must hold on whatever comes out of it, valid or not.
		_ = a.Finalize()
		_ = a.Validate()
		req := BudgetRequest{Model: fuzzModel(arch, vocab, hidden, layers, heads, inner, positions), Args: a,
			Replicas: int(replicas), SeqLen: int(seq), TrainExamples: int(trainN), EvalExamples: int(evalN),
			OnHost: arch&8 == 0, ParamBytes: int(arch % 5), Allocated: int64(trainN)}

		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		est, err := checkBudget(req, host)
		est2, err2 := EstimateMemory(req)
		runtime.ReadMemStats(&after)
		if d := after.TotalAlloc - before.TotalAlloc; d > budgetAllocBound {
			t.Fatalf("the budget allocated %d bytes (bound %d) for %+v", d, budgetAllocBound, req)
		}

		var be *BudgetError
		switch {
		case err == nil && err2 == nil:
			need := est.Host
			if req.OnHost {
				need = max(need-max(req.Allocated, 0), 0)
			}
			if need > host.Available || est != est2 {
				t.Fatalf("accepted a run needing %d of %d bytes (%+v, %+v)", need, host.Available, est, est2)
			}
		case errors.As(err, &be):
			if be.Need <= be.Available || be.Setting == "" {
				t.Fatalf("refused a run needing %d of %d bytes (%q)", be.Need, be.Available, be.Setting)
			}
		}
		if err2 == nil && (est2.Parameters < 0 || est2.Activations < 0 || est2.Inputs < 0 || est2.Host < est2.Inputs) {
			t.Fatalf("inconsistent estimate %+v", est2)
		}
	})
}
