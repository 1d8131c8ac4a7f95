package hub

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/hub/hubtest"
)

// TestCorruptDownloadIsRefused: bytes that do not hash to the etag (sha256 for LFS, git blob
// sha1 for regular files) are ErrCorrupt; nothing is left in blobs/ or snapshots/; a rerun
// succeeds.
func TestCorruptDownloadIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int
	}{{"lfs-sha256", 50 << 10}, {"regular-git-sha1", 700}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := hubtest.New(t)
			data := payload(tc.size, 6)
			srv.AddRepo("model", "org/name", map[string][]byte{"weights.bin": data}, hubtest.RepoOptions{})
			c, _ := newClient(t, srv)
			repoDir := filepath.Join(c.CacheDir(), "models--org--name")

			srv.CorruptNext("weights.bin")
			_, err := c.Download(context.Background(), testRepo, "weights.bin")
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), `"weights.bin"`) {
				t.Fatalf("corrupt download: %v, want ErrCorrupt naming the file", err)
			}
			if got := dirNames(t, filepath.Join(repoDir, "blobs")); len(got) != 0 {
				t.Errorf("blobs/ after a corrupt download: %v", got)
			}
			if got := dirNames(t, filepath.Join(repoDir, "snapshots")); len(got) != 0 {
				t.Errorf("snapshots/ after a corrupt download: %v", got)
			}
			p := mustDownload(t, c, testRepo, "weights.bin")
			if got := readFile(t, p); string(got) != string(data) {
				t.Error("rerun content differs")
			}
			t.Logf("refused: %v", err)
		})
	}
}

// TestOversizedDownloadIsRefused: a body longer than X-Linked-Size (sent chunked, so only
// counting notices) is ErrCorrupt, and nothing is kept.
func TestOversizedDownloadIsRefused(t *testing.T) {
	srv := hubtest.New(t)
	data := payload(8<<10, 7)
	srv.AddRepo("model", "org/name", map[string][]byte{"weights.bin": data}, hubtest.RepoOptions{})
	c, _ := newClient(t, srv)
	srv.ExtraNext("weights.bin", 10)
	_, err := c.Download(context.Background(), testRepo, "weights.bin")
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("oversized download: %v, want ErrCorrupt", err)
	}
	if got := dirNames(t, filepath.Join(c.CacheDir(), "models--org--name", "blobs")); len(got) != 0 {
		t.Errorf("blobs/ after an oversized download: %v", got)
	}
	mustDownload(t, c, testRepo, "weights.bin")
}

// TestVerifyFindsTamperedBlob: Verify passes a fresh snapshot and names the file whose blob was
// changed (same size, so Download's size check cannot see it).
func TestVerifyFindsTamperedBlob(t *testing.T) {
	srv := hubtest.New(t)
	weights, cfgJSON := payload(32<<10, 8), []byte(`{"a": 1}`)
	srv.AddRepo("model", "org/name", map[string][]byte{"model.safetensors": weights, "config.json": cfgJSON}, hubtest.RepoOptions{})
	c, logs := newClient(t, srv)
	ctx := context.Background()
	if _, err := c.Snapshot(ctx, testRepo, SnapshotOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Verify(ctx, testRepo); err != nil {
		t.Fatalf("Verify of a fresh snapshot: %v", err)
	}
	if !strings.Contains(logs.String(), "ok=2 corrupt=0") {
		t.Errorf("Verify did not check both files:\n%s", logs)
	}
	blob := filepath.Join(c.CacheDir(), "models--org--name", "blobs", hubtest.SHA256(weights))
	tampered := append([]byte(nil), weights...)
	tampered[1000] ^= 1
	if err := os.WriteFile(blob, tampered, 0o644); err != nil {
		t.Fatal(err)
	}
	err := c.Verify(ctx, testRepo)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), `"model.safetensors"`) || strings.Contains(err.Error(), "config.json") {
		t.Fatalf("Verify after tampering: %v, want ErrCorrupt naming model.safetensors only", err)
	}
	t.Logf("Verify: %v", err)

	// A missing blob is reported too.
	if err := os.Remove(filepath.Join(c.CacheDir(), "models--org--name", "blobs", hubtest.GitBlobSHA1(cfgJSON))); err != nil {
		t.Fatal(err)
	}
	if err := c.Verify(ctx, testRepo); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("Verify with a missing blob: %v", err)
	}
	if err := c.Verify(ctx, Repo{ID: "org/absent"}); !errors.Is(err, ErrNotCached) {
		t.Errorf("Verify of an uncached repo: %v", err)
	}
}

// TestTruncatedBlobIsReplaced: online, a cached blob whose size differs from the Hub's is
// downloaded again (with a warning), not linked.
func TestTruncatedBlobIsReplaced(t *testing.T) {
	srv := hubtest.New(t)
	data := payload(20<<10, 9)
	srv.AddRepo("model", "org/name", map[string][]byte{"model.bin": data}, hubtest.RepoOptions{})
	c, logs := newClient(t, srv)
	p := mustDownload(t, c, testRepo, "model.bin")
	blob := filepath.Join(c.CacheDir(), "models--org--name", "blobs", hubtest.SHA256(data))
	if err := os.Truncate(blob, 100); err != nil {
		t.Fatal(err)
	}
	srv.ResetRequests()
	if p2 := mustDownload(t, c, testRepo, "model.bin"); p2 != p {
		t.Errorf("path changed: %s vs %s", p2, p)
	}
	if got := readFile(t, p); string(got) != string(data) {
		t.Errorf("blob not repaired: %d bytes", len(got))
	}
	if count(srv, "cdn", "GET", "") != 1 {
		t.Errorf("repair did not download once: %+v", srv.Requests())
	}
	if !strings.Contains(logs.String(), "wrong size") {
		t.Errorf("replacement not logged:\n%s", logs)
	}
}
