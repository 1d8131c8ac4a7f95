package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gotpu/gotpu/xla"
)

// repoRoot is the repository root, which relative paths in the tests' job requests are relative
// to (the service's working directory when run with `go run ./examples/service`).
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// goSrc is $(go env GOROOT)/src: real text every machine with Go has.
func goSrc(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "src")
}

// openRuntime opens the pure-Go backend for a test.
func openRuntime(t testing.TB) *xla.Runtime {
	t.Helper()
	rt, err := xla.Open(context.Background(), xla.Config{Device: "go", NumDevices: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

// testServer is a real Server on a loopback port.
type testServer struct {
	srv  *Server
	url  string
	stop func() error // graceful shutdown; returns Serve's error
}

func startServer(t *testing.T, rt *xla.Runtime, cfg Config) *testServer {
	t.Helper()
	return startServerWith(t, rt, cfg, nil)
}

// startServerWith is startServer with the loopback listener wrapped by wrap (when not nil).
func startServerWith(t *testing.T, rt *xla.Runtime, cfg Config, wrap func(net.Listener) net.Listener) *testServer {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	srv, err := NewServer(cfg, rt)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		ln = wrap(ln)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	ts := &testServer{srv: srv, url: "http://" + ln.Addr().String()}
	stopped := false
	var stopErr error
	ts.stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			stopErr = <-served
		}
		return stopErr
	}
	t.Cleanup(func() {
		if err := ts.stop(); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ts
}

// testWriter sends the server's warnings to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// call makes one request and returns the status and body.
func call(t *testing.T, method, url, body string) (int, []byte) {
	t.Helper()
	code, _, b := callHeader(t, method, url, body, nil)
	return code, b
}

// callHeader makes one request with extra headers and returns the status, the answer's headers
// and its body.
func callHeader(t *testing.T, method, url, body string, h http.Header) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, url, err)
	}
	return resp.StatusCode, resp.Header, b
}

// callJSON makes a request, checks the status and decodes the JSON answer into out.
func callJSON(t *testing.T, method, url, body string, want int, out any) {
	t.Helper()
	code, b := call(t, method, url, body)
	if code != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, url, code, want, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, url, err, b)
		}
	}
}

// waitFor polls the job until cond holds (or the job ends without it, or the test's deadline).
func waitFor(t *testing.T, url string, what string, cond func(Progress) bool) Progress {
	t.Helper()
	for {
		var p Progress
		callJSON(t, "GET", url, "", http.StatusOK, &p)
		if cond(p) {
			return p
		}
		if p.State.Done() {
			t.Fatalf("job ended (%s, step %d, error %q) before %s", p.State, p.Step, p.Error, what)
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("gave up waiting for %s: %+v", what, p)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// readEvents reads n server-sent events (their data lines) from url, or all of them until the
// stream ends when n < 0, then closes the connection.
func readEvents(t *testing.T, url string, n int) []Progress {
	t.Helper()
	out, err := collectEvents(t.Context(), url, n, nil)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// collectEvents is readEvents for any goroutine: it reports problems as an error, and calls
// onEvent (if set) on each event as it arrives.
func collectEvents(ctx context.Context, url string, n int, onEvent func(Progress)) ([]Progress, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		return nil, fmt.Errorf("GET %s: status %d, content type %q", url, resp.StatusCode, ct)
	}
	var out []Progress
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	lastID := -1
	for (n < 0 || len(out) < n) && sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			id, err := strconv.Atoi(strings.TrimPrefix(line, "id: "))
			if err != nil || id <= lastID {
				return nil, fmt.Errorf("event id %q after %d: want increasing integers", line, lastID)
			}
			lastID = id
		case strings.HasPrefix(line, "data: "):
			var p Progress
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &p); err != nil {
				return nil, fmt.Errorf("event %q: %w", line, err)
			}
			out = append(out, p)
			if onEvent != nil {
				onEvent(p)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", url, err)
	}
	return out, nil
}

// metricValue finds `name{labels} value` in a Prometheus text exposition.
func metricValue(t *testing.T, text, series string) float64 {
	t.Helper()
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("metric %s: %v", series, err)
			}
			return f
		}
	}
	t.Fatalf("metric %s not in /metrics:\n%s", series, text)
	return 0
}

// writeTokenJSONL writes n pre-tokenized examples of length L with ids below vocab: arithmetic
// sequences, something a tiny model learns quickly.
func writeTokenJSONL(t testing.TB, path string, n, L, vocab int) {
	t.Helper()
	var b strings.Builder
	for i := range n {
		ids := make([]int, L)
		for k := range ids {
			ids[k] = (i*7 + k*(i%5+1)) % vocab
		}
		line, err := json.Marshal(map[string][]int{"input_ids": ids})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s\n", line)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}
