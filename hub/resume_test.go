package hub

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gotpu/gotpu/hub/hubtest"
)

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestResumeAfterCut: a connection dropped mid-file leaves blobs/<etag>.incomplete; the next
// call asks for the rest with a Range and the blob's sha256 is the file's.
func TestResumeAfterCut(t *testing.T) {
	for _, tc := range []struct {
		name, host string
		size       int
	}{
		{"lfs-from-cdn", "cdn", 1 << 20},
		{"regular-from-hub", "hub", 600}, // under the LFS threshold: served by the Hub host, git sha1 etag
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := hubtest.New(t)
			data := payload(tc.size, 3)
			srv.AddRepo("model", "org/name", map[string][]byte{"model.bin": data}, hubtest.RepoOptions{})
			c, _ := newClient(t, srv)
			etag := hubtest.GitBlobSHA1(data)
			if tc.host == "cdn" {
				etag = hubtest.SHA256(data)
			}
			inc := filepath.Join(c.CacheDir(), "models--org--name", "blobs", etag+".incomplete")
			cut := int64(tc.size * 3 / 10)
			srv.CutAfter("model.bin", cut)

			_, err := c.Download(context.Background(), testRepo, "model.bin")
			if err == nil || errors.Is(err, ErrCorrupt) {
				t.Fatalf("cut download: err = %v, want a transfer error", err)
			}
			st, serr := os.Stat(inc)
			if serr != nil || st.Size() != cut {
				t.Fatalf("after the cut: %s = %v, %v; want %d bytes kept", inc, st, serr, cut)
			}
			if !strings.Contains(err.Error(), "for resuming") {
				t.Errorf("error %q does not say the partial file is kept", err)
			}

			srv.ResetRequests()
			p := mustDownload(t, c, testRepo, "model.bin")
			wantRange := fmt.Sprintf("bytes=%d-", cut)
			resumed := false
			for _, r := range srv.Requests() {
				if r.Host == tc.host && r.Method == "GET" && r.Range == wantRange && r.Status == 206 {
					resumed = true
				}
			}
			if !resumed {
				t.Errorf("no GET with Range %q answered 206 on %s: %+v", wantRange, tc.host, srv.Requests())
			}
			got := readFile(t, p)
			if sha256Hex(got) != sha256Hex(data) {
				t.Errorf("resumed blob sha256 %s, want %s", sha256Hex(got), sha256Hex(data))
			}
			if exists(inc) {
				t.Errorf("%s left behind", inc)
			}
			t.Logf("cut at %d of %d bytes; resumed with Range %s on %s; sha256 %s", cut, tc.size, wantRange, tc.host, sha256Hex(got)[:16])
		})
	}
}

// TestResumeServerIgnoresRange: a 200 to a Range request restarts the file from byte 0.
func TestResumeServerIgnoresRange(t *testing.T) {
	srv := hubtest.New(t)
	data := payload(200<<10, 4)
	srv.AddRepo("model", "org/name", map[string][]byte{"model.bin": data}, hubtest.RepoOptions{})
	c, logs := newClient(t, srv)
	srv.CutAfter("model.bin", 50000)
	if _, err := c.Download(context.Background(), testRepo, "model.bin"); err == nil {
		t.Fatal("cut download succeeded")
	}
	srv.IgnoreRangeNext("model.bin")
	srv.ResetRequests()
	p := mustDownload(t, c, testRepo, "model.bin")
	var sawIgnored bool
	for _, r := range srv.Requests() {
		if r.Host == "cdn" && r.Range == "bytes=50000-" && r.Status == 200 {
			sawIgnored = true
		}
	}
	if !sawIgnored {
		t.Errorf("no Range request answered 200: %+v", srv.Requests())
	}
	if got := readFile(t, p); sha256Hex(got) != sha256Hex(data) || len(got) != len(data) {
		t.Errorf("restarted blob: %d bytes, sha256 %s; want %d, %s", len(got), sha256Hex(got), len(data), sha256Hex(data))
	}
	if !strings.Contains(logs.String(), "ignored the resume request") {
		t.Errorf("restart not logged:\n%s", logs)
	}
}

// TestStallTimesOut: a server that stops sending is abandoned after DownloadTimeout, the
// bytes received are kept, and the caller's own deadline works the same way.
func TestStallTimesOut(t *testing.T) {
	srv := hubtest.New(t)
	data := payload(100<<10, 5)
	srv.AddRepo("model", "org/name", map[string][]byte{"model.bin": data}, hubtest.RepoOptions{})
	c, _ := newClient(t, srv, func(cfg *Config) { cfg.DownloadTimeout = 200 * time.Millisecond })
	inc := filepath.Join(c.CacheDir(), "models--org--name", "blobs", hubtest.SHA256(data)+".incomplete")

	srv.StallAfter("model.bin", 1000)
	start := time.Now()
	_, err := c.Download(context.Background(), testRepo, "model.bin")
	if !errors.Is(err, errStalled) {
		t.Fatalf("stalled download: %v, want the download timeout", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the stall was noticed after %v", d)
	}
	if st, err := os.Stat(inc); err != nil || st.Size() != 1000 {
		t.Errorf("partial file after the stall: %v, %v; want 1000 bytes", st, err)
	}

	// The caller's deadline: the context error, the partial file grows and is kept.
	srv.StallAfter("model.bin", 2000)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	slow, _ := newClient(t, srv, withCache(c.CacheDir()))
	if _, err := slow.Download(ctx, testRepo, "model.bin"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("download past the caller's deadline: %v", err)
	}
	if st, err := os.Stat(inc); err != nil || st.Size() != 3000 {
		t.Errorf("partial file after the deadline: %v, %v; want 3000 bytes", st, err)
	}
	p := mustDownload(t, c, testRepo, "model.bin")
	if got := readFile(t, p); sha256Hex(got) != sha256Hex(data) {
		t.Error("blob after two stalls differs")
	}
}
