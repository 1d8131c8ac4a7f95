package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// TestFlagErrorsCLI: the real binary reports a command-line mistake once, as
// "gotpu <cmd>: <message>" naming the flag as typed (with a did-you-mean for a near miss), then
// the help hint, with exit status 2.
func TestFlagErrorsCLI(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"train", "--learning_rat", "1e-4"}, "gotpu train: unknown flag --learning_rat; did you mean --learning_rate?"},
		{[]string{"train", "-learning_rat", "1e-4"}, "gotpu train: unknown flag -learning_rat; did you mean --learning_rate?"},
		{[]string{"eval", "--per_device_eval_batch", "2"}, "gotpu eval: unknown flag --per_device_eval_batch; did you mean --per_device_eval_batch_size?"},
		{[]string{"train", "--frobnicate", "3"}, "gotpu train: unknown flag --frobnicate"},
		{[]string{"train", "--bf16", "maybe"}, `gotpu train: invalid value "maybe" for --bf16: not a boolean (true/false, yes/no, 1/0)`},
		{[]string{"devices", "--json", "maybe"}, `gotpu devices: invalid value "maybe" for --json: not a boolean (true/false, yes/no, 1/0)`},
		{[]string{"train", "--learning_rate", "fast"}, `gotpu train: invalid value "fast" for --learning_rate: not a number`},
		{[]string{"version", "--jsn"}, "gotpu version: unknown flag --jsn; did you mean --json?"},
	} {
		out, errOut, code := runGotpu(t, nil, tc.args...)
		lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
		hint := "Run 'gotpu " + tc.args[0] + " --help' for usage."
		if code != 2 || out != "" || len(lines) != 2 || lines[0] != tc.want || lines[1] != hint {
			t.Errorf("gotpu %q: exit %d, stderr:\n%s\nwant exit 2 and:\n%s\n%s", tc.args, code, errOut, tc.want, hint)
		}
	}
}

// TestHelpGrouped: train --help is grouped, short enough to read, and every line says what its
// flag means; eval --help shows what eval uses, while eval still accepts every training flag.
func TestHelpGrouped(t *testing.T) {
	_, train, code := runGotpu(t, nil, "train", "--help")
	if code != 0 {
		t.Fatalf("train --help: exit %d", code)
	}
	_, eval, code := runGotpu(t, nil, "eval", "--help")
	if code != 0 {
		t.Fatalf("eval --help: exit %d", code)
	}
	trainLines, evalLines := strings.Split(train, "\n"), strings.Split(eval, "\n")
	t.Logf("train --help: %d lines; eval --help: %d lines", len(trainLines), len(evalLines))
	if len(trainLines) > 150 || len(evalLines) > 70 {
		t.Errorf("help too long: train %d lines, eval %d", len(trainLines), len(evalLines))
	}
	for _, h := range []string{train, eval} {
		if strings.Contains(h, "example-script argument") {
			t.Errorf("a help line has no meaning:\n%s", h)
		}
	}
	// Each section in order, the common flags first; refused HF fields named compactly.
	last := -1
	for _, s := range []string{"Common flags:", "  --model_name_or_path string ", "  --learning_rate float ",
		"  --eval_strategy, --evaluation_strategy string ", "\nTraining arguments (Hugging Face TrainingArguments):\n",
		"  --adam_beta1 float ", "\nModel and data arguments", "  --torch_dtype, --dtype string ", "\nPEFT / LoRA",
		"\nSupervised fine-tuning data", "\nFSDP:\n", "\ngotpu:\n", "\nHF arguments gotpu does not implement", " fp16,",
		"\nHF arguments accepted and ignored", " local_rank,"} {
		i := strings.Index(train, s)
		if i <= last {
			t.Errorf("train --help: %q missing or out of order", s)
		}
		last = max(last, i)
	}
	if strings.Count(train, "--learning_rate ") != 1 {
		t.Errorf("train --help lists --learning_rate %d times", strings.Count(train, "--learning_rate "))
	}
	for _, s := range []string{"--model_name_or_path", "--validation_file", "--per_device_eval_batch_size", "--max_eval_samples",
		"--bf16", "--device", "--output_dir", "--adapter_name_or_path", "--dataset_text_field", "accepted and\nignored by eval"} {
		if !strings.Contains(eval, s) {
			t.Errorf("eval --help lacks %q", s)
		}
	}
	for _, s := range []string{"--learning_rate", "--num_train_epochs", "--per_device_train_batch_size", "--lora_r", "fp16"} {
		if strings.Contains(eval, s) {
			t.Errorf("eval --help lists the training flag %s", s)
		}
	}
	// eval accepts the training flags (one command line or --args file serves both): it gets
	// past parsing to its first real requirement.
	_, errOut, code := runGotpu(t, nil, "eval", "--learning_rate", "1e-4", "--num_train_epochs", "2", "--output_dir", t.TempDir())
	if code != 2 || strings.Contains(errOut, "unknown flag") || !strings.Contains(errOut, "--model_name_or_path") &&
		!strings.Contains(errOut, "--validation_file") {
		t.Errorf("eval with training flags: exit %d, stderr %q", code, errOut)
	}
	// The other commands' help: one line per flag, exit 0.
	for _, c := range []string{"devices", "score", "generate", "merge", "tokenize", "chat-template", "plan", "download", "version"} {
		_, h, code := runGotpu(t, nil, c, "--help")
		if code != 0 || !strings.HasPrefix(h, "Usage: gotpu "+c+" ") || strings.Contains(h, "\n    \t") {
			t.Errorf("%s --help: exit %d:\n%s", c, code, h)
		}
	}
}

// TestVersion: gotpu version and --version print the module version, Go version, platform and
// the backends compiled in (PJRT unless built with -tags noxla); --json has the same fields.
// A binary built with VCS stamping names the checkout's commit and whether it was modified.
func TestVersion(t *testing.T) {
	text, errOut, code := runGotpu(t, nil, "version")
	alias, _, code2 := runGotpu(t, nil, "--version")
	if code != 0 || code2 != 0 || errOut != "" || text != alias {
		t.Fatalf("version: exit %d/%d, stdout %q, --version %q, stderr %q", code, code2, text, alias, errOut)
	}
	t.Logf("gotpu version:\n%s", text)
	wantBackends := []string{"gotpu", "simplego", "pjrt"}
	if noXLA {
		wantBackends = wantBackends[:2]
	}
	for _, re := range []string{`^gotpu \S+\n`, `\ncommit    .+\n`, `\ngo        ` + regexp.QuoteMeta(runtime.Version()) + ` ` + runtime.GOOS + `/` + runtime.GOARCH + `\n`,
		`\nbackends  ` + strings.Join(wantBackends, ", ")} {
		if !regexp.MustCompile(re).MatchString(text) {
			t.Errorf("version output lacks %s", re)
		}
	}
	if noXLA != strings.Contains(text, "-tags noxla") {
		t.Errorf("version output does not say whether PJRT is compiled in (noxla %v)", noXLA)
	}
	out, _, code := runGotpu(t, nil, "version", "--json")
	var v versionInfo
	if err := json.Unmarshal([]byte(out), &v); code != 0 || err != nil {
		t.Fatalf("version --json: exit %d, %v: %q", code, err, out)
	}
	if v.Version == "" || v.GoVersion != runtime.Version() || v.Platform != runtime.GOOS+"/"+runtime.GOARCH ||
		strings.Join(v.Backends, ",") != strings.Join(wantBackends, ",") {
		t.Errorf("version --json = %+v", v)
	}

	// VCS stamping: build with -buildvcs=true (the test environment may turn it off) when git
	// can describe the checkout.
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("no git checkout to compare the VCS stamp with: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "gotpu")
	args := []string{"build", "-buildvcs=true", "-o", bin}
	if noXLA {
		args = append(args, "-tags", "noxla")
	}
	if b, err := exec.Command("go", append(args, ".")...).CombinedOutput(); err != nil {
		t.Fatalf("go build -buildvcs=true: %v\n%s", err, b)
	}
	status, err := exec.Command("git", "status", "--porcelain").Output()
	if err != nil {
		t.Fatal(err)
	}
	b, err := exec.Command(bin, "version", "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	v = versionInfo{}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	t.Logf("with VCS stamp: %s", b)
	// Modified is compared only one way: the tree may change between git status and go build
	// while other work goes on in it.
	if v.Commit != strings.TrimSpace(string(head)) || (len(status) > 0 && !v.Modified) || v.CommitTime == "" {
		t.Errorf("VCS stamp %+v; want commit %s, modified %v", v, head, len(status) > 0)
	}
	_ = os.Remove(bin)
}
