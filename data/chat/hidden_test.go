package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/gotpu/gotpu/internal/jinja"
)

// hiddenConversation is one line of testdata/chat/hidden/conversations.jsonl.
type hiddenConversation struct {
	ID       string                     `json:"id"`
	Cat      string                     `json:"cat"`
	Messages []json.RawMessage          `json:"messages"`
	Tools    []json.RawMessage          `json:"tools"` // nil: None; [] is an empty list
	Extra    map[string]json.RawMessage `json:"extra"`
	Families []string                   `json:"families"`
	CLI      bool                       `json:"cli"`
}

// hiddenRecord is one line of testdata/chat/hidden/hidden.jsonl.
type hiddenRecord struct {
	ID       string  `json:"id"`
	Family   string  `json:"family"`
	AGP      bool    `json:"add_generation_prompt"`
	Rendered *string `json:"rendered"`
	Error    *struct {
		Kind    string `json:"kind"`
		Message string `json:"message"`
	} `json:"error"`
	GenCP   [][2]int `json:"generation_spans_cp"`
	GenUTF8 [][2]int `json:"generation_spans_utf8"`
}

// TestHidden renders the conversations of testdata/chat/hidden (made by gen_hidden.py from a
// seed, none of them in the shared corpus: tool calls, content lists, null/missing contents,
// unknown roles, reasoning_content, ~20 KB contents, tools lists and extra template arguments...)
// with every family and compares with Python Jinja2's renders: the text exactly,
// raise_exception messages exactly, runtime errors as errors (and the message exactly where the
// engine claims Python's wording), generation spans exactly. GOTPU_CHAT_HIDDEN_DIR=DIR checks the
// set that gen_hidden.py --seed N --out DIR wrote instead.
func TestHidden(t *testing.T) {
	dir := filepath.Join(chatDir, "hidden")
	if d := os.Getenv("GOTPU_CHAT_HIDDEN_DIR"); d != "" {
		dir = d // another set: gen_hidden.py --seed N --out DIR
	}
	convs := map[string]hiddenConversation{}
	for _, c := range readJSONL[hiddenConversation](t, filepath.Join(dir, "conversations.jsonl")) {
		convs[c.ID] = c
	}
	recs := readJSONL[hiddenRecord](t, filepath.Join(dir, "hidden.jsonl"))
	if len(convs) < 150 || len(recs) < 150*13 {
		t.Fatalf("%d conversations, %d records: the hidden set is incomplete", len(convs), len(recs))
	}
	tms := map[string]*Template{}
	seen := map[string]int{}
	pass, texts, raises, runtimes, runtimeExact, gens := 0, 0, 0, 0, 0, 0
	for _, e := range recs {
		what := fmt.Sprintf("%s %s agp=%v", e.Family, e.ID, e.AGP)
		c, ok := convs[e.ID]
		if !ok {
			t.Fatalf("%s: not in conversations.jsonl", what)
		}
		seen[e.ID]++
		tm := tms[e.Family]
		if tm == nil {
			var err error
			if tm, err = LoadTemplate(filepath.Join(chatDir, "families", e.Family, "tokenizer_config.json"), ""); err != nil {
				t.Fatal(err)
			}
			tms[e.Family] = tm
		}
		r, err := tm.Render(t.Context(), c.Messages, RenderOptions{AddGenerationPrompt: e.AGP, Now: fixedNow, Tools: c.Tools, Extra: c.Extra})
		if e.Error != nil {
			var re *RaiseError
			switch e.Error.Kind {
			case "raise_exception":
				if !errors.As(err, &re) || re.Message != e.Error.Message {
					t.Errorf("%s: want raise_exception %q, got %v (text %q)", what, e.Error.Message, err, r.Text)
					continue
				}
				raises++
			case "runtime":
				if err == nil {
					t.Errorf("%s: want runtime error %q, rendered %q", what, e.Error.Message, r.Text)
					continue
				}
				if errors.As(err, &re) {
					t.Errorf("%s: want runtime error %q, got raise_exception %q", what, e.Error.Message, re.Message)
					continue
				}
				var je *jinja.Error
				if errors.As(err, &je) && je.Python && je.PythonMessage() != e.Error.Message {
					t.Errorf("%s: runtime error %q claims Python's wording, Python says %q", what, je.PythonMessage(), e.Error.Message)
					continue
				}
				if je != nil && je.PythonMessage() == e.Error.Message {
					runtimeExact++
				}
				runtimes++
			default:
				t.Fatalf("%s: error kind %q", what, e.Error.Kind)
			}
			pass++
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", what, err)
			continue
		}
		if r.Text != *e.Rendered {
			t.Errorf("%s: rendered\n got %q\nwant %q", what, r.Text, *e.Rendered)
			continue
		}
		if tm.HasGeneration() || e.GenCP != nil {
			if !sameGeneration(t, what, r, e.GenCP, e.GenUTF8) {
				continue
			}
			gens++
		}
		texts++
		pass++
	}
	for id, c := range convs {
		want := 26
		if c.Families != nil {
			want = 2 * len(c.Families)
		}
		if seen[id] != want {
			t.Errorf("%s: %d records, want %d", id, seen[id], want)
		}
	}
	t.Logf("%d/%d records pass (%d texts, %d of them with generation spans; %d raise_exception; %d runtime errors, %d with Python's message) over %d conversations",
		pass, len(recs), texts, gens, raises, runtimes, runtimeExact, len(convs))
}
