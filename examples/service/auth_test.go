package main

import (
	"bytes"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAuthToken: with Config.AuthToken set, every endpoint but /healthz answers 401 (with a
// Bearer challenge) to a request without the token, with another token, a prefix of it or
// another scheme, and serves a request that carries it; an unauthenticated POST creates nothing.
func TestAuthToken(t *testing.T) {
	root, tmp := repoRoot(t), t.TempDir()
	const token = "s3cret-token-0123456789abcdef"
	ts := startServer(t, openRuntime(t), Config{DataDir: filepath.Join(tmp, "data"), InputRoots: []string{root}, BaseDir: root, AuthToken: token})
	job := `{"model_name_or_path": "testdata/models/gpt2-tiny", "train_file": "nope.jsonl"}`
	bearer := func(v string) http.Header { return http.Header{"Authorization": {v}} }
	for _, ep := range []struct{ method, path, body string }{
		{"GET", "/jobs", ""},
		{"POST", "/jobs", job},
		{"GET", "/jobs/abc", ""},
		{"DELETE", "/jobs/abc", ""},
		{"GET", "/jobs/abc/events", ""},
		{"GET", "/jobs/abc/generate?prompt=a", ""},
		{"GET", "/metrics", ""},
	} {
		for _, h := range []http.Header{
			nil,
			bearer("Bearer " + token + "x"),
			bearer("Bearer " + token[:len(token)-1]),
			bearer("Bearer "),
			bearer("Basic " + token),
			bearer(token),
		} {
			code, hdr, body := callHeader(t, ep.method, ts.url+ep.path, ep.body, h)
			if code != http.StatusUnauthorized || !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer ") {
				t.Fatalf("%s %s with %v: status %d, WWW-Authenticate %q: %s", ep.method, ep.path, h, code, hdr.Get("WWW-Authenticate"), body)
			}
		}
	}
	// /healthz stays open: probes and load balancers rarely carry secrets, and it tells nothing
	// about jobs.
	if code, body := call(t, "GET", ts.url+"/healthz", ""); code != http.StatusOK {
		t.Fatalf("/healthz without a token: %d %s", code, body)
	}
	for _, v := range []string{"Bearer " + token, "bearer " + token} {
		if code, _, body := callHeader(t, "GET", ts.url+"/jobs", "", bearer(v)); code != http.StatusOK || !strings.Contains(string(body), `"jobs": []`) {
			t.Fatalf("GET /jobs with %q: %d %s (want 200 and no job: the unauthenticated POSTs created none)", v, code, body)
		}
	}
	if code, _, body := callHeader(t, "GET", ts.url+"/metrics", "", bearer("Bearer "+token)); code != http.StatusOK ||
		metricValue(t, string(body), "gotpu_http_unauthorized_total") < 42 {
		t.Fatalf("GET /metrics with the token: %d %s", code, body)
	}
	if code, _, body := callHeader(t, "POST", ts.url+"/jobs", job, bearer("Bearer "+token)); code != http.StatusBadRequest {
		t.Fatalf("POST /jobs with the token: %d %s (want the 400 of the missing train_file)", code, body)
	}
}

// TestLoadAuthToken: the token comes from -auth_token_file (one trailing newline trimmed; empty
// refused; a group- or world-readable file warned about) or GOTPU_SERVICE_TOKEN, not both.
func TestLoadAuthToken(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil { // the umask may have cut the mode
			t.Fatal(err)
		}
		return path
	}
	noEnv := func(string) (string, bool) { return "", false }
	env := func(v string) func(string) (string, bool) {
		return func(k string) (string, bool) { return v, k == tokenEnv }
	}
	for _, c := range []struct {
		name, file string
		env        func(string) (string, bool)
		want       string // the token; "" with errWant: an error
		errWant    string
		warnWant   string
	}{
		{"none", "", noEnv, "", "", ""},
		{"file with newline", write("a", "abc-0123456789-xyz\n", 0o600), noEnv, "abc-0123456789-xyz", "", ""},
		{"file with CRLF", write("b", "abc-0123456789-xyz\r\n", 0o600), noEnv, "abc-0123456789-xyz", "", ""},
		{"file without newline", write("c", "abc-0123456789-xyz", 0o600), noEnv, "abc-0123456789-xyz", "", ""},
		{"empty file", write("d", "", 0o600), noEnv, "", "-auth_token_file", ""},
		{"only a newline", write("e", "\n", 0o600), noEnv, "", "empty", ""},
		{"inner whitespace", write("f", "abc def-0123456789\n", 0o600), noEnv, "", "whitespace", ""},
		{"world-readable", write("g", "abc-0123456789-xyz\n", 0o644), noEnv, "abc-0123456789-xyz", "", "readable by group or others"},
		{"group-readable", write("h", "abc-0123456789-xyz\n", 0o640), noEnv, "abc-0123456789-xyz", "", "readable by group or others"},
		{"missing file", filepath.Join(dir, "nope"), noEnv, "", "-auth_token_file", ""},
		{"env", "", env("env-token-0123456789"), "env-token-0123456789", "", ""},
		{"env empty", "", env(""), "", tokenEnv, ""},
		{"file and env", write("i", "abc-0123456789-xyz\n", 0o600), env("env-token-0123456789"), "", "not both", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var logs bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logs, nil))
			got, err := loadAuthToken(c.file, c.env, log)
			if c.errWant != "" {
				if err == nil || !strings.Contains(err.Error(), c.errWant) {
					t.Fatalf("token %q, error %v; want an error saying %q", got, err, c.errWant)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("token %q, error %v; want %q", got, err, c.want)
			}
			if c.warnWant != "" && (!strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), c.warnWant) || !strings.Contains(logs.String(), c.file)) {
				t.Fatalf("no warning %q naming %s in the log:\n%s", c.warnWant, c.file, logs.String())
			}
			if c.warnWant == "" && strings.Contains(logs.String(), "readable") {
				t.Fatalf("unexpected warning:\n%s", logs.String())
			}
		})
	}
}

// TestExposure: which listen addresses count as loopback, and Serve refusing a non-loopback
// listener without a token (the flag-level check is in TestServiceBinary).
func TestExposure(t *testing.T) {
	ctx := t.Context()
	for _, c := range []struct {
		addr     string
		loopback bool
	}{
		{"127.0.0.1:8080", true},
		{"127.0.0.2:0", true},
		{"[::1]:8080", true},
		{"localhost:8080", true},
		{":8080", false},
		{"0.0.0.0:8080", false},
		{"[::]:8080", false},
		{"192.0.2.1:8080", false},
		{"no-such-host.invalid:8080", false},
	} {
		got, err := addrIsLoopback(ctx, c.addr)
		if got != c.loopback {
			t.Errorf("addrIsLoopback(%q) = %v (%v), want %v", c.addr, got, err, c.loopback)
		}
	}
	if err := checkExposure(ctx, "0.0.0.0:8080", false); err == nil || !strings.Contains(err.Error(), "-auth_token_file") || !strings.Contains(err.Error(), tokenEnv) {
		t.Fatalf("non-loopback without a token: %v", err)
	}
	if err := checkExposure(ctx, "0.0.0.0:8080", true); err != nil {
		t.Fatalf("non-loopback with a token: %v", err)
	}
	if err := checkExposure(ctx, "127.0.0.1:8080", false); err != nil {
		t.Fatalf("loopback without a token: %v", err)
	}

	srv, err := NewServer(Config{DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))}, openRuntime(t))
	if err != nil {
		t.Fatal(err)
	}
	ln := &fakeListener{addr: &net.TCPAddr{IP: net.ParseIP("192.0.2.1"), Port: 8080}, closed: make(chan struct{})}
	if err := srv.Serve(ctx, ln); err == nil || !strings.Contains(err.Error(), "AuthToken") {
		t.Fatalf("Serve on a non-loopback listener without a token: %v", err)
	}
}

// fakeListener has a non-loopback address and never accepts: it lets Serve's guard be tested
// without opening a port beyond loopback.
type fakeListener struct {
	addr   net.Addr
	closed chan struct{}
}

func (l *fakeListener) Accept() (net.Conn, error) {
	<-l.closed
	return nil, net.ErrClosed
}

func (l *fakeListener) Close() error {
	select {
	case <-l.closed:
	default:
		close(l.closed)
	}
	return nil
}

func (l *fakeListener) Addr() net.Addr { return l.addr }
