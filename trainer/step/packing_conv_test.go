package step

import (
	"bufio"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/data/chat"
	"github.com/gotpu/gotpu/data/sft"
	"github.com/gotpu/gotpu/data/tokenizer"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/xla"
)

// TestPackedConversationsEqualAlone is the "packed training equals unpacked training"
// on a conversational set: the shared corpus's conversations with an assistant reply
// (testdata/chat), rendered with Qwen3's training template and labelled for assistant-only
// loss by data/sft, packed best-fit-decreasing into rows of 256, run through the Llama
// fixture's weights: the loss of the packed batch equals the token-weighted mean of every
// conversation's loss run alone (|d| <= 1e-6). The fixture's config is copied with
// max_position_embeddings raised to 1024 (RoPE has no position table: the weights are the
// fixture's) so that conversations fit; ids are folded into its 512-token vocabulary.
func TestPackedConversationsEqualAlone(t *testing.T) {
	ctx := context.Background()
	repo := filepath.Join("..", "..")
	tok, err := tokenizer.FromFile(filepath.Join(repo, "testdata", "tokenizers", "qwen3", "tokenizer.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	tm, err := chat.LoadTemplate(filepath.Join(repo, "testdata", "chat", "families", "qwen3-trl-training", "tokenizer_config.json"), "")
	if err != nil {
		t.Fatal(err)
	}
	// The corpus's conversations that have an assistant turn (assistant-only loss refuses a
	// conversation with nothing to train on, as TRL does).
	f, err := os.Open(filepath.Join(repo, "testdata", "chat", "corpus-shared.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var c struct {
			Messages []struct {
				Role string `json:"role"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		for _, m := range c.Messages {
			if m.Role == "assistant" {
				lines = append(lines, sc.Text())
				break
			}
		}
	}
	convs := filepath.Join(t.TempDir(), "conversations.jsonl")
	if err := os.WriteFile(convs, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := sft.DefaultConfig()
	cfg.MaxLength, cfg.AssistantOnlyLoss = 256, true
	alone, _, err := sft.Prepare(ctx, sft.ReadJSONL(convs), tok, tm, cfg)
	if err != nil {
		t.Fatal(err)
	}

	dir := filepath.Join(t.TempDir(), "llama")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"config.json", "model.safetensors"} {
		b, err := os.ReadFile(filepath.Join(fixtureDir("llama-tiny"), name))
		if err != nil {
			t.Fatal(err)
		}
		if name == "config.json" {
			b = []byte(strings.Replace(string(b), `"max_position_embeddings": 64`, `"max_position_embeddings": 1024`, 1))
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rt, err := xla.Open(ctx, xla.Config{Device: "go", NumDevices: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	m, err := models.Load(ctx, rt, dir, models.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vocab := int32(m.(models.CausalLM).VocabSize())
	for i := range alone {
		for j, id := range alone[i].InputIDs {
			alone[i].InputIDs[j] = id % vocab
		}
		for j, l := range alone[i].Labels {
			if l != data.IgnoreIndex {
				alone[i].Labels[j] = l % vocab
			}
		}
	}
	rows, st, err := data.PackBFDWithStats(alone, cfg.MaxLength)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(rt, m, Config{Optimizer: DefaultAdamW(), NumReplicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	packed, err := data.CausalLMCollator{BlockSize: cfg.MaxLength}.Collate(rows)
	if err != nil {
		t.Fatal(err)
	}
	sum, terms, logits, err := s.Evaluate(ctx, packed)
	if err != nil {
		t.Fatal(err)
	}
	logits.Release()
	wantSum, wantTerms := evalAlone(t, s, alone)
	got, want := sum/terms, wantSum/wantTerms
	t.Logf("%d conversations (%d tokens, %v trained targets) packed into %d rows of %d: packed loss %.7f, token-weighted mean alone %.7f, |d| %.2g",
		len(alone), st.Tokens, terms, st.Rows, cfg.MaxLength, got, want, math.Abs(got-want))
	if terms != wantTerms || math.Abs(got-want) > 1e-6 {
		t.Fatalf("packed: %.7f over %v targets; alone: %.7f over %v", got, terms, want, wantTerms)
	}
	if st.Rows >= len(alone) {
		t.Fatalf("%d conversations in %d rows: nothing packed", len(alone), st.Rows)
	}
}
