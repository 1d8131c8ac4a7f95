package trainer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"math"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/trainer"
	"github.com/gotpu/gotpu/xla"
)

// TestCompileLogOnGoBackend: gotpu's pure-Go backend counts its own compiles (fusion and buffer
// planning) and has no cache, so its "compiled the training step" and "compiled the evaluation
// step" lines say source=go with programs_compiled and go_compile_seconds and no cache
// attributes, and the closing "compilation" line sums them. GoMLX's simplego keeps no counters:
// its log gains nothing (the evaluation's compile line is at debug level, no summary).
func TestCompileLogOnGoBackend(t *testing.T) {
	for _, backend := range []string{xla.GoBackendGotpu, xla.GoBackendSimpleGo} {
		t.Run(backend, func(t *testing.T) {
			rt, err := xla.Open(context.Background(), xla.Config{Device: "go", NumDevices: 1, GoBackend: backend})
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Close()
			_, counted := rt.CompileStats()
			if counted != (backend == xla.GoBackendGotpu) {
				t.Fatalf("CompileStats ok=%v on %s", counted, backend)
			}
			a := baseArgs(t)
			a.MaxSteps, a.LoggingSteps, a.SaveStrategy = 2, 1, "no"
			evalSteps := 2.0
			a.EvalStrategy, a.EvalSteps = "steps", &evalSteps
			var logs bytes.Buffer
			tr, err := trainer.New(a, tinyGPT2(t, rt), counting(16, 0), noise(4), trainer.Options{Runtime: rt,
				Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tr.Train(context.Background()); err != nil {
				t.Fatal(err)
			}
			recs := logRecords(t, logs.Bytes())
			step := findRecord(t, recs, "compiled the training step in ")
			ev := findRecord(t, recs, "compiled the evaluation step in ")
			for _, r := range []map[string]any{step, ev} {
				for _, k := range []string{"cache_hits", "cache_misses", "cache_load_seconds", "compilation_cache", "xla_compile_seconds"} {
					if v, ok := r[k]; ok {
						t.Errorf("%q carries %s=%v on the pure-Go backend", r["msg"], k, v)
					}
				}
			}
			var summary map[string]any
			for _, r := range recs {
				if r["msg"] == "compilation" {
					summary = r
				}
			}
			t.Logf("%v\n%v\n%v", step, ev, summary)
			if !counted {
				if step["source"] != nil || ev["level"] != "DEBUG" || summary != nil {
					t.Errorf("simplego: training step %v, evaluation %v, summary %v: want no source, a debug line, no summary", step, ev, summary)
				}
				return
			}
			for _, r := range []map[string]any{step, ev} {
				if r["level"] != "INFO" || r["source"] != "go" || num(r, "programs_compiled") < 1 || !(num(r, "go_compile_seconds") >= 0) {
					t.Errorf("%v: want INFO, source=go, programs_compiled >= 1, go_compile_seconds", r)
				}
			}
			if summary == nil || summary["backend"] != "go" || num(summary, "programs_compiled") < num(step, "programs_compiled")+num(ev, "programs_compiled") {
				t.Errorf("summary %v: want backend=go and at least the programs the two lines reported", summary)
			}
		})
	}
}

// logRecords are a JSON slog handler's lines, decoded.
func logRecords(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var r map[string]any
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

// findRecord is the only record whose message starts with prefix.
func findRecord(t *testing.T, recs []map[string]any, prefix string) map[string]any {
	t.Helper()
	var found []map[string]any
	for _, r := range recs {
		if msg, _ := r["msg"].(string); strings.HasPrefix(msg, prefix) {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d log lines %q..., want 1: %v", len(found), prefix, found)
	}
	return found[0]
}

func num(r map[string]any, key string) float64 {
	f, ok := r[key].(float64)
	if !ok {
		return math.NaN()
	}
	return f
}
