package trainer

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMergeFlagsOverridesRefusedFileSetting: flags override the argument file, refused HF fields
// included: `--args X.json --fp16 false` drops X.json's "fp16": true (HF's default, accepted),
// while X.json alone is refused, and a flag setting a refused value is refused in turn.
func TestMergeFlagsOverridesRefusedFileSetting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "X.json")
	if err := os.WriteFile(path, []byte(`{"output_dir": "out", "fp16": true, "tf32": true, "learning_rate": 1e-4}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		flags   []string
		refused []string // field names Validate refuses, in order
	}{
		{nil, []string{"fp16", "tf32"}},
		{[]string{"--fp16", "false"}, []string{"tf32"}},
		{[]string{"--fp16=False", "--tf32", "None"}, nil},
		{[]string{"--tf32", "None", "--fp16", "False", "--learning_rate", "2e-4"}, nil},
		// The file's remaining problem is reported (naming the file) before the merged ones.
		{[]string{"--fp16", "false", "--deepspeed", "ds.json"}, []string{"tf32"}},
		{[]string{"--fp16", "false", "--tf32", "None", "--deepspeed", "ds.json"}, []string{"deepspeed"}},
	} {
		flagged, flaggedMD, fs, err := parseFlags(t, tc.flags...)
		if err != nil {
			t.Fatal(err)
		}
		file, _, err := LoadArgumentsWithFlags(path, flagged, flaggedMD, fs)
		if err == nil {
			err = file.Validate()
		}
		var ae *ArgumentsError
		switch {
		case len(tc.refused) == 0 && err != nil:
			t.Errorf("%v: %v", tc.flags, err)
		case len(tc.refused) > 0 && (!errors.As(err, &ae) || strings.Join(ae.FieldNames(), ",") != strings.Join(tc.refused, ",")):
			t.Errorf("%v: err = %v, want refusals of %v", tc.flags, err, tc.refused)
		}
		if len(tc.refused) > 0 && tc.refused[0] == "fp16" && (!strings.Contains(err.Error(), "fp16: true") || !strings.HasPrefix(err.Error(), path)) {
			t.Errorf("file alone: %v does not name the file and fp16's value", err)
		}
		if len(tc.refused) == 0 && file.LearningRate != map[bool]float64{true: 2e-4, false: 1e-4}[len(tc.flags) > 4] {
			t.Errorf("%v: learning_rate %v", tc.flags, file.LearningRate)
		}
		t.Logf("%v → %v", tc.flags, err)
	}
}

// TestEveryFlagHasHelp: every flag of gotpu train and eval has a real one-line meaning.
func TestEveryFlagHasHelp(t *testing.T) {
	_, _, fs, err := parseFlags(t)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range modelDataArgsMeta.fields {
		if modelDataUsage(f.name) == "" {
			t.Errorf("model/data argument %s has no help (modelDataHelp or sftHelp)", f.name)
		}
	}
	for _, f := range trainingArgsMeta.fields {
		if argHelp[f.name] == "" {
			t.Errorf("TrainingArguments field %s has no help (argHelp)", f.name)
		}
	}
	n := 0
	fs.VisitAll(func(f *flag.Flag) {
		n++
		if strings.Contains(f.Usage, "example-script argument") || strings.Contains(f.Usage, "\n") || len(f.Usage) < 10 {
			t.Errorf("--%s: usage %q is not a one-line meaning", f.Name, f.Usage)
		}
	})
	// Every flag lands in one help group (cmd/gotpu prints them by group).
	groups := Flags()
	seen := map[string]bool{}
	for _, g := range [][]string{groups.Training, groups.FSDP, groups.Extras, groups.ModelData, groups.PEFT, groups.SFT, groups.Refused, groups.Inert} {
		for _, name := range g {
			if seen[name] {
				t.Errorf("%s is in two help groups", name)
			}
			seen[name] = true
			if fs.Lookup(name) == nil {
				t.Errorf("help group names %s, which is not a flag", name)
			}
		}
	}
	t.Logf("%d flags, %d in groups (the rest are aliases)", n, len(seen))
}
