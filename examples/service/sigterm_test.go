package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gotpu/gotpu/checkpoint"
	"github.com/gotpu/gotpu/models"
)

// TestSIGTERM builds the service, runs it as a real child process, starts a job, and sends
// SIGTERM mid-run: the process must exit 0 with the job's checkpoint committed at the step it
// reached and job.json saying "cancelled".
func TestSIGTERM(t *testing.T) {
	root, tmp := repoRoot(t), t.TempDir()
	bin := filepath.Join(tmp, "service")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dataDir := filepath.Join(tmp, "data")
	tokens := filepath.Join(tmp, "tokens.jsonl")
	writeTokenJSONL(t, tokens, 16, 32, 1000)

	cmd := exec.Command(bin, "-addr", "127.0.0.1:0", "-device", "go", "-num_devices", "1",
		"-data_dir", dataDir, "-input_roots", root+","+tmp)
	cmd.Dir = root
	var stderr bytes.Buffer
	lines := &firstLine{ch: make(chan string, 1)}
	cmd.Stdout, cmd.Stderr = lines, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	killed := false
	defer func() {
		if !killed {
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() { // the buffer is complete (and no longer written) once Wait has returned
			t.Logf("service stderr:\n%s", stderr.String())
		}
	}()
	var base string
	select {
	case line := <-lines.ch:
		addr, ok := strings.CutPrefix(line, "listening on ")
		if !ok {
			t.Fatalf("first line %q, want \"listening on ...\"", line)
		}
		base = strings.Fields(addr)[0]
	case err := <-exited:
		killed = true
		t.Fatalf("the service exited at start: %v\n%s", err, stderr.String())
	case <-time.After(time.Minute):
		t.Fatal("the service printed no address within a minute")
	}

	job := fmt.Sprintf(`{"model_name_or_path": "testdata/models/gpt2-tiny", "train_file": %q,
		"per_device_train_batch_size": 4, "max_steps": 1000000, "save_steps": 1000000, "logging_steps": 1}`, tokens)
	var created Progress
	callJSON(t, "POST", base+"/jobs", job, http.StatusCreated, &created)
	p := waitFor(t, base+"/jobs/"+created.ID, "step 3", func(p Progress) bool { return p.Step >= 3 })

	// A client following the job's events: its stream must end with the job's final state, and
	// must not hold the shutdown up.
	type streamResult struct {
		events []Progress
		err    error
	}
	stream, connected := make(chan streamResult, 1), make(chan struct{})
	go func() {
		var once bool
		evs, err := collectEvents(t.Context(), base+"/jobs/"+created.ID+"/events", -1, func(Progress) {
			if !once {
				once = true
				close(connected)
			}
		})
		stream <- streamResult{evs, err}
	}()
	select {
	case <-connected:
	case r := <-stream:
		t.Fatalf("event stream ended before SIGTERM: %v", r.err)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		killed = true
		if err != nil {
			t.Fatalf("service after SIGTERM: %v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("service did not exit within 2 minutes of SIGTERM")
	}

	r := <-stream // the server has exited, so the stream has ended
	if r.err != nil || len(r.events) == 0 || r.events[len(r.events)-1].State != StateCancelled {
		t.Fatalf("event stream across SIGTERM: %d events, error %v", len(r.events), r.err)
	}

	jobDir := filepath.Join(dataDir, "jobs", created.ID)
	var rec jobRecord
	if b, err := os.ReadFile(filepath.Join(jobDir, jobFile)); err != nil {
		t.Fatal(err)
	} else if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	last, err := checkpoint.Latest(jobDir)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	if rec.Progress.State != StateCancelled || rec.Progress.Step < p.Step || last.Step != rec.Progress.Step {
		t.Fatalf("after SIGTERM: job.json %+v, latest checkpoint %+v (step %d seen before)", rec.Progress, last, p.Step)
	}
	c, err := checkpoint.Open(last.Dir, "model.safetensors", "optimizer.safetensors", "trainer_state.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := models.Load(context.Background(), openRuntime(t), c.Dir, models.LoadOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("SIGTERM at step %d: exit 0, %s committed", rec.Progress.Step, last.Dir)
}

// firstLine is the child's stdout: it hands the first complete line to ch. (exec's copying
// goroutine, owned by cmd.Wait, is its only writer.)
type firstLine struct {
	buf  []byte
	sent bool
	ch   chan string
}

func (w *firstLine) Write(p []byte) (int, error) {
	if !w.sent {
		w.buf = append(w.buf, p...)
		if i := bytes.IndexByte(w.buf, '\n'); i >= 0 {
			w.ch <- string(w.buf[:i])
			w.sent = true
		}
	}
	return len(p), nil
}
