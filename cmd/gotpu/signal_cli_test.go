package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The tests below signal real processes. Their waits have generous bounds that exist only so that
// a regression fails instead of hanging; they are not speed assertions.
const signalWait = time.Minute

// lockedBuffer is a bytes.Buffer that the test may read while exec's copying goroutine writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// started is a child process under test.
type started struct {
	cmd    *exec.Cmd
	stderr *lockedBuffer
	exited chan error
}

func start(t *testing.T, cmd *exec.Cmd) *started {
	t.Helper()
	p := &started{cmd: cmd, stderr: &lockedBuffer{}, exited: make(chan error, 1)}
	if cmd.Stdout == nil {
		cmd.Stdout = io.Discard
	}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

// waitStderr waits until the child's stderr contains want (polling: the child says when it is
// ready), failing if the child exits first.
func (p *started) waitStderr(t *testing.T, want string) {
	t.Helper()
	deadline := time.After(signalWait)
	for !strings.Contains(p.stderr.String(), want) {
		select {
		case err := <-p.exited:
			p.exited <- err
			t.Fatalf("exited (%v) before writing %q; stderr:\n%s", err, want, p.stderr)
		case <-deadline:
			t.Fatalf("no %q on stderr after %v; stderr:\n%s", want, signalWait, p.stderr)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (p *started) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// wait returns the child's exit status, -1 when a signal ended it.
func (p *started) wait(t *testing.T) int {
	t.Helper()
	select {
	case err := <-p.exited:
		p.exited <- err
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(signalWait):
		t.Fatalf("still running %v after the signal; stderr:\n%s", signalWait, p.stderr)
	}
	return 0
}

// pathologicalTokenizer is issue #16's tokenizer: a Split pre-tokenizer whose lookahead body
// `(a*)*b` must scan to the end of "a…ab" from every position. The old engine was quadratic on it
// (16k characters 7.3 s a line), which kept `gotpu tokenize` busy for minutes, deaf to signals.
const pathologicalTokenizer = `{"version": "1.0", "added_tokens": [], "normalizer": null, "post_processor": null, "decoder": null,
 "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(?=(a*)*b)"}, "behavior": "Isolated", "invert": false},
 "model": {"type": "WordLevel", "vocab": {"[UNK]": 0, "a": 1, "b": 2}, "unk_token": "[UNK]"}}`

// TestTokenizeStopsOnSignal: `gotpu tokenize` on the pathological input, from a producer that
// keeps writing, stops on the first SIGINT or SIGTERM, says so, and exits 130 or 143. The old code
// exited 1 ("context canceled") when the signal came before a batch was being encoded, and kept
// encoding for minutes when it came during one.
func TestTokenizeStopsOnSignal(t *testing.T) {
	tokPath := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := os.WriteFile(tokPath, []byte(pathologicalTokenizer), 0o600); err != nil {
		t.Fatal(err)
	}
	// One batch of the library's JSON-lines reader (256 lines) of 8k-character lines: minutes of
	// work for the quadratic engine, a fraction of a second for a linear one.
	line := `{"text": "` + strings.Repeat("a", 8191) + `b"}` + "\n"
	batch := strings.Repeat(line, 256)
	for _, c := range []struct {
		sig    syscall.Signal
		name   string
		status int
	}{{syscall.SIGINT, "SIGINT", 130}, {syscall.SIGTERM, "SIGTERM", 143}} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(gotpuBin, "tokenize", "--tokenizer", tokPath)
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			p := start(t, cmd)
			// The producer writes batches until the pipe breaks (gotpu has exited; Wait also
			// closes the pipe). Its first write returns once gotpu has read all but a pipe's
			// buffer of the first batch: gotpu is running, its signal handling in place, and
			// about to tokenize.
			firstBatch := make(chan struct{})
			go func() {
				for i := 0; ; i++ {
					if _, err := io.WriteString(stdin, batch); err != nil {
						return
					}
					if i == 0 {
						close(firstBatch)
					}
				}
			}()
			select {
			case <-firstBatch:
			case err := <-p.exited:
				p.exited <- err
				t.Fatalf("gotpu exited (%v) before reading its input; stderr:\n%s", err, p.stderr)
			case <-time.After(signalWait):
				t.Fatalf("gotpu did not read its input within %v; stderr:\n%s", signalWait, p.stderr)
			}
			p.signal(t, c.sig)
			if code := p.wait(t); code != c.status {
				t.Fatalf("exit status %d, want %d; stderr:\n%s", code, c.status, p.stderr)
			}
			for _, want := range []string{"gotpu: " + c.name + " received: stopping", "gotpu tokenize: stopped by " + c.name} {
				if !strings.Contains(p.stderr.String(), want) {
					t.Errorf("stderr lacks %q:\n%s", want, p.stderr)
				}
			}
		})
	}
}

// TestTokenizeCompletesPathological: the same input, closed: every line is tokenized (one token
// per character) and gotpu exits 0.
func TestTokenizeCompletesPathological(t *testing.T) {
	tokPath := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := os.WriteFile(tokPath, []byte(pathologicalTokenizer), 0o600); err != nil {
		t.Fatal(err)
	}
	const n = 200_000
	out, errOut, code := runGotpuStdin(t, `{"text": "`+strings.Repeat("a", n-1)+`b"}`+"\n", "tokenize", "--tokenizer", tokPath)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := `{"ids":[` + strings.Repeat("1,", n-1) + `2],`
	if !strings.HasPrefix(out, want) {
		t.Fatalf("output starts %.80q, want %.80q", out, want)
	}
}

// TestScoreStopsOnSignal: `gotpu score` reading examples from a pipe that stays open (blank lines
// so far) stops on SIGINT with status 130.
func TestScoreStopsOnSignal(t *testing.T) {
	model := t.TempDir()
	makeTinyGPT2Dir(t, model)
	cmd := exec.Command(gotpuBin, "score", "--model", model, "--device", "go")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	p := start(t, cmd)
	// More than a pipe's buffer and the scanner's: once written, score has loaded the model and
	// is reading its input.
	if _, err := io.WriteString(stdin, strings.Repeat("\n", 256<<10)); err != nil {
		t.Fatalf("writing the input: %v; stderr:\n%s", err, p.stderr)
	}
	p.signal(t, syscall.SIGINT)
	if code := p.wait(t); code != 130 || !strings.Contains(p.stderr.String(), "gotpu score: stopped by SIGINT") {
		t.Fatalf("exit status %d, want 130 and a message; stderr:\n%s", code, p.stderr)
	}
}
