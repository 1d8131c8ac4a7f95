package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gotpu/gotpu/checkpoint"
	"github.com/gotpu/gotpu/data/tokenizer"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/trainer"
)

// TestServiceEndToEnd drives the real server over loopback HTTP: a GPT-2 trained from scratch
// (model_type + config_overrides) on Go source text with the GPT-2 tokenizer is followed by
// polling, server-sent events and /metrics, cancelled with DELETE (checkpoint committed at the
// step it reached, loadable), and generates text from that checkpoint; a second job queued
// behind it is cancelled before it starts; a third, fine-tuning the gpt2-tiny fixture on token
// ids, runs to completion.
func TestServiceEndToEnd(t *testing.T) {
	root, tmp := repoRoot(t), t.TempDir()
	src := goSrc(t)
	rt := openRuntime(t)
	dataDir := filepath.Join(tmp, "data")
	ts := startServer(t, rt, Config{DataDir: dataDir, InputRoots: []string{root, src, tmp}, BaseDir: root})
	start := time.Now()
	lap := func(what string) { t.Logf("%6.1fs %s", time.Since(start).Seconds(), what) }

	// Job 1: from scratch on text; runs until cancelled (max_steps far away, no periodic save).
	textJob := fmt.Sprintf(`{
		"model_type": "gpt2",
		"config_overrides": "n_embd=16,n_layer=1,n_head=2,n_positions=32,resid_pdrop=0,embd_pdrop=0,attn_pdrop=0",
		"tokenizer_name": "testdata/tokenizers/gpt2/tokenizer.json.gz",
		"train_file": %q,
		"block_size": 16,
		"per_device_train_batch_size": 1,
		"learning_rate": 1e-3,
		"max_steps": 100000,
		"logging_steps": 1,
		"save_steps": 100000,
		"seed": 7
	}`, filepath.Join(src, "errors", "wrap.go"))
	req, err := http.NewRequestWithContext(t.Context(), "POST", ts.url+"/jobs", strings.NewReader(textJob))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var created Progress
	err = json.NewDecoder(resp.Body).Decode(&created)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /jobs: status %d, %v", resp.StatusCode, err)
	}
	if loc := resp.Header.Get("Location"); loc != "/jobs/"+created.ID || created.URLs["events"] != loc+"/events" {
		t.Fatalf("Location %q, urls %v for job %q", loc, created.URLs, created.ID)
	}
	jobURL := ts.url + "/jobs/" + created.ID

	// Job 2 waits for the single training slot, which job 1 holds once running; cancelling it
	// never starts it.
	waitFor(t, jobURL, "running", func(p Progress) bool { return p.State == StateRunning })
	tokens := filepath.Join(tmp, "tokens.jsonl")
	writeTokenJSONL(t, tokens, 16, 32, 1000)
	idsJob := fmt.Sprintf(`{"model_name_or_path": "testdata/models/gpt2-tiny", "train_file": %q,
		"per_device_train_batch_size": 4, "max_steps": 3, "learning_rate": 5e-3, "logging_steps": 1}`, tokens)
	var queued Progress
	callJSON(t, "POST", ts.url+"/jobs", idsJob, http.StatusCreated, &queued)
	if queued.State != StateQueued {
		t.Fatalf("second job: state %s, want queued behind the first", queued.State)
	}
	var qc Progress
	callJSON(t, "DELETE", ts.url+"/jobs/"+queued.ID, "", http.StatusOK, &qc)
	if qc.State != StateCancelled || qc.Step != 0 || qc.LatestCheckpoint != nil || qc.StartedAt != nil {
		t.Fatalf("queued job after DELETE: %+v", qc)
	}

	lap("queued job cancelled")
	// Progress: polling, then a few server-sent events.
	p := waitFor(t, jobURL, "step 5", func(p Progress) bool { return p.Step >= 5 })
	if p.State != StateRunning || p.MaxSteps != 100000 || p.Loss == nil || p.TokensPerSecond == nil || *p.TokensPerSecond <= 0 ||
		p.ETASeconds == nil || *p.ETASeconds <= 0 || p.LearningRate == nil || p.LatestCheckpoint != nil || p.StartedAt == nil {
		t.Fatalf("progress at step %d: %+v", p.Step, p)
	}
	lap("step 5 reached")
	events := readEvents(t, jobURL+"/events", 3)
	for i, e := range events {
		if e.ID != created.ID || e.State != StateRunning || e.Step < p.Step || (i > 0 && e.Step < events[i-1].Step) {
			t.Fatalf("event %d: %+v (after step %d)", i, e, p.Step)
		}
	}
	if events[2].Step <= events[0].Step {
		t.Fatalf("3 events, no step between them: %d, %d", events[0].Step, events[2].Step)
	}
	// The client went away: its stream ends although the job runs on.
	for {
		_, body := call(t, "GET", ts.url+"/metrics", "")
		if metricValue(t, string(body), "gotpu_event_streams") == 0 {
			break
		}
		select {
		case <-t.Context().Done():
			t.Fatal("the event stream of a client that went away is still open")
		case <-time.After(20 * time.Millisecond):
		}
	}
	callJSON(t, "GET", jobURL, "", http.StatusOK, &p)
	if p.State != StateRunning {
		t.Fatalf("job %s after the client left its stream", p.State)
	}

	lap("3 events read")
	code, body := call(t, "GET", ts.url+"/metrics", "")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	metrics := string(body)
	if step := metricValue(t, metrics, `gotpu_job_step{job="`+created.ID+`"}`); step < 5 {
		t.Fatalf("gotpu_job_step %v, want >= 5", step)
	}
	if loss := metricValue(t, metrics, `gotpu_job_loss{job="`+created.ID+`"}`); !(loss > 0 && loss < 20) {
		t.Fatalf("gotpu_job_loss %v", loss)
	}
	if tps := metricValue(t, metrics, `gotpu_job_tokens_per_second{job="`+created.ID+`"}`); tps <= 0 {
		t.Fatalf("gotpu_job_tokens_per_second %v", tps)
	}
	if syncs := metricValue(t, metrics, `gotpu_job_host_syncs{job="`+created.ID+`"}`); syncs < 1 {
		t.Fatalf("gotpu_job_host_syncs %v: a log interval has at least its own read", syncs)
	}
	if idle := metricValue(t, metrics, `gotpu_job_device_idle_fraction{job="`+created.ID+`"}`); idle < 0 || idle > 1 {
		t.Fatalf("gotpu_job_device_idle_fraction %v", idle)
	}
	if n := metricValue(t, metrics, `gotpu_jobs{state="running"}`); n != 1 {
		t.Fatalf("gotpu_jobs{state=running} = %v", n)
	}
	if n := metricValue(t, metrics, `gotpu_jobs{state="cancelled"}`); n != 1 {
		t.Fatalf("gotpu_jobs{state=cancelled} = %v (the queued job)", n)
	}

	// No checkpoint yet: generation says so.
	if code, body := call(t, "GET", jobURL+"/generate?prompt=func", ""); code != http.StatusConflict {
		t.Fatalf("generate before any checkpoint: %d %s", code, body)
	}

	lap("metrics checked")
	// DELETE: the trainer finishes its step and commits a checkpoint there.
	var cancelled Progress
	callJSON(t, "DELETE", jobURL, "", http.StatusOK, &cancelled)
	if cancelled.State != StateCancelled || cancelled.Step < 5 || cancelled.LatestCheckpoint == nil ||
		cancelled.LatestCheckpoint.Step != cancelled.Step || cancelled.Saves != 1 || cancelled.FinishedAt == nil || cancelled.ETASeconds != nil {
		t.Fatalf("after DELETE: %+v", cancelled)
	}
	lap("DELETE returned")
	ckpt, err := checkpoint.Open(cancelled.LatestCheckpoint.Dir, "model.safetensors", "config.json", "optimizer.safetensors", "trainer_state.json")
	if err != nil {
		t.Fatal(err)
	}
	if ckpt.Manifest.Step != cancelled.Step {
		t.Fatalf("checkpoint manifest step %d, job step %d", ckpt.Manifest.Step, cancelled.Step)
	}
	st, err := trainer.LoadTrainerState(filepath.Join(ckpt.Dir, "trainer_state.json"))
	if err != nil {
		t.Fatal(err)
	}
	if st.GlobalStep != cancelled.Step {
		t.Fatalf("trainer_state.json global_step %d, job step %d", st.GlobalStep, cancelled.Step)
	}
	m, err := models.Load(t.Context(), rt, ckpt.Dir, models.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lm, ok := m.(models.CausalLM)
	if !ok || lm.VocabSize() != 50257 || lm.MaxPositions() != 32 || m.Architecture() != "GPT2LMHeadModel" {
		t.Fatalf("checkpoint model: %s, causal %v", m.Architecture(), ok)
	}
	var rec jobRecord
	if b, err := os.ReadFile(filepath.Join(dataDir, "jobs", created.ID, jobFile)); err != nil {
		t.Fatal(err)
	} else if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Progress.State != StateCancelled || rec.Progress.Step != cancelled.Step {
		t.Fatalf("job.json: %+v", rec.Progress)
	}
	code, body = call(t, "GET", ts.url+"/metrics", "")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	if n := metricValue(t, string(body), `gotpu_jobs{state="cancelled"}`); n != 2 {
		t.Fatalf("gotpu_jobs{state=cancelled} = %v after DELETE", n)
	}
	if n := metricValue(t, string(body), `gotpu_job_checkpoint_saves_total{job="`+created.ID+`"}`); n != 1 {
		t.Fatalf("saves %v", n)
	}
	if n := metricValue(t, string(body), `gotpu_job_step{job="`+created.ID+`"}`); int(n) != cancelled.Step {
		t.Fatalf("gotpu_job_step %v, job step %d", n, cancelled.Step)
	}

	lap("checkpoint loaded")
	// Generation from the committed checkpoint, decoded with the job's tokenizer.
	var gen generateResponse
	callJSON(t, "GET", jobURL+"/generate?"+url.Values{"prompt": {"func Unwrap(err error) "}, "max_new_tokens": {"6"}}.Encode(), "", http.StatusOK, &gen)
	tok, err := tokenizer.FromFile(filepath.Join(root, "testdata", "tokenizers", "gpt2", "tokenizer.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	enc, err := tok.Encode("func Unwrap(err error) ", false)
	if err != nil {
		t.Fatal(err)
	}
	if gen.Checkpoint != ckpt.Dir || gen.Step != cancelled.Step || len(gen.PromptIDs) != len(enc.IDs) ||
		len(gen.TokenIDs) == 0 || len(gen.TokenIDs) > 6 || gen.Text == nil {
		t.Fatalf("generate: %+v", gen)
	}
	ids := make([]uint32, len(gen.TokenIDs))
	for i, id := range gen.TokenIDs {
		ids[i] = uint32(id)
	}
	if text, err := tok.Decode(ids, false); err != nil || text != *gen.Text {
		t.Fatalf("generated ids decode to %q (%v), the service said %q", text, err, *gen.Text)
	}
	firstText := *gen.Text
	t.Logf("cancelled at step %d (loss %.4f); generated %q", cancelled.Step, *cancelled.Loss, firstText)

	lap("generated")
	// Job 3: fine-tune the fixture on token ids to completion, followed by its event stream.
	var done Progress
	callJSON(t, "POST", ts.url+"/jobs", idsJob, http.StatusCreated, &done)
	events = readEvents(t, ts.url+"/jobs/"+done.ID+"/events", -1)
	last := events[len(events)-1]
	if last.State != StateCompleted || last.Step != 3 || last.MaxSteps != 3 || last.LatestCheckpoint == nil ||
		last.LatestCheckpoint.Step != 3 || last.TrainLoss == nil || last.Error != "" {
		t.Fatalf("last event of the completed job: %+v", last)
	}
	lap("job 3 completed")
	if _, err := models.Load(t.Context(), rt, filepath.Join(dataDir, "jobs", done.ID), models.LoadOptions{}); err != nil {
		t.Fatalf("final model in output_dir: %v", err)
	}
	if code, body := call(t, "DELETE", ts.url+"/jobs/"+done.ID, ""); code != http.StatusConflict {
		t.Fatalf("DELETE of a completed job: %d %s", code, body)
	}
	if code, body := call(t, "GET", ts.url+"/jobs/"+done.ID+"/generate?prompt=hello", ""); code != http.StatusBadRequest ||
		!strings.Contains(string(body), "prompt_ids") {
		t.Fatalf("text prompt to a job without a tokenizer: %d %s", code, body)
	}
	callJSON(t, "GET", ts.url+"/jobs/"+done.ID+"/generate?prompt_ids=1,8,15&max_new_tokens=4", "", http.StatusOK, &gen)
	if gen.Step != 3 || gen.Text != nil || len(gen.TokenIDs) == 0 || len(gen.TokenIDs) > 4 {
		t.Fatalf("generate from token ids: %+v", gen)
	}

	lap("job 3 generated")
	var list struct{ Jobs []Progress }
	callJSON(t, "GET", ts.url+"/jobs", "", http.StatusOK, &list)
	if len(list.Jobs) != 3 || list.Jobs[0].ID != created.ID || list.Jobs[1].ID != queued.ID || list.Jobs[2].ID != done.ID {
		t.Fatalf("GET /jobs: %+v", list.Jobs)
	}
	if code, _ := call(t, "GET", ts.url+"/jobs/nope", ""); code != http.StatusNotFound {
		t.Fatalf("unknown job: %d", code)
	}
	if err := ts.stop(); err != nil {
		t.Fatalf("shutdown: %v", err)
	}

	lap("server stopped")
	// A new server on the same data directory lists the jobs and generates from their checkpoints.
	ts2 := startServer(t, rt, Config{DataDir: dataDir, InputRoots: []string{root, src, tmp}, BaseDir: root})
	callJSON(t, "GET", ts2.url+"/jobs", "", http.StatusOK, &list)
	if len(list.Jobs) != 3 || list.Jobs[0].State != StateCancelled || list.Jobs[0].LatestCheckpoint == nil ||
		list.Jobs[0].LatestCheckpoint.Step != cancelled.Step || list.Jobs[2].State != StateCompleted {
		t.Fatalf("jobs after a restart: %+v", list.Jobs)
	}
	var gen2 generateResponse
	callJSON(t, "GET", ts2.url+"/jobs/"+created.ID+"/generate?"+url.Values{"prompt": {"func Unwrap(err error) "}, "max_new_tokens": {"6"}}.Encode(), "", http.StatusOK, &gen2)
	// Greedy decoding from the same checkpoint gives the same text.
	if gen2.Step != cancelled.Step || gen2.Text == nil || *gen2.Text != firstText {
		t.Fatalf("generation after a restart: %+v, before: %q", gen2, firstText)
	}
}
