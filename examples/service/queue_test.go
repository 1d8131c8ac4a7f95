package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// holdSlots takes every training slot of the server, so that jobs stay queued without training
// (and without using the machine's cores); the slots are handed back at the end of the test.
func holdSlots(t *testing.T, s *Server) (release func()) {
	t.Helper()
	for range cap(s.slots) {
		s.slots <- struct{}{}
	}
	released := false
	release = func() {
		if !released {
			released = true
			for range cap(s.slots) {
				<-s.slots
			}
		}
	}
	t.Cleanup(release)
	return release
}

// TestQueueCap: beyond Config.MaxQueued queued jobs, POST /jobs answers 429 with Retry-After;
// a cancelled queued job frees its place.
func TestQueueCap(t *testing.T) {
	root, tmp := repoRoot(t), t.TempDir()
	ts := startServer(t, openRuntime(t), Config{DataDir: filepath.Join(tmp, "data"), InputRoots: []string{root, tmp}, BaseDir: root, MaxQueued: 2})
	holdSlots(t, ts.srv)
	tokens := filepath.Join(tmp, "tokens.jsonl")
	writeTokenJSONL(t, tokens, 4, 16, 1000)
	job := fmt.Sprintf(`{"model_name_or_path": "testdata/models/gpt2-tiny", "train_file": %q, "max_steps": 1}`, tokens)
	var a, b Progress
	callJSON(t, "POST", ts.url+"/jobs", job, http.StatusCreated, &a)
	callJSON(t, "POST", ts.url+"/jobs", job, http.StatusCreated, &b)
	for range 2 {
		code, hdr, body := callHeader(t, "POST", ts.url+"/jobs", job, nil)
		secs, err := strconv.Atoi(hdr.Get("Retry-After"))
		if code != http.StatusTooManyRequests || err != nil || secs <= 0 {
			t.Fatalf("POST beyond the cap: %d, Retry-After %q: %s", code, hdr.Get("Retry-After"), body)
		}
		var eb errorBody
		if err := json.Unmarshal(body, &eb); err != nil || !strings.Contains(eb.Error, "queued") {
			t.Fatalf("429 body %s (%v)", body, err)
		}
	}
	var list struct{ Jobs []Progress }
	callJSON(t, "GET", ts.url+"/jobs", "", http.StatusOK, &list)
	if len(list.Jobs) != 2 {
		t.Fatalf("%d jobs after two refused POSTs, want 2", len(list.Jobs))
	}
	callJSON(t, "DELETE", ts.url+"/jobs/"+a.ID, "", http.StatusOK, nil)
	var c Progress
	callJSON(t, "POST", ts.url+"/jobs", job, http.StatusCreated, &c)
	if c.State != StateQueued {
		t.Fatalf("job after a cancel freed a place: %+v", c)
	}
}

// TestTokenizerSharedAndReleased: 20 queued jobs on the same tokenizer load it once; cancelling
// them releases it (nothing holds it any more); a job that completes releases it too, and
// generation borrows it for the request only. The counts are the service's own metrics.
func TestTokenizerSharedAndReleased(t *testing.T) {
	root, tmp := repoRoot(t), t.TempDir()
	src := goSrc(t)
	ts := startServer(t, openRuntime(t), Config{DataDir: filepath.Join(tmp, "data"), InputRoots: []string{root, src}, BaseDir: root, MaxQueued: 32})
	release := holdSlots(t, ts.srv)
	metric := func(series string) float64 {
		t.Helper()
		_, body := call(t, "GET", ts.url+"/metrics", "")
		return metricValue(t, string(body), series)
	}
	job := func(maxSteps int) string {
		return fmt.Sprintf(`{"model_type": "gpt2", "config_overrides": "n_embd=16,n_layer=1,n_head=2,n_positions=32",
			"tokenizer_name": "testdata/tokenizers/gpt2/tokenizer.json.gz", "train_file": %q, "block_size": 16,
			"per_device_train_batch_size": 1, "max_steps": %d}`, filepath.Join(src, "errors", "wrap.go"), maxSteps)
	}
	var ids []string
	for range 20 {
		var p Progress
		callJSON(t, "POST", ts.url+"/jobs", job(1), http.StatusCreated, &p)
		ids = append(ids, p.ID)
	}
	if n, held := metric("gotpu_tokenizer_loads_total"), metric("gotpu_tokenizers_loaded"); n != 1 || held != 1 {
		t.Fatalf("20 queued jobs on one tokenizer: %v loads, %v held; want 1 and 1", n, held)
	}
	for _, id := range ids {
		var p Progress
		callJSON(t, "DELETE", ts.url+"/jobs/"+id, "", http.StatusOK, &p)
		if p.State != StateCancelled {
			t.Fatalf("job %s after DELETE: %s", id, p.State)
		}
	}
	if held := metric("gotpu_tokenizers_loaded"); held != 0 {
		t.Fatalf("%v tokenizers still held after every job was cancelled", held)
	}
	// The progress record outlives the job's spec.
	callJSON(t, "GET", ts.url+"/jobs/"+ids[0], "", http.StatusOK, nil)

	release()
	var done Progress
	callJSON(t, "POST", ts.url+"/jobs", job(1), http.StatusCreated, &done)
	p := waitFor(t, ts.url+"/jobs/"+done.ID, "completed", func(p Progress) bool { return p.State == StateCompleted })
	if n, held := metric("gotpu_tokenizer_loads_total"), metric("gotpu_tokenizers_loaded"); n != 2 || held != 0 {
		t.Fatalf("after a completed job: %v loads, %v held; want 2 (loaded again once released) and 0", n, held)
	}
	var gen generateResponse
	callJSON(t, "GET", ts.url+"/jobs/"+done.ID+"/generate?"+url.Values{"prompt": {"func "}, "max_new_tokens": {"2"}}.Encode(), "", http.StatusOK, &gen)
	if gen.Text == nil || gen.Step != p.Step {
		t.Fatalf("generate: %+v", gen)
	}
	if n, held := metric("gotpu_tokenizer_loads_total"), metric("gotpu_tokenizers_loaded"); n != 3 || held != 0 {
		t.Fatalf("after generating: %v loads, %v held; want 3 and 0", n, held)
	}
}

// TestDefaultSaveTotalLimit: a job that sets no save_total_limit gets the service's default; one
// that sets it keeps its own.
func TestDefaultSaveTotalLimit(t *testing.T) {
	root, tmp := repoRoot(t), t.TempDir()
	tokens := filepath.Join(tmp, "tokens.jsonl")
	writeTokenJSONL(t, tokens, 4, 16, 1000)
	paths, err := newPathPolicy(root, []string{root, tmp})
	if err != nil {
		t.Fatal(err)
	}
	env := specEnv{paths: paths, jobDir: t.TempDir(), deviceKind: "go", numDevices: 1, toks: newTokenizerCache(nil)}
	for _, c := range []struct {
		extra string
		want  int
	}{{"", defaultSaveTotalLimit}, {`, "save_total_limit": 7`, 7}} {
		spec, err := parseSpec(t.Context(), []byte(fmt.Sprintf(`{"model_name_or_path": "testdata/models/gpt2-tiny", "train_file": %q%s}`, tokens, c.extra)), env)
		if err != nil {
			t.Fatal(err)
		}
		if spec.Args.SaveTotalLimit == nil || *spec.Args.SaveTotalLimit != c.want {
			t.Fatalf("%q: save_total_limit %v, want %d", c.extra, spec.Args.SaveTotalLimit, c.want)
		}
		spec.release()
	}
}
