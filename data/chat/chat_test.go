package chat

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gotpu/gotpu/data/tokenizer"
	"github.com/gotpu/gotpu/internal/jinja"
)

var chatDir = filepath.Join("..", "..", "testdata", "chat")

// fixedNow is the golden data's clock (testdata/chat/README.md).
var fixedNow = time.Date(2025, 3, 14, 9, 5, 7, 0, time.UTC)

// familyTokenizer: the families whose expected records carry ids, and the tokenizer in
// testdata/tokenizers that produced them (testdata/chat/README.md, "Families").
var familyTokenizer = map[string]string{
	"qwen3":              "qwen3",
	"qwen3-trl-training": "qwen3",
	"mistral-7b-v0.1":    "mistral-7b",
}

type conversation struct {
	ID       string            `json:"id"`
	Messages []json.RawMessage `json:"messages"`
}

type expected struct {
	ID       string  `json:"id"`
	AGP      bool    `json:"add_generation_prompt"`
	Rendered *string `json:"rendered"`
	Error    *struct {
		Kind    string `json:"kind"`
		Message string `json:"message"`
	} `json:"error"`
	GenCP   [][2]int `json:"generation_spans_cp"`
	GenUTF8 [][2]int `json:"generation_spans_utf8"`
	IDs     []uint32 `json:"ids"`
	Masks   *struct {
		Generation []int `json:"generation"`
	} `json:"masks"`
}

func readJSONL[T any](t testing.TB, path string) []T {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for n := 1; sc.Scan(); n++ {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("%s line %d: %v", path, n, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func cpToByte(s string, cp int) int {
	i := 0
	for b := range s {
		if i == cp {
			return b
		}
		i++
	}
	return len(s)
}

// TestConformance: every expected record of every family renders to its text (or raises its
// message), with its generation spans, and where it has ids, the tokenizer's ids and
// AssistantMask equal the expected ids and generation mask.
func TestConformance(t *testing.T) {
	convs := map[string]conversation{}
	for _, c := range readJSONL[conversation](t, filepath.Join(chatDir, "corpus-shared.jsonl")) {
		convs[c.ID] = c
	}
	fams, err := filepath.Glob(filepath.Join(chatDir, "families", "*", "tokenizer_config.json"))
	if err != nil || len(fams) != 13 {
		t.Fatalf("families: %v %v", fams, err)
	}
	toks := map[string]tokenizer.Tokenizer{}
	for _, cfg := range fams {
		fam := filepath.Base(filepath.Dir(cfg))
		t.Run(fam, func(t *testing.T) {
			tm, err := LoadTemplate(cfg, "")
			if err != nil {
				t.Fatal(err)
			}
			var tok tokenizer.Tokenizer
			if name, ok := familyTokenizer[fam]; ok {
				if tok = toks[name]; tok == nil {
					p, err := tokenizer.FromFile(filepath.Join("..", "..", "testdata", "tokenizers", name, "tokenizer.json.gz"))
					if err != nil {
						t.Fatal(err)
					}
					tok, toks[name] = p, p
				}
			}
			exps := readJSONL[expected](t, filepath.Join(chatDir, "expected", fam+".jsonl"))
			pass, withIDs := 0, 0
			for _, e := range exps {
				what := fmt.Sprintf("%s agp=%v", e.ID, e.AGP)
				c, ok := convs[e.ID]
				if !ok {
					t.Fatalf("%s: not in the corpus", what)
				}
				r, err := tm.Render(t.Context(), c.Messages, RenderOptions{AddGenerationPrompt: e.AGP, Now: fixedNow})
				if e.Error != nil {
					var re *RaiseError
					if e.Error.Kind != "raise_exception" || !errors.As(err, &re) || re.Message != e.Error.Message {
						t.Errorf("%s: want %s %q, got %v", what, e.Error.Kind, e.Error.Message, err)
						continue
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
				if (e.GenCP != nil || r.Generation != nil) && !sameGeneration(t, what, r, e.GenCP, e.GenUTF8) {
					continue
				}
				if e.IDs != nil {
					if tok == nil {
						t.Fatalf("%s: record has ids but the family has no tokenizer here", what)
					}
					enc, err := tok.Encode(r.Text, false)
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(enc.IDs, e.IDs) {
						t.Errorf("%s: ids %v, want %v", what, enc.IDs, e.IDs)
						continue
					}
					offs := make([][2]int, len(enc.ByteOffsets))
					for i, o := range enc.ByteOffsets {
						offs[i] = o
					}
					want := e.Masks.Generation
					if !tm.HasGeneration() {
						// The fixture leaves the mask empty for templates without generation
						// blocks; the mask is all zeros then.
						if len(want) != 0 {
							t.Fatalf("%s: generation mask for a template without generation blocks", what)
						}
						want = make([]int, len(enc.IDs))
					}
					if mask := AssistantMask(r, offs); !slices.Equal(mask, want) {
						t.Errorf("%s: assistant mask %v, want %v", what, mask, e.Masks.Generation)
						continue
					}
					withIDs++
				}
				pass++
			}
			if len(exps) != 50 {
				t.Errorf("%d records, want 50", len(exps))
			}
			t.Logf("%s: %d/%d records pass (%d with ids and masks); generation blocks: %v", fam, pass, len(exps), withIDs, tm.HasGeneration())
		})
	}
}

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func msgs(js ...string) []json.RawMessage {
	out := make([]json.RawMessage, len(js))
	for i, s := range js {
		out[i] = json.RawMessage(s)
	}
	return out
}

// TestLoadTemplate: string, named list, chat_template.jinja precedence, AddedToken specials,
// unknown names, and parse errors naming file and line.
func TestLoadTemplate(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "tokenizer_config.json", `{
		"bos_token": {"content": "<s>", "lstrip": false},
		"eos_token": "</s>",
		"unk_token": null,
		"additional_special_tokens": ["<x>", {"content": "<y>"}],
		"chat_template": [
			{"name": "default", "template": "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}{{ eos_token }}{{ unk_token is defined }}"},
			{"name": "tool_use", "template": "{{ additional_special_tokens | join(',') }}"}
		]}`)
	one := msgs(`{"role": "user", "content": "hi"}`)
	for _, tc := range []struct{ name, want string }{{"", "<s>hi</s>False"}, {"default", "<s>hi</s>False"}, {"tool_use", "<x>,<y>"}} {
		tm, err := LoadTemplate(cfg, tc.name)
		if err != nil {
			t.Fatal(err)
		}
		r, err := tm.Render(t.Context(), one, RenderOptions{})
		if err != nil || r.Text != tc.want || tm.HasGeneration() {
			t.Errorf("template %q: %q, %v; want %q", tc.name, r.Text, err, tc.want)
		}
	}
	_, err := LoadTemplate(cfg, "rag")
	if err == nil || !strings.Contains(err.Error(), `"default", "tool_use"`) || !strings.Contains(err.Error(), cfg) {
		t.Errorf("unknown name: %v", err)
	}

	// chat_template.jinja beside the config wins, as in transformers >= 4.49.
	writeFile(t, dir, "chat_template.jinja", "from file {{ messages[0].role }}\n")
	tm, err := LoadTemplate(cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	if r, err := tm.Render(t.Context(), one, RenderOptions{}); err != nil || r.Text != "from file user" {
		t.Errorf("chat_template.jinja: %q, %v", r.Text, err)
	}
	if _, err := LoadTemplate(cfg, "tool_use"); err == nil || !strings.Contains(err.Error(), "chat_template.jinja") {
		t.Errorf("named template with chat_template.jinja: %v", err)
	}

	// A parse error names the file and the line.
	bad := writeFile(t, dir, "chat_template.jinja", "line one\n{% for m in messages %}\n{{ m.content }}\n{% if x %}\n{% endfor %}\n")
	_, err = LoadTemplate(cfg, "")
	if err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "line ") {
		t.Errorf("parse error: %v", err)
	}
	_, err = Parse("a\nb\n{{ 1 + }}\n", "x.jinja", nil)
	if err == nil || !strings.Contains(err.Error(), "x.jinja") || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("parse error: %v", err)
	}
	// A generation tag split over lines keeps later lines' numbers.
	_, err = Parse("{% generation\n%}x{% endgeneration %}\n{{ ) }}", "g.jinja", nil)
	if err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("parse error after a generation tag: %v", err)
	}

	noTmpl := writeFile(t, t.TempDir(), "tokenizer_config.json", `{"eos_token": 5}`)
	if _, err := LoadTemplate(noTmpl, ""); err == nil || !strings.Contains(err.Error(), "eos_token") {
		t.Errorf("bad special token: %v", err)
	}
}

// TestTemplateLoadsJinjaFile: the golden families whose template ships as chat_template.jinja
// load from that file and render like the family's tokenizer_config.json.
func TestTemplateLoadsJinjaFile(t *testing.T) {
	convs := readJSONL[conversation](t, filepath.Join(chatDir, "corpus-shared.jsonl"))
	for _, fam := range []string{"llama3.2", "qwen3-trl-training"} {
		dir := t.TempDir()
		src, err := os.ReadFile(filepath.Join(chatDir, "templates", fam, "chat_template.jinja"))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, dir, "chat_template.jinja", string(src))
		cfgSrc, err := os.ReadFile(filepath.Join(chatDir, "families", fam, "tokenizer_config.json"))
		if err != nil {
			t.Fatal(err)
		}
		var cfg map[string]any
		if err := json.Unmarshal(cfgSrc, &cfg); err != nil {
			t.Fatal(err)
		}
		delete(cfg, "chat_template")
		b, _ := json.Marshal(cfg)
		fromFile, err := LoadTemplate(writeFile(t, dir, "tokenizer_config.json", string(b)), "")
		if err != nil {
			t.Fatal(err)
		}
		fromCfg, err := LoadTemplate(filepath.Join(chatDir, "families", fam, "tokenizer_config.json"), "")
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range convs {
			a, errA := fromFile.Render(t.Context(), c.Messages, RenderOptions{Now: fixedNow})
			b, errB := fromCfg.Render(t.Context(), c.Messages, RenderOptions{Now: fixedNow})
			if fmt.Sprint(errA) != strings.ReplaceAll(fmt.Sprint(errB), fromCfg.Name(), fromFile.Name()) || a.Text != b.Text || !slices.Equal(a.Generation, b.Generation) {
				t.Errorf("%s %s: from file %q %v, from config %q %v", fam, c.ID, a.Text, errA, b.Text, errB)
			}
		}
	}
}

// TestRenderBadInput: messages without role, non-objects, reserved extra names,
// raise_exception's message, strftime_now on the given clock, Extra/Tools reaching the template,
// and generation spans as transformers' AssistantTracker records them.
func TestRenderBadInput(t *testing.T) {
	tm, err := Parse("{% for m in messages %}{% if m.role == 'bad' %}{{ raise_exception('no ' + m.role) }}{% endif %}"+
		"{% generation %}{{ m.content }}{% endgeneration %}{% endfor %}|{{ strftime_now('%d %b %Y %H:%M') }}|{{ x }}|{{ tools | length if tools else 'none' }}\n", "t.jinja", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !tm.HasGeneration() {
		t.Fatal("HasGeneration false")
	}
	_, err = tm.Render(t.Context(), msgs(`{"role": "user", "content": "a"}`, `{"content": "b"}`), RenderOptions{})
	if err == nil || !strings.Contains(err.Error(), "message 1") || !strings.Contains(err.Error(), "role") {
		t.Errorf("no role: %v", err)
	}
	if _, err = tm.Render(t.Context(), msgs(`["role"]`), RenderOptions{}); err == nil || !strings.Contains(err.Error(), "message 0") {
		t.Errorf("not an object: %v", err)
	}
	// Private-use code points are ordinary text (generation spans are tracked by the engine).
	if r, err := tm.Render(t.Context(), msgs(`{"role": "user", "content": "x"}`, `{"role": "user", "content": "a\ue000\uE001"}`), RenderOptions{}); err != nil || !strings.HasPrefix(r.Text, "xa\ue000\ue001|") || !slices.Equal(r.Generation, [][2]int{{1, 8}}) {
		t.Errorf("private-use code points: %q %v %v", r.Text, r.Generation, err)
	}
	if r, err := mustParse(t, "\ue000{{ 1 }}").Render(t.Context(), nil, RenderOptions{}); err != nil || r.Text != "\ue0001" {
		t.Errorf("private-use code point in the template: %q %v", r.Text, err)
	}
	if _, err = tm.Render(t.Context(), nil, RenderOptions{Extra: map[string]json.RawMessage{"messages": json.RawMessage(`[]`)}}); err == nil || !strings.Contains(err.Error(), `"messages"`) {
		t.Errorf("reserved extra: %v", err)
	}
	_, err = tm.Render(t.Context(), msgs(`{"role": "bad"}`), RenderOptions{})
	var re *RaiseError
	if !errors.As(err, &re) || re.Message != "no bad" || re.Template != "t.jinja" {
		t.Errorf("raise: %v", err)
	}
	r, err := tm.Render(t.Context(), msgs(`{"role": "user", "content": "é"}`, `{"role": "assistant", "content": "ok"}`), RenderOptions{
		Now: fixedNow, Extra: map[string]json.RawMessage{"x": json.RawMessage(`7`)}, Tools: msgs(`{"name": "f"}`)})
	// AssistantTracker records a block only once something was output before it (its
	// is_active() is false while nothing was yielded), so the first block, at offset 0, has no
	// span: Python Jinja2 gives [[1, 3]] in code points here.
	if err != nil || r.Text != "éok|14 Mar 2025 09:05|7|1" || !slices.Equal(r.Generation, [][2]int{{2, 4}}) {
		t.Errorf("render: %q %v %v", r.Text, r.Generation, err)
	}
	if m := AssistantMask(r, [][2]int{{0, 1}, {1, 2}, {2, 4}, {4, 5}, {5, 5}}); !slices.Equal(m, []int{0, 0, 1, 0, 0}) {
		t.Errorf("mask %v", m)
	}
	big := make([]json.RawMessage, 2)
	big[0] = json.RawMessage(`{"role": "user", "content": "` + strings.Repeat("a", MaxInputBytes) + `"}`)
	big[1] = big[0]
	if _, err := tm.Render(t.Context(), big, RenderOptions{}); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("oversized input: %v", err)
	}
}

// FuzzParseRender: Parse and Render never panic, and generation spans lie inside the text.
func FuzzParseRender(f *testing.F) {
	f.Add("{% for m in messages %}{{ m.role }}{% generation %}{{ m.content }}{% endgeneration %}{% endfor %}", `{"role": "user", "content": "x"}`)
	f.Add("{{ raise_exception('x') }}", `{"role": "a"}`)
	f.Add("{% if messages[0]['role'] == 'system' %}{{ bos_token }}{% endif %}{{ strftime_now('%Y') }}", `{"role": "system"}`)
	f.Add("{% endgeneration %}", `{"role": "a", "content": [1, 2.5, null]}`)
	f.Fuzz(func(t *testing.T, src, msg string) {
		if len(src) > 512 || strings.Contains(src, "range") {
			t.Skip() // renders are bounded (jinja.Limits), but a long one makes fuzzing slow
		}
		tm, err := Parse(src, "fuzz.jinja", map[string]string{"bos_token": "<s>"})
		if err != nil {
			return
		}
		r, err := tm.Render(t.Context(), []json.RawMessage{json.RawMessage(msg)}, RenderOptions{AddGenerationPrompt: true, Now: fixedNow})
		if err != nil {
			return
		}
		for _, g := range r.Generation {
			if g[0] < 0 || g[0] > g[1] || g[1] > len(r.Text) {
				t.Fatalf("span %v outside %d bytes", g, len(r.Text))
			}
		}
	})
}

func mustParse(t *testing.T, src string) *Template {
	t.Helper()
	tm, err := Parse(src, "test.jinja", nil)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

// TestBoundedAllocation: a template cannot make a render allocate or run without bound:
// range() has Jinja2's sandbox limit (MAX_RANGE, its OverflowError message), * is Python's
// operator but charged before it allocates, and output, built bytes, steps and recursion depth
// are limited (jinja.Limits), each a *jinja.LimitError.
func TestBoundedAllocation(t *testing.T) {
	msgs := []json.RawMessage{json.RawMessage(`{"role":"user","content":"hi"}`)}
	tm := mustParse(t, "{% for i in range(1000000000) %}x{% endfor %}")
	if _, err := tm.Render(t.Context(), msgs, RenderOptions{}); err == nil || !strings.Contains(err.Error(), "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).") {
		t.Errorf("range(10**9): %v", err)
	}
	tm = mustParse(t, "{{ range(2, 11, 3) | join(',') }}|{{ range(5, 0, -2) | join(',') }}|{{ range(100000) | length }}|{{ 'ab' * 3 }}|{{ [1] * 2 }}|{{ 2 ** 40 }}")
	if r, err := tm.Render(t.Context(), msgs, RenderOptions{}); err != nil || r.Text != "2,5,8|5,3,1|100000|ababab|[1, 1]|1099511627776" {
		t.Errorf("ranges and products: %q %v", r.Text, err)
	}
	for _, c := range []struct{ src, limit string }{
		{"{{ 'a' * 10000000000 }}", "MaxBytes"},
		{"{% set ns = namespace(s='ab') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}", "MaxBytes"},
		{"{% for i in range(100000) %}{% for j in range(100000) %}{% for k in range(100000) %}xxxxxxxxxxxxxxxx{% endfor %}{% endfor %}{% endfor %}", "MaxOutputBytes"},
		{"{% set r = range(100000) %}{% for i in r %}{% for j in r %}{% endfor %}{% endfor %}", "MaxSteps"},
		{"{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "MaxDepth"},
	} {
		start := time.Now()
		_, err := mustParse(t, c.src).Render(t.Context(), msgs, RenderOptions{})
		var le *jinja.LimitError
		if !errors.As(err, &le) || le.Limit != c.limit {
			t.Errorf("%s: %v, want the %s limit", c.src, err, c.limit)
		}
		t.Logf("%s: %v after %v", c.limit, err, time.Since(start))
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("%s: stopped after %v", c.src, d)
		}
	}
}

// sameGeneration compares r's generation spans (byte offsets) with a record's spans in code
// points and in UTF-8 bytes, reporting a difference; a record whose two forms disagree is a
// broken fixture.
func sameGeneration(t *testing.T, what string, r Rendered, wantCP, wantUTF8 [][2]int) bool {
	t.Helper()
	var cp [][2]int
	for _, g := range r.Generation {
		cp = append(cp, [2]int{utf8.RuneCountInString(r.Text[:g[0]]), utf8.RuneCountInString(r.Text[:g[1]])})
	}
	for _, g := range wantCP {
		if b := [2]int{cpToByte(r.Text, g[0]), cpToByte(r.Text, g[1])}; !slices.Contains(wantUTF8, b) {
			t.Fatalf("%s: fixture cp span %v is byte span %v, not in %v", what, g, b, wantUTF8)
		}
	}
	if len(r.Generation) != len(wantUTF8) || (len(r.Generation) > 0 && (!slices.Equal(r.Generation, wantUTF8) || !slices.Equal(cp, wantCP))) {
		t.Errorf("%s: generation spans %v (cp %v), want %v (cp %v)", what, r.Generation, cp, wantUTF8, wantCP)
		return false
	}
	return true
}
