package cli

import (
	"errors"
	"flag"
	"testing"
)

func TestParseHFStyle(t *testing.T) {
	for _, tc := range []struct {
		args []string
		lr   float64
		bf16 bool
		out  string
		rest []string
	}{
		{[]string{"--learning_rate", "3e-4", "--output_dir", "out"}, 3e-4, false, "out", nil},
		{[]string{"--learning-rate=5e-5", "-output-dir", "x"}, 5e-5, false, "x", nil},
		{[]string{"--bf16", "True", "--learning_rate", "1"}, 1, true, "", nil},
		{[]string{"--bf16", "--output_dir", "o"}, 0, true, "o", nil},
		{[]string{"--bf16", "false", "pos"}, 0, false, "", []string{"pos"}},
		{[]string{"--learning_rate", "-1e-3"}, -1e-3, false, "", nil},
		{[]string{"--bf16=1", "--", "--x"}, 0, true, "", []string{"--x"}},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		lr := fs.Float64("learning_rate", 0, "")
		bf16 := fs.Bool("bf16", false, "")
		out := fs.String("output_dir", "", "")
		if err := Parse(fs, tc.args); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if *lr != tc.lr || *bf16 != tc.bf16 || *out != tc.out || len(fs.Args()) != len(tc.rest) {
			t.Errorf("%v: lr=%v bf16=%v out=%q rest=%v", tc.args, *lr, *bf16, *out, fs.Args())
		}
		for i := range tc.rest {
			if fs.Args()[i] != tc.rest[i] {
				t.Errorf("%v: rest=%v", tc.args, fs.Args())
			}
		}
	}
}

func TestParseErrorsAreUsageErrors(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.Float64("learning_rate", 0, "")
	for _, args := range [][]string{{"--nope"}, {"--learning_rate", "fast"}, {"--learning_rate"}} {
		if err := Parse(fs, args); !errors.Is(err, ErrUsage) {
			t.Errorf("%v: err = %v, want a usage error", args, err)
		}
	}
}
