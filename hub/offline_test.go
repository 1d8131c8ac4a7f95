package hub

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/hub/hubtest"
)

// TestOfflineFromEnv fills a cache online, then reads it with HF_HUB_OFFLINE=1 (through
// ConfigFromEnv) and checks that the server sees no request at all.
func TestOfflineFromEnv(t *testing.T) {
	srv := hubtest.New(t)
	commit := srv.AddRepo("model", "org/name", map[string][]byte{
		"config.json": []byte("{}"), "model.bin": payload(4096, 2), "other.bin": []byte("x"),
	}, hubtest.RepoOptions{})
	online, _ := newClient(t, srv)
	want := mustDownload(t, online, testRepo, "config.json")
	mustDownload(t, online, testRepo, "model.bin")

	env := map[string]string{"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": online.CacheDir(), "HF_ENDPOINT": srv.URL(), "HOME": t.TempDir()}
	cfg, err := ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Offline {
		t.Fatal("HF_HUB_OFFLINE=1 did not set Offline")
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv.ResetRequests()
	ctx := context.Background()

	if p, err := c.Download(ctx, testRepo, "config.json"); err != nil || p != want {
		t.Errorf("offline Download = %q, %v; want %q", p, err, want)
	}
	_, err = c.Download(ctx, testRepo, "other.bin")
	if !errors.Is(err, ErrNotCached) {
		t.Errorf("offline Download of an uncached file: %v, want ErrNotCached", err)
	}
	for _, part := range []string{`"other.bin"`, `"org/name"`, `revision "main"`, online.CacheDir(), "HF_HUB_OFFLINE"} {
		if err == nil || !strings.Contains(err.Error(), part) {
			t.Errorf("error %q does not name %s", err, part)
		}
	}
	dir, err := c.Snapshot(ctx, testRepo, SnapshotOptions{})
	if wantDir := filepath.Join(online.CacheDir(), "models--org--name", "snapshots", commit); err != nil || dir != wantDir {
		t.Errorf("offline Snapshot = %q, %v; want %q", dir, err, wantDir)
	}
	gotCommit, files, err := c.ListFiles(ctx, testRepo)
	if err != nil || gotCommit != commit || !slices.Equal(files, []string{"config.json", "model.bin"}) {
		t.Errorf("offline ListFiles = %s %v %v", gotCommit, files, err)
	}
	if ok, err := c.FileExists(ctx, testRepo, "model.bin"); !ok || err != nil {
		t.Errorf("offline FileExists(model.bin) = %v, %v", ok, err)
	}
	if _, err := c.FileExists(ctx, testRepo, "other.bin"); !errors.Is(err, ErrNotCached) {
		t.Errorf("offline FileExists(other.bin): %v, want ErrNotCached", err)
	}
	if _, err := c.Download(ctx, Repo{ID: "org/never"}, "config.json"); !errors.Is(err, ErrNotCached) {
		t.Errorf("offline Download from an unknown repo: %v", err)
	}
	if n := srv.RequestCount(); n != 0 {
		t.Fatalf("offline client sent %d requests: %+v", n, srv.Requests())
	}
	t.Logf("offline: Download, Snapshot, ListFiles and FileExists answered from the cache with 0 requests")
}

// TestNoExistMarker: the Hub's EntryNotFound is recorded under .no_exist and then answers
// offline calls (Download: ErrEntryNotFound, FileExists: false) without a request.
func TestNoExistMarker(t *testing.T) {
	srv := hubtest.New(t)
	commit := srv.AddRepo("model", "org/name", map[string][]byte{"config.json": []byte("{}")}, hubtest.RepoOptions{})
	c, _ := newClient(t, srv)
	ctx := context.Background()
	_, err := c.Download(ctx, testRepo, "generation_config.json")
	if !errors.Is(err, ErrEntryNotFound) || !strings.Contains(err.Error(), "generation_config.json") {
		t.Fatalf("Download of a missing file: %v, want ErrEntryNotFound naming it", err)
	}
	marker := filepath.Join(c.CacheDir(), "models--org--name", ".no_exist", commit, "generation_config.json")
	if !exists(marker) {
		t.Fatalf("no marker %s", marker)
	}
	if got := string(readFile(t, filepath.Join(c.CacheDir(), "models--org--name", "refs", "main"))); got != commit {
		t.Errorf("refs/main = %q after EntryNotFound, want %q", got, commit)
	}

	off, _ := newClient(t, srv, withCache(c.CacheDir()), func(cfg *Config) { cfg.Offline = true })
	srv.ResetRequests()
	if _, err := off.Download(ctx, testRepo, "generation_config.json"); !errors.Is(err, ErrEntryNotFound) {
		t.Errorf("offline Download with a marker: %v, want ErrEntryNotFound", err)
	}
	if ok, err := off.FileExists(ctx, testRepo, "generation_config.json"); ok || err != nil {
		t.Errorf("offline FileExists with a marker = %v, %v; want false, nil", ok, err)
	}
	// Online with the commit as revision, the marker answers too.
	if ok, err := c.FileExists(ctx, Repo{ID: "org/name", Revision: commit}, "generation_config.json"); ok || err != nil {
		t.Errorf("FileExists at the commit = %v, %v; want false, nil", ok, err)
	}
	if n := srv.RequestCount(); n != 0 {
		t.Errorf("%d requests, want 0", n)
	}
	// Online FileExists asks and records.
	if ok, err := c.FileExists(ctx, testRepo, "config.json"); !ok || err != nil {
		t.Errorf("FileExists(config.json) = %v, %v", ok, err)
	}
	if ok, err := c.FileExists(ctx, testRepo, "nope.txt"); ok || err != nil {
		t.Errorf("FileExists(nope.txt) = %v, %v", ok, err)
	}
	if !exists(filepath.Join(c.CacheDir(), "models--org--name", ".no_exist", commit, "nope.txt")) {
		t.Error("FileExists recorded no marker for nope.txt")
	}
}

// TestConnectionRefusedFallsBack: with the Hub unreachable, cached files are served (with a
// warning), uncached ones are ErrNotCached carrying the network error.
func TestConnectionRefusedFallsBack(t *testing.T) {
	srv := hubtest.New(t)
	srv.AddRepo("model", "org/name", map[string][]byte{"config.json": []byte("{}"), "b.txt": []byte("b")}, hubtest.RepoOptions{})
	online, _ := newClient(t, srv)
	want := mustDownload(t, online, testRepo, "config.json")
	snap, err := online.Snapshot(context.Background(), testRepo, SnapshotOptions{Include: []string{"config.json"}})
	if err != nil {
		t.Fatal(err)
	}

	c, logs := newClient(t, srv, withCache(online.CacheDir()), func(cfg *Config) { cfg.Endpoint = hubtest.ClosedURL(t) })
	ctx := context.Background()
	if p, err := c.Download(ctx, testRepo, "config.json"); err != nil || p != want {
		t.Errorf("Download with the Hub down = %q, %v; want the cached %q", p, err, want)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "connection refused") {
		t.Errorf("no warning about the refused connection in the log:\n%s", logs)
	}
	_, err = c.Download(ctx, testRepo, "b.txt")
	var netErr net.Error
	if !errors.Is(err, ErrNotCached) || !errors.As(err, &netErr) {
		t.Errorf("uncached file with the Hub down: %v, want ErrNotCached wrapping the network error", err)
	}
	if dir, err := c.Snapshot(ctx, testRepo, SnapshotOptions{}); err != nil || dir != snap {
		t.Errorf("Snapshot with the Hub down = %q, %v; want %q", dir, err, snap)
	}
	if _, _, err := c.ListFiles(ctx, Repo{ID: "org/other"}); !errors.Is(err, ErrNotCached) {
		t.Errorf("ListFiles of an uncached repo with the Hub down: %v", err)
	}
}
