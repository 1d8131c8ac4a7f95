package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/examples/internal/gocorpus"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/xla"
)

const testTokenizer = "../../testdata/tokenizers/mistral-7b/tokenizer.json.gz"

func shortOptions(t *testing.T) options {
	o := defaultOptions()
	o.maxSteps, o.blockSize, o.batch, o.gradAccum, o.vocab = 8, 16, 2, 4, 256
	o.evalEvery, o.saveEvery, o.trainBytes, o.evalBlocks = 4, 100, 16<<10, 4
	o.outputDir = t.TempDir()
	o.tokenizerPath, o.device, o.quiet = testTokenizer, "go", true
	o.logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	return o
}

// TestInterruptAndResume: a bf16 run with gradient accumulation interrupted after step 4 (as
// Ctrl-C does) saves checkpoint-4; a run with -resume_from_checkpoint true continues from that
// step to the end, and ends with exactly the held-out loss of a run that was never interrupted.
// The saved model loads as a Llama with the compact vocabulary.
func TestInterruptAndResume(t *testing.T) {
	o := shortOptions(t)
	o.interruptAt = 4
	first, err := run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	first.print(io.Discard)
	if !first.interrupted || first.steps != 4 || filepath.Base(first.checkpoint) != "checkpoint-4" {
		t.Fatalf("interrupted %v at step %d, checkpoint %q; want an interruption at 4 with checkpoint-4", first.interrupted, first.steps, first.checkpoint)
	}

	o.interruptAt, o.resume = 0, "true"
	resumed, err := run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	resumed.print(io.Discard)
	if resumed.interrupted || resumed.startStep != 4 || resumed.firstStep != 5 || resumed.steps != 8 {
		t.Fatalf("resumed run began at %d, first trained step %d, ended at %d; want 4, 5, 8", resumed.startStep, resumed.firstStep, resumed.steps)
	}
	if resumed.beforeStep != 0 || !(resumed.after < resumed.before) {
		t.Errorf("held-out loss %.4f at step %d, %.4f after: want the initial loss from the checkpoint's log history, and a lower one after",
			resumed.before, resumed.beforeStep, resumed.after)
	}

	whole := shortOptions(t)
	straight, err := run(context.Background(), whole)
	if err != nil {
		t.Fatal(err)
	}
	if straight.startStep != 0 || straight.firstStep != 1 || straight.steps != 8 {
		t.Fatalf("uninterrupted run: began at %d, first step %d, ended at %d", straight.startStep, straight.firstStep, straight.steps)
	}
	if straight.before != resumed.before || straight.after != resumed.after {
		t.Errorf("held-out loss %.6f → %.6f uninterrupted, %.6f → %.6f interrupted and resumed: want the same",
			straight.before, straight.after, resumed.before, resumed.after)
	}

	rt, err := xla.Open(context.Background(), xla.Config{Device: "go"})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	m, err := models.Load(context.Background(), rt, o.outputDir, models.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lm, ok := m.(models.CausalLM)
	vm, verr := gocorpus.LoadVocabMap(filepath.Join(o.outputDir, gocorpus.VocabFile))
	if !ok || m.Architecture() != "LlamaForCausalLM" || verr != nil || vm == nil || lm.VocabSize() != vm.Size() || vm.Size() != 256 {
		t.Fatalf("saved model %s (causal LM %v), vocab map %v (%v)", m.Architecture(), ok, vm, verr)
	}
	// The specials keep their Mistral ids, which config.json's bos/eos ids name.
	if vm.Mistral[0] != 0 || vm.Mistral[1] != 1 || vm.Mistral[2] != 2 {
		t.Errorf("compact ids 0..2 map to %v, want Mistral's <unk> <s> </s> (0 1 2)", vm.Mistral[:3])
	}

	// Resuming with another vocabulary would read the checkpoint's embedding rows as other
	// tokens: refused, naming the file.
	o.vocab = 300
	if _, err := run(context.Background(), o); err == nil || !strings.Contains(err.Error(), gocorpus.VocabFile) {
		t.Errorf("resume with another -vocab: error %v, want one naming %s", err, gocorpus.VocabFile)
	}
}

// TestFineTuneFromModel: -model_name_or_path continues from a saved model with its vocabulary
// map: the fine-tuning run's first held-out loss is exactly the saved model's last one.
func TestFineTuneFromModel(t *testing.T) {
	base := shortOptions(t)
	base.maxSteps, base.bf16 = 6, false // float32: the bf16 path is TestInterruptAndResume's, and slow under -race
	pre, err := run(context.Background(), base)
	if err != nil {
		t.Fatal(err)
	}
	o := shortOptions(t)
	o.maxSteps, o.modelPath, o.bf16 = 2, base.outputDir, false
	o.vocab = 999 // ignored: the loaded model's vocab_map.json decides (a 999-id map would not fit its 256 rows)
	ft, err := run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if ft.before != pre.after || ft.after == ft.before || ft.steps != 2 {
		t.Errorf("fine-tuning: held-out loss %.6f → %.6f in %d steps; the base model ended at %.6f", ft.before, ft.after, ft.steps, pre.after)
	}
	a, _ := os.ReadFile(filepath.Join(base.outputDir, gocorpus.VocabFile))
	b, _ := os.ReadFile(filepath.Join(o.outputDir, gocorpus.VocabFile))
	if len(a) == 0 || string(a) != string(b) {
		t.Error("the fine-tuned model's vocab_map.json differs from its base model's")
	}
}
