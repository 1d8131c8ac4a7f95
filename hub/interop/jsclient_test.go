//go:build unix

package interop_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gotpu/gotpu/hub"
	"github.com/gotpu/gotpu/hub/hubtest"
)

// TestJSSnapshotFoundOffline (a): @huggingface/hub's snapshotDownload fills a cache from the
// fake Hub (following the tree API's Link pages); then hub.Client offline and `gotpu download`
// with HF_HUB_OFFLINE=1 find every file in it, byte-identical, without one request.
func TestJSSnapshotFoundOffline(t *testing.T) {
	needNode(t)
	s := hubtest.New(t)
	files := tinyGPT2(t)
	commit := s.AddRepo("model", "org/tiny-gpt2", files, hubtest.RepoOptions{})
	s.SetTreePageSize(2) // 4 files and 1 folder: 3 pages
	cache := t.TempDir()

	var snap struct{ Path string }
	runJS(t, "snapshot", jsArgs{Repo: &jsRepo{"model", "org/tiny-gpt2"}, HubURL: s.URL(), CacheDir: cache}, &snap)
	want := filepath.Join(cache, "models--org--tiny-gpt2", "snapshots", commit)
	if snap.Path != want {
		t.Fatalf("snapshotDownload returned %q, want %q", snap.Path, want)
	}
	pages := s.CountRequests(func(r hubtest.Request) bool { return strings.Contains(r.Path, "/tree/") })
	if pages != 3 {
		t.Errorf("snapshotDownload read %d tree pages, want 3", pages)
	}
	t.Logf("snapshotDownload: %d requests (%d tree pages, %d content GETs)", s.RequestCount(), pages, len(contentGETs(s)))

	s.ResetRequests()
	ctx := t.Context()
	c := newClient(t, s, cache, true)
	repo := hub.Repo{ID: "org/tiny-gpt2"}
	dir, err := c.Snapshot(ctx, repo, hub.SnapshotOptions{})
	if err != nil || dir != want {
		t.Fatalf("offline Snapshot = %q, %v; want %q", dir, err, want)
	}
	gotCommit, listed, err := c.ListFiles(ctx, repo)
	if err != nil || gotCommit != commit || !slices.Equal(listed, slices.Sorted(maps.Keys(files))) {
		t.Errorf("offline ListFiles = %s %q, %v; want %s %q", gotCommit, listed, err, commit, slices.Sorted(maps.Keys(files)))
	}
	for _, rev := range []string{"", commit} {
		repo.Revision = rev
		for name, content := range files {
			p, err := c.Download(ctx, repo, name)
			if err != nil {
				t.Errorf("offline Download %s@%s: %v", name, rev, err)
				continue
			}
			if got, err := os.ReadFile(p); err != nil || p != filepath.Join(want, name) || !bytes.Equal(got, content) {
				t.Errorf("offline Download %s@%s = %s (%d bytes, %v): want %s, %d bytes", name, rev, p, len(got), err, filepath.Join(want, name), len(content))
			}
		}
	}
	repo.Revision = ""
	if err := c.Verify(ctx, repo); err != nil {
		t.Errorf("Verify of the snapshot @huggingface/hub wrote: %v", err)
	}

	offline := []string{"HF_HUB_OFFLINE=1"}
	out, errOut, code := runGotpu(t, s, offline, "download", "org/tiny-gpt2", "--cache-dir", cache, "--quiet")
	if code != 0 || strings.TrimSpace(out) != want {
		t.Fatalf("HF_HUB_OFFLINE=1 gotpu download org/tiny-gpt2: exit %d, stdout %q, stderr %s; want %s", code, out, errOut, want)
	}
	for name, content := range files {
		out, errOut, code := runGotpu(t, s, offline, "download", "org/tiny-gpt2", name, "--cache-dir", cache, "--quiet")
		p := strings.TrimSpace(out)
		got, err := os.ReadFile(p)
		if code != 0 || p != filepath.Join(want, name) || err != nil || !bytes.Equal(got, content) {
			t.Errorf("HF_HUB_OFFLINE=1 gotpu download org/tiny-gpt2 %s: exit %d, stdout %q (%d bytes, %v), stderr %s", name, code, out, len(got), err, errOut)
		}
	}
	if n := s.RequestCount(); n != 0 {
		t.Errorf("the offline phase sent %d requests: %+v", n, s.Requests())
	}
}

// jsScan is hfjs.mjs's account of scanCacheDir.
type jsScan struct {
	Repos    []jsCachedRepo `json:"repos"`
	Size     int64          `json:"size"`
	Warnings []string       `json:"warnings"`
}

type jsCachedRepo struct {
	ID         jsRepo       `json:"id"`
	Path       string       `json:"path"`
	FilesCount int          `json:"filesCount"`
	Size       int64        `json:"size"`
	Revisions  []jsRevision `json:"revisions"`
}

type jsRevision struct {
	CommitOid string   `json:"commitOid"`
	Refs      []string `json:"refs"`
	Size      int64    `json:"size"`
	Path      string   `json:"path"`
	Files     []jsFile `json:"files"`
}

type jsFile struct {
	Path string `json:"path"` // relative to the snapshot folder
	Blob string `json:"blob"` // relative to the repo folder
	Size int64  `json:"size"`
}

// wantScanRepo is what scanCacheDir must report for a repo cached at one commit with the ref
// main. scanCacheDir lists the files directly in a snapshot folder, not those in subfolders
// (unlike huggingface_hub's scan_cache_dir), so only top-level files are expected; the repo's
// filesCount and size count each blob once, the revision's size each file.
func wantScanRepo(cache, typ, id, commit string, files map[string][]byte) jsCachedRepo {
	dir := filepath.Join(cache, typ+"s--"+strings.ReplaceAll(id, "/", "--"))
	rev := jsRevision{CommitOid: commit, Refs: []string{"main"}, Path: filepath.Join(dir, "snapshots", commit), Files: []jsFile{}}
	r := jsCachedRepo{ID: jsRepo{typ, id}, Path: dir}
	blobs := map[string]bool{}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if strings.Contains(name, "/") {
			continue
		}
		content := files[name]
		blob := "blobs/" + etagOf(content)
		rev.Files = append(rev.Files, jsFile{Path: name, Blob: blob, Size: int64(len(content))})
		rev.Size += int64(len(content))
		if !blobs[blob] {
			blobs[blob] = true
			r.FilesCount++
			r.Size += int64(len(content))
		}
	}
	r.Revisions = []jsRevision{rev}
	return r
}

// TestJSScansGotpuCache (b): gotpu downloads a model and a dataset repo; @huggingface/hub's
// scanCacheDir lists both, with their ids and types, commit, ref, files, blobs and sizes, and no
// warning; and its downloadFileToCacheDir, pinned to the commit, returns gotpu's files without
// a request.
func TestJSScansGotpuCache(t *testing.T) {
	needNode(t)
	s := hubtest.New(t)
	model, data := tinyGPT2(t), tinyCorpus(t)
	modelCommit := s.AddRepo("model", "org/tiny-gpt2", model, hubtest.RepoOptions{})
	dataCommit := s.AddRepo("dataset", "org/tiny-corpus", data, hubtest.RepoOptions{})
	cache := t.TempDir()
	c := newClient(t, s, cache, false)
	for _, r := range []hub.Repo{{ID: "org/tiny-gpt2"}, {ID: "org/tiny-corpus", Type: hub.DatasetRepo}} {
		if _, err := c.Snapshot(t.Context(), r, hub.SnapshotOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	var scan jsScan
	runJS(t, "scan", jsArgs{CacheDir: cache}, &scan)
	want := jsScan{Repos: []jsCachedRepo{
		wantScanRepo(cache, "dataset", "org/tiny-corpus", dataCommit, data),
		wantScanRepo(cache, "model", "org/tiny-gpt2", modelCommit, model),
	}, Warnings: []string{}}
	want.Size = want.Repos[0].Size + want.Repos[1].Size
	if !reflect.DeepEqual(scan, want) {
		got, _ := json.MarshalIndent(scan, "", " ")
		exp, _ := json.MarshalIndent(want, "", " ")
		t.Fatalf("scanCacheDir of gotpu's cache:\n%s\nwant\n%s", got, exp)
	}
	t.Logf("scanCacheDir: %d repos, %d bytes, %d warnings", len(scan.Repos), scan.Size, len(scan.Warnings))

	s.ResetRequests()
	for _, tc := range []struct {
		typ, id, commit string
		files           map[string][]byte
	}{{"model", "org/tiny-gpt2", modelCommit, model}, {"dataset", "org/tiny-corpus", dataCommit, data}} {
		names := slices.Sorted(maps.Keys(tc.files))
		var got struct{ Paths []string }
		runJS(t, "download", jsArgs{Repo: &jsRepo{tc.typ, tc.id}, HubURL: s.URL(), CacheDir: cache, Revision: tc.commit, Paths: names}, &got)
		snap := filepath.Join(cache, tc.typ+"s--"+strings.ReplaceAll(tc.id, "/", "--"), "snapshots", tc.commit)
		for i, name := range names {
			if i >= len(got.Paths) || got.Paths[i] != filepath.Join(snap, name) {
				t.Errorf("downloadFileToCacheDir %s %s = %q, want gotpu's %s", tc.id, name, got.Paths, filepath.Join(snap, name))
			}
		}
	}
	if n := s.RequestCount(); n != 0 {
		t.Errorf("downloadFileToCacheDir of files gotpu cached sent %d requests: %+v", n, s.Requests())
	}
}

// editedConfig returns files with config.json changed (a new commit's worth), and the new
// config.
func editedConfig(t *testing.T, files map[string][]byte) (map[string][]byte, []byte) {
	t.Helper()
	var cfg map[string]any
	if err := json.Unmarshal(files["config.json"], &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["torch_dtype"] = "bfloat16"
	edited, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	out := maps.Clone(files)
	out["config.json"] = edited
	return out, edited
}

// checkReused fails the test unless every blob of before is still in after, unchanged (same
// inode and time), and after holds exactly added more.
func checkReused(t *testing.T, who string, before, after map[string]string, added ...string) {
	t.Helper()
	for name, id := range before {
		if after[name] != id {
			t.Errorf("%s rewrote or removed blob %s (%s, now %q)", who, name, id, after[name])
		}
	}
	for _, name := range added {
		if _, ok := after[name]; !ok {
			t.Errorf("%s did not write blob %s", who, name)
		}
	}
	if len(after) != len(before)+len(added) {
		t.Errorf("%s left %d blobs, want %d: %v", who, len(after), len(before)+len(added), slices.Sorted(maps.Keys(after)))
	}
}

// checkSnapshot fails the test unless the snapshot folder dir holds files, byte for byte.
func checkSnapshot(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	for name, content := range files {
		if got, err := os.ReadFile(filepath.Join(dir, name)); err != nil || !bytes.Equal(got, content) {
			t.Errorf("%s: %d bytes (%v), want %d", filepath.Join(dir, name), len(got), err, len(content))
		}
	}
}

// onlyGETsOf fails the test unless the content GETs logged are all of path, and there is one.
func onlyGETsOf(t *testing.T, who string, s *hubtest.Server, path string) {
	t.Helper()
	gets := contentGETs(s)
	for _, r := range gets {
		if r.Host != "hub" || r.Path != path {
			t.Errorf("%s fetched %s %s (range %q): only %s changed", who, r.Host, r.Path, r.Range, path)
		}
	}
	if len(gets) == 0 {
		t.Errorf("%s did not fetch %s", who, path)
	}
}

// TestSharedCacheJSThenGotpu (c): gotpu, online, reuses the blobs @huggingface/hub downloaded:
// no GET of content for the same commit, and for a new commit only the changed file.
func TestSharedCacheJSThenGotpu(t *testing.T) {
	needNode(t)
	s := hubtest.New(t)
	files := tinyGPT2(t)
	commitA := s.AddRepo("model", "org/tiny-gpt2", files, hubtest.RepoOptions{})
	cache := t.TempDir()
	repoDir := filepath.Join(cache, "models--org--tiny-gpt2")
	var snap struct{ Path string }
	runJS(t, "snapshot", jsArgs{Repo: &jsRepo{"model", "org/tiny-gpt2"}, HubURL: s.URL(), CacheDir: cache}, &snap)
	before := blobIDs(t, repoDir)

	s.ResetRequests()
	c := newClient(t, s, cache, false)
	repo := hub.Repo{ID: "org/tiny-gpt2"}
	dir, err := c.Snapshot(t.Context(), repo, hub.SnapshotOptions{})
	if err != nil || dir != snap.Path {
		t.Fatalf("gotpu Snapshot = %q, %v; want node's %q", dir, err, snap.Path)
	}
	if gets := contentGETs(s); len(gets) != 0 {
		t.Errorf("gotpu fetched content that node had cached: %+v", gets)
	}
	heads := s.CountRequests(func(r hubtest.Request) bool { return r.Method == "HEAD" })
	checkReused(t, "gotpu", before, blobIDs(t, repoDir))
	checkSnapshot(t, dir, files)
	t.Logf("gotpu over node's cache, same commit: %d requests (%d HEAD), 0 content GETs", s.RequestCount(), heads)

	filesB, configB := editedConfig(t, files)
	commitB := s.AddRepo("model", "org/tiny-gpt2", filesB, hubtest.RepoOptions{})
	s.ResetRequests()
	if dir, err = c.Snapshot(t.Context(), repo, hub.SnapshotOptions{}); err != nil || dir != filepath.Join(repoDir, "snapshots", commitB) {
		t.Fatalf("gotpu Snapshot of the new commit = %q, %v", dir, err)
	}
	onlyGETsOf(t, "gotpu", s, "/org/tiny-gpt2/resolve/"+commitB+"/config.json")
	checkReused(t, "gotpu", before, blobIDs(t, repoDir), etagOf(configB))
	checkSnapshot(t, dir, filesB)
	if err := c.Verify(t.Context(), repo); err != nil {
		t.Error(err)
	}
	checkTwoCommits(t, cache, commitA, commitB)
}

// TestSharedCacheGotpuThenJS (c, the other way): @huggingface/hub reuses the blobs gotpu
// downloaded: no GET of content for the same commit, and for a new commit only the changed file.
func TestSharedCacheGotpuThenJS(t *testing.T) {
	needNode(t)
	s := hubtest.New(t)
	files := tinyGPT2(t)
	commitA := s.AddRepo("model", "org/tiny-gpt2", files, hubtest.RepoOptions{})
	cache := t.TempDir()
	repoDir := filepath.Join(cache, "models--org--tiny-gpt2")
	c := newClient(t, s, cache, false)
	repo := hub.Repo{ID: "org/tiny-gpt2"}
	dir, err := c.Snapshot(t.Context(), repo, hub.SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before := blobIDs(t, repoDir)

	s.ResetRequests()
	var snap struct{ Path string }
	js := jsArgs{Repo: &jsRepo{"model", "org/tiny-gpt2"}, HubURL: s.URL(), CacheDir: cache}
	runJS(t, "snapshot", js, &snap)
	if snap.Path != dir {
		t.Fatalf("snapshotDownload = %q, want gotpu's %q", snap.Path, dir)
	}
	if gets := contentGETs(s); len(gets) != 0 {
		t.Errorf("node fetched content that gotpu had cached: %+v", gets)
	}
	checkReused(t, "node", before, blobIDs(t, repoDir))
	t.Logf("node over gotpu's cache, same commit: %d requests, 0 content GETs", s.RequestCount())

	filesB, configB := editedConfig(t, files)
	commitB := s.AddRepo("model", "org/tiny-gpt2", filesB, hubtest.RepoOptions{})
	s.ResetRequests()
	runJS(t, "snapshot", js, &snap)
	if want := filepath.Join(repoDir, "snapshots", commitB); snap.Path != want {
		t.Fatalf("snapshotDownload of the new commit = %q, want %q", snap.Path, want)
	}
	onlyGETsOf(t, "node", s, "/org/tiny-gpt2/resolve/"+commitB+"/config.json")
	checkReused(t, "node", before, blobIDs(t, repoDir), etagOf(configB))
	checkSnapshot(t, snap.Path, filesB)
	// gotpu, offline, follows node's refs/main to the new commit and verifies every blob.
	off := newClient(t, s, cache, true)
	if dir, err := off.Snapshot(t.Context(), repo, hub.SnapshotOptions{}); err != nil || dir != snap.Path {
		t.Errorf("offline Snapshot after node = %q, %v; want %q", dir, err, snap.Path)
	}
	if err := off.Verify(t.Context(), repo); err != nil {
		t.Error(err)
	}
	checkTwoCommits(t, cache, commitA, commitB)
}

// checkTwoCommits: after two clients wrote commits A then B of org/tiny-gpt2 into cache,
// scanCacheDir sees both revisions, main on B, and no warning.
func checkTwoCommits(t *testing.T, cache, commitA, commitB string) {
	t.Helper()
	var scan jsScan
	runJS(t, "scan", jsArgs{CacheDir: cache}, &scan)
	if len(scan.Warnings) != 0 || len(scan.Repos) != 1 || len(scan.Repos[0].Revisions) != 2 {
		t.Fatalf("scanCacheDir of the shared cache: %+v", scan)
	}
	refs := map[string][]string{}
	for _, r := range scan.Repos[0].Revisions {
		refs[r.CommitOid] = r.Refs
	}
	if len(refs[commitA]) != 0 || !slices.Equal(refs[commitB], []string{"main"}) || len(refs) != 2 {
		t.Errorf("scanCacheDir refs %v: want main on %s only, and %s without a ref", refs, commitB, commitA)
	}
	// 4 top-level blobs: config A, config B, model, tokenizer.
	if n := scan.Repos[0].FilesCount; n != 4 {
		t.Errorf("scanCacheDir counts %d blobs, want 4", n)
	}
}

// TestJSAPIAgainstFakeHub: the fake Hub answers what @huggingface/hub asks as the Hub does:
// modelInfo/datasetInfo (sha and the default expanded fields), a paginated recursive tree,
// paths-info with last commits, and fileDownloadInfo's ranged resolve (through the CDN redirect
// for LFS files).
func TestJSAPIAgainstFakeHub(t *testing.T) {
	needNode(t)
	s := hubtest.New(t)
	s.SetTreePageSize(3)
	for _, tc := range []struct {
		typ, id string
		files   map[string][]byte
	}{{"model", "org/tiny-gpt2", tinyGPT2(t)}, {"dataset", "org/tiny-corpus", tinyCorpus(t)}} {
		commit := s.AddRepo(tc.typ, tc.id, tc.files, hubtest.RepoOptions{})
		names := slices.Sorted(maps.Keys(tc.files))
		var got struct {
			Info struct {
				Name, Sha, UpdatedAt string
				Private, Gated       bool
				Downloads, Likes     *int
			}
			Tree []struct {
				Type, Path, OID string
				Size            int
				LFS             *struct {
					OID         string `json:"oid"`
					Size        int    `json:"size"`
					PointerSize int    `json:"pointerSize"`
				}
			}
			PathsInfo []struct {
				Path, Type, OID, LastCommit string
				Size                        int
			}
			Downloads []struct {
				Path, Etag string
				Size       int
				Xet        bool
			}
		}
		s.ResetRequests()
		runJS(t, "api", jsArgs{Repo: &jsRepo{tc.typ, tc.id}, HubURL: s.URL(), Revision: "main", Paths: names}, &got)
		updated, err := time.Parse(time.RFC3339, got.Info.UpdatedAt)
		if got.Info.Name != tc.id || got.Info.Sha != commit || got.Info.Private || got.Info.Gated ||
			got.Info.Downloads == nil || got.Info.Likes == nil || err != nil || updated.Year() < 2000 {
			t.Errorf("%s info: %+v (updatedAt: %v)", tc.id, got.Info, err)
		}
		var files []string
		dirs := 0
		for _, e := range got.Tree {
			switch content, ok := tc.files[e.Path]; {
			case e.Type == "directory":
				dirs++
			case !ok || e.Type != "file" || e.Size != len(content):
				t.Errorf("%s tree entry %+v", tc.id, e)
			case len(content) >= hubtest.DefaultLFSThreshold:
				if e.LFS == nil || e.LFS.OID != hubtest.SHA256(content) || e.LFS.Size != len(content) || e.LFS.PointerSize == 0 || len(e.OID) != 40 {
					t.Errorf("%s LFS tree entry %s: %+v", tc.id, e.Path, e)
				}
				files = append(files, e.Path)
			default:
				if e.LFS != nil || e.OID != hubtest.GitBlobSHA1(content) {
					t.Errorf("%s tree entry %s: %+v", tc.id, e.Path, e)
				}
				files = append(files, e.Path)
			}
		}
		if !slices.Equal(files, names) || dirs != 1 {
			t.Errorf("%s listFiles: files %q and %d folders, want %q and 1", tc.id, files, dirs, names)
		}
		if pages := s.CountRequests(func(r hubtest.Request) bool { return strings.Contains(r.Path, "/tree/") }); pages != (len(got.Tree)+2)/3 {
			t.Errorf("%s listFiles read %d pages of 3 for %d entries", tc.id, pages, len(got.Tree))
		}
		if len(got.PathsInfo) != len(names) {
			t.Errorf("%s pathsInfo: %+v", tc.id, got.PathsInfo)
		}
		for _, p := range got.PathsInfo {
			if p.Type != "file" || p.LastCommit != commit || p.Size != len(tc.files[p.Path]) {
				t.Errorf("%s pathsInfo entry %+v", tc.id, p)
			}
		}
		if len(got.Downloads) != len(names) {
			t.Fatalf("%s fileDownloadInfo: %+v", tc.id, got.Downloads)
		}
		for _, d := range got.Downloads {
			content := tc.files[d.Path]
			if d.Size != len(content) || d.Xet || strings.Trim(d.Etag, `"`) != etagOf(content) {
				t.Errorf("%s fileDownloadInfo %+v: want size %d, etag %s", tc.id, d, len(content), etagOf(content))
			}
		}
	}
}
