package datasets

import (
	"bytes"
	"context"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/hub"
	"github.com/gotpu/gotpu/hub/hubtest"
)

func newHubClient(t *testing.T, s *hubtest.Server) *hub.Client {
	t.Helper()
	c, err := hub.New(hub.Config{Endpoint: s.URL(), CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// pushToHubRepo is a repository laid out as push_to_hub lays it out, with a second config. The
// file contents are arbitrary bytes (reading them is another package's concern); one train shard
// is large enough to be an LFS file served from the CDN host.
func pushToHubRepo() map[string][]byte {
	return map[string][]byte{
		".gitattributes":                         []byte("*.parquet filter=lfs diff=lfs merge=lfs -text\n"),
		"README.md":                              []byte(pushToHubReadme),
		"data/train-00000-of-00002.parquet":      bytes.Repeat([]byte("shard0"), 400),
		"data/train-00001-of-00002.parquet":      []byte("shard1"),
		"data/validation-00000-of-00001.parquet": []byte("valid"),
		"other/train-00000-of-00001.parquet":     []byte("other"),
	}
}

func TestResolveHubPushToHubLayout(t *testing.T) {
	ctx := context.Background()
	s := hubtest.New(t)
	files := pushToHubRepo()
	commit := s.AddRepo("dataset", "org/name", files, hubtest.RepoOptions{})
	c := newHubClient(t, s)
	repo := hub.Repo{ID: "org/name", Type: hub.DatasetRepo}

	r, err := ResolveHub(ctx, c, repo, "")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"train":      {"data/train-00000-of-00002.parquet", "data/train-00001-of-00002.parquet"},
		"validation": {"data/validation-00000-of-00001.parquet"},
	}
	if r.Repo != "org/name" || r.Commit != commit || r.Config != "default" || r.Format != "parquet" ||
		!maps.EqualFunc(r.Splits, want, slices.Equal) {
		t.Fatalf("got %+v, want commit %s, default, parquet, %v", r, commit, want)
	}

	// A new commit on main after resolving: the split still downloads from the resolved commit.
	changed := pushToHubRepo()
	changed["data/train-00001-of-00002.parquet"] = []byte("rewritten")
	if newCommit := s.AddRepo("dataset", "org/name", changed, hubtest.RepoOptions{}); newCommit == commit {
		t.Fatal("the fake hub did not make a new commit")
	}
	s.ResetRequests()
	paths, err := DownloadSplit(ctx, c, repo, r, "train")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 2 {
		t.Fatalf("paths %v", paths)
	}
	for i, p := range paths {
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if wantBytes := files[want["train"][i]]; !bytes.Equal(got, wantBytes) {
			t.Errorf("file %d (%s): %d bytes, not the content of %s at the resolved commit", i, p, len(got), want["train"][i])
		}
	}
	for _, req := range s.Requests() {
		if req.Host == "hub" && strings.Contains(req.Path, "/resolve/") && !strings.Contains(req.Path, "/resolve/"+commit+"/") {
			t.Errorf("request %s %s is not pinned to commit %s", req.Method, req.Path, commit)
		}
	}

	other, err := ResolveHub(ctx, c, repo, "other")
	if err != nil {
		t.Fatal(err)
	}
	if other.Config != "other" || !slices.Equal(other.Splits["train"], []string{"other/train-00000-of-00001.parquet"}) {
		t.Fatalf("other: %+v", other)
	}
	if other.Commit == commit {
		t.Errorf("resolving again did not see the new commit")
	}

	if _, err := ResolveHub(ctx, c, repo, "nope"); err == nil || !strings.Contains(err.Error(), "available configs: default, other") {
		t.Fatalf("unknown config: %v", err)
	}
	if _, err := DownloadSplit(ctx, c, repo, r, "test"); err == nil || !strings.Contains(err.Error(), "available splits: train, validation") {
		t.Fatalf("unknown split: %v", err)
	}
}

// TestResolveHubWithoutReadme: the default patterns on a repo without a dataset card; an empty
// Repo.Type is taken as a dataset.
func TestResolveHubWithoutReadme(t *testing.T) {
	ctx := context.Background()
	s := hubtest.New(t)
	commit := s.AddRepo("dataset", "org/plain", map[string][]byte{
		".gitattributes":  []byte("\n"),
		"train/0000.csv":  []byte("text\na\n"),
		"train/0001.csv":  []byte("text\nb\n"),
		"dev/0000.csv":    []byte("text\nc\n"),
		"docs/figure.png": []byte("png"),
	}, hubtest.RepoOptions{})
	c := newHubClient(t, s)
	repo := hub.Repo{ID: "org/plain"}
	r, err := ResolveHub(ctx, c, repo, "")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"train": {"train/0000.csv", "train/0001.csv"}, "validation": {"dev/0000.csv"}}
	if r.Commit != commit || r.Config != "default" || r.Format != "csv" || !maps.EqualFunc(r.Splits, want, slices.Equal) {
		t.Fatalf("got %+v, want %v", r, want)
	}
	paths, err := DownloadSplit(ctx, c, repo, r, "validation")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(paths[0]); err != nil || string(got) != "text\nc\n" {
		t.Fatalf("validation file: %q, %v", got, err)
	}
	for _, req := range s.Requests() {
		if strings.Contains(req.Path, "README.md") {
			t.Errorf("asked for a README the listing does not have: %s", req.Path)
		}
	}
}

func TestResolveHubErrors(t *testing.T) {
	ctx := context.Background()
	s := hubtest.New(t)
	s.AddRepo("dataset", "org/big-card", map[string][]byte{
		"README.md": append([]byte("---\nlicense: mit\n---\n"), bytes.Repeat([]byte("x"), MaxReadmeBytes)...),
		"a.csv":     []byte("x\n"),
	}, hubtest.RepoOptions{})
	s.AddRepo("dataset", "org/images", map[string][]byte{"train/a.png": []byte("png"), "train/b.png": []byte("png")}, hubtest.RepoOptions{})
	s.AddRepo("dataset", "org/yaml", map[string][]byte{
		"README.md":         []byte("---\nconfigs:\n- config_name: a\n  data_files: a.csv\n---\n"),
		".huggingface.yaml": []byte("configs:\n- config_name: b\n  data_files: [b.csv\n"),
		"a.csv":             []byte("x\n"),
	}, hubtest.RepoOptions{})
	c := newHubClient(t, s)
	for _, tc := range []struct {
		repo hub.Repo
		want string
	}{
		{hub.Repo{ID: "org/big-card", Type: hub.DatasetRepo}, `file "README.md": the Hub announces 1048597 bytes (X-Linked-Size or Content-Length), over the limit of 1048576 bytes`},
		{hub.Repo{ID: "org/images", Type: hub.DatasetRepo}, `"imagefolder" builder`},
		{hub.Repo{ID: "org/yaml", Type: hub.DatasetRepo}, ".huggingface.yaml: YAML metadata"},
		{hub.Repo{ID: "org/missing", Type: hub.DatasetRepo}, "org/missing"},
		{hub.Repo{ID: "org/images", Type: hub.ModelRepo}, "a model repository is not a dataset"},
	} {
		if _, err := ResolveHub(ctx, c, tc.repo, ""); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.repo.ID, err, tc.want)
		}
	}
	local := &Resolved{Repo: "/data/x", Splits: map[string][]string{"train": {"a.csv"}}}
	if _, err := DownloadSplit(ctx, c, hub.Repo{ID: "org/x"}, local, "train"); err == nil || !strings.Contains(err.Error(), "no commit") {
		t.Errorf("download of a local resolution: %v", err)
	}
	other := &Resolved{Repo: "org/y", Commit: strings.Repeat("a", 40), Splits: map[string][]string{"train": {"a.csv"}}}
	if _, err := DownloadSplit(ctx, c, hub.Repo{ID: "org/x"}, other, "train"); err == nil || !strings.Contains(err.Error(), "resolved dataset is org/y") {
		t.Errorf("download for another repo: %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := ResolveHub(cancelled, c, hub.Repo{ID: "org/images", Type: hub.DatasetRepo}, ""); err == nil {
		t.Error("resolved with a cancelled context")
	}
}
