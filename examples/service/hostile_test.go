package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gotpu/gotpu/hub/hubtest"
	"github.com/gotpu/gotpu/models/peft"
)

// deepTargets is a target_modules expression nested 999 groups deep: RE2 (Go's regexp/syntax,
// maximum nesting depth 1000) accepts it bare, but not anchored as PEFT's re.fullmatch
// ("^(?:" + expr + ")$" adds a level). peft validated it bare and panicked compiling it
// anchored, which took the whole service down from a job, and reset /generate's connection.
var deepTargets = strings.Repeat("(", 999) + "a" + strings.Repeat(")", 999)

// hostileAdapterFiles are the gpt2-lora-tiny adapter's files with deepTargets as target_modules.
func hostileAdapterFiles(t *testing.T) map[string][]byte {
	t.Helper()
	dir := filepath.Join(repoRoot(t), loraAdapter)
	raw, err := os.ReadFile(filepath.Join(dir, peft.ConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["target_modules"] = deepTargets
	hostile, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	weights, err := os.ReadFile(filepath.Join(dir, peft.WeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	return map[string][]byte{peft.ConfigFile: hostile, peft.WeightsFile: weights}
}

// writeFiles writes files into dir.
func writeFiles(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// checkHostileMessage checks that a refusal of the adapter the request named given names its
// file and field, is short, and names no directory of the service beside the one given.
func checkHostileMessage(t *testing.T, what, given, msg string, private ...string) {
	t.Helper()
	for _, want := range []string{peft.ConfigFile, "target_modules", "nests too deeply"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%s: %q lacks %q", what, msg, want)
		}
	}
	if len(msg) > 1000 {
		t.Errorf("%s: the message is %d bytes long", what, len(msg))
	}
	shown := strings.ReplaceAll(msg, given, "<adapter>")
	for _, p := range private {
		if strings.Contains(shown, p) {
			t.Errorf("%s: %q names the service's directory %s", what, msg, p)
		}
	}
}

// TestHostileAdapter: an adapter whose target_modules nests just under RE2's depth limit, local
// or from the Hub, is a 400 naming adapter_config.json and target_modules, from GET /generate
// (whose connection used to be reset) and from POST /jobs (whose job used to kill the service);
// ordinary requests are answered as before afterwards.
func TestHostileAdapter(t *testing.T) {
	root, tmp := repoRoot(t), t.TempDir()
	in := filepath.Join(tmp, "in")
	hostile := filepath.Join(in, "hostile-adapter")
	files := hostileAdapterFiles(t)
	writeFiles(t, hostile, files)
	tokens := filepath.Join(in, "tokens.jsonl")
	writeTokenJSONL(t, tokens, 8, 16, 1000)
	fake := hubtest.New(t)
	fake.AddRepo("model", tinyRepo, tinyGPT2Files(t), hubtest.RepoOptions{})
	fake.AddRepo("model", "org/hostile-lora", files, hubtest.RepoOptions{})
	rt := openRuntime(t)
	ts := startServer(t, rt, Config{DataDir: filepath.Join(tmp, "data"), InputRoots: []string{root, in}, BaseDir: root,
		Hub: hubClient(t, fake, filepath.Join(tmp, "hf"), nil)})
	q := fmt.Sprintf("%s/generate?model=%s&prompt_ids=%s&max_new_tokens=%d", ts.url, loraBase, loraPrompt, loraNew)

	for _, adapter := range []string{hostile, "org/hostile-lora"} {
		msg := refused(t, "GET", q+"&adapter="+url.QueryEscape(adapter), "", "adapter")
		checkHostileMessage(t, "GET /generate?adapter="+adapter, adapter, msg, tmp)
		t.Logf("GET /generate?adapter=%s: 400 %s", adapter, msg)
	}
	for _, adapter := range []string{hostile, "org/hostile-lora"} {
		body := fmt.Sprintf(`{"model_name_or_path": %q, "train_file": %q, "adapter_name_or_path": %q, "max_steps": 1,
			"save_strategy": "no", "per_device_train_batch_size": 4}`, loraBase, tokens, adapter)
		msg := refused(t, "POST", ts.url+"/jobs", body, "adapter_name_or_path")
		checkHostileMessage(t, "POST /jobs naming "+adapter, adapter, msg, tmp)
	}

	// The service is up and answers as before.
	callJSON(t, "GET", ts.url+"/healthz", "", http.StatusOK, nil)
	g := generateTokens(t, q+"&adapter="+url.QueryEscape(loraAdapter))
	if g.Adapter != loraAdapter {
		t.Errorf("an ordinary adapter afterwards: %+v", g)
	}
	var list struct{ Jobs []Progress }
	callJSON(t, "GET", ts.url+"/jobs", "", http.StatusOK, &list)
	if len(list.Jobs) != 0 {
		t.Errorf("refused requests left jobs: %+v", list.Jobs)
	}
}

// TestAdapterTurnedHostileBeforeTheJobStarts: an adapter that was fine when its job was accepted
// and holds the hostile expression by the time the job loads it (rewritten while the job was
// queued) fails that job, with an error naming adapter_config.json and target_modules; the
// service goes on, and the next job trains to completion in the slot the failed one gave back.
func TestAdapterTurnedHostileBeforeTheJobStarts(t *testing.T) {
	root, tmp := repoRoot(t), t.TempDir()
	in := filepath.Join(tmp, "in")
	adapter := filepath.Join(in, "adapter")
	copyAdapter(t, filepath.Join(root, loraAdapter), adapter)
	tokens := filepath.Join(in, "tokens.jsonl")
	writeTokenJSONL(t, tokens, 8, 16, 1000)
	ts := startServer(t, openRuntime(t), Config{DataDir: filepath.Join(tmp, "data"), InputRoots: []string{root, in}, BaseDir: root, MaxRunning: 1})
	release := holdSlots(t, ts.srv)
	job := func(adapter string) string {
		return fmt.Sprintf(`{"model_name_or_path": %q, "train_file": %q, "adapter_name_or_path": %q, "max_steps": 1,
			"save_strategy": "no", "per_device_train_batch_size": 4}`, loraBase, tokens, adapter)
	}
	var p Progress
	callJSON(t, "POST", ts.url+"/jobs", job(adapter), http.StatusCreated, &p)
	writeFiles(t, adapter, map[string][]byte{peft.ConfigFile: hostileAdapterFiles(t)[peft.ConfigFile]})
	release()
	p = waitFor(t, ts.url+p.URLs["self"], "failure", func(p Progress) bool { return p.State == StateFailed })
	for _, want := range []string{"adapter_name_or_path", peft.ConfigFile, "target_modules", "nests too deeply"} {
		if !strings.Contains(p.Error, want) {
			t.Errorf("the job's error %q lacks %q", p.Error, want)
		}
	}
	t.Logf("job %s: %s: %s", p.ID, p.State, p.Error)

	var next Progress
	callJSON(t, "POST", ts.url+"/jobs", job(filepath.Join(root, loraAdapter)), http.StatusCreated, &next)
	waitFor(t, ts.url+next.URLs["self"], "completion", func(p Progress) bool { return p.State == StateCompleted })
}

// syncBuffer is a bytes.Buffer for a logger written from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestPanickingJobFails: a job whose work panics ends failed with an error saying so, the panic
// is logged with its stack, and the service goes on: it answers, and the next job trains in the
// training slot the failed one gave back. No input is known to make a job panic any more (the
// adapter expression was one), so the panic comes through Server.trainJob, a test-only seam,
// for the first job only; the second job runs the real train.
func TestPanickingJobFails(t *testing.T) {
	root, tmp := repoRoot(t), t.TempDir()
	tokens := filepath.Join(tmp, "tokens.jsonl")
	writeTokenJSONL(t, tokens, 8, 16, 1000)
	var logs syncBuffer
	ts := startServer(t, openRuntime(t), Config{DataDir: filepath.Join(tmp, "data"), InputRoots: []string{root, tmp}, BaseDir: root,
		MaxRunning: 1, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	release := holdSlots(t, ts.srv)
	// Set while the slots are held: a job's goroutine reads trainJob after taking a slot, which
	// release's receives happen before.
	realTrain := ts.srv.trainJob
	var calls atomic.Int32
	ts.srv.trainJob = func(ctx context.Context, j *Job, log *slog.Logger) error {
		if calls.Add(1) == 1 {
			panic("injected by TestPanickingJobFails")
		}
		return realTrain(ctx, j, log)
	}
	body := fmt.Sprintf(`{"model_name_or_path": %q, "train_file": %q, "max_steps": 1, "save_strategy": "no",
		"per_device_train_batch_size": 4}`, loraBase, tokens)
	var p Progress
	callJSON(t, "POST", ts.url+"/jobs", body, http.StatusCreated, &p)
	release()
	p = waitFor(t, ts.url+p.URLs["self"], "failure", func(p Progress) bool { return p.State == StateFailed })
	if !strings.Contains(p.Error, "panicked: injected by TestPanickingJobFails") {
		t.Errorf("the job's error: %q", p.Error)
	}
	callJSON(t, "GET", ts.url+"/healthz", "", http.StatusOK, nil)
	var next Progress
	callJSON(t, "POST", ts.url+"/jobs", body, http.StatusCreated, &next)
	waitFor(t, ts.url+next.URLs["self"], "completion", func(p Progress) bool { return p.State == StateCompleted })
	log := logs.String()
	for _, want := range []string{"job panicked", "injected by TestPanickingJobFails", "stack=", "runtime/debug.Stack", "hostile_test.go"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
}

// TestHandlerPanic: a handler that panics before answering is answered 500, one that panics
// mid-answer has its connection dropped (the client sees the answer cut short, never complete),
// both logged with the stack; the server keeps serving. The handlers are the test's own, behind
// the service's recoverPanics on a real loopback server: no request of the service is known to
// panic since the adapter expression was bounded.
func TestHandlerPanic(t *testing.T) {
	root, tmp := repoRoot(t), t.TempDir()
	var logs syncBuffer
	ts := startServer(t, openRuntime(t), Config{DataDir: filepath.Join(tmp, "data"), InputRoots: []string{root}, BaseDir: root,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	h := ts.srv.recoverPanics(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/early":
			panic("early panic")
		case "/late":
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, "partial")
			w.(http.Flusher).Flush()
			panic("late panic")
		}
		_, _ = io.WriteString(w, "ok")
	}))
	hs := httptest.NewServer(h)
	defer hs.Close()

	code, body := call(t, "GET", hs.URL+"/early", "")
	var eb errorBody
	if code != http.StatusInternalServerError || json.Unmarshal(body, &eb) != nil || !strings.Contains(eb.Error, "panicked") {
		t.Errorf("a panic before answering: %d %s; want a 500 saying the request panicked", code, body)
	}
	resp, err := http.Get(hs.URL + "/late")
	if err == nil {
		b, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		if rerr == nil {
			t.Errorf("a panic mid-answer: the client read a complete answer %d %q", resp.StatusCode, b)
		}
	}
	if code, body := call(t, "GET", hs.URL+"/fine", ""); code != http.StatusOK || string(body) != "ok" {
		t.Errorf("after the panics: %d %q", code, body)
	}
	log := logs.String()
	for _, want := range []string{"request panicked", "early panic", "late panic", "path=/early", "runtime/debug.Stack"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
}
