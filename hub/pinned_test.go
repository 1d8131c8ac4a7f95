package hub

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gotpu/gotpu/hub/hubtest"
)

// pinnedElsewhere serves org/name with a branch named like a commit (asked) whose answers carry
// another commit (served), as a Hub (or a proxy in front of it) that ignores the pin would: every
// answer for revision asked says X-Repo-Commit: served.
func pinnedElsewhere(t *testing.T) (srv *hubtest.Server, asked, served string) {
	t.Helper()
	srv = hubtest.New(t)
	asked = strings.Repeat("ab", 20)
	served = srv.AddRepo("model", "org/name", map[string][]byte{
		"config.json": []byte(`{"n_layer": 1}`), "model.bin": payload(4096, 9),
	}, hubtest.RepoOptions{Branch: asked})
	if served == asked {
		t.Fatal("the fake commit equals the asked one")
	}
	return srv, asked, served
}

// TestCommitPinRefusesAnotherCommit: Download, FileExists, ListFiles and Snapshot at a 40-hex
// commit revision refuse an answer that names another commit (ErrCorrupt), and write nothing:
// no blob, no snapshot of the other commit, no refs/<commit> entry mapping one commit to
// another, no .no_exist marker.
func TestCommitPinRefusesAnotherCommit(t *testing.T) {
	srv, asked, served := pinnedElsewhere(t)
	c, _ := newClient(t, srv)
	ctx := context.Background()
	repo := Repo{ID: "org/name", Revision: asked}

	_, err := c.Download(ctx, repo, "model.bin")
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), served) || !strings.Contains(err.Error(), `"model.bin"`) {
		t.Errorf("Download at %s answered for %s: %v, want ErrCorrupt naming the file and the commit", asked, served, err)
	}
	if ok, err := c.FileExists(ctx, repo, "config.json"); !errors.Is(err, ErrCorrupt) {
		t.Errorf("FileExists at a commit answered for another: %v, %v; want ErrCorrupt", ok, err)
	}
	if _, _, err := c.ListFiles(ctx, repo); !errors.Is(err, ErrCorrupt) {
		t.Errorf("ListFiles at a commit answered for another: %v, want ErrCorrupt", err)
	}
	if _, err := c.Snapshot(ctx, repo, SnapshotOptions{}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Snapshot at a commit answered for another: %v, want ErrCorrupt", err)
	}
	// A missing file's answer carries the other commit too: it must not be recorded.
	if _, err := c.Download(ctx, repo, "missing.bin"); !errors.Is(err, ErrEntryNotFound) {
		t.Errorf("Download of a missing file: %v, want ErrEntryNotFound", err)
	}
	t.Logf("refused: %v", err)

	repoDir := filepath.Join(c.CacheDir(), "models--org--name")
	for _, sub := range []string{"refs", "blobs", "snapshots", ".no_exist"} {
		if got := dirNames(t, filepath.Join(repoDir, sub)); len(got) != 0 {
			t.Errorf("%s/ after answers for another commit: %v", sub, got)
		}
	}
	if _, err := os.Stat(filepath.Join(repoDir, "refs", asked)); err == nil {
		t.Errorf("refs/%s written", asked)
	}
}

// TestWriteRefRefusesCommitToCommit: the cache itself never records one commit as resolving to
// another, whichever caller asks.
func TestWriteRefRefusesCommitToCommit(t *testing.T) {
	c, _ := newClient(t, hubtest.New(t))
	rc := c.repoCache(testRepo.normalized())
	a, b := strings.Repeat("a", 40), strings.Repeat("b", 40)
	if err := rc.writeRef(a, b); !errors.Is(err, ErrCorrupt) {
		t.Errorf("writeRef(commit, other commit): %v, want ErrCorrupt", err)
	}
	if err := rc.writeRef(a, a); err != nil {
		t.Errorf("writeRef(commit, itself): %v", err)
	}
	if err := rc.writeRef("main", b); err != nil {
		t.Errorf("writeRef(main, commit): %v", err)
	}
}

// hangingHub is a server that accepts every request and never answers it (until the client
// gives up or the test ends); headersOnly makes it send 200 and JSON headers first, then stall
// in the body.
func hangingHub(t *testing.T, headersOnly bool) *httptest.Server {
	t.Helper()
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if headersOnly {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			w.Write([]byte(`{"sha":`))
			http.NewResponseController(w).Flush()
		}
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(done) }) // runs first: the handlers return, then Close
	return srv
}

// TestRepoAPITimeout: ListFiles and Snapshot against a server that accepts and never answers
// (or answers headers and then stalls) end within the metadata timeout (EtagTimeout for the
// answer, DownloadTimeout for a stalled body) with an error naming it, and answer from the cache
// when it holds the revision, as Download does. The caller's own context has no deadline here
// beyond a safety net far above the timeouts.
func TestRepoAPITimeout(t *testing.T) {
	hub := hubtest.New(t)
	commit := hub.AddRepo("model", "org/name", map[string][]byte{"config.json": []byte("{}"), "model.bin": payload(2048, 4)}, hubtest.RepoOptions{})
	filled, _ := newClient(t, hub)
	snap, err := filled.Snapshot(context.Background(), testRepo, SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const timeout = 300 * time.Millisecond
	for _, tc := range []struct {
		name        string
		headersOnly bool
		want        string
	}{
		{"no answer", false, "HF_HUB_ETAG_TIMEOUT"},
		{"stalled body", true, "HF_HUB_DOWNLOAD_TIMEOUT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := hangingHub(t, tc.headersOnly)
			edit := func(cfg *Config) {
				cfg.Endpoint, cfg.EtagTimeout, cfg.DownloadTimeout = srv.URL, timeout, timeout
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*timeout)
			defer cancel()

			empty, _ := newClient(t, hub, edit)
			start := time.Now()
			_, _, err := empty.ListFiles(ctx, testRepo)
			elapsed := time.Since(start)
			if !errors.Is(err, ErrNotCached) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ListFiles on a hanging server, empty cache: %v; want ErrNotCached wrapping the %s timeout", err, tc.want)
			}
			if elapsed > 10*timeout {
				t.Errorf("ListFiles took %v with a %v timeout", elapsed, timeout)
			}
			t.Logf("empty cache: %v after %v", err, elapsed.Round(time.Millisecond))

			cached, logs := newClient(t, hub, edit, withCache(filled.CacheDir()))
			start = time.Now()
			dir, err := cached.Snapshot(ctx, testRepo, SnapshotOptions{})
			if err != nil || dir != snap {
				t.Errorf("Snapshot on a hanging server, cached: %q, %v; want %q", dir, err, snap)
			}
			got, files, err := cached.ListFiles(ctx, testRepo)
			if err != nil || got != commit || len(files) != 2 {
				t.Errorf("ListFiles on a hanging server, cached: %s %v %v", got, files, err)
			}
			if elapsed := time.Since(start); elapsed > 20*timeout {
				t.Errorf("two cached answers took %v with a %v timeout", elapsed, timeout)
			}
			if !strings.Contains(logs.String(), "using the cached snapshot") {
				t.Errorf("the fallback was not logged:\n%s", logs)
			}
		})
	}
}
