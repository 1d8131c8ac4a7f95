package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/trainer"
	"github.com/gotpu/gotpu/xla"
)

const testTokenizer = "../../testdata/tokenizers/bert-base-uncased/tokenizer.json.gz"

// TestCorpusSplit: the held-out snippets come from files with no snippet in the training set,
// both sides are balanced, and no snippet holds the package clause that would name the answer.
func TestCorpusSplit(t *testing.T) {
	c := defaultOptions().corpus
	c.root, c.seed = goRootSrc(), 1
	c.trainPerClass, c.evalPerClass = 200, 50
	train, held, err := buildCorpus(c)
	if err != nil {
		t.Fatal(err)
	}
	if n := sharedFiles(train, held); n != 0 {
		t.Errorf("%d files have snippets on both sides of the split", n)
	}
	for _, set := range []struct {
		name  string
		s     []snippet
		total int
	}{{"train", train, 200}, {"held-out", held, 50}} {
		per := map[string]int{}
		for _, x := range set.s {
			per[x.class]++
			if !strings.HasPrefix(x.file, x.class+string(filepath.Separator)) {
				t.Errorf("%s snippet of class %s from %s", set.name, x.class, x.file)
			}
			for line := range strings.SplitSeq(x.text, "\n") {
				if strings.HasPrefix(line, "package ") {
					t.Errorf("%s snippet from %s holds its package clause %q", set.name, x.file, line)
				}
			}
		}
		for _, class := range c.classes {
			if per[class] != set.total {
				t.Errorf("%s set: %d snippets of %s, want %d", set.name, per[class], class, set.total)
			}
		}
	}
	// The same seed gives the same corpus; another seed another sample.
	again, _, err := buildCorpus(c)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(train, again) {
		t.Error("the same seed gave a different training set")
	}
	c.classes = []string{"crypto", "no-such-family"}
	if _, _, err := buildCorpus(c); err == nil || !strings.Contains(err.Error(), "no-such-family") {
		t.Errorf("missing class directory: error %v, want one naming it", err)
	}
}

// TestShortRun trains for a few steps on a small sample and checks what the example reports:
// accuracy over exactly the held-out set (matching its confusion matrix), the balanced baseline,
// and a saved model that loads as a 4-class BERT classifier with the class names and scores the
// held-out set to the same accuracy.
func TestShortRun(t *testing.T) {
	o := defaultOptions()
	o.maxSteps, o.evalEvery, o.batch, o.maxSeqLength = 8, 4, 16, 32
	o.corpus.trainPerClass, o.corpus.evalPerClass = 48, 10
	o.outputDir = t.TempDir()
	o.tokenizerPath, o.device, o.quiet = testTokenizer, "go", true
	o.logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	res, err := run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	res.print(io.Discard)
	if res.heldOut != 40 || res.trainSnippets != 192 || res.steps != 8 {
		t.Fatalf("held out %d, trained on %d, %d steps; want 40, 192, 8", res.heldOut, res.trainSnippets, res.steps)
	}
	if res.baseline != 0.25 {
		t.Errorf("majority baseline %.3f on a balanced 4-class set, want 0.25", res.baseline)
	}
	total, diag := 0, 0
	for i, row := range res.confusion {
		for j, n := range row {
			total += n
			if i == j {
				diag += n
			}
		}
	}
	if total != res.heldOut || res.accuracy != float64(diag)/float64(total) {
		t.Errorf("confusion counts %d examples, %d right; accuracy %.4f", total, diag, res.accuracy)
	}
	if res.bestCheckpoint == "" {
		t.Fatal("no best checkpoint recorded")
	}
	for _, f := range []string{"model.safetensors", "optimizer.safetensors", "trainer_state.json"} {
		if _, err := os.Stat(filepath.Join(res.bestCheckpoint, f)); err != nil {
			t.Errorf("best checkpoint: %v", err)
		}
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
	sc, ok := m.(models.SequenceClassifier)
	if !ok || sc.NumLabels() != 4 {
		t.Fatalf("saved model %s is not a 4-label classifier", m.Architecture())
	}
	cfg, err := os.ReadFile(filepath.Join(o.outputDir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, class := range res.classes {
		if !strings.Contains(string(cfg), `"`+class+`"`) {
			t.Errorf("config.json lacks the label %q:\n%s", class, cfg)
		}
	}
	a := trainer.DefaultTrainingArguments()
	a.PerDeviceEvalBatchSize = 64
	tr, err := trainer.New(a, m, nil, res.evalSet, trainer.Options{Runtime: rt, ComputeMetrics: trainer.Accuracy, Logger: o.logger})
	if err != nil {
		t.Fatal(err)
	}
	p, err := tr.Predict(context.Background(), res.evalSet)
	if err != nil {
		t.Fatal(err)
	}
	if p.Metrics["test_accuracy"] != res.accuracy {
		t.Errorf("the saved model scores %.4f on the held-out set, the run reported %.4f", p.Metrics["test_accuracy"], res.accuracy)
	}
}
