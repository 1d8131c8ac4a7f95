package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/examples/internal/gocorpus"
)

// TestChatSFT runs the example small and checks what it reports: the held-out loss over the
// assistant's tokens falls by a wide margin, conversations were packed (fewer rows than
// conversations, only part of the tokens labelled), and the whole run compiled one training
// program.
func TestChatSFT(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model for a few dozen steps")
	}
	o := defaultOptions()
	o.maxSteps, o.maxLength, o.batch, o.evalEvery, o.vocab = 40, 192, 8, 20, 1024
	o.outputDir = t.TempDir()
	o.tokenizerPath = filepath.Join("..", "..", o.tokenizerPath)
	o.templatePath = filepath.Join("..", "..", o.templatePath)
	o.quiet = true
	o.logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	res, err := run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	res.print(&out)
	t.Log("\n" + out.String())
	if res.steps != o.maxSteps {
		t.Fatalf("trained %d steps, want %d", res.steps, o.maxSteps)
	}
	// A random model's loss is about ln(vocab) ≈ 6.9; 40 steps take it well below.
	if !(res.after < res.before-1) {
		t.Fatalf("held-out assistant-token loss %.4f before, %.4f after: want a drop of more than 1 nat", res.before, res.after)
	}
	if res.train.Rows >= res.train.Examples {
		t.Fatalf("%d rows from %d conversations: nothing was packed", res.train.Rows, res.train.Examples)
	}
	if res.trainedShare <= 0.1 || res.trainedShare >= 0.9 {
		t.Fatalf("%.3f of the tokens carry labels: assistant-only loss should label the replies only", res.trainedShare)
	}
	if res.programs != 1 {
		t.Fatalf("%d training programs compiled over %d steps, want 1", res.programs, res.steps)
	}
	// The conversations file is TRL's conversational format.
	b, err := os.ReadFile(filepath.Join(o.outputDir, "train.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	var row struct {
		Messages []message `json:"messages"`
	}
	if err := json.Unmarshal([]byte(first), &row); err != nil || len(row.Messages) != 1+2*o.turns || row.Messages[2].Role != "assistant" {
		t.Fatalf("first conversation %q: %v", first, err)
	}
}

// TestConversationsDeterministic: the data is the same on every run (a function with a file per
// platform gives one answer, the linux/amd64 one).
func TestConversationsDeterministic(t *testing.T) {
	root := gocorpus.GoRootSrc()
	a1, h1, err := conversations(root, 2)
	if err != nil {
		t.Fatal(err)
	}
	a2, h2, err := conversations(root, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a1, a2) || !reflect.DeepEqual(h1, h2) {
		t.Fatal("two reads of the standard library gave different conversations")
	}
	t.Logf("%d training and %d held-out conversations", len(a1), len(h1))
}
