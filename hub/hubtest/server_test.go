package hubtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// noRedirect is a client that reports redirects instead of following them, as the Hub
// clients' metadata requests do.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func do(t *testing.T, c *http.Client, method, u string, hdr map[string]string, body io.Reader) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// TestGitBlobSHA1MatchesGit checks the ETag of regular files against git itself.
func TestGitBlobSHA1MatchesGit(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git not installed")
	}
	for _, content := range [][]byte{nil, []byte("hello\n"), bytes.Repeat([]byte{0, 0xff, 7}, 5000)} {
		cmd := exec.Command(git, "hash-object", "--stdin")
		cmd.Stdin = bytes.NewReader(content)
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		if want := strings.TrimSpace(string(out)); GitBlobSHA1(content) != want {
			t.Errorf("GitBlobSHA1 of %d bytes = %s, git says %s", len(content), GitBlobSHA1(content), want)
		}
	}
}

func TestResolveProtocol(t *testing.T) {
	s := New(t)
	small, large := []byte("small file\n"), bytes.Repeat([]byte("0123456789"), 300)
	commit := s.AddRepo("model", "org/name", map[string][]byte{"a.txt": small, "w/large.bin": large}, RepoOptions{})

	resp, _ := do(t, noRedirect, "HEAD", s.URL()+"/org/name/resolve/main/a.txt", nil, nil)
	if resp.StatusCode != 200 || resp.Header.Get("ETag") != `"`+GitBlobSHA1(small)+`"` ||
		resp.Header.Get("X-Repo-Commit") != commit || resp.Header.Get("Content-Length") != fmt.Sprint(len(small)) {
		t.Errorf("HEAD small: %d %v", resp.StatusCode, resp.Header)
	}

	resp, _ = do(t, noRedirect, "HEAD", s.URL()+"/org/name/resolve/main/w/large.bin", nil, nil)
	loc, _ := url.Parse(resp.Header.Get("Location"))
	ptr := lfsPointer(SHA256(large), len(large))
	if resp.StatusCode != 302 || resp.Header.Get("X-Linked-Etag") != `"`+SHA256(large)+`"` ||
		resp.Header.Get("X-Linked-Size") != fmt.Sprint(len(large)) || resp.Header.Get("ETag") != `"`+GitBlobSHA1([]byte(ptr))+`"` ||
		loc == nil || "http://"+loc.Host != s.CDNURL() {
		t.Errorf("HEAD LFS: %d %v", resp.StatusCode, resp.Header)
	}
	if len(ptr) < 100 || len(ptr) > 200 {
		t.Errorf("LFS pointer of %d bytes: %q", len(ptr), ptr)
	}

	// GET follows to the CDN; ranges on both hosts.
	resp, body := do(t, http.DefaultClient, "GET", s.URL()+"/org/name/resolve/"+commit+"/w/large.bin", map[string]string{"Range": "bytes=2990-"}, nil)
	if resp.StatusCode != 206 || string(body) != string(large[2990:]) || resp.Header.Get("Content-Range") != "bytes 2990-2999/3000" {
		t.Errorf("ranged GET on the CDN: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	resp, body = do(t, http.DefaultClient, "GET", s.URL()+"/org/name/resolve/main/a.txt", map[string]string{"Range": "bytes=0-0"}, nil)
	if resp.StatusCode != 206 || string(body) != "s" || resp.Header.Get("Content-Range") != fmt.Sprintf("bytes 0-0/%d", len(small)) {
		t.Errorf("bytes=0-0 on the hub: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	resp, _ = do(t, http.DefaultClient, "GET", s.URL()+"/org/name/resolve/main/a.txt", map[string]string{"Range": "bytes=100-"}, nil)
	if resp.StatusCode != 416 {
		t.Errorf("unsatisfiable range: %d", resp.StatusCode)
	}

	for _, tc := range []struct {
		path, code string
		status     int
	}{
		{"/org/name/resolve/v2/a.txt", "RevisionNotFound", 404},
		{"/org/name/resolve/main/b.txt", "EntryNotFound", 404},
		{"/org/none/resolve/main/a.txt", "RepoNotFound", 404},
		{"/datasets/org/name/resolve/main/a.txt", "RepoNotFound", 404},
	} {
		resp, _ := do(t, noRedirect, "HEAD", s.URL()+tc.path, nil, nil)
		if resp.StatusCode != tc.status || resp.Header.Get("X-Error-Code") != tc.code {
			t.Errorf("%s: %d %q, want %d %s", tc.path, resp.StatusCode, resp.Header.Get("X-Error-Code"), tc.status, tc.code)
		}
		if tc.code == "EntryNotFound" && resp.Header.Get("X-Repo-Commit") != commit {
			t.Errorf("EntryNotFound without X-Repo-Commit")
		}
	}
}

func TestGatedAndLog(t *testing.T) {
	s := New(t)
	s.AddRepo("model", "org/gated", map[string][]byte{"a.txt": []byte("a")}, RepoOptions{Gated: true})
	u := s.URL() + "/org/gated/resolve/main/a.txt"
	if resp, _ := do(t, noRedirect, "HEAD", u, nil, nil); resp.StatusCode != 401 || resp.Header.Get("X-Error-Code") != "GatedRepo" {
		t.Errorf("no token: %d %v", resp.StatusCode, resp.Header)
	}
	if resp, _ := do(t, noRedirect, "HEAD", u, map[string]string{"Authorization": "Bearer nope"}, nil); resp.StatusCode != 401 {
		t.Errorf("wrong token: %d", resp.StatusCode)
	}
	if resp, _ := do(t, noRedirect, "HEAD", u, map[string]string{"Authorization": "Bearer " + s.Token()}, nil); resp.StatusCode != 200 {
		t.Errorf("token: %d", resp.StatusCode)
	}
	log := s.Requests()
	if len(log) != 3 || log[0].Status != 401 || log[2].Authorization != "Bearer "+s.Token() || log[2].Host != "hub" {
		t.Errorf("log %+v", log)
	}
}

func TestAPI(t *testing.T) {
	s := New(t)
	large := bytes.Repeat([]byte("x"), 2000)
	commit := s.AddRepo("dataset", "org/data", map[string][]byte{"a.csv": []byte("a\n"), "d/e/f.parquet": large}, RepoOptions{})

	_, body := do(t, http.DefaultClient, "GET", s.URL()+"/api/datasets/org/data/revision/main?blobs=true", nil, nil)
	var info struct {
		ID       string `json:"id"`
		SHA      string `json:"sha"`
		Siblings []struct {
			RFilename string `json:"rfilename"`
			Size      int    `json:"size"`
			BlobID    string `json:"blobId"`
			LFS       *struct {
				SHA256 string `json:"sha256"`
				Size   int    `json:"size"`
			} `json:"lfs"`
		} `json:"siblings"`
	}
	if err := json.Unmarshal(body, &info); err != nil {
		t.Fatal(err)
	}
	if info.ID != "org/data" || info.SHA != commit || len(info.Siblings) != 2 || info.Siblings[1].LFS == nil ||
		info.Siblings[1].LFS.SHA256 != SHA256(large) || info.Siblings[0].Size != 2 || info.Siblings[0].BlobID != GitBlobSHA1([]byte("a\n")) {
		t.Errorf("revision API: %s", body)
	}

	type entry struct {
		Type, OID, Path string
		Size            int
		LFS             *struct {
			OID         string `json:"oid"`
			Size        int    `json:"size"`
			PointerSize int    `json:"pointerSize"`
		} `json:"lfs"`
		LastCommit *struct{ ID string } `json:"lastCommit"`
	}
	var tree []entry
	_, body = do(t, http.DefaultClient, "GET", s.URL()+"/api/datasets/org/data/tree/main?recursive=true&expand=true", nil, nil)
	if err := json.Unmarshal(body, &tree); err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, e := range tree {
		paths = append(paths, e.Type+":"+e.Path)
	}
	if got := strings.Join(paths, " "); got != "file:a.csv directory:d directory:d/e file:d/e/f.parquet" {
		t.Errorf("recursive tree: %s", got)
	}
	last := tree[3]
	if last.LFS == nil || last.LFS.OID != SHA256(large) || last.LFS.Size != 2000 || last.LastCommit == nil || last.LastCommit.ID != commit {
		t.Errorf("LFS tree entry: %s", body)
	}
	_, body = do(t, http.DefaultClient, "GET", s.URL()+"/api/datasets/org/data/tree/main/d", nil, nil)
	if err := json.Unmarshal(body, &tree); err != nil || len(tree) != 1 || tree[0].Path != "d/e" {
		t.Errorf("tree of d: %s", body)
	}

	for _, tc := range []struct{ ct, body string }{
		{"application/json", `{"paths":["d/e/f.parquet","missing"],"expand":true}`},
		{"application/x-www-form-urlencoded", "paths=d%2Fe%2Ff.parquet&paths=missing&expand=True"},
	} {
		_, body = do(t, http.DefaultClient, "POST", s.URL()+"/api/datasets/org/data/paths-info/main", map[string]string{"Content-Type": tc.ct}, strings.NewReader(tc.body))
		var got []entry
		if err := json.Unmarshal(body, &got); err != nil || len(got) != 1 || got[0].LastCommit == nil || got[0].LastCommit.ID != commit {
			t.Errorf("paths-info (%s): %s", tc.ct, body)
		}
	}
	if resp, _ := do(t, http.DefaultClient, "GET", s.URL()+"/api/datasets/org/data/revision/nope", nil, nil); resp.Header.Get("X-Error-Code") != "RevisionNotFound" {
		t.Errorf("unknown revision: %v", resp.Header)
	}
}

func TestFaults(t *testing.T) {
	s := New(t)
	content := bytes.Repeat([]byte("abcdefgh"), 1000)
	s.AddRepo("model", "m", map[string][]byte{"f.bin": content}, RepoOptions{LFSThreshold: -1})
	u := s.URL() + "/m/resolve/main/f.bin"

	s.CorruptNext("f.bin")
	if _, body := do(t, http.DefaultClient, "GET", u, nil, nil); bytes.Equal(body, content) || len(body) != len(content) {
		t.Error("CorruptNext served the right bytes")
	}
	if _, body := do(t, http.DefaultClient, "GET", u, nil, nil); !bytes.Equal(body, content) {
		t.Error("the fault was not one-shot")
	}
	s.CutAfter("f.bin", 100)
	req, _ := http.NewRequest("GET", u, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil || len(body) != 100 {
		t.Errorf("CutAfter: %d bytes, err %v", len(body), err)
	}
	s.ExtraNext("f.bin", 5)
	if resp, body := do(t, http.DefaultClient, "GET", u, nil, nil); len(body) != len(content)+5 || resp.ContentLength != -1 {
		t.Errorf("ExtraNext: %d bytes, Content-Length %d", len(body), resp.ContentLength)
	}
	s.IgnoreRangeNext("f.bin")
	if resp, body := do(t, http.DefaultClient, "GET", u, map[string]string{"Range": "bytes=10-"}, nil); resp.StatusCode != 200 || len(body) != len(content) {
		t.Errorf("IgnoreRangeNext: %d, %d bytes", resp.StatusCode, len(body))
	}
}

// TestCloseReleasesStall: Close returns even while a client waits on a stalled download.
func TestCloseReleasesStall(t *testing.T) {
	s := NewServer()
	s.AddRepo("model", "m", map[string][]byte{"f.bin": bytes.Repeat([]byte("x"), 5000)}, RepoOptions{})
	s.StallAfter("f.bin", 10)
	got := make(chan int, 1)
	go func() {
		resp, err := http.Get(s.URL() + "/m/resolve/main/f.bin")
		if err != nil {
			got <- -1
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got <- len(b)
	}()
	time.Sleep(100 * time.Millisecond)
	done := make(chan struct{})
	go func() { s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close blocked on a stalled handler")
	}
	if n := <-got; n != 10 {
		t.Errorf("client received %d bytes before the stall, want 10", n)
	}
}
