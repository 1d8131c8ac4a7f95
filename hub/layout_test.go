package hub

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/hub/hubtest"
)

// TestDownloadLayout downloads a small file, an LFS file and a nested file and checks every
// part of huggingface_hub's layout: refs/main, blobs named by etag, relative links with the
// right depth resolving to the blobs, lock files under .locks, nothing left .incomplete.
func TestDownloadLayout(t *testing.T) {
	srv := hubtest.New(t)
	small := []byte(`{"model_type": "gpt2"}`)
	large := payload(64<<10, 1)
	nested := []byte("nested file\n")
	commit := srv.AddRepo("model", "org/name", map[string][]byte{
		"config.json": small, "model.safetensors": large, "sub/dir/file.txt": nested,
	}, hubtest.RepoOptions{})
	c, _ := newClient(t, srv)
	repoDir := filepath.Join(c.CacheDir(), "models--org--name")

	want := map[string]struct {
		content []byte
		etag    string
		link    string
	}{
		"config.json":       {small, hubtest.GitBlobSHA1(small), "../../blobs/" + hubtest.GitBlobSHA1(small)},
		"model.safetensors": {large, hubtest.SHA256(large), "../../blobs/" + hubtest.SHA256(large)},
		"sub/dir/file.txt":  {nested, hubtest.GitBlobSHA1(nested), "../../../../blobs/" + hubtest.GitBlobSHA1(nested)},
	}
	var etags []string
	for file, w := range want {
		p := mustDownload(t, c, testRepo, file)
		if wantPath := filepath.Join(repoDir, "snapshots", commit, filepath.FromSlash(file)); p != wantPath {
			t.Errorf("%s: path %s, want %s", file, p, wantPath)
		}
		link, err := os.Readlink(p)
		if err != nil {
			t.Fatalf("%s: not a symlink: %v", file, err)
		}
		if link != w.link {
			t.Errorf("%s: link %q, want %q", file, link, w.link)
		}
		if got := readFile(t, p); string(got) != string(w.content) {
			t.Errorf("%s: content through the link differs (%d bytes, want %d)", file, len(got), len(w.content))
		}
		if got := readFile(t, filepath.Join(repoDir, "blobs", w.etag)); string(got) != string(w.content) {
			t.Errorf("%s: blob %s differs", file, w.etag)
		}
		if _, err := os.Stat(filepath.Join(c.CacheDir(), ".locks", "models--org--name", w.etag+".lock")); err != nil {
			t.Errorf("%s: lock file: %v", file, err)
		}
		etags = append(etags, w.etag)
	}
	slices.Sort(etags)
	if got := dirNames(t, filepath.Join(repoDir, "blobs")); !slices.Equal(got, etags) {
		t.Errorf("blobs/ holds %v, want %v (no .incomplete left)", got, etags)
	}
	if got := string(readFile(t, filepath.Join(repoDir, "refs", "main"))); got != commit {
		t.Errorf("refs/main = %q, want %q", got, commit)
	}
	if got := dirNames(t, filepath.Join(repoDir, "snapshots")); !slices.Equal(got, []string{commit}) {
		t.Errorf("snapshots/ holds %v", got)
	}

	// A second download of everything sends metadata requests only.
	srv.ResetRequests()
	for file := range want {
		mustDownload(t, c, testRepo, file)
	}
	if n := count(srv, "", "GET", ""); n != 0 {
		t.Errorf("second download sent %d GETs, want 0: %+v", n, srv.Requests())
	}
	t.Logf("3 files laid out under %s; a second pass sent %d requests (HEAD only)", repoDir, srv.RequestCount())
}

// TestDownloadRevisions resolves a branch, a commit, refs/pr/1 and the @rev syntax.
func TestDownloadRevisions(t *testing.T) {
	srv := hubtest.New(t)
	mainCommit := srv.AddRepo("model", "org/name", map[string][]byte{"v.txt": []byte("main\n")}, hubtest.RepoOptions{})
	devCommit := srv.AddRepo("model", "org/name", map[string][]byte{"v.txt": []byte("dev\n")}, hubtest.RepoOptions{Branch: "dev"})
	prCommit := srv.AddRepo("model", "org/name", map[string][]byte{"v.txt": []byte("pr\n")}, hubtest.RepoOptions{Branch: "refs/pr/1"})
	c, _ := newClient(t, srv)
	repoDir := filepath.Join(c.CacheDir(), "models--org--name")

	dev, err := ParseRepo("org/name@dev", ModelRepo)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		repo         Repo
		commit, body string
		ref          string // the refs/ file written, "" for none
	}{
		{testRepo, mainCommit, "main\n", "refs/main"},
		{dev, devCommit, "dev\n", "refs/dev"},
		{Repo{ID: "org/name", Revision: "refs/pr/1"}, prCommit, "pr\n", "refs/refs/pr/1"},
		{Repo{ID: "org/name", Revision: devCommit}, devCommit, "dev\n", ""},
	} {
		p := mustDownload(t, c, tc.repo, "v.txt")
		if got := string(readFile(t, p)); got != tc.body {
			t.Errorf("%s: content %q, want %q", tc.repo, got, tc.body)
		}
		if !strings.Contains(p, filepath.Join("snapshots", tc.commit)) {
			t.Errorf("%s: path %s not under the commit %s", tc.repo, p, tc.commit)
		}
		if tc.ref != "" {
			if got := string(readFile(t, filepath.Join(repoDir, filepath.FromSlash(tc.ref)))); got != tc.commit {
				t.Errorf("%s: %s = %q, want %q", tc.repo, tc.ref, got, tc.commit)
			}
		}
	}
	if got := dirNames(t, filepath.Join(repoDir, "refs")); !slices.Equal(got, []string{"dev", "main", "refs"}) {
		t.Errorf("refs/ holds %v: a commit revision must write no ref", got)
	}
	// The PR revision travels as one escaped path segment.
	if n := count(srv, "hub", "HEAD", "/resolve/refs%2Fpr%2F1/v.txt"); n != 1 {
		t.Errorf("%d HEADs of resolve/refs%%2Fpr%%2F1/v.txt, want 1: %+v", n, srv.Requests())
	}
	// A commit revision whose file is linked is answered without a request.
	srv.ResetRequests()
	mustDownload(t, c, Repo{ID: "org/name", Revision: devCommit}, "v.txt")
	if n := srv.RequestCount(); n != 0 {
		t.Errorf("cached commit revision sent %d requests, want 0", n)
	}
}

// TestDatasetFolder checks the dataset URL prefix and cache folder.
func TestDatasetFolder(t *testing.T) {
	srv := hubtest.New(t)
	commit := srv.AddRepo("dataset", "org/data", map[string][]byte{"train.csv": []byte("a,b\n1,2\n")}, hubtest.RepoOptions{})
	c, _ := newClient(t, srv)
	repo, err := ParseRepo("org/data", DatasetRepo)
	if err != nil {
		t.Fatal(err)
	}
	p := mustDownload(t, c, repo, "train.csv")
	want := filepath.Join(c.CacheDir(), "datasets--org--data", "snapshots", commit, "train.csv")
	if p != want {
		t.Errorf("path %s, want %s", p, want)
	}
	if n := count(srv, "hub", "HEAD", "/datasets/org/data/resolve/main/train.csv"); n != 1 {
		t.Errorf("%d HEADs under /datasets/, want 1: %+v", n, srv.Requests())
	}
	// The same id as a model is another repo: not found.
	if _, err := c.Download(context.Background(), Repo{ID: "org/data"}, "train.csv"); err == nil || !strings.Contains(err.Error(), "repository not found") {
		t.Errorf("model org/data: err = %v, want repository not found", err)
	}
}

// TestProgressOnlyOnTerminals: a Progress writer that is not a terminal (a log file, a pipe)
// gets no bar, so redirected output stays clean.
func TestProgressOnlyOnTerminals(t *testing.T) {
	srv := hubtest.New(t)
	srv.AddRepo("model", "org/name", map[string][]byte{"model.bin": payload(300<<10, 15)}, hubtest.RepoOptions{})
	var out syncBuffer
	c, _ := newClient(t, srv, func(cfg *Config) { cfg.Progress = &out })
	mustDownload(t, c, testRepo, "model.bin")
	if _, err := c.Snapshot(context.Background(), testRepo, SnapshotOptions{}); err != nil {
		t.Fatal(err)
	}
	if out.String() != "" {
		t.Errorf("progress written to a non-terminal: %q", out.String())
	}
}

// TestEmptyFile: a 0-byte file (git's empty blob e69de29…) needs no GET and links like any
// other.
func TestEmptyFile(t *testing.T) {
	srv := hubtest.New(t)
	srv.AddRepo("model", "org/name", map[string][]byte{"empty.txt": {}}, hubtest.RepoOptions{})
	c, _ := newClient(t, srv)
	p := mustDownload(t, c, testRepo, "empty.txt")
	link, err := os.Readlink(p)
	if err != nil || link != "../../blobs/e69de29bb2d1d6434b8b29ae775ad8c2e48c5391" {
		t.Errorf("link %q, %v", link, err)
	}
	if got := readFile(t, p); len(got) != 0 {
		t.Errorf("%d bytes", len(got))
	}
	if n := count(srv, "", "GET", ""); n != 0 {
		t.Errorf("%d GETs for an empty file", n)
	}
}
