package hub

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/hub/hubtest"
)

// TestHubErrors maps the Hub's X-Error-Code answers to the sentinels, with messages naming
// the repo, revision and file.
func TestHubErrors(t *testing.T) {
	srv := hubtest.New(t)
	commit := srv.AddRepo("model", "org/name", map[string][]byte{"config.json": []byte("{}")}, hubtest.RepoOptions{})
	c, _ := newClient(t, srv)
	ctx := context.Background()

	_, err := c.Download(ctx, Repo{ID: "org/name", Revision: "v9"}, "config.json")
	if !errors.Is(err, ErrRevisionNotFound) || !strings.Contains(err.Error(), `revision "v9"`) {
		t.Errorf("unknown revision: %v", err)
	}
	_, err = c.Download(ctx, testRepo, "weights.bin")
	if !errors.Is(err, ErrEntryNotFound) || !strings.Contains(err.Error(), `file "weights.bin"`) {
		t.Errorf("unknown file: %v", err)
	}
	if !exists(filepath.Join(c.CacheDir(), "models--org--name", ".no_exist", commit, "weights.bin")) {
		t.Error("no .no_exist marker for weights.bin")
	}
	_, err = c.Download(ctx, Repo{ID: "org/absent"}, "config.json")
	if !errors.Is(err, ErrRepoNotFound) || !strings.Contains(err.Error(), `"org/absent"`) {
		t.Errorf("unknown repo: %v", err)
	}
	_, _, err = c.ListFiles(ctx, Repo{ID: "org/name", Revision: "v9"})
	if !errors.Is(err, ErrRevisionNotFound) {
		t.Errorf("ListFiles of an unknown revision: %v", err)
	}
	if _, err := c.Snapshot(ctx, Repo{ID: "org/absent"}, SnapshotOptions{}); !errors.Is(err, ErrRepoNotFound) {
		t.Errorf("Snapshot of an unknown repo: %v", err)
	}
	if _, err := c.Snapshot(ctx, testRepo, SnapshotOptions{MaxWorkers: -1}); err == nil || !strings.Contains(err.Error(), "MaxWorkers") {
		t.Errorf("negative MaxWorkers: %v", err)
	}
	for _, r := range []Repo{{ID: "bad--id"}, {ID: "org/name", Type: "model-ish"}, {ID: "org/name", Revision: "../../x"}} {
		if _, err := c.Download(ctx, r, "config.json"); err == nil {
			t.Errorf("Download accepted %+v", r)
		}
	}
}

// TestUntrustedNamesRefused: file names that would leave the snapshot folder are refused,
// whether the caller or the Hub's file list supplies them, and nothing is written outside the
// cache.
func TestUntrustedNamesRefused(t *testing.T) {
	srv := hubtest.New(t)
	bad := []string{"../evil.txt", "/etc/evil", "a/../../evil", "a//b", "a\\..\\b", "./x", "sub/"}
	files := map[string][]byte{"ok.txt": []byte("ok")}
	for _, b := range bad {
		files[b] = []byte("evil")
	}
	srv.AddRepo("model", "org/name", files, hubtest.RepoOptions{})
	root := t.TempDir()
	c, _ := newClient(t, srv, withCache(filepath.Join(root, "cache", "hub")))
	ctx := context.Background()

	srv.ResetRequests()
	for _, b := range bad {
		if _, err := c.Download(ctx, testRepo, b); err == nil || !strings.Contains(err.Error(), "file path") {
			t.Errorf("Download(%q): %v, want a refusal", b, err)
		}
	}
	if n := srv.RequestCount(); n != 0 {
		t.Errorf("refused names sent %d requests", n)
	}
	_, snapErr := c.Snapshot(ctx, testRepo, SnapshotOptions{})
	if err := snapErr; !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "rfilename") {
		t.Errorf("Snapshot with hostile names: %v, want ErrCorrupt naming the field", err)
	}
	if _, _, err := c.ListFiles(ctx, testRepo); !errors.Is(err, ErrCorrupt) {
		t.Errorf("ListFiles with hostile names: %v", err)
	}
	// Nothing was written outside the cache.
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && p != root && !strings.HasPrefix(p, c.CacheDir()) && !strings.HasPrefix(c.CacheDir(), p) {
			t.Errorf("written outside the cache: %s", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/etc/evil"); err == nil {
		t.Error("/etc/evil exists")
	}
	t.Logf("refused: %v", snapErr)
}

// TestHostileHeadersRefused: an etag that is not a plain file name or a commit that is not a
// sha is refused before anything is written (parseFileMeta is also fuzzed).
func TestHostileHeadersRefused(t *testing.T) {
	for _, tc := range []struct{ commit, etag, size string }{
		{"0123456789012345678901234567890123456789", `"../../../x"`, "3"},
		{"../../x", `"abc"`, "3"},
		{"0123456789012345678901234567890123456789", `"abc"`, "-1"},
		{"0123456789012345678901234567890123456789", `""`, "3"},
	} {
		h := make(map[string][]string)
		h["X-Repo-Commit"] = []string{tc.commit}
		h["Etag"] = []string{tc.etag}
		h["Content-Length"] = []string{tc.size}
		if m, err := parseFileMeta(h, nil); err == nil {
			t.Errorf("%+v accepted: %+v", tc, m)
		}
	}
}
