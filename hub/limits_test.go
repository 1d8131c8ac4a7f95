package hub

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gotpu/gotpu/hub/hubtest"
)

// limited is c.WithLimits(l), failing the test on error.
func limited(t *testing.T, c *Client, l Limits) *Client {
	t.Helper()
	lc, err := c.WithLimits(l)
	if err != nil {
		t.Fatal(err)
	}
	return lc
}

// cdnGets counts the GET requests that reached the CDN host (LFS bytes).
func cdnGets(srv *hubtest.Server) int { return count(srv, "cdn", "GET", "") }

// TestOversizedFileRefusedBeforeWriting: a file the Hub announces above the limit (an LFS file
// whose size comes from X-Linked-Size on the Hub's redirect, and a regular one whose size is
// its Content-Length) is ErrTooLarge naming the file and the limit, and nothing is fetched or
// written: no GET of its bytes, no blob, no partial file, no snapshot link, no ref.
func TestOversizedFileRefusedBeforeWriting(t *testing.T) {
	srv := hubtest.New(t)
	big := payload(8<<20, 11)
	srv.AddRepo("model", "org/name", map[string][]byte{
		"model.safetensors": big,                     // LFS, served by the CDN
		"notes.txt":         payload(900<<10, 12),    // regular file (threshold below), 900 KiB
		"config.json":       []byte(`{"n_layer":1}`), // small
	}, hubtest.RepoOptions{LFSThreshold: 1 << 20})
	c, _ := newClient(t, srv)
	lc := limited(t, c, Limits{File: 512 << 10})
	ctx := context.Background()

	for _, file := range []string{"model.safetensors", "notes.txt"} {
		srv.ResetRequests()
		_, err := lc.Download(ctx, testRepo, file)
		if !errors.Is(err, ErrTooLarge) {
			t.Fatalf("Download %s over the limit: %v, want ErrTooLarge", file, err)
		}
		for _, part := range []string{`"` + file + `"`, "524288", `"org/name"`, "X-Linked-Size or Content-Length"} {
			if !strings.Contains(err.Error(), part) {
				t.Errorf("error %q does not name %s", err, part)
			}
		}
		if n := count(srv, "", "GET", ""); n != 0 {
			t.Errorf("%s: %d GET requests for a file refused by its size: %+v", file, n, srv.Requests())
		}
		if n := srv.BytesServed(); n != 0 {
			t.Errorf("%s: the server sent %d body bytes for a refused file", file, n)
		}
		t.Logf("refused before any byte: %v", err)
	}
	repoDir := filepath.Join(c.CacheDir(), "models--org--name")
	for _, sub := range []string{"blobs", "snapshots", "refs"} {
		if got := dirNames(t, filepath.Join(repoDir, sub)); len(got) != 0 {
			t.Errorf("%s/ after refused downloads: %v", sub, got)
		}
	}

	// A file within the limit downloads as ever; the unlimited client is not limited.
	mustDownload(t, lc, testRepo, "config.json")
	if p := mustDownload(t, c, testRepo, "model.safetensors"); len(readFile(t, p)) != len(big) {
		t.Error("the unlimited client's download differs")
	}
	// Once cached, the file is refused by its size on disk, also with a commit revision (which
	// needs no request) and offline.
	pinned := testRepo
	pinned.Revision = dirNames(t, filepath.Join(repoDir, "snapshots"))[0]
	if _, err := lc.Download(ctx, pinned, "model.safetensors"); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "cached file") {
		t.Errorf("cached file over the limit at a commit: %v, want ErrTooLarge naming the cached file", err)
	}
	off, _ := newClient(t, srv, withCache(c.CacheDir()), func(cfg *Config) { cfg.Offline = true })
	if _, err := limited(t, off, Limits{File: 512 << 10}).Download(ctx, testRepo, "model.safetensors"); !errors.Is(err, ErrTooLarge) {
		t.Errorf("offline cached file over the limit: %v, want ErrTooLarge", err)
	}
}

// TestTotalLimitBoundsSnapshot: Limits.Total bounds the sum of the files a limited client hands
// out (a snapshot, or a shard index's files one by one): the file that would cross it is refused
// before it is fetched, a file returned twice counts once.
func TestTotalLimitBoundsSnapshot(t *testing.T) {
	srv := hubtest.New(t)
	srv.AddRepo("model", "org/name", map[string][]byte{
		"a.bin": payload(300<<10, 1), "b.bin": payload(300<<10, 2), "c.bin": payload(300<<10, 3),
	}, hubtest.RepoOptions{})
	c, _ := newClient(t, srv)
	lc := limited(t, c, Limits{Total: 700 << 10})
	ctx := context.Background()
	mustDownload(t, lc, testRepo, "a.bin")
	mustDownload(t, lc, testRepo, "a.bin") // the same file again: not counted twice
	mustDownload(t, lc, testRepo, "b.bin")
	srv.ResetRequests()
	_, err := lc.Download(ctx, testRepo, "c.bin")
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), `"c.bin"`) || !strings.Contains(err.Error(), "716800") {
		t.Fatalf("third file over the total: %v, want ErrTooLarge naming c.bin and 716800", err)
	}
	if n := srv.BytesServed(); n != 0 {
		t.Errorf("the server sent %d bytes of a file refused by the total", n)
	}
	if _, err := limited(t, c, Limits{Total: 700 << 10}).Snapshot(ctx, testRepo, SnapshotOptions{MaxWorkers: 1}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Snapshot over the total: %v, want ErrTooLarge", err)
	}
	if _, err := c.WithLimits(Limits{File: -1}); err == nil {
		t.Error("a negative limit was accepted")
	}
}

// TestLyingServerStoppedAtLimit: a file announced within the limit whose server then streams far
// more (64 MiB, chunked, so no Content-Length gives it away) is cut off after the announced size:
// ErrCorrupt, the partial file removed, no blob, and the server got to send only what socket
// buffers hold, not the 64 MiB.
func TestLyingServerStoppedAtLimit(t *testing.T) {
	srv := hubtest.New(t)
	data := payload(256<<10, 21)
	srv.AddRepo("model", "org/name", map[string][]byte{"model.safetensors": data}, hubtest.RepoOptions{})
	c, _ := newClient(t, srv)
	lc := limited(t, c, Limits{File: 1 << 20})
	const extra = 64 << 20
	srv.ExtraNext("model.safetensors", extra)
	_, err := lc.Download(context.Background(), testRepo, "model.safetensors")
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("a server sending more than it announced: %v, want ErrCorrupt", err)
	}
	blobs := filepath.Join(c.CacheDir(), "models--org--name", "blobs")
	if got := dirNames(t, blobs); len(got) != 0 {
		t.Errorf("blobs/ after the lying download: %v", got)
	}
	// The handler is logged once its writes fail (the client has closed the connection): wait
	// for it, so that what it sent is all counted.
	for deadline := time.Now().Add(10 * time.Second); cdnGets(srv) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the server is still sending 10 s after the client gave up")
		}
	}
	served := srv.BytesServed()
	if served >= extra/2 {
		t.Errorf("the server sent %d bytes: the client read on past the announced %d", served, len(data))
	}
	t.Logf("server sent %d bytes (announced %d, tried %d more); %v", served, len(data), extra, err)
	if _, err := os.Stat(filepath.Join(blobs, hubtest.SHA256(data)+".incomplete")); err == nil {
		t.Error("the partial file of a lying server was kept")
	}
}
