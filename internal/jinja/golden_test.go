package jinja

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// goldenCase is one line of testdata/golden.jsonl or testdata/probes.jsonl: a template, its
// context, and what Python Jinja2 3.1.6 (transformers' environment) gave.
type goldenCase struct {
	Name  string          `json:"name"`
	Tpl   string          `json:"tpl"`
	Ctx   json.RawMessage `json:"ctx"`
	Text  *string         `json:"text"`
	Error *string         `json:"error"`
	Raise *string         `json:"raise"`
	Gen   [][2]int        `json:"gen"` // generation spans in code points (templates with generation blocks)
}

// transformersOptions are the lexer options transformers uses.
var transformersOptions = ParseOptions{TrimBlocks: true, LStripBlocks: true}

// goldenNow is the generators' fixed clock.
var goldenNow = time.Date(2025, 3, 14, 9, 5, 7, 0, time.UTC)

// raised is the error of the test's raise_exception.
type raised struct{ msg string }

func (e *raised) Error() string { return "raise_exception: " + e.msg }

// testStrftime is enough of C strftime for the golden cases.
func testStrftime(t time.Time, f string) string {
	r := strings.NewReplacer("%Y", fmt.Sprint(t.Year()), "%m", fmt.Sprintf("%02d", int(t.Month())), "%d", fmt.Sprintf("%02d", t.Day()),
		"%H", fmt.Sprintf("%02d", t.Hour()), "%M", fmt.Sprintf("%02d", t.Minute()), "%S", fmt.Sprintf("%02d", t.Second()),
		"%b", t.Month().String()[:3], "%B", t.Month().String(), "%A", t.Weekday().String(), "%a", t.Weekday().String()[:3],
		"%j", fmt.Sprintf("%03d", t.YearDay()))
	return r.Replace(f)
}

// goldenVars builds the render variables: the case's context plus transformers' globals.
func goldenVars(t testing.TB, ctx json.RawMessage) map[string]Value {
	vars := map[string]Value{}
	if len(ctx) > 0 {
		v, err := FromJSON(ctx)
		if err != nil {
			t.Fatal(err)
		}
		d, ok := v.AsDict()
		if !ok {
			t.Fatalf("context is not an object: %s", ctx)
		}
		for i, k := range d.Keys() {
			vars[k.s] = d.Values()[i]
		}
	}
	vars["raise_exception"] = Func("raise_exception", func(c *Call) (Value, error) {
		msg := ""
		if len(c.Args) > 0 {
			msg = c.Args[0].String()
		}
		return Value{}, &raised{msg}
	})
	vars["strftime_now"] = Func("strftime_now", func(c *Call) (Value, error) {
		if len(c.Args) != 1 || c.Args[0].Kind() != KindString {
			return Value{}, errors.New("strftime_now takes one format string")
		}
		s, _ := c.Args[0].AsString()
		return String(testStrftime(goldenNow, s)), nil
	})
	return vars
}

func readGolden(t testing.TB, name string) []goldenCase {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []goldenCase
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var c goldenCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkGolden renders one case and compares it with Python's result: text exactly (and the
// generation spans of templates with generation blocks); a raise_exception's message exactly;
// runtime errors by "Type: message" where the engine claims Python's message (Error.Python),
// syntax errors by message where it claims it (SyntaxError.Python), else only that it fails.
func checkGolden(c goldenCase) error {
	tm, err := Parse(c.Tpl, transformersOptions)
	var res Result
	if err == nil {
		res, err = tm.Render(context.Background(), goldenVars(nil, c.Ctx), Limits{})
	}
	switch {
	case c.Text != nil:
		if err != nil {
			return fmt.Errorf("want %q, got error %v", *c.Text, err)
		}
		if res.Text != *c.Text {
			return fmt.Errorf("\n got %q\nwant %q", res.Text, *c.Text)
		}
		if c.Gen != nil || res.Generation != nil {
			var cp [][2]int
			for _, g := range res.Generation {
				cp = append(cp, [2]int{utf8.RuneCountInString(res.Text[:g[0]]), utf8.RuneCountInString(res.Text[:g[1]])})
			}
			if fmt.Sprint(cp) != fmt.Sprint(c.Gen) && !(len(cp) == 0 && len(c.Gen) == 0) {
				return fmt.Errorf("generation spans (code points) %v, want %v", cp, c.Gen)
			}
		}
	case c.Raise != nil:
		var re *raised
		if !errors.As(err, &re) || re.msg != *c.Raise {
			return fmt.Errorf("want raise_exception(%q), got %q, %v", *c.Raise, res.Text, err)
		}
	case c.Error != nil:
		if err == nil {
			return fmt.Errorf("want error %q, got %q", *c.Error, res.Text)
		}
		var se *SyntaxError
		if errors.As(err, &se) && se.Python {
			typ, msg, _ := strings.Cut(*c.Error, ": ")
			if (typ != "TemplateSyntaxError" && typ != "TemplateAssertionError") || msg != se.Msg {
				return fmt.Errorf("syntax error\n got %q\nwant %q", se.Msg, *c.Error)
			}
		}
		var e *Error
		if errors.As(err, &e) && e.Python && e.PythonMessage() != *c.Error {
			return fmt.Errorf("error\n got %q\nwant %q", e.PythonMessage(), *c.Error)
		}
		if strings.Contains(err.Error(), "internal error") {
			return fmt.Errorf("panic: %v", err)
		}
	}
	return nil
}

func runGolden(t *testing.T, file string) {
	cases := readGolden(t, file)
	pass := 0
	for _, c := range cases {
		if err := checkGolden(c); err != nil {
			t.Errorf("%s: %s: %v", c.Name, c.Tpl, err)
			continue
		}
		pass++
	}
	t.Logf("%s: %d/%d cases pass", file, pass, len(cases))
}

// TestGolden runs the cases of testdata/gen_golden.py against their Python results.
func TestGolden(t *testing.T) { runGolden(t, "golden.jsonl") }

// TestProbes runs the 60 edge-case probes the engine evaluation was made with.
func TestProbes(t *testing.T) { runGolden(t, "probes.jsonl") }

// TestConcurrentRenders: one Template rendered by many goroutines at once (run with -race)
// gives the same result each time, generation spans included.
func TestConcurrentRenders(t *testing.T) {
	tm, err := Parse("{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{{ m.role }}:{% generation %}{{ m.content|upper }}{% endgeneration %}|{% endfor %}{{ ns.n }}", transformersOptions)
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]Value{"messages": List(qwen3Conversation()...)}
	want, err := tm.Render(context.Background(), vars, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			for range 20 {
				got, err := tm.Render(context.Background(), vars, Limits{})
				if err != nil || got.Text != want.Text || fmt.Sprint(got.Generation) != fmt.Sprint(want.Generation) {
					errs <- fmt.Errorf("render differs: %v", err)
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if len(want.Generation) != 25 {
		t.Errorf("%d generation spans, want 25", len(want.Generation))
	}
}
