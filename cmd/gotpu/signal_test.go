package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The second-signal tests need a command that is slow to stop, which no real command is on
// demand; the test binary runs as that process instead, through the same notifySignals and run
// as main, with the command given by this variable.
const signalHelperEnv = "GOTPU_TEST_SIGNAL_HELPER"

func init() {
	// Before TestMain, which would build gotpu first.
	if mode := os.Getenv(signalHelperEnv); mode != "" {
		os.Exit(signalHelper(mode))
	}
}

func signalHelper(mode string) int {
	wait := command{name: "wait", summary: "wait for a signal", run: func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		fmt.Fprintln(stderr, "ready")
		<-ctx.Done()
		switch mode {
		case "stuck": // never stops by itself: the second signal must end it
			for {
				time.Sleep(time.Hour)
			}
		case "saves": // stops as `gotpu train` does: its work saved, a success
			return nil
		case "fails": // stops with an error of its own, which wraps the context's
			return fmt.Errorf("reading input: %w", ctx.Err())
		}
		return fmt.Errorf("unknown helper mode %q", mode)
	}}
	ctx, stop := notifySignals(context.Background(), os.Stderr)
	code := run(ctx, []command{wait}, []string{"wait"}, os.Stdout, os.Stderr)
	stop()
	return code
}

func startHelper(t *testing.T, mode string) *started {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), signalHelperEnv+"="+mode)
	p := start(t, cmd)
	p.waitStderr(t, "ready")
	return p
}

// TestSecondSignalExits: a command that does not stop after the first signal is ended by the
// second one at once, with 128 + the second signal's number.
func TestSecondSignalExits(t *testing.T) {
	p := startHelper(t, "stuck")
	p.signal(t, syscall.SIGINT)
	p.waitStderr(t, "gotpu: SIGINT received: stopping (send it again to exit at once)")
	p.signal(t, syscall.SIGTERM)
	if code := p.wait(t); code != 143 {
		t.Fatalf("exit status %d, want 143; stderr:\n%s", code, p.stderr)
	}
	if !strings.Contains(p.stderr.String(), "gotpu: second signal (SIGTERM): exiting now") {
		t.Errorf("stderr:\n%s", p.stderr)
	}
}

// TestSignalStatus: after the first signal, a command's error is reported as stopped by that
// signal, with 128+N; a command that returns nil (train: checkpoint committed) exits 0.
func TestSignalStatus(t *testing.T) {
	for _, c := range []struct {
		mode   string
		sig    syscall.Signal
		status int
		stderr string
	}{
		{"fails", syscall.SIGINT, 130, "gotpu wait: stopped by SIGINT\n"},
		{"fails", syscall.SIGTERM, 143, "gotpu wait: stopped by SIGTERM\n"},
		{"saves", syscall.SIGTERM, 0, "gotpu: SIGTERM received: stopping"},
	} {
		p := startHelper(t, c.mode)
		p.signal(t, c.sig)
		if code := p.wait(t); code != c.status || !strings.Contains(p.stderr.String(), c.stderr) {
			t.Errorf("%s, %v: exit status %d, want %d and %q; stderr:\n%s", c.mode, c.sig, code, c.status, c.stderr, p.stderr)
		}
	}
}

// TestCancelableReader: data and EOF pass through; a read blocked on a pipe with nothing to read
// returns the context's error once it is cancelled.
func TestCancelableReader(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close() // releases the reading goroutine at the end
	ctx, cancel := context.WithCancel(context.Background())
	r := newCancelableReader(ctx, pr)
	go pw.Write([]byte("hello"))
	buf := make([]byte, 3)
	var got []byte
	for len(got) < 5 {
		n, err := r.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, buf[:n]...)
	}
	if string(got) != "hello" {
		t.Fatalf("read %q", got)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := r.Read(buf)
		errc <- err
	}()
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("blocked read after cancel: %v", err)
		}
	case <-time.After(signalWait):
		t.Fatal("a blocked read did not return after cancel")
	}

	r = newCancelableReader(context.Background(), strings.NewReader("abc"))
	if b, err := io.ReadAll(r); err != nil || string(b) != "abc" {
		t.Fatalf("ReadAll = %q, %v", b, err)
	}
}
