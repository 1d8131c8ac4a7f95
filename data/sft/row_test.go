package sft

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/data/chat"
	"github.com/gotpu/gotpu/data/tokenizer"
)

// TestBadRows: each bad row is refused with an error naming the file, the line and the field.
func TestBadRows(t *testing.T) {
	tok, tm := qwen3Tok(t), qwen3Template(t)
	good := `{"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}]}`
	for _, c := range []struct {
		name string
		rows []string
		cfg  func(*Config)
		want string
	}{
		{"not JSON", []string{`{"text": `}, nil, "line 1: not a JSON object"},
		{"not an object", []string{`[1, 2]`}, nil, "line 1: not a JSON object"},
		{"no known field", []string{`{"body": "x", "id": 1}`}, nil, `line 1: no "text", "messages", or "prompt" and "completion" field (fields: body, id)`},
		{"mixed in a row", []string{`{"text": "a", "messages": [{"role": "user", "content": "b"}]}`}, nil, `line 1: mixes formats: "text" (language modeling) and "messages" (conversational)`},
		{"mixed across rows", []string{good, `{"text": "a"}`}, nil, "line 2: the row is language modeling (text) but the first row is conversational language modeling (messages)"},
		{"message without role", []string{good, `{"messages": [{"content": "Hi"}]}`}, nil, `line 2: field "messages": message 0: no "role"`},
		{"role not a string", []string{`{"messages": [{"role": 3, "content": "Hi"}]}`}, nil, `line 1: field "messages": message 0: "role" is a number, want a string`},
		{"content a number", []string{`{"messages": [{"role": "user", "content": 5}]}`}, nil, `line 1: field "messages": message 0: "content" is a number, want a string, a list of parts or null`},
		{"messages not a list", []string{`{"messages": "hi"}`}, nil, `line 1: field "messages": a string, want a list of messages`},
		{"empty messages", []string{`{"messages": []}`}, nil, `line 1: field "messages": an empty list of messages`},
		{"text not a string", []string{`{"text": 12}`}, nil, `line 1: field "text": a number, want a string`},
		{"prompt only", []string{`{"prompt": "a"}`}, nil, `line 1: field "prompt" without "completion"`},
		{"prompt list, completion string", []string{`{"prompt": [{"role": "user", "content": "a"}], "completion": "b"}`}, nil,
			`line 1: field "prompt" is a list but "completion" is a string`},
		{"completion not a string", []string{`{"prompt": "a", "completion": {"x": 1}}`}, nil, `line 1: field "completion": an object, want a string`},
		{"tools not a list", []string{`{"messages": [{"role": "user", "content": "a"}], "tools": 3}`}, nil, `line 1: field "tools": a number, want a list`},
		{"kwargs not an object", []string{`{"messages": [{"role": "user", "content": "a"}], "chat_template_kwargs": [1]}`}, nil, `line 1: field "chat_template_kwargs": a list, want an object`},
		{"assistant_only_loss on text", []string{`{"text": "a"}`}, func(c *Config) { c.AssistantOnlyLoss = true },
			"line 1: assistant_only_loss: the dataset is language modeling (text), not conversational"},
		{"eos not in vocab", []string{`{"text": "a"}`}, func(c *Config) { c.EOSToken = "<nope>" }, `eos_token: "<nope>" is not in the tokenizer's vocabulary`},
		{"eos unset", []string{`{"text": "a"}`}, func(c *Config) { c.EOSToken = "" }, "eos_token: not set"},
		{"empty file", []string{""}, nil, "no rows: the dataset is empty"},
		{"packing without max_length", []string{good}, func(c *Config) { c.Packing, c.MaxLength = true, 0 }, "max_length: packing needs a row length"},
		{"unknown strategy", []string{good}, func(c *Config) { c.Packing, c.PackingStrategy = true, "ffd" }, `packing_strategy: "ffd" is not one of bfd, bfd_split, wrapped`},
		{"padding_free without packing", []string{good}, func(c *Config) { c.PaddingFree = true }, "padding_free: without packing, max_length (1024) is not enforced"},
		// Issue 38: bounded before decoding (each once took hundreds of MB under 2 GB).
		{"too many keys", []string{manyKeysRow(1 << 17)}, nil, "line 1: an object of more than 65536 keys"},
		{"nested too deep", []string{`{"text": "a", "meta": ` + strings.Repeat("[", 1000) + strings.Repeat("]", 1000) + `}`}, nil, "line 1: arrays and objects nested deeper than 1000 levels"},
		{"too many messages", []string{`{"messages": [` + strings.Repeat(`{},`, MaxMessages) + `{}]}`}, nil, `line 1: field "messages": more than 65536 messages (sft.MaxMessages`},
		{"a message of too many keys", []string{`{"messages": [{"role": "user", "content": "a"}, ` + manyKeysRow(1<<17) + `]}`}, nil, `line 1: field "messages": message 1: an object of more than 65536 keys`},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := qwenConfig()
			if c.cfg != nil {
				c.cfg(&cfg)
			}
			path := writeLines(t, c.rows...)
			_, _, err := Prepare(context.Background(), ReadJSONL(path), tok, tm, cfg)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v\nwant it to contain %q", err, c.want)
			}
			if strings.Contains(c.want, "line ") && !strings.Contains(err.Error(), path) {
				t.Fatalf("error %v does not name the file %s", err, path)
			}
		})
	}
}

// manyKeysRow is an object of a "text" key and n others.
func manyKeysRow(n int) string {
	var b strings.Builder
	b.WriteString(`{"text": "x"`)
	for i := range n {
		b.WriteString(`, "k` + strconv.Itoa(i) + `": 0`)
	}
	return b.String() + "}"
}

// TestNoGenerationBlocks: assistant_only_loss with a template that has no {% generation %}
// blocks (plain Qwen3's) is refused before any row is read, naming the template file.
func TestNoGenerationBlocks(t *testing.T) {
	cfgPath := filepath.Join(chatDir, "families", "qwen3", "tokenizer_config.json")
	tm, err := chat.LoadTemplate(cfgPath, "")
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.AssistantOnlyLoss = true
	_, _, err = Prepare(context.Background(), ReadJSONL(filepath.Join(chatDir, "corpus-shared.jsonl")), qwen3Tok(t), tm, cfg)
	if err == nil || !strings.Contains(err.Error(), "assistant_only_loss: the chat template "+cfgPath) || !strings.Contains(err.Error(), "no {% generation %} blocks") {
		t.Fatalf("error %v", err)
	}
	// Without assistant_only_loss the same template trains on the whole conversation.
	exs, st, err := Prepare(context.Background(), ReadJSONL(filepath.Join(chatDir, "corpus-shared.jsonl")), qwen3Tok(t), tm, DefaultConfig())
	if err != nil || len(exs) != 25 || st.TrainedTokens != st.Tokens {
		t.Fatalf("%d examples, %+v, %v", len(exs), st, err)
	}
}

// TestShareGPTConversations: "conversations" of {"from", "value"} render as "messages" of
// {"role", "content"} (TRL's maybe_convert_to_chatml).
func TestShareGPTConversations(t *testing.T) {
	tok, tm := qwen3Tok(t), qwen3Template(t)
	a, _, err := Prepare(context.Background(), ReadJSONL(writeLines(t, `{"conversations": [{"from": "user", "value": "Hi"}, {"from": "assistant", "value": "Hello."}]}`)), tok, tm, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := Prepare(context.Background(), ReadJSONL(writeLines(t, `{"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}]}`)), tok, tm, DefaultConfig())
	if err != nil || !slices.Equal(a[0].InputIDs, b[0].InputIDs) {
		t.Fatalf("%v vs %v (%v)", a, b, err)
	}
}

// TestReaders: a JSON array file and JSON lines give the same rows; a line beyond MaxRowBytes
// is refused by number before it is held; an unclosed array is an error.
func TestReaders(t *testing.T) {
	dir := t.TempDir()
	arr := filepath.Join(dir, "a.json")
	if err := os.WriteFile(arr, []byte(`[{"text": "Hello"}, {"text": "Hello world"}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	exs, _, err := Prepare(context.Background(), ReadFile(context.Background(), arr, "", "text"), qwen3Tok(t), nil, qwenConfig())
	if err != nil || len(exs) != 2 || !slices.Equal(exs[1].InputIDs, []int32{9707, 1879, imEnd}) {
		t.Fatalf("%+v %v", exs, err)
	}
	bad := filepath.Join(dir, "b.json")
	if err := os.WriteFile(bad, []byte(`[{"text": "Hello"}, {"text": "x"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = Prepare(context.Background(), ReadFile(context.Background(), bad, "", "text"), qwen3Tok(t), nil, qwenConfig())
	if err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("unclosed array: %v", err)
	}
	long := filepath.Join(dir, "long.jsonl")
	f, err := os.Create(long)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"text": "a"}` + "\n" + `{"text": "`)
	chunk := []byte(strings.Repeat("x", 1<<20))
	for range MaxRowBytes>>20 + 1 {
		f.Write(chunk)
	}
	f.WriteString("\"}\n")
	f.Close()
	n := 0
	for _, err := range ReadJSONL(long) {
		if err != nil {
			if !strings.Contains(err.Error(), "long.jsonl: line 2: longer than") {
				t.Fatal(err)
			}
			n = -1
			break
		}
		n++
	}
	if n != -1 {
		t.Fatal("the overlong line was read")
	}
}

// TestTableRows: text and prompt/completion string columns come from a CSV through data/table.
func TestTableRows(t *testing.T) {
	dir := t.TempDir()
	csv := filepath.Join(dir, "pc.csv")
	if err := os.WriteFile(csv, []byte("prompt,completion\nWhat is 2+2?, 4.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	exs, st, err := Prepare(context.Background(), ReadFile(context.Background(), csv, "", "text"), qwen3Tok(t), nil, qwenConfig())
	if err != nil || st.Format != PromptCompletion || !slices.Equal(exs[0].InputIDs, []int32{3838, 374, 220, 17, 10, 17, 30, 220, 19, 13, imEnd}) {
		t.Fatalf("%+v %+v %v", exs, st, err)
	}
	none := filepath.Join(dir, "none.csv")
	os.WriteFile(none, []byte("a,b\n1,2\n"), 0o644)
	_, _, err = Prepare(context.Background(), ReadFile(context.Background(), none, "", "text"), qwen3Tok(t), nil, qwenConfig())
	if err == nil || !strings.Contains(err.Error(), `none.csv: no "text" column, nor "prompt" and "completion" (columns: a, b)`) {
		t.Fatalf("%v", err)
	}
}

// byteTok tokenizes one token per byte (id = byte value), every token known: enough for
// fuzzing the parser and the label logic without a vocabulary.
type byteTok struct{}

func (byteTok) Encode(text string, _ bool) (*tokenizer.Encoding, error) {
	e := &tokenizer.Encoding{IDs: make([]uint32, len(text)), ByteOffsets: make([]tokenizer.Offset, len(text))}
	for i := range len(text) {
		e.IDs[i], e.ByteOffsets[i] = uint32(text[i]), tokenizer.Offset{i, i + 1}
	}
	return e, nil
}

func (byteTok) TokenToID(string) (uint32, bool) { return 1, true }

// FuzzPrepare: any row is either refused with an error naming its line, or gives examples
// whose labels are their ids or -100, within max_length, never a panic.
func FuzzPrepare(f *testing.F) {
	for _, s := range []string{
		`{"text": "hello"}`, `{"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}`,
		`{"prompt": "a", "completion": "b"}`, `{"prompt": [{"role": "user", "content": "a"}], "completion": [{"role": "assistant", "content": "b"}]}`,
		`{"conversations": [{"from": "human", "value": "x"}]}`, `{"messages": [{"role": "user"}], "tools": "[{\"name\": \"f\"}]"}`,
		`{"text": null, "prompt": "a", "completion": "b", "chat_template_kwargs": {"enable_thinking": false}}`, `[]`, `{"messages": [{}]}`,
	} {
		f.Add(s, false, uint8(0))
	}
	tm, err := chat.LoadTemplate(qwen3Config, "")
	if err != nil {
		f.Fatal(err)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, row string, aol bool, maxLen uint8) {
		if strings.ContainsAny(row, "\n\r") {
			return
		}
		path := filepath.Join(dir, "row.jsonl")
		if err := os.WriteFile(path, []byte(row+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg := DefaultConfig()
		cfg.EOSToken, cfg.AssistantOnlyLoss, cfg.MaxLength = "</s>", aol, int(maxLen)
		exs, _, err := Prepare(context.Background(), ReadJSONL(path), byteTok{}, tm, cfg)
		if err != nil {
			if json.Valid([]byte(row)) && strings.TrimSpace(row) != "" && !strings.Contains(err.Error(), "line 1") && !strings.Contains(err.Error(), "all 1 examples were dropped") {
				t.Fatalf("error without the row: %v", err)
			}
			return
		}
		for _, ex := range exs {
			if len(ex.Labels) != len(ex.InputIDs) || (cfg.MaxLength > 0 && len(ex.InputIDs) > cfg.MaxLength) {
				t.Fatalf("example %+v", ex)
			}
			for i, l := range ex.Labels {
				if l != ex.InputIDs[i] && l != data.IgnoreIndex {
					t.Fatalf("label %d is %d, id %d", i, l, ex.InputIDs[i])
				}
			}
		}
	})
}
