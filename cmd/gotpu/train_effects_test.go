package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gotpu/gotpu/data/tokenizer"
	"github.com/gotpu/gotpu/trainer"
)

// cliOnlyPolicies are the flags of `gotpu train` that are not HF arguments.
var cliOnlyPolicies = map[string]trainer.ArgumentPolicy{
	"plugin_path": {Effect: trainer.EffectImplemented, Tests: []string{"TestTrainEvalPluginPath"}},
	"go_backend":  {Effect: trainer.EffectImplemented, Tests: []string{"TestGoBackendFlag"}},
	"args":        {Effect: trainer.EffectImplemented, Tests: []string{"TestTrainArgsFile"}},
	"compilation_cache_dir": {Effect: trainer.EffectImplemented,
		Tests: []string{"TestTrainCompilationCacheOnXLACPU", "TestTrainCompilationCacheFlagErrors"}},
	"compilation_cache_max_bytes": {Effect: trainer.EffectImplemented,
		Tests: []string{"TestTrainCompilationCacheOnXLACPU", "TestTrainCompilationCacheFlagErrors"}},
}

// repoTestNames collects every Test function declared in the module's test files.
func repoTestNames(t *testing.T) map[string]bool {
	t.Helper()
	re := regexp.MustCompile(`(?m)^func (Test\w+)\(`)
	names := map[string]bool{}
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllSubmatch(b, -1) {
			names[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func testExists(names map[string]bool, test string) bool {
	if p, ok := strings.CutSuffix(test, "*"); ok {
		for n := range names {
			if strings.HasPrefix(n, p) {
				return true
			}
		}
		return false
	}
	return names[test]
}

// runInProcess runs one gotpu command line in this process (no binary, no exec).
func runInProcess(args ...string) (stdout, stderr string, code int) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var o, e bytes.Buffer
	code = run(ctx, commands(), args, &o, &e)
	return o.String(), e.String(), code
}

// writeEffectIDs writes n pre-tokenized examples of 20 tokens (ids below 500) as JSON lines.
func writeEffectIDs(t *testing.T, path string, n, salt int) {
	t.Helper()
	var sb strings.Builder
	for i := range n {
		ids := make([]int, 20)
		for j := range ids {
			ids[j] = (i*31 + j*7 + salt) % 500
		}
		b, _ := json.Marshal(map[string]any{"input_ids": ids})
		sb.Write(append(b, '\n'))
	}
	if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

var llamaTiny = filepath.Join("..", "..", "testdata", "models", "llama-tiny")

// TestEveryTrainFlagHasAPolicy is issue #39's acceptance table: every flag `gotpu train`
// registers (enumerated from its flag set, so a new flag without a policy fails here) is
// implemented — and the tests named for it exist in the module —, refused — and `gotpu train`
// given its refused value fails naming it —, inert with a stated reason, or an alias of one
// that is.
func TestEveryTrainFlagHasAPolicy(t *testing.T) {
	r, err := parseRunArgs("train", nil, io.Discard, "")
	if err != nil {
		t.Fatal(err)
	}
	policies := map[string]trainer.ArgumentPolicy{}
	for _, p := range trainer.ArgumentPolicies() {
		policies[p.Name] = p
	}
	for name, p := range cliOnlyPolicies {
		p.Name = name
		policies[name] = p
	}
	tests := repoTestNames(t)
	dir := t.TempDir()
	ids := filepath.Join(dir, "ids.jsonl")
	writeEffectIDs(t, ids, 16, 0)
	counts := map[trainer.ArgumentEffect]int{}
	var flags []string
	r.fs.VisitAll(func(f *flag.Flag) { flags = append(flags, f.Name) })
	for _, name := range flags {
		p, ok := policies[name]
		if !ok {
			t.Errorf("--%s: no policy (add it to trainer/args_modeldata_policy.go: implemented with tests, refused, or inert with a reason)", name)
			continue
		}
		counts[p.Effect]++
		switch p.Effect {
		case trainer.EffectAlias:
			if _, ok := policies[p.AliasOf]; !ok || r.fs.Lookup(p.AliasOf) == nil {
				t.Errorf("--%s: alias of %q, which is not a flag with a policy", name, p.AliasOf)
			}
		case trainer.EffectInert:
			if strings.TrimSpace(p.Reason) == "" {
				t.Errorf("--%s: inert without a reason", name)
			}
		case trainer.EffectImplemented:
			if len(p.Tests) == 0 {
				t.Errorf("--%s: implemented, but no test shows its effect", name)
			}
			for _, test := range p.Tests {
				if !testExists(tests, test) {
					t.Errorf("--%s: its test %s does not exist", name, test)
				}
			}
		}
		if p.Effect != trainer.EffectRefused && p.RefuseValue == "" {
			continue
		}
		if p.RefuseValue == "" {
			t.Errorf("--%s: refused, but no value to refuse is known", name)
			continue
		}
		t.Run("refuses/"+name, func(t *testing.T) {
			start := time.Now()
			out := filepath.Join(dir, "out-"+name)
			_, stderr, code := runInProcess("train", "--model_name_or_path", llamaTiny, "--train_file", ids,
				"--output_dir", out, "--device", "go", "--max_steps", "1", "--save_strategy", "no",
				"--per_device_train_batch_size", "2", "--block_size", "16", "--disable_tqdm", "true",
				"--"+name, p.RefuseValue)
			if code == 0 || !strings.Contains(stderr, name) {
				t.Errorf("--%s %s: exit %d, want a refusal naming %s:\n%s", name, p.RefuseValue, code, name, stderr)
			}
			if _, err := os.Stat(filepath.Join(out, "model.safetensors")); err == nil {
				t.Errorf("--%s %s: refused, but a model was written", name, p.RefuseValue)
			}
			line, _, _ := strings.Cut(strings.TrimSpace(stderr), "\n")
			t.Logf("--%s %s → exit %d in %v: %s", name, p.RefuseValue, code, time.Since(start).Round(time.Millisecond), line)
		})
	}
	t.Logf("%d flags: %d implemented, %d refused, %d inert, %d aliases", len(flags), counts[trainer.EffectImplemented],
		counts[trainer.EffectRefused], counts[trainer.EffectInert], counts[trainer.EffectAlias])
}

// TestTrainArgsFile: --args reads TrainingArguments and model/data arguments from a JSON file
// (as HF's to_json_string writes them), and flags override it.
func TestTrainArgsFile(t *testing.T) {
	dir := t.TempDir()
	ids := filepath.Join(dir, "ids.jsonl")
	writeEffectIDs(t, ids, 16, 0)
	file := filepath.Join(dir, "args.json")
	b, _ := json.Marshal(map[string]any{"model_name_or_path": llamaTiny, "train_file": ids, "max_steps": 3,
		"per_device_train_batch_size": 2, "block_size": 16, "save_strategy": "no", "learning_rate": 1e-3, "device": "go"})
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	stdout, stderr, code := runInProcess("train", "--args", file, "--max_steps", "2", "--output_dir", out, "--disable_tqdm", "true")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	st, err := trainer.LoadTrainerState(filepath.Join(out, "trainer_state.json"))
	if err != nil {
		t.Fatal(err)
	}
	if st.GlobalStep != 2 || st.TrainBatchSize == nil || *st.TrainBatchSize != 2 {
		t.Errorf("global_step %d, train_batch_size %v: want 2 (the flag over the file's 3) and 2 (the file's)", st.GlobalStep, st.TrainBatchSize)
	}
	t.Logf("%s", strings.TrimSpace(stdout))
}

// TestTrainDoFlags: gotpu train refuses --do_predict (run_clm.py has no prediction) and an
// explicit --do_train false (run_clm's evaluate-only mode is gotpu eval), naming them; --do_train
// true is what it does anyway.
func TestTrainDoFlags(t *testing.T) {
	dir := t.TempDir()
	ids := filepath.Join(dir, "ids.jsonl")
	writeEffectIDs(t, ids, 16, 0)
	base := []string{"train", "--model_name_or_path", llamaTiny, "--train_file", ids, "--device", "go",
		"--max_steps", "1", "--save_strategy", "no", "--per_device_train_batch_size", "2", "--disable_tqdm", "true"}
	for _, c := range []struct {
		extra []string
		code  int
		want  []string
	}{
		{[]string{"--do_predict"}, 2, []string{"do_predict", "gotpu score"}},
		{[]string{"--do_train", "false", "--do_eval"}, 2, []string{"do_train", "gotpu eval"}},
		{[]string{"--do_train", "false"}, 2, []string{"do_train"}},
		{[]string{"--do_train"}, 0, []string{"trained 1 steps"}},
	} {
		args := append(append(append([]string(nil), base...), "--output_dir", filepath.Join(dir, fmt.Sprint("out", len(c.extra), c.code))), c.extra...)
		stdout, stderr, code := runInProcess(args...)
		if code != c.code {
			t.Errorf("%v: exit %d, want %d:\n%s", c.extra, code, c.code, stderr)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(stdout+stderr, w) {
				t.Errorf("%v: output does not mention %q:\n%s%s", c.extra, w, stdout, stderr)
			}
		}
		line, _, _ := strings.Cut(strings.TrimSpace(stderr+stdout), "\n")
		t.Logf("%v → exit %d: %s", c.extra, code, line)
	}
}

// TestTrainDoEvalFinalEvaluation: --do_eval evaluates after training as run_clm.py does:
// eval_results.json holds eval_loss, eval_samples (after --max_eval_samples) and perplexity =
// exp(eval_loss); all_results.json merges them with the train metrics (train_samples after
// --max_train_samples). The eval_loss is the saved model's, as `gotpu eval` computes it
// independently (1e-6); --do_eval without evaluation data is refused naming --do_eval.
func TestTrainDoEvalFinalEvaluation(t *testing.T) {
	dir := t.TempDir()
	ids, val := filepath.Join(dir, "ids.jsonl"), filepath.Join(dir, "val.jsonl")
	writeEffectIDs(t, ids, 24, 0)
	writeEffectIDs(t, val, 10, 3)
	out := filepath.Join(dir, "out")
	common := []string{"--model_name_or_path", llamaTiny, "--device", "go", "--per_device_eval_batch_size", "2", "--disable_tqdm", "true"}
	stdout, stderr, code := runInProcess(append([]string{"train", "--train_file", ids, "--validation_file", val, "--output_dir", out,
		"--do_train", "--do_eval", "--max_steps", "3", "--per_device_train_batch_size", "2", "--save_strategy", "no",
		"--learning_rate", "1e-2", "--max_train_samples", "10", "--max_eval_samples", "6"}, common...)...)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	t.Logf("%s", strings.TrimSpace(stdout))
	read := func(name string) map[string]float64 {
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]float64{}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return m
	}
	ev, all := read("eval_results.json"), read("all_results.json")
	t.Logf("eval_results.json: %v", ev)
	loss := ev["eval_loss"]
	if ev["eval_samples"] != 6 || !(loss > 0) || math.Abs(ev["perplexity"]-math.Exp(loss)) > 1e-9*math.Exp(loss) {
		t.Errorf("eval_results.json %v: want eval_samples 6 and perplexity exp(eval_loss) = %g", ev, math.Exp(loss))
	}
	for _, k := range []string{"eval_loss", "perplexity", "eval_samples", "train_loss", "train_samples"} {
		if _, ok := all[k]; !ok {
			t.Errorf("all_results.json lacks %s: %v", k, all)
		}
	}
	if all["train_samples"] != 10 {
		t.Errorf("train_samples %v, want 10 (--max_train_samples)", all["train_samples"])
	}
	// The same evaluation of the saved model, by gotpu eval.
	evOut, stderr, code := runInProcess(append([]string{"eval", "--validation_file", val, "--max_eval_samples", "6",
		"--output_dir", filepath.Join(dir, "eval"), "--model_name_or_path", out}, common[2:]...)...)
	if code != 0 {
		t.Fatalf("gotpu eval: exit %d:\n%s", code, stderr)
	}
	var indep map[string]float64
	if err := json.Unmarshal([]byte(lastLine(evOut)), &indep); err != nil {
		t.Fatalf("gotpu eval output %q: %v", evOut, err)
	}
	t.Logf("final evaluation eval_loss %.7f, gotpu eval of the saved model %.7f", loss, indep["eval_loss"])
	if math.Abs(indep["eval_loss"]-loss) > 1e-6 {
		t.Errorf("final evaluation eval_loss %.7f, gotpu eval of the saved model %.7f", loss, indep["eval_loss"])
	}

	_, stderr, code = runInProcess(append([]string{"train", "--train_file", ids, "--output_dir", filepath.Join(dir, "noeval"),
		"--do_eval", "--validation_split_percentage", "0", "--max_steps", "1", "--per_device_train_batch_size", "2"}, common...)...)
	if code != 2 || !strings.Contains(stderr, "--do_eval") {
		t.Errorf("--do_eval without evaluation data: exit %d, want 2 naming --do_eval:\n%s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "noeval", "model.safetensors")); err == nil {
		t.Error("--do_eval without evaluation data trained anyway")
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// TestCausalLMRefusesClassifierArgs: run_glue's max_seq_length, text_column_names and
// label_column_name are refused for a causal LM, naming them and what it uses instead.
func TestCausalLMRefusesClassifierArgs(t *testing.T) {
	dir := t.TempDir()
	ids := filepath.Join(dir, "ids.jsonl")
	writeEffectIDs(t, ids, 8, 0)
	for _, c := range []struct{ flag, value, advice string }{
		{"max_seq_length", "64", "--block_size"},
		{"text_column_names", "a,b", "--text_column_name"},
		{"label_column_name", "y", "input_ids"},
	} {
		_, stderr, code := runInProcess("train", "--model_name_or_path", llamaTiny, "--train_file", ids, "--device", "go",
			"--output_dir", filepath.Join(dir, c.flag), "--max_steps", "1", "--"+c.flag, c.value)
		if code != 2 || !strings.Contains(stderr, c.flag) || !strings.Contains(stderr, c.advice) {
			t.Errorf("--%s %s for a causal LM: exit %d, want 2 naming it and %s:\n%s", c.flag, c.value, code, c.advice, stderr)
		}
	}
}

// readResults reads a results file of output_dir (HF's save_metrics JSON).
func readResults(t *testing.T, out, name string) map[string]float64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, name))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]float64{}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return m
}

// TestValidationSplitPercentage: without evaluation data run_clm.py evaluates on
// train[:N%] and trains on train[N%:], counting raw rows and rounding the boundary as datasets
// does (Python's round, half to even: 5% of 50 rows is 2, not 3). Checked for --train_file
// (N = run_clm's default 5 under --do_eval, and an explicit 10) and for a --dataset_name
// directory with only a train split: the row counts, and the final eval_loss against `gotpu eval`
// of the saved model on a file of exactly the first rows (1e-6).
func TestValidationSplitPercentage(t *testing.T) {
	dir := t.TempDir()
	ids := filepath.Join(dir, "ids.jsonl")
	writeEffectIDs(t, ids, 50, 0)
	lines := strings.SplitAfter(strings.TrimSpace(mustRead(t, ids)), "\n")
	dsDir := filepath.Join(dir, "dataset")
	if err := os.MkdirAll(dsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dsDir, "train.jsonl"), []byte(mustRead(t, ids)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name       string
		data       []string
		extra      []string
		eval, rest int
	}{
		{"train_file default 5%", []string{"--train_file", ids}, nil, 2, 48},
		{"train_file 10%", []string{"--train_file", ids}, []string{"--validation_split_percentage", "10"}, 5, 45},
		{"dataset_name 10%", []string{"--dataset_name", dsDir}, []string{"--validation_split_percentage", "10"}, 5, 45},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_"))
			args := append([]string{"train", "--model_name_or_path", llamaTiny, "--device", "go", "--output_dir", out,
				"--do_eval", "--max_steps", "2", "--per_device_train_batch_size", "2", "--per_device_eval_batch_size", "1",
				"--save_strategy", "no", "--learning_rate", "1e-2", "--disable_tqdm", "true"}, c.data...)
			stdout, stderr, code := runInProcess(append(args, c.extra...)...)
			if code != 0 {
				t.Fatalf("exit %d:\n%s", code, stderr)
			}
			all := readResults(t, out, "all_results.json")
			t.Logf("%s: eval_samples %v, train_samples %v, eval_loss %.7f (%s)", c.name, all["eval_samples"], all["train_samples"],
				all["eval_loss"], lastLine(stdout))
			if all["eval_samples"] != float64(c.eval) || all["train_samples"] != float64(c.rest) {
				t.Fatalf("eval_samples %v, train_samples %v: want %d and %d", all["eval_samples"], all["train_samples"], c.eval, c.rest)
			}
			head := filepath.Join(dir, c.name+"-head.jsonl")
			if err := os.WriteFile(head, []byte(strings.Join(lines[:c.eval], "")), 0o644); err != nil {
				t.Fatal(err)
			}
			evOut, stderr, code := runInProcess("eval", "--model_name_or_path", out, "--validation_file", head, "--device", "go",
				"--per_device_eval_batch_size", "1", "--output_dir", filepath.Join(dir, c.name+"-eval"), "--disable_tqdm", "true")
			if code != 0 {
				t.Fatalf("gotpu eval: exit %d:\n%s", code, stderr)
			}
			var indep map[string]float64
			if err := json.Unmarshal([]byte(lastLine(evOut)), &indep); err != nil {
				t.Fatal(err)
			}
			if math.Abs(indep["eval_loss"]-all["eval_loss"]) > 1e-6 {
				t.Errorf("final eval_loss %.7f, gotpu eval on the first %d rows %.7f", all["eval_loss"], c.eval, indep["eval_loss"])
			}
		})
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestKeepLinebreaks: run_clm.py's keep_linebreaks for .txt files: true keeps each line's "\n"
// in the text tokenized (datasets' splitlines(keepends=True)), false drops it. The number of
// --block_size blocks trained on (train_samples) is checked against the tokenizer's own count
// of the lines with and without their breaks.
func TestKeepLinebreaks(t *testing.T) {
	dir := t.TempDir()
	modelDir := filepath.Join(dir, "model")
	makeTinyGPT2Dir(t, modelDir)
	var sb strings.Builder
	for i := range 40 {
		fmt.Fprintf(&sb, "line %d says hello\n", i)
	}
	corpus := filepath.Join(dir, "corpus.txt")
	if err := os.WriteFile(corpus, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.FromPretrained(context.Background(), modelDir, tokenizer.HubOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const block = 8
	// Unset is run_clm's default: the line breaks are kept.
	for _, flagValue := range []string{"false", "true", ""} {
		keep := flagValue != "false"
		total := 0
		for _, line := range strings.SplitAfter(strings.TrimSuffix(sb.String(), "\n"), "\n") {
			if !keep {
				line = strings.TrimSuffix(line, "\n")
			} else if !strings.HasSuffix(line, "\n") {
				line += "\n"
			}
			enc, err := tok.Encode(line, true)
			if err != nil {
				t.Fatal(err)
			}
			total += len(enc.IDs)
		}
		out := filepath.Join(dir, "out-"+flagValue)
		args := []string{"train", "--model_name_or_path", modelDir, "--train_file", corpus, "--device", "go",
			"--output_dir", out, "--block_size", fmt.Sprint(block), "--max_steps", "1", "--save_strategy", "no", "--disable_tqdm", "true"}
		if flagValue != "" {
			args = append(args, "--keep_linebreaks", flagValue)
		}
		_, stderr, code := runInProcess(args...)
		if code != 0 {
			t.Fatalf("keep_linebreaks %v: exit %d:\n%s", keep, code, stderr)
		}
		got := readResults(t, out, "train_results.json")["train_samples"]
		t.Logf("keep_linebreaks %v: %d tokens → %v blocks of %d", keep, total, got, block)
		if got != float64(total/block) {
			t.Errorf("keep_linebreaks %v: %v blocks, want %d (%d tokens)", keep, got, total/block, total)
		}
	}
}

// TestEvalRefusesScriptArgs: gotpu eval refuses, before loading anything, the other scripts'
// arguments train refuses, and validation_split_percentage (eval reads no training data), naming
// each.
func TestEvalRefusesScriptArgs(t *testing.T) {
	for _, c := range [][]string{
		{"--mlm_probability", "0.15"},
		{"--line_by_line", "true"},
		{"--validation_split_percentage", "10"},
	} {
		args := append([]string{"eval", "--model_name_or_path", "does-not-matter", "--validation_file", "nowhere.jsonl", "--device", "go"}, c...)
		_, stderr, code := runInProcess(args...)
		t.Logf("%v: exit %d: %s", c, code, strings.TrimSpace(stderr))
		if code != 2 || !strings.Contains(stderr, strings.TrimPrefix(c[0], "--")) {
			t.Errorf("%v: exit %d, stderr %q: want exit 2 naming %s", c, code, stderr, c[0])
		}
	}
}
