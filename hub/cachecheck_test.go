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

// TestCorruptCachedBlob: a cached blob altered in place (same size, so a size check cannot see
// it) is never handed out: offline it is ErrCorrupt naming the file; online it is fetched again
// and comes back intact; with TrustCache (huggingface_hub's behaviour) it is returned unchecked.
func TestCorruptCachedBlob(t *testing.T) {
	ctx := context.Background()
	srv := hubtest.New(t)
	want := payload(5000, 1) // above the LFS threshold: a sha256 etag
	srv.AddRepo("model", testRepo.ID, map[string][]byte{"model.safetensors": want, "config.json": []byte(`{"a": 1}`)}, hubtest.RepoOptions{})
	c, _ := newClient(t, srv)
	for _, f := range []string{"model.safetensors", "config.json"} {
		p, err := c.Download(ctx, testRepo, f)
		if err != nil {
			t.Fatal(err)
		}
		blob, err := filepath.EvalSymlinks(p)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(blob)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)/2] ^= 0x20
		if err := os.WriteFile(blob, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	off, _ := newClient(t, srv, func(cfg *Config) { cfg.CacheDir, cfg.Offline = c.CacheDir(), true })
	for _, f := range []string{"model.safetensors", "config.json"} {
		_, err := off.Download(ctx, testRepo, f)
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), f) {
			t.Errorf("offline %s: %v, want ErrCorrupt naming it", f, err)
		}
	}
	trusting, _ := newClient(t, srv, func(cfg *Config) { cfg.CacheDir, cfg.Offline, cfg.TrustCache = c.CacheDir(), true, true })
	if _, err := trusting.Download(ctx, testRepo, "model.safetensors"); err != nil {
		t.Errorf("TrustCache: %v", err)
	}
	srv.ResetRequests()
	p, err := c.Download(ctx, testRepo, "model.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Error("online: the corrupt blob was not replaced")
	}
	gets := 0
	for _, r := range srv.Requests() {
		if r.Method == "GET" {
			gets++
		}
	}
	if gets == 0 {
		t.Error("online: no GET: the corrupt blob was trusted")
	}
	// By commit, through the no-request shortcut: the same check.
	commit := filepath.Base(filepath.Dir(p))
	if _, err := off.Download(ctx, Repo{ID: testRepo.ID, Revision: commit}, "config.json"); !errors.Is(err, ErrCorrupt) {
		t.Errorf("offline by commit: %v, want ErrCorrupt", err)
	}
}
