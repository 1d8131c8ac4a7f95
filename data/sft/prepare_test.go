package sft

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/data/chat"
	"github.com/gotpu/gotpu/data/tokenizer"
)

var (
	chatDir     = filepath.Join("..", "..", "testdata", "chat")
	qwen3Config = filepath.Join(chatDir, "families", "qwen3-trl-training", "tokenizer_config.json")
)

// qwen3 loads the real Qwen3 tokenizer once.
var qwen3 = sync.OnceValues(func() (*tokenizer.Pipeline, error) {
	return tokenizer.FromFile(filepath.Join("..", "..", "testdata", "tokenizers", "qwen3", "tokenizer.json.gz"))
})

func qwen3Tok(t testing.TB) *tokenizer.Pipeline {
	t.Helper()
	p, err := qwen3()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func qwen3Template(t testing.TB) *chat.Template {
	t.Helper()
	tm, err := chat.LoadTemplate(qwen3Config, "")
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

// writeLines writes rows as a JSON-lines file and returns its path.
func writeLines(t *testing.T, rows ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "data.jsonl")
	if err := os.WriteFile(p, []byte(strings.Join(rows, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

type record struct {
	ID    string `json:"id"`
	AGP   bool   `json:"add_generation_prompt"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
	IDs   []int32 `json:"ids"`
	Masks *struct {
		Generation []int `json:"generation"`
	} `json:"masks"`
}

func readRecords(t *testing.T, path string) []record {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []record
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var r record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// TestAssistantOnlyLossMatchesTransformers: the Qwen3 training template (TRL's
// qwen3_training.jinja) over the shared corpus with assistant_only_loss: every example's
// input_ids are the reference ids (transformers' apply_chat_template(tokenize=True)) and its
// labels are the ids exactly where return_assistant_tokens_mask is 1, -100 elsewhere.
func TestAssistantOnlyLossMatchesTransformers(t *testing.T) {
	tok, tm := qwen3Tok(t), qwen3Template(t)
	refs := map[string]record{}
	for _, r := range readRecords(t, filepath.Join(chatDir, "expected", "qwen3-trl-training.jsonl")) {
		if !r.AGP {
			refs[r.ID] = r
		}
	}
	// Conversations without an assistant turn have no assistant tokens, which TRL refuses;
	// the others form the dataset.
	var lines, ids []string
	for row, err := range ReadJSONL(filepath.Join(chatDir, "corpus-shared.jsonl")) {
		if err != nil {
			t.Fatal(err)
		}
		var c struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(row.JSON, &c); err != nil {
			t.Fatal(err)
		}
		r, ok := refs[c.ID]
		if !ok || r.Error != nil {
			t.Fatalf("%s: no reference ids", c.ID)
		}
		if slices.Contains(r.Masks.Generation, 1) {
			lines, ids = append(lines, string(row.JSON)), append(ids, c.ID)
		}
	}
	if len(lines) != 23 {
		t.Fatalf("%d conversations with assistant tokens, want 23", len(lines))
	}
	cfg := DefaultConfig()
	cfg.AssistantOnlyLoss = true
	exs, st, err := Prepare(context.Background(), ReadJSONL(writeLines(t, lines...)), tok, tm, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(exs) != len(lines) || st.Format != Messages || st.Dropped != 0 || st.Truncated != 0 {
		t.Fatalf("%d examples, stats %+v", len(exs), st)
	}
	trained, total := 0, 0
	for i, ex := range exs {
		ref := refs[ids[i]]
		if !slices.Equal(ex.InputIDs, ref.IDs) {
			t.Errorf("%s: input_ids\n got %v\nwant %v", ids[i], ex.InputIDs, ref.IDs)
			continue
		}
		for j, m := range ref.Masks.Generation {
			want := int32(data.IgnoreIndex)
			if m == 1 {
				want = ref.IDs[j]
				trained++
			}
			if ex.Labels[j] != want {
				t.Errorf("%s: label %d is %d, want %d", ids[i], j, ex.Labels[j], want)
				break
			}
		}
		total += len(ex.InputIDs)
	}
	if st.Tokens != total || st.TrainedTokens != trained {
		t.Errorf("stats %+v, want %d tokens, %d trained", st, total, trained)
	}
	t.Logf("%d conversations, %d tokens, %d assistant tokens trained: ids and masks equal transformers'", len(exs), total, trained)

	// The whole corpus: its first conversation has no assistant turn, refused as TRL does.
	_, _, err = Prepare(context.Background(), ReadJSONL(filepath.Join(chatDir, "corpus-shared.jsonl")), tok, tm, cfg)
	if err == nil || !strings.Contains(err.Error(), "corpus-shared.jsonl: line 1: assistant_only_loss: the conversation has no assistant tokens") {
		t.Fatalf("error %v", err)
	}
}

// Token ids of the Qwen3 tokenizer, read off its vocabulary: "Hello"=9707, " world"=1879,
// "What"=3838, " is"=374, " "=220, "2"=17, "+"=10, "?"=30, "4"=19, "."=13, "Hel"=32713, and the
// added token <|im_end|>=151645 (the qwen3 config's eos_token).
const imEnd = 151645

func qwenConfig() Config {
	cfg := DefaultConfig()
	cfg.EOSToken = "<|im_end|>"
	return cfg
}

// TestTextFormat: language-modelling text is tokenized and gets the EOS appended unless it
// ends with it; every token is trained. TRL appends only to a column named "text".
func TestTextFormat(t *testing.T) {
	tok := qwen3Tok(t)
	for _, c := range []struct {
		name, field, row string
		want             []int32
	}{
		{"eos appended", "text", `{"text": "Hello world", "id": 7}`, []int32{9707, 1879, imEnd}},
		{"eos kept", "text", `{"text": "Hello world<|im_end|>"}`, []int32{9707, 1879, imEnd}},
		{"other field: no eos, as TRL", "body", `{"body": "Hello world"}`, []int32{9707, 1879}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := qwenConfig()
			cfg.DatasetTextField = c.field
			exs, st, err := Prepare(context.Background(), ReadJSONL(writeLines(t, c.row)), tok, nil, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if len(exs) != 1 || !slices.Equal(exs[0].InputIDs, c.want) || !slices.Equal(exs[0].Labels, c.want) {
				t.Fatalf("got %+v, want ids and labels %v", exs, c.want)
			}
			if st.Format != Text || st.TrainedTokens != len(c.want) {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

// TestPromptCompletion: prompt ids, then completion ids (+EOS), labels -100 over the prompt by
// default (completion_only_loss None → true), all trained with completion_only_loss false.
func TestPromptCompletion(t *testing.T) {
	tok := qwen3Tok(t)
	prompt := []int32{3838, 374, 220, 17, 10, 17, 30}
	completion := []int32{220, 19, 13, imEnd}
	all := append(slices.Clone(prompt), completion...)
	masked := slices.Clone(all)
	for i := range prompt {
		masked[i] = data.IgnoreIndex
	}
	row := `{"prompt": "What is 2+2?", "completion": " 4."}`
	exs, st, err := Prepare(context.Background(), ReadJSONL(writeLines(t, row)), tok, nil, qwenConfig())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(exs[0].InputIDs, all) || !slices.Equal(exs[0].Labels, masked) || st.TrainedTokens != 4 || st.PrefixMismatches != 0 {
		t.Fatalf("got %+v %+v", exs[0], st)
	}
	cfg := qwenConfig()
	off := false
	cfg.CompletionOnlyLoss = &off
	exs, _, err = Prepare(context.Background(), ReadJSONL(writeLines(t, row)), tok, nil, cfg)
	if err != nil || !slices.Equal(exs[0].Labels, all) {
		t.Fatalf("completion_only_loss false: %+v %v", exs, err)
	}

	// "Hel" + "lo": the prompt's token (Hel) is not a prefix of the whole's (Hello): TRL warns
	// and still masks as many tokens as the prompt has.
	exs, st, err = Prepare(context.Background(), ReadJSONL(writeLines(t, `{"prompt": "Hel", "completion": "lo"}`)), tok, nil, qwenConfig())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(exs[0].InputIDs, []int32{9707, imEnd}) || !slices.Equal(exs[0].Labels, []int32{data.IgnoreIndex, imEnd}) ||
		st.PrefixMismatches != 1 || !strings.HasSuffix(st.FirstMismatch, "line 1") {
		t.Fatalf("mismatch: %+v %+v", exs[0], st)
	}
}

// TestConversationalPromptCompletion: the prompt rendered with the generation prompt, the
// whole rendered as one conversation; the completion is what follows the prompt's tokens.
// Against the reference ids of corpus conversation s02 (the same two messages).
func TestConversationalPromptCompletion(t *testing.T) {
	tok, tm := qwen3Tok(t), qwen3Template(t)
	var ref record
	for _, r := range readRecords(t, filepath.Join(chatDir, "expected", "qwen3-trl-training.jsonl")) {
		if r.ID == "s02-user-assistant" && !r.AGP {
			ref = r
		}
	}
	// The prompt ends after the second <|im_start|> and "assistant\n".
	second := slices.Index(ref.IDs[1:], 151644) + 1
	promptLen := second + 3
	row := `{"prompt": [{"role": "user", "content": "What is 2+2?"}], "completion": [{"role": "assistant", "content": "2+2 equals 4."}]}`
	for _, aol := range []bool{false, true} {
		cfg := DefaultConfig()
		cfg.AssistantOnlyLoss = aol
		exs, st, err := Prepare(context.Background(), ReadJSONL(writeLines(t, row)), tok, tm, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if st.Format != ConversationalPromptCompletion || !slices.Equal(exs[0].InputIDs, ref.IDs) {
			t.Fatalf("ids %v, want %v", exs[0].InputIDs, ref.IDs)
		}
		for j, id := range ref.IDs {
			want := id
			if j < promptLen || (aol && ref.Masks.Generation[j] == 0) {
				want = data.IgnoreIndex
			}
			if exs[0].Labels[j] != want {
				t.Fatalf("assistant_only_loss %v: label %d is %d, want %d (labels %v)", aol, j, exs[0].Labels[j], want, exs[0].Labels)
			}
		}
	}
}

// TestTruncationAndDrop: without packing, examples keep their first max_length tokens, and an
// example left with nothing to train on is dropped (TRL's filter after truncation).
func TestTruncationAndDrop(t *testing.T) {
	tok := qwen3Tok(t)
	cfg := qwenConfig()
	cfg.MaxLength = 3
	exs, st, err := Prepare(context.Background(), ReadJSONL(writeLines(t,
		`{"prompt": "What is 2+2?", "completion": " 4."}`, // prompt fills max_length: dropped
		`{"prompt": "Hello", "completion": " world"}`,
	)), tok, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(exs) != 1 || !slices.Equal(exs[0].InputIDs, []int32{9707, 1879, imEnd}) || st.Dropped != 1 || st.Truncated != 1 || st.TruncatedTokens != 8 {
		t.Fatalf("got %+v, stats %+v", exs, st)
	}
}

// TestPacking: bfd packs whole examples into rows of max_length with positions restarting per
// example; bfd_split splits an overlong example instead of cutting it; wrapped cuts the stream.
func TestPacking(t *testing.T) {
	tok := qwen3Tok(t)
	rows := []string{`{"text": "Hello world"}`, `{"text": "What is 2+2?"}`, `{"text": "Hello"}`}
	// Examples: [9707 1879 E] (3), [3838 374 220 17 10 17 30 E] (8), [9707 E] (2).
	for _, c := range []struct {
		strategy string
		want     [][]int32
		pos      [][]int32
	}{
		{StrategyBFD, [][]int32{{3838, 374, 220, 17, 10}, {9707, 1879, imEnd, 9707, imEnd}},
			[][]int32{{0, 1, 2, 3, 4}, {0, 1, 2, 0, 1}}},
		{StrategyBFDSplit, [][]int32{{3838, 374, 220, 17, 10}, {9707, 1879, imEnd, 9707, imEnd}, {17, 30, imEnd}},
			[][]int32{{0, 1, 2, 3, 4}, {0, 1, 2, 0, 1}, {0, 1, 2}}},
		{StrategyWrapped, [][]int32{{9707, 1879, imEnd, 3838, 374}, {220, 17, 10, 17, 30}, {imEnd, 9707, imEnd}}, nil},
	} {
		t.Run(c.strategy, func(t *testing.T) {
			cfg := qwenConfig()
			cfg.Packing, cfg.PackingStrategy, cfg.MaxLength = true, c.strategy, 5
			exs, st, err := Prepare(context.Background(), ReadJSONL(writeLines(t, rows...)), tok, nil, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if len(exs) != len(c.want) || st.Rows != len(c.want) {
				t.Fatalf("%d rows, want %d: %+v", len(exs), len(c.want), exs)
			}
			for i, ex := range exs {
				if !slices.Equal(ex.InputIDs, c.want[i]) || !slices.Equal(ex.Labels, c.want[i]) {
					t.Errorf("row %d: %v / %v, want %v", i, ex.InputIDs, ex.Labels, c.want[i])
				}
				if c.pos != nil && !slices.Equal(ex.PositionIDs, c.pos[i]) {
					t.Errorf("row %d: positions %v, want %v", i, ex.PositionIDs, c.pos[i])
				}
			}
			t.Logf("%s: %d rows, padding %.3f at block 5", c.strategy, st.Rows, st.PaddingFraction(5))
		})
	}
}
