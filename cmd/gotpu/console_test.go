package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// varLenFile writes 12 pre-tokenized examples of 3..14 tokens (102 in all): batches of them
// are padded to the longest (14), so "all" and "non_padding" token counts differ.
func varLenFile(t *testing.T) (path string, total int) {
	t.Helper()
	var sb strings.Builder
	for i := range 12 {
		n := 3 + i
		ids := make([]string, n)
		for j := range ids {
			ids[j] = fmt.Sprint((7*i + 13*j + 1) % 1000)
		}
		fmt.Fprintf(&sb, "{\"input_ids\": [%s]}\n", strings.Join(ids, ", "))
		total += n
	}
	path = filepath.Join(t.TempDir(), "varlen.jsonl")
	if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, total
}

type stateLog struct {
	NumInputTokensSeen int64            `json:"num_input_tokens_seen"`
	LogHistory         []map[string]any `json:"log_history"`
}

func trainSmall(t *testing.T, extra ...string) (stdout, stderr string, st stateLog) {
	t.Helper()
	file, _ := varLenFile(t)
	out := t.TempDir()
	args := append([]string{"train", "--model_name_or_path", filepath.Join("..", "..", "testdata", "models", "gpt2-tiny"),
		"--train_file", file, "--per_device_train_batch_size", "4", "--num_train_epochs", "2", "--logging_steps", "1",
		"--save_strategy", "no", "--device", "go", "--seed", "3", "--output_dir", out}, extra...)
	stdout, stderr, code := runGotpu(t, nil, args...)
	if code != 0 {
		t.Fatalf("gotpu train: exit %d\n%s", code, stderr)
	}
	raw, err := os.ReadFile(filepath.Join(out, "trainer_state.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatal(err)
	}
	return stdout, stderr, st
}

// TestTokensSeenLogged: --include_num_input_tokens_seen puts HF's num_input_tokens_seen in every
// log entry and trainer_state.json. "all" counts every input position (3 batches of 4 padded to
// the longest example, 14: 56 per step); "non_padding" the attention mask's ones, which after
// each full epoch is the dataset's own token count (102 per epoch). Off (the default), no entry
// has the key and the state's count is 0, as HF writes it.
func TestTokensSeenLogged(t *testing.T) {
	_, total := varLenFile(t)
	for _, mode := range []string{"all", "non_padding", "no"} {
		t.Run(mode, func(t *testing.T) {
			stdout, _, st := trainSmall(t, "--include_num_input_tokens_seen="+mode)
			var last int64
			for _, e := range st.LogHistory {
				v, ok := e["num_input_tokens_seen"].(float64)
				if mode == "no" {
					if ok {
						t.Errorf("entry %v has num_input_tokens_seen with the option off", e)
					}
					continue
				}
				if !ok {
					t.Fatalf("entry %v lacks num_input_tokens_seen", e)
				}
				step := int64(e["step"].(float64))
				switch {
				case mode == "all" && int64(v) != 56*step:
					t.Errorf("all: step %d: %v tokens seen, want %d", step, v, 56*step)
				case mode == "non_padding" && (step == 3 || step == 6) && int64(v) != int64(total)*step/3:
					t.Errorf("non_padding: step %d (an epoch's end): %v tokens seen, want %d", step, v, int64(total)*step/3)
				case int64(v) < last:
					t.Errorf("step %d: count went down from %d to %v", step, last, v)
				}
				last = int64(v)
				t.Logf("%s: step %d num_input_tokens_seen %v", mode, step, v)
			}
			if st.NumInputTokensSeen != last {
				t.Errorf("trainer_state.json num_input_tokens_seen %d, want %d", st.NumInputTokensSeen, last)
			}
			if printed := strings.Contains(stdout, "'num_input_tokens_seen': "); printed != (mode != "no") {
				t.Errorf("console lines with num_input_tokens_seen: %v, want %v:\n%s", printed, mode != "no", stdout)
			}
		})
	}
}

// TestConsoleLogLinesHFKeys: the console's log lines carry HF's keys only (no step, no gotpu
// counters) and are short; --log_gotpu_metrics adds the counters, which log_history keeps
// either way. The first step's step_seconds is its real wall time on the device, compilation
// included (at least compile_seconds, not the microseconds left after subtracting it), and the
// compilation is logged on its own line.
func TestConsoleLogLinesHFKeys(t *testing.T) {
	stdout, stderr, st := trainSmall(t)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	var logLines []string
	for _, l := range lines {
		if strings.HasPrefix(l, "{") {
			logLines = append(logLines, l)
		}
	}
	if len(logLines) != 7 { // 6 steps and the summary
		t.Fatalf("%d log lines, want 7:\n%s", len(logLines), stdout)
	}
	t.Logf("first log line (%d chars): %s", len(logLines[0]), logLines[0])
	if !strings.HasPrefix(logLines[0], "{'loss': '") || !strings.Contains(logLines[0], "'learning_rate': ") || !strings.HasSuffix(logLines[0], "'epoch': '0.3333'}") {
		t.Errorf("first line is not HF's: %s", logLines[0])
	}
	for _, l := range logLines {
		for _, k := range []string{"step_seconds", "tokens_per_second", "host_syncs", "'step'", "mfu"} {
			if strings.Contains(l, k) {
				t.Errorf("console line has %s: %s", k, l)
			}
		}
		if strings.HasPrefix(l, "{'loss'") && len(l) > 100 { // one terminal line (HF's own summary line is longer)
			t.Errorf("console line of %d characters: %s", len(l), l)
		}
	}
	first := st.LogHistory[0]
	ss, ok1 := first["step_seconds"].(float64)
	cs, ok2 := first["compile_seconds"].(float64)
	t.Logf("step 1: step_seconds %.4g, compile_seconds %.4g", ss, cs)
	if !ok1 || !ok2 || cs <= 0 || ss < cs {
		t.Errorf("step 1: step_seconds %v (%v), compile_seconds %v (%v): want step_seconds >= compile_seconds > 0", ss, ok1, cs, ok2)
	}
	if !strings.Contains(stderr, "compiled the training step in ") {
		t.Errorf("no compile line on stderr:\n%s", stderr)
	}

	stdout, _, _ = trainSmall(t, "--log_gotpu_metrics")
	if !strings.Contains(stdout, "'step_seconds': ") || !strings.Contains(stdout, "'tokens_per_second': ") {
		t.Errorf("--log_gotpu_metrics: counters not printed:\n%s", stdout)
	}
}

// TestEvalPrintsOneJSONLine: `gotpu eval` writes exactly one line on stdout, a JSON object that
// encoding/json parses, with run_clm's perplexity = exp(eval_loss) (to 1e-12 relative) and
// eval_samples; eval_results.json holds the same.
func TestEvalPrintsOneJSONLine(t *testing.T) {
	file, _ := varLenFile(t)
	out := t.TempDir()
	stdout, stderr, code := runGotpu(t, nil, "eval", "--model_name_or_path", filepath.Join("..", "..", "testdata", "models", "gpt2-tiny"),
		"--validation_file", file, "--per_device_eval_batch_size", "4", "--device", "go", "--output_dir", out)
	if code != 0 {
		t.Fatalf("gotpu eval: exit %d\n%s", code, stderr)
	}
	t.Logf("stdout: %q", stdout)
	if strings.Count(stdout, "\n") != 1 || !strings.HasSuffix(stdout, "\n") {
		t.Fatalf("stdout is not one line: %q", stdout)
	}
	var m map[string]float64
	if err := json.Unmarshal([]byte(stdout), &m); err != nil {
		t.Fatalf("stdout is not JSON: %v: %q", err, stdout)
	}
	loss, ppl := m["eval_loss"], m["perplexity"]
	if want := math.Exp(loss); loss <= 0 || math.Abs(ppl-want) > 1e-12*want {
		t.Errorf("perplexity %v, want exp(%v) = %v", ppl, loss, want)
	}
	if m["eval_samples"] != 12 {
		t.Errorf("eval_samples %v, want 12", m["eval_samples"])
	}
	raw, err := os.ReadFile(filepath.Join(out, "eval_results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var saved map[string]float64
	if err := json.Unmarshal(raw, &saved); err != nil {
		t.Fatalf("eval_results.json: %v\n%s", err, raw)
	}
	if saved["perplexity"] != ppl || saved["eval_loss"] != loss {
		t.Errorf("eval_results.json %v differs from stdout %v", saved, m)
	}
}
