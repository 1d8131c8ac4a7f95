package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gotpu/gotpu/checkpoint"
	"github.com/gotpu/gotpu/models"
)

// TestServiceBinary builds the service once and runs it as a real child process: the default
// listen address, the refusal to listen beyond loopback without a token, bearer-token
// authentication from the environment, and SIGTERM mid-job.
func TestServiceBinary(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "service")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	t.Run("DefaultAddress", func(t *testing.T) { testDefaultAddress(t, bin) })
	t.Run("ExposedNeedsToken", func(t *testing.T) { testExposedNeedsToken(t, bin) })
	t.Run("Token", func(t *testing.T) { testTokenProcess(t, bin) })
	t.Run("SIGTERM", func(t *testing.T) { testSIGTERM(t, bin) })
	t.Run("HubFlag", func(t *testing.T) { testHubFlag(t, bin) })
}

// serviceEnv is the environment of a child service: the test's own without a token, plus extra.
func serviceEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, tokenEnv+"=") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// testDefaultAddress: -addr defaults to loopback (as the usage text shows).
func testDefaultAddress(t *testing.T, bin string) {
	cmd := exec.CommandContext(t.Context(), bin, "-h")
	cmd.Env = serviceEnv()
	out, _ := cmd.CombinedOutput()
	if !regexp.MustCompile(`-addr string\n[^\n]*\(default "127\.0\.0\.1:8080"\)`).Match(out) {
		t.Fatalf("usage does not show -addr defaulting to 127.0.0.1:8080:\n%s", out)
	}
}

// testExposedNeedsToken: an address beyond loopback without a token is an error naming the
// flag, the variable and the address, and nothing listens. 192.0.2.1 is TEST-NET-1, on no
// interface of any machine, so this test never opens a port beyond loopback, even on code
// without the check (there the listen fails instead). With a token the check passes, and the
// listen on that address then fails.
func testExposedNeedsToken(t *testing.T, bin string) {
	tmp := t.TempDir()
	cmd := exec.CommandContext(t.Context(), bin, "-addr", "192.0.2.1:0", "-device", "go", "-data_dir", filepath.Join(tmp, "data"))
	cmd.Env = serviceEnv()
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "-auth_token_file") ||
		!strings.Contains(string(out), tokenEnv) || !strings.Contains(string(out), "192.0.2.1:0") {
		t.Fatalf("non-loopback -addr without a token: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "listening on") {
		t.Fatalf("the service listened:\n%s", out)
	}
	tokFile := filepath.Join(tmp, "token")
	if err := os.WriteFile(tokFile, []byte("abc-0123456789-xyz\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd = exec.CommandContext(t.Context(), bin, "-addr", "192.0.2.1:0", "-device", "go", "-data_dir", filepath.Join(tmp, "data"), "-auth_token_file", tokFile)
	cmd.Env = serviceEnv()
	out, err = cmd.CombinedOutput()
	if err == nil || strings.Contains(string(out), "-auth_token_file") || !strings.Contains(string(out), "192.0.2.1") {
		t.Fatalf("non-loopback -addr with a token: %v (want the listen error, not the token one)\n%s", err, out)
	}
}

// child is a service binary running as a child process.
type child struct {
	cmd    *exec.Cmd
	base   string        // http://127.0.0.1:port
	stderr *bytes.Buffer // complete (and no longer written) once wait has returned
	exited chan error
	done   bool
	err    error
}

// startChild runs the service binary in dir with args and the extra environment, and waits for
// its "listening on" line. The process is killed at the end of the test if it still runs.
func startChild(t *testing.T, bin, dir string, env []string, args ...string) *child {
	t.Helper()
	c := &child{cmd: exec.Command(bin, args...), stderr: &bytes.Buffer{}, exited: make(chan error, 1)}
	c.cmd.Dir, c.cmd.Env = dir, serviceEnv(env...)
	lines := &firstLine{ch: make(chan string, 1)}
	c.cmd.Stdout, c.cmd.Stderr = lines, c.stderr
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.exited <- c.cmd.Wait() }()
	t.Cleanup(func() {
		if !c.done {
			c.cmd.Process.Kill()
			c.err, c.done = <-c.exited, true
		}
		if t.Failed() {
			t.Logf("service stderr:\n%s", c.stderr.String())
		}
	})
	select {
	case line := <-lines.ch:
		addr, ok := strings.CutPrefix(line, "listening on ")
		if !ok {
			t.Fatalf("first line %q, want \"listening on ...\"", line)
		}
		c.base = strings.Fields(addr)[0]
	case c.err = <-c.exited:
		c.done = true
		t.Fatalf("the service exited at start: %v\n%s", c.err, c.stderr.String())
	case <-time.After(time.Minute):
		t.Fatal("the service printed no address within a minute")
	}
	return c
}

// stop sends SIGTERM and waits up to d for the exit, which it returns.
func (c *child) stop(t *testing.T, d time.Duration) error {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case c.err = <-c.exited:
		c.done = true
		return c.err
	case <-time.After(d):
		t.Fatalf("the service did not exit within %v of SIGTERM", d)
		return nil
	}
}

// testTokenProcess: with GOTPU_SERVICE_TOKEN set the binary answers 401 without the token and
// 200 with it, never logs it, and exits 0 on SIGTERM.
func testTokenProcess(t *testing.T, bin string) {
	const token = "env-token-0123456789-abcdef"
	c := startChild(t, bin, repoRoot(t), []string{tokenEnv + "=" + token},
		"-addr", "127.0.0.1:0", "-device", "go", "-data_dir", filepath.Join(t.TempDir(), "data"))
	if code, _ := call(t, "GET", c.base+"/jobs", ""); code != http.StatusUnauthorized {
		t.Fatalf("GET /jobs without the token: %d", code)
	}
	if code, _, body := callHeader(t, "GET", c.base+"/jobs", "", http.Header{"Authorization": {"Bearer " + token}}); code != http.StatusOK {
		t.Fatalf("GET /jobs with the token: %d %s", code, body)
	}
	if code, _ := call(t, "GET", c.base+"/healthz", ""); code != http.StatusOK {
		t.Fatalf("GET /healthz without the token: %d", code)
	}
	if err := c.stop(t, time.Minute); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
	if strings.Contains(c.stderr.String(), token) {
		t.Fatalf("the token is in the log:\n%s", c.stderr.String())
	}
}

// testSIGTERM starts a job in the binary and sends SIGTERM mid-run: the process must exit 0
// with the job's checkpoint committed at the step it reached and job.json saying "cancelled".
// The explicitly chosen -addr is logged as a warning naming it.
func testSIGTERM(t *testing.T, bin string) {
	root, tmp := repoRoot(t), t.TempDir()
	dataDir := filepath.Join(tmp, "data")
	tokens := filepath.Join(tmp, "tokens.jsonl")
	writeTokenJSONL(t, tokens, 16, 32, 1000)
	c := startChild(t, bin, root, nil, "-addr", "127.0.0.1:0", "-device", "go", "-num_devices", "1",
		"-data_dir", dataDir, "-input_roots", root+","+tmp)
	base := c.base

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

	if err := c.stop(t, 2*time.Minute); err != nil {
		t.Fatalf("service after SIGTERM: %v", err)
	}
	stderr := c.stderr.String()
	if !regexp.MustCompile(`level=WARN msg="[^"]*explicit[^"]*" addr=127\.0\.0\.1:0`).MatchString(stderr) {
		t.Fatalf("no warning naming the explicitly chosen -addr in the log:\n%s", stderr)
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
		t.Fatal(err)
	}
	if rec.Progress.State != StateCancelled || rec.Progress.Step < p.Step || last.Step != rec.Progress.Step {
		t.Fatalf("after SIGTERM: job.json %+v, latest checkpoint %+v (step %d seen before)", rec.Progress, last, p.Step)
	}
	ck, err := checkpoint.Open(last.Dir, "model.safetensors", "optimizer.safetensors", "trainer_state.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := models.Load(context.Background(), openRuntime(t), ck.Dir, models.LoadOptions{}); err != nil {
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
