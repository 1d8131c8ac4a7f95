package cli

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
)

func testFlagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.Float64("learning_rate", 0, "")
	fs.Int("per_device_train_batch_size", 8, "")
	fs.Int("per_device_eval_batch_size", 8, "")
	fs.Bool("bf16", false, "")
	fs.String("output_dir", "", "")
	return fs
}

// TestParseErrorMessages: each command-line mistake gets one message naming the flag as typed,
// with a did-you-mean for a near miss; all are usage errors (exit status 2).
func TestParseErrorMessages(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		flagsOnly  bool
		want       string
		positional []string // when want is "": fs.Args()
	}{
		{[]string{"--learning_rat", "1"}, true, "unknown flag --learning_rat; did you mean --learning_rate?", nil},
		{[]string{"-learning_rat", "1"}, true, "unknown flag -learning_rat; did you mean --learning_rate?", nil},
		{[]string{"--learning-rat=1"}, true, "unknown flag --learning-rat; did you mean --learning_rate?", nil},
		{[]string{"--lerning_rate", "1"}, true, "unknown flag --lerning_rate; did you mean --learning_rate?", nil},
		{[]string{"--bf61"}, true, "unknown flag --bf61; did you mean --bf16?", nil},
		{[]string{"--per_device"}, true, "unknown flag --per_device; did you mean --per_device_eval_batch_size or --per_device_train_batch_size?", nil},
		{[]string{"--zzzqqq", "1"}, true, "unknown flag --zzzqqq", nil},
		{[]string{"--fp16"}, true, "unknown flag --fp16", nil},
		{[]string{"--bf16", "maybe"}, true, `invalid value "maybe" for --bf16: not a boolean (true/false, yes/no, 1/0)`, nil},
		{[]string{"-bf16=maybe"}, false, `invalid value "maybe" for -bf16: not a boolean (true/false, yes/no, 1/0)`, nil},
		{[]string{"--learning_rate", "fast"}, true, `invalid value "fast" for --learning_rate: not a valid float`, nil},
		{[]string{"--per-device-train-batch-size", "1.5"}, true, `invalid value "1.5" for --per-device-train-batch-size: not a valid int`, nil},
		{[]string{"--output_dir"}, true, "--output_dir needs a value", nil},
		{[]string{"---bf16"}, true, `bad flag syntax "---bf16": flags are written --name value or --name=value`, nil},
		// Where positional arguments are allowed, a word after a boolean flag is one.
		{[]string{"--bf16", "maybe"}, false, "", []string{"maybe"}},
		{[]string{"--bf16", "no", "x"}, true, "", []string{"x"}},
		{[]string{"--bf16", "--output_dir", "o", "x", "--y"}, true, "", []string{"x", "--y"}},
		{[]string{"--bf16=yes", "--", "--bf16"}, true, "", []string{"--bf16"}},
	} {
		fs := testFlagSet()
		var err error
		if tc.flagsOnly {
			err = ParseFlagsOnly(fs, tc.args)
		} else {
			err = Parse(fs, tc.args)
		}
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v", tc.args, err)
		case tc.want == "" && strings.Join(fs.Args(), " ") != strings.Join(tc.positional, " "):
			t.Errorf("%q: positional %q, want %q", tc.args, fs.Args(), tc.positional)
		case tc.want != "" && (err == nil || err.Error() != tc.want || !errors.Is(err, ErrUsage)):
			t.Errorf("%q: err = %v\n want usage error %q", tc.args, err, tc.want)
		}
	}
	for _, h := range []string{"-h", "--help", "-help"} {
		if err := ParseFlagsOnly(testFlagSet(), []string{"--bf16", h}); !errors.Is(err, flag.ErrHelp) {
			t.Errorf("%s: err = %v, want flag.ErrHelp", h, err)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"abc", "abc", 0}, {"learning_rat", "learning_rate", 1}, {"bf61", "bf16", 1},
		{"lerning_rate", "learning_rate", 1}, {"kitten", "sitting", 3}, {"", "abc", 3}, {"BF16", "bf16", 0}} {
		if got := editDistance(tc.a, tc.b); got != tc.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.d)
		}
	}
}

// TestPrintGroups: sections in order, an alias on its flag's line, a compact paragraph, and
// every flag no section names either listed under "Other flags" or replaced by one line.
func TestPrintGroups(t *testing.T) {
	fs := testFlagSet()
	fs.Var(fs.Lookup("output_dir").Value, "out", "alias of --output_dir")
	groups := []HelpGroup{
		{Title: "Common", Names: []string{"output_dir", "learning_rate", "no_such_flag"}},
		{Title: "Batch", Names: []string{"per_device_train_batch_size", "per_device_eval_batch_size"}, Compact: true, Note: "sizes"},
	}
	var b bytes.Buffer
	PrintGroups(&b, fs, groups, "")
	want := `
Common:
  --output_dir, --out string
  --learning_rate float

Batch (sizes):
  per_device_train_batch_size, per_device_eval_batch_size

Other flags:
  --bf16
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	PrintGroups(&b, fs, groups[:1], "The rest are accepted and ignored.")
	if !strings.HasSuffix(b.String(), "\nThe rest are accepted and ignored.\n") || strings.Contains(b.String(), "bf16") {
		t.Errorf("with rest:\n%s", b.String())
	}
}

func TestSuggestCommand(t *testing.T) {
	names := []string{"train", "eval", "generate", "score", "plan", "devices", "version"}
	for _, c := range []struct{ in, want string }{
		{"trian", `; did you mean "train"?`},
		{"evl", `; did you mean "eval"?`},
		{"genrate", `; did you mean "generate"?`},
		{"xyzzy", ""},
		{"t", ""},
	} {
		if got := SuggestCommand(c.in, names); got != c.want {
			t.Errorf("SuggestCommand(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
