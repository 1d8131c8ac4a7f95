package hub

import (
	"context"
	"io/fs"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gotpu/gotpu/hub/hubtest"
)

// snapshotFiles lists the files (links) under a snapshot folder.
func snapshotFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// TestSnapshotFilters downloads subsets chosen by Include/Exclude globs with
// huggingface_hub's rules, and lists the repo.
func TestSnapshotFilters(t *testing.T) {
	srv := hubtest.New(t)
	all := map[string][]byte{
		"config.json": []byte("{}"), "tokenizer.json": []byte(`{"v": 1}`), "README.md": []byte("# m\n"),
		"model.safetensors": payload(3000, 13), "sub/model-00001.safetensors": payload(2000, 14),
		"sub/extra.json": []byte("[]"),
	}
	commit := srv.AddRepo("model", "org/name", all, hubtest.RepoOptions{})
	ctx := context.Background()
	for _, tc := range []struct {
		include, exclude []string
		want             []string
	}{
		{[]string{"*.json"}, nil, []string{"config.json", "sub/extra.json", "tokenizer.json"}},
		{[]string{"*.safetensors"}, []string{"sub/"}, []string{"model.safetensors"}},
		{nil, []string{"*.safetensors", "*.md"}, []string{"config.json", "sub/extra.json", "tokenizer.json"}},
		{[]string{"sub/"}, nil, []string{"sub/extra.json", "sub/model-00001.safetensors"}},
		{[]string{"[ct]*.json"}, nil, []string{"config.json", "tokenizer.json"}},
		{[]string{"nothing*"}, nil, nil},
	} {
		c, _ := newClient(t, srv)
		dir, err := c.Snapshot(ctx, testRepo, SnapshotOptions{Include: tc.include, Exclude: tc.exclude, MaxWorkers: 2})
		if err != nil {
			t.Fatalf("include %v exclude %v: %v", tc.include, tc.exclude, err)
		}
		if want := filepath.Join(c.CacheDir(), "models--org--name", "snapshots", commit); dir != want {
			t.Errorf("dir %s, want %s", dir, want)
		}
		if got := snapshotFiles(t, dir); !slices.Equal(got, tc.want) {
			t.Errorf("include %v exclude %v: got %v, want %v", tc.include, tc.exclude, got, tc.want)
		}
		for _, f := range tc.want {
			if got := readFile(t, filepath.Join(dir, filepath.FromSlash(f))); string(got) != string(all[f]) {
				t.Errorf("%s differs", f)
			}
		}
	}

	c, _ := newClient(t, srv)
	gotCommit, files, err := c.ListFiles(ctx, testRepo)
	if err != nil || gotCommit != commit {
		t.Fatalf("ListFiles: %s, %v", gotCommit, err)
	}
	var want []string
	for f := range all {
		want = append(want, f)
	}
	slices.Sort(want)
	slices.Sort(files)
	if !slices.Equal(files, want) {
		t.Errorf("ListFiles = %v, want %v", files, want)
	}
	// ListFiles records the revision, and the (empty) snapshot folder a ref must point at.
	repoDir := filepath.Join(c.CacheDir(), "models--org--name")
	if got := string(readFile(t, filepath.Join(repoDir, "refs", "main"))); got != commit {
		t.Errorf("refs/main after ListFiles = %q", got)
	}
	if got := dirNames(t, filepath.Join(repoDir, "snapshots")); !slices.Equal(got, []string{commit}) {
		t.Errorf("snapshots/ after ListFiles = %v", got)
	}

	// A second snapshot of a complete cache costs one API request: the files are pinned to
	// the commit and already linked.
	if _, err := c.Snapshot(ctx, testRepo, SnapshotOptions{}); err != nil {
		t.Fatal(err)
	}
	srv.ResetRequests()
	if _, err := c.Snapshot(ctx, testRepo, SnapshotOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := srv.RequestCount(); n != 1 {
		t.Errorf("second Snapshot sent %d requests, want 1: %+v", n, srv.Requests())
	}
}
