package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// slowTimeouts are the short server timeouts of the slow-client tests; bound is how long a test
// waits for the server to act on them before it calls the connection held open (far longer than
// any of them, so a loaded machine does not fail the test: it only asserts that the server acts
// at all, where before it never did).
const bound = 30 * time.Second

func slowClientConfig(t *testing.T) Config {
	root := repoRoot(t)
	return Config{
		DataDir: filepath.Join(t.TempDir(), "data"), InputRoots: []string{root}, BaseDir: root,
		ReadHeaderTimeout: time.Second, ReadTimeout: 2 * time.Second, IdleTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second,
		// A shutdown that waited for the grace period would outlast the test's bound by far.
		ShutdownGrace: 10 * time.Minute,
	}
}

// slowBody opens a connection to addr and starts a POST /jobs whose body arrives at one byte
// every three seconds (startSlowBody); it fails the test if it cannot.
func slowBody(t *testing.T, addr string) (net.Conn, func()) {
	t.Helper()
	conn, stop, err := startSlowBody(addr)
	if err != nil {
		t.Fatal(err)
	}
	return conn, stop
}

// startSlowBody opens a connection to addr and starts a POST /jobs whose body arrives at one
// byte every three seconds. The trickle's goroutine stops when the connection fails or is
// closed; the returned function closes the connection and waits for it.
func startSlowBody(addr string) (net.Conn, func(), error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	if _, err := io.WriteString(conn, "POST /jobs HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"); err != nil {
		conn.Close()
		return nil, nil, err
	}
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(3 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := io.WriteString(conn, " "); err != nil {
					return
				}
			}
		}
	}()
	var once sync.Once
	return conn, func() {
		once.Do(func() {
			close(stop)
			conn.Close()
			<-stopped
		})
	}, nil
}

// closedByServer reads conn until the server closes it, for at most bound. It returns what was
// read; a read that times out on the test's side fails the test.
func closedByServer(t *testing.T, conn net.Conn, what string) string {
	t.Helper()
	start := time.Now()
	conn.SetReadDeadline(time.Now().Add(bound))
	b, err := io.ReadAll(conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("%s: the server kept the connection open for %v", what, bound)
	}
	t.Logf("%s: closed by the server after %.1fs (%v)", what, time.Since(start).Seconds(), err)
	return string(b)
}

// TestSlowClients: a request body trickling at one byte every three seconds and an idle
// keep-alive connection are closed by the server within its timeouts (ReadTimeout, IdleTimeout),
// and a shutdown with a slow body in flight ends within the timeouts rather than waiting for the
// whole grace period.
func TestSlowClients(t *testing.T) {
	ts := startServer(t, openRuntime(t), slowClientConfig(t))
	addr := strings.TrimPrefix(ts.url, "http://")

	t.Run("slow body", func(t *testing.T) {
		conn, closeConn := slowBody(t, addr)
		defer closeConn()
		got := closedByServer(t, conn, "slow body")
		if got != "" && !strings.HasPrefix(got, "HTTP/1.1 400") && !strings.HasPrefix(got, "HTTP/1.1 408") {
			t.Fatalf("answer to a slow body: %q", got)
		}
	})

	t.Run("idle keep-alive", func(t *testing.T) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Close {
			t.Fatalf("GET /healthz: %d, close %v (want a kept-alive connection)", resp.StatusCode, resp.Close)
		}
		conn.SetReadDeadline(time.Now().Add(bound))
		n, err := br.Read(make([]byte, 1))
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("an idle keep-alive connection stayed open for %v", bound)
		}
		if n != 0 || err == nil {
			t.Fatalf("idle connection: read %d bytes, %v", n, err)
		}
	})

	t.Run("shutdown", func(t *testing.T) {
		_, closeConn := slowBody(t, addr)
		defer closeConn()
		// Let the request reach its handler, where it is active (not idle) for Shutdown.
		time.Sleep(500 * time.Millisecond)
		stopped := make(chan error, 1)
		go func() { stopped <- ts.stop() }()
		select {
		case err := <-stopped:
			if err != nil {
				t.Fatalf("Serve: %v", err)
			}
		case <-time.After(bound):
			t.Fatalf("shutdown still waiting for a slow body after %v (grace %v)", bound, ts.srv.cfg.ShutdownGrace)
		}
	})
}

// TestWriteDeadline: a client that stops reading its answer is cut off by the per-answer write
// deadline (Config.WriteTimeout); without it the handler would block on the write for as long as
// the client keeps the connection. The answer is /metrics with the series of 5000 (restored)
// jobs, ~1 MB, and both sockets' buffers are kept small so that they fill.
func TestWriteDeadline(t *testing.T) {
	cfg := slowClientConfig(t)
	dir := filepath.Join(cfg.DataDir, "jobs")
	for i := range 5000 {
		id := fmt.Sprintf("%012d", i)
		if err := os.MkdirAll(filepath.Join(dir, id), 0o755); err != nil {
			t.Fatal(err)
		}
		rec := `{"id": "` + id + `", "progress": {"id": "` + id + `", "state": "completed", "created_at": "2026-01-01T00:00:00Z"}}`
		if err := os.WriteFile(filepath.Join(dir, id, jobFile), []byte(rec), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ts := startServerWith(t, openRuntime(t), cfg, func(ln net.Listener) net.Listener { return smallSendBuffers{ln.(*net.TCPListener)} })
	// The client's receive buffer is set before connecting, so that the window it advertises
	// from the start is small.
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) }); err != nil {
			return err
		}
		return serr
	}}
	conn, err := d.DialContext(t.Context(), "tcp", strings.TrimPrefix(ts.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	code, body := call(t, "GET", ts.url+"/metrics", "")
	if code != http.StatusOK || len(body) < 900_000 {
		t.Fatalf("/metrics: %d, %d bytes (want ~1 MB, more than the socket buffers hold)", code, len(body))
	}
	if _, err := io.WriteString(conn, "GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	// Never read: the handler fills the buffers, then its write must time out. The server's
	// count of requests in flight tells when the handler has returned.
	deadline := time.Now().Add(bound)
	for ts.srv.requestsInFlight() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("a /metrics answer to a client that does not read is still being written after %v", bound)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// smallSendBuffers gives each accepted connection a small socket send buffer, so that a client
// that does not read blocks the server's writes after a few kB rather than a few MB.
type smallSendBuffers struct{ *net.TCPListener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.TCPListener.AcceptTCP()
	if err != nil {
		return nil, err
	}
	if err := c.SetWriteBuffer(4096); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}
