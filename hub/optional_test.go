package hub

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/hub/hubtest"
)

// TestDownloadOptional: a file the repo has is downloaded; one it lacks is "" with no error
// online (EntryNotFound, recorded as a marker), offline with a marker, and offline with nothing
// cached at all (logged); a repo that does not exist or is gated stays an error.
func TestDownloadOptional(t *testing.T) {
	srv := hubtest.New(t)
	commit := srv.AddRepo("model", "org/name", map[string][]byte{"config.json": []byte("{}"), "tokenizer_config.json": []byte(`{"a": 1}`)}, hubtest.RepoOptions{})
	srv.AddRepo("model", "org/gated", map[string][]byte{"config.json": []byte("{}")}, hubtest.RepoOptions{Gated: true})
	c, _ := newClient(t, srv)
	ctx := context.Background()

	p, err := c.DownloadOptional(ctx, testRepo, "tokenizer_config.json")
	if err != nil || string(readFile(t, p)) != `{"a": 1}` {
		t.Fatalf("DownloadOptional of a present file = %q, %v", p, err)
	}
	if p, err := c.DownloadOptional(ctx, testRepo, "generation_config.json"); p != "" || err != nil {
		t.Fatalf("online DownloadOptional of a missing file = %q, %v; want \"\", nil", p, err)
	}
	if marker := filepath.Join(c.CacheDir(), "models--org--name", ".no_exist", commit, "generation_config.json"); !exists(marker) {
		t.Errorf("the Hub's EntryNotFound left no marker %s", marker)
	}
	for _, tc := range []struct {
		repo Repo
		want error
	}{{Repo{ID: "org/none"}, ErrRepoNotFound}, {Repo{ID: "org/gated"}, ErrGated}, {Repo{ID: "org/name", Revision: "v9"}, ErrRevisionNotFound}} {
		if p, err := c.DownloadOptional(ctx, tc.repo, "generation_config.json"); p != "" || !errors.Is(err, tc.want) {
			t.Errorf("DownloadOptional from %s = %q, %v; want %v", tc.repo, p, err, tc.want)
		}
	}

	off, logs := newClient(t, srv, withCache(c.CacheDir()), func(cfg *Config) { cfg.Offline = true })
	srv.ResetRequests()
	if p, err := off.DownloadOptional(ctx, testRepo, "tokenizer_config.json"); err != nil || p == "" {
		t.Errorf("offline DownloadOptional of a cached file = %q, %v", p, err)
	}
	if p, err := off.DownloadOptional(ctx, testRepo, "generation_config.json"); p != "" || err != nil {
		t.Errorf("offline DownloadOptional with a marker = %q, %v; want \"\", nil", p, err)
	}
	// Neither cached nor marked: transformers goes on without it, and so does gotpu, saying so.
	if p, err := off.DownloadOptional(ctx, testRepo, "special_tokens_map.json"); p != "" || err != nil {
		t.Errorf("offline DownloadOptional of an unknown file = %q, %v; want \"\", nil", p, err)
	}
	if l := logs.String(); !strings.Contains(l, "optional file not in the cache") || !strings.Contains(l, "special_tokens_map.json") {
		t.Errorf("no log line naming the uncached optional file:\n%s", l)
	}
	if n := srv.RequestCount(); n != 0 {
		t.Errorf("offline calls sent %d requests", n)
	}
}

// TestDownloadOptionalPlainNotFound: a server (a mirror, a proxy) that answers a bare 404 with no
// X-Error-Code for a missing file: the optional file is absent, a required one an error that
// names the status.
func TestDownloadOptionalPlainNotFound(t *testing.T) {
	bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }))
	t.Cleanup(bare.Close)
	srv := hubtest.New(t)
	c, _ := newClient(t, srv, func(cfg *Config) { cfg.Endpoint = bare.URL })
	ctx := context.Background()
	if p, err := c.DownloadOptional(ctx, testRepo, "generation_config.json"); p != "" || err != nil {
		t.Errorf("DownloadOptional with a bare 404 = %q, %v; want \"\", nil", p, err)
	}
	if _, err := c.Download(ctx, testRepo, "config.json"); err == nil || !strings.Contains(err.Error(), "404") || !strings.Contains(err.Error(), "config.json") {
		t.Errorf("Download with a bare 404: %v; want an error naming config.json and the 404", err)
	}
}

// TestSnapshotMarkMissing: Snapshot marks each MarkMissing name the commit's full listing lacks,
// whatever Include selects, and none it has; offline, Download then says ErrEntryNotFound and
// FileExists false, with no request. A name that is not a repo path is refused before any
// request.
func TestSnapshotMarkMissing(t *testing.T) {
	srv := hubtest.New(t)
	commit := srv.AddRepo("model", "org/name", map[string][]byte{"config.json": []byte("{}"), "model.safetensors": payload(100, 1)}, hubtest.RepoOptions{})
	c, _ := newClient(t, srv)
	ctx := context.Background()
	mark := []string{"generation_config.json", "model.safetensors", "config.json", "sub/chat_template.jinja"}
	if _, err := c.Snapshot(ctx, testRepo, SnapshotOptions{Include: []string{"config.json"}, MarkMissing: mark}); err != nil {
		t.Fatal(err)
	}
	noExist := filepath.Join(c.CacheDir(), "models--org--name", ".no_exist", commit)
	for _, f := range mark {
		want := f == "generation_config.json" || f == "sub/chat_template.jinja"
		if got := exists(filepath.Join(noExist, filepath.FromSlash(f))); got != want {
			t.Errorf("marker for %s: %v, want %v", f, got, want)
		}
	}
	off, _ := newClient(t, srv, withCache(c.CacheDir()), func(cfg *Config) { cfg.Offline = true })
	srv.ResetRequests()
	if _, err := off.Download(ctx, testRepo, "generation_config.json"); !errors.Is(err, ErrEntryNotFound) {
		t.Errorf("offline Download of a marked file: %v, want ErrEntryNotFound", err)
	}
	if ok, err := off.FileExists(ctx, testRepo, "sub/chat_template.jinja"); ok || err != nil {
		t.Errorf("offline FileExists of a marked file = %v, %v; want false, nil", ok, err)
	}
	// Excluded by Include but in the listing: not marked, so offline it is "not cached".
	if _, err := off.Download(ctx, testRepo, "model.safetensors"); !errors.Is(err, ErrNotCached) {
		t.Errorf("offline Download of a listed, undownloaded file: %v, want ErrNotCached", err)
	}
	if _, err := c.Snapshot(ctx, testRepo, SnapshotOptions{MarkMissing: []string{"../escape"}}); err == nil || !strings.Contains(err.Error(), "MarkMissing") {
		t.Errorf("MarkMissing ../escape: %v, want an error naming MarkMissing", err)
	}
	if n := srv.RequestCount(); n != 0 {
		t.Errorf("%d requests after ResetRequests, want 0", n)
	}
}
