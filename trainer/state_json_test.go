package trainer

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// pyJSONVectors: an input, whether CPython 3.11's json.loads accepts it, and what
// json.dumps(v) and json.dumps(v, indent=2, sort_keys=True) then write (generated with CPython).
var pyJSONVectors = []struct {
	in              string
	ok              bool
	compact, sorted string
}{
	{"{\"a\": 1, \"b\": [1.0, 2.5e-05, -0.0, 1E5, 1e400, -1e400], \"c\": null}", true, "{\"a\": 1, \"b\": [1.0, 2.5e-05, -0.0, 100000.0, Infinity, -Infinity], \"c\": null}", "{\n  \"a\": 1,\n  \"b\": [\n    1.0,\n    2.5e-05,\n    -0.0,\n    100000.0,\n    Infinity,\n    -Infinity\n  ],\n  \"c\": null\n}"},
	{"[NaN, Infinity, -Infinity]", true, "[NaN, Infinity, -Infinity]", "[\n  NaN,\n  Infinity,\n  -Infinity\n]"},
	{"{\"a\": 1, \"a\": 2, \"b\": 3}", true, "{\"a\": 2, \"b\": 3}", "{\n  \"a\": 2,\n  \"b\": 3\n}"},
	{"\"\\ud83d\\ude00 \\ud83d x \\ude00 \\u00e9 \\u007f \\/ \\b\\f\\n\\r\\t\"", true, "\"\\ud83d\\ude00 \\ud83d x \\ude00 \\u00e9 \\u007f / \\b\\f\\n\\r\\t\"", "\"\\ud83d\\ude00 \\ud83d x \\ude00 \\u00e9 \\u007f / \\b\\f\\n\\r\\t\""},
	{"\"caf\u00e9 \U0001f600 \u007f\"", true, "\"caf\\u00e9 \\ud83d\\ude00 \\u007f\"", "\"caf\\u00e9 \\ud83d\\ude00 \\u007f\""},
	{"  {\"x\" : [ ] , \"y\" : { } }  ", true, "{\"x\": [], \"y\": {}}", "{\n  \"x\": [],\n  \"y\": {}\n}"},
	{"-0", true, "0", "0"},
	{"123456789012345678901234567890", true, "123456789012345678901234567890", "123456789012345678901234567890"},
	{"0.1", true, "0.1", "0.1"},
	{"01", false, "", ""},
	{"1.", false, "", ""},
	{".5", false, "", ""},
	{"1e", false, "", ""},
	{"-", false, "", ""},
	{"[1,]", false, "", ""},
	{"{\"a\":1,}", false, "", ""},
	{"{'a': 1}", false, "", ""},
	{"[1 2]", false, "", ""},
	{"nul", false, "", ""},
	{"\"abc", false, "", ""},
	{"\"a\tb\"", false, "", ""},
	{"\"\\x\"", false, "", ""},
	{"\"\\u12\"", false, "", ""},
	{"-NaN", false, "", ""},
	{"-Infinity", true, "-Infinity", "-Infinity"},
	{"true false", false, "", ""},
	{"", false, "", ""},
	{"[]", true, "[]", "[]"},
	{"{}", true, "{}", "{}"},
	{"[[[[]]]]", true, "[[[[]]]]", "[\n  [\n    [\n      []\n    ]\n  ]\n]"},
	{"{\"k\\u0000\": \"v\\u001f\"}", true, "{\"k\\u0000\": \"v\\u001f\"}", "{\n  \"k\\u0000\": \"v\\u001f\"\n}"},
	{"3.0", true, "3.0", "3.0"},
	{"1E-7", true, "1e-07", "1e-07"},
	{"-12.5e+3", true, "-12500.0", "-12500.0"},
	{"{\"b\": 1, \"a\": {\"d\": 2, \"c\": 3}}", true, "{\"b\": 1, \"a\": {\"d\": 2, \"c\": 3}}", "{\n  \"a\": {\n    \"c\": 3,\n    \"d\": 2\n  },\n  \"b\": 1\n}"},
	{"\"\\uDBFF\\uDFFF\"", true, "\"\\udbff\\udfff\"", "\"\\udbff\\udfff\""},
	{"[\"\\ud800\\ud800\"]", true, "[\"\\ud800\\ud800\"]", "[\n  \"\\ud800\\ud800\"\n]"},
	{"1e-400", true, "0.0", "0.0"},
	{"\t\n\r 7 \n", true, "7", "7"},
}

func TestPyJSONMatchesPython(t *testing.T) {
	for _, v := range pyJSONVectors {
		got, err := parsePyJSON([]byte(v.in))
		if (err == nil) != v.ok {
			t.Errorf("parsePyJSON(%q): err = %v, Python accepts: %v", v.in, err, v.ok)
			continue
		}
		if err != nil {
			if !errors.Is(err, ErrJSONSyntax) {
				t.Errorf("parsePyJSON(%q): %v does not wrap ErrJSONSyntax", v.in, err)
			}
			continue
		}
		if c := string(appendPyJSON(nil, got, pyJSONStyle{indent: -1}, 0)); c != v.compact {
			t.Errorf("compact(%q) = %q, Python writes %q", v.in, c, v.compact)
		}
		if s := string(appendPyJSON(nil, got, pyJSONStyle{indent: 2, sortKeys: true}, 0)); s != v.sorted {
			t.Errorf("sorted(%q) = %q, Python writes %q", v.in, s, v.sorted)
		}
	}
}

// TestPyJSONRewritesRealArgumentFiles: the argument files Python wrote come back byte for byte
// in their own layout (to_dict() dumped compact; to_json_string() with indent 2). The two
// hand-written files use 5e-5-style literals Python would write as 5e-05, so they are checked
// only for a stable rewrite.
func TestPyJSONRewritesRealArgumentFiles(t *testing.T) {
	for _, tt := range []struct {
		file  string
		style pyJSONStyle
		exact bool
	}{
		{"marketguardians_training_args_full_dump.json", pyJSONStyle{indent: -1}, true},
		{"grpo_accounting_grpoconfig_dump.json", pyJSONStyle{indent: -1}, true},
		{"sizifs_trainer_args_full_dump.json", pyJSONStyle{indent: 2}, true},
		{"cbdetect_training_args.json", pyJSONStyle{indent: 2}, false},
		{"torgo_training_args.json", pyJSONStyle{indent: 2}, false},
	} {
		data := readTestFile(t, filepath.Join(argsDir, tt.file))
		v, err := parsePyJSON(data)
		if err != nil {
			t.Fatalf("%s: %v", tt.file, err)
		}
		out := appendPyJSON(nil, v, tt.style, 0)
		want := bytes.TrimSuffix(data, []byte("\n"))
		if tt.exact && !bytes.Equal(out, want) {
			i := firstDiff(out, want)
			t.Errorf("%s: rewrite differs at byte %d: …%s… vs …%s…", tt.file, i, around(out, i), around(want, i))
		}
		back, err := parsePyJSON(out)
		if err != nil || !back.Equal(v) {
			t.Errorf("%s: rewrite does not parse back equal: %v", tt.file, err)
		}
	}
}

func TestJSONValueAccessors(t *testing.T) {
	v, err := parsePyJSON([]byte(`{"i": 12, "big": 123456789012345678901234567890, "f": 2.0, "s": "x", "b": true, "n": null, "l": [1]}`))
	if err != nil {
		t.Fatal(err)
	}
	get := func(k string) JSONValue { x, _ := v.Get(k); return x }
	if i, ok := get("i").Int(); !ok || i != 12 {
		t.Errorf("Int = %v %v", i, ok)
	}
	if f, ok := get("i").Float(); !ok || f != 12 {
		t.Errorf("Float of int = %v", f)
	}
	if _, ok := get("big").Int(); ok {
		t.Error("big int fits int64?")
	}
	if lit, _ := get("big").IntLiteral(); lit != "123456789012345678901234567890" {
		t.Errorf("literal = %q", lit)
	}
	if f, ok := get("big").Float(); !ok || f != 1.2345678901234568e29 {
		t.Errorf("big Float = %v", f)
	}
	if i, ok := get("f").Int(); !ok || i != 2 {
		t.Errorf("integral float Int = %v %v", i, ok)
	}
	if s, ok := get("s").Str(); !ok || s != "x" {
		t.Errorf("Str = %q", s)
	}
	if b, ok := get("b").Bool(); !ok || !b {
		t.Error("Bool")
	}
	if !get("n").IsNull() || len(get("l").Array()) != 1 || get("l").Kind().String() != "list" {
		t.Error("null/list")
	}
	if _, ok := v.Get("missing"); ok {
		t.Error("Get(missing)")
	}
	w := v.With("i", JSONIntValue(13))
	if x, _ := v.Get("i"); !x.Equal(JSONIntValue(12)) {
		t.Error("With changed the original")
	}
	if x, _ := w.Get("i"); !x.Equal(JSONIntValue(13)) || len(w.Object()) != len(v.Object()) {
		t.Error("With did not replace in place")
	}
	if JSONFloatValue(0).Equal(JSONFloatValue(negZero())) || JSONIntValue(1).Equal(JSONFloatValue(1)) {
		t.Error("Equal ignores the sign of zero or the kind")
	}
	deep := strings.Repeat("[", maxJSONDepth+2) + strings.Repeat("]", maxJSONDepth+2)
	if _, err := parsePyJSON([]byte(deep)); err == nil || !strings.Contains(err.Error(), "nested") {
		t.Errorf("deep nesting: %v", err)
	}
	if _, err := parsePyJSON([]byte(strings.Repeat("9", maxIntDigits+1))); err == nil {
		t.Error("over-long integer accepted")
	}
	bom := append([]byte{0xEF, 0xBB, 0xBF}, `{"a": 1}`...)
	if _, err := parsePyJSON(bom); err != nil {
		t.Errorf("BOM: %v", err)
	}
}

func negZero() float64 { z := 0.0; return -z }

// FuzzPyJSON: parsing never panics; a parsed value rewrites (both layouts) to text that parses
// back to an equal value and rewrites identically.
func FuzzPyJSON(f *testing.F) {
	for _, v := range pyJSONVectors {
		f.Add([]byte(v.in))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := parsePyJSON(data)
		if err != nil {
			return
		}
		for _, st := range []pyJSONStyle{{indent: -1}, {indent: 2}, {indent: 2, sortKeys: true}} {
			out := appendPyJSON(nil, v, st, 0)
			back, err := parsePyJSON(out)
			if err != nil {
				t.Fatalf("rewrite %q of %q does not parse: %v", out, data, err)
			}
			if !st.sortKeys && !back.Equal(v) {
				t.Fatalf("rewrite %q of %q parses to a different value", out, data)
			}
			if out2 := appendPyJSON(nil, back, st, 0); !bytes.Equal(out, out2) {
				t.Fatalf("rewrite of %q unstable: %q vs %q", data, out, out2)
			}
		}
	})
}
