package hub

import (
	"bytes"
	"context"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/gotpu/gotpu/hub/hubtest"
)

// testRepo is the model repo most tests use.
var testRepo = Repo{ID: "org/name"}

// payload is n deterministic pseudo-random bytes (seeded), so a flipped or missing byte changes
// every hash.
func payload(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 42))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// syncBuffer is a bytes.Buffer safe for a logger written from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// newClient returns a client of srv with a fresh cache, its log captured in logs.
func newClient(t *testing.T, srv *hubtest.Server, edit ...func(*Config)) (*Client, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	cfg := DefaultConfig()
	cfg.Endpoint = srv.URL()
	cfg.CacheDir = filepath.Join(t.TempDir(), "hub")
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	for _, e := range edit {
		e(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, logs
}

// withCache makes a client share another's cache directory.
func withCache(dir string) func(*Config) { return func(c *Config) { c.CacheDir = dir } }

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// dirNames lists the entries of dir, sorted ("" entries if it does not exist).
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

// count returns the logged requests that match all of host ("" any), method ("" any) and the
// path substring.
func count(srv *hubtest.Server, host, method, pathPart string) int {
	return srv.CountRequests(func(r hubtest.Request) bool {
		return (host == "" || r.Host == host) && (method == "" || r.Method == method) && strings.Contains(r.Path, pathPart)
	})
}

func mustDownload(t *testing.T, c *Client, repo Repo, file string) string {
	t.Helper()
	p, err := c.Download(context.Background(), repo, file)
	if err != nil {
		t.Fatalf("Download %s: %v", file, err)
	}
	return p
}
