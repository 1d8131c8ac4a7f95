//go:build unix

package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gotpu/gotpu/hub/hubtest"
)

// bigRepo serves org/big: a 4 MiB LFS file (big.bin, served by the CDN host) and a small
// regular one (config.json). It returns the files and the commit.
func bigRepo(t *testing.T, s *hubtest.Server) (map[string][]byte, string) {
	t.Helper()
	big := make([]byte, 4<<20)
	rand.NewChaCha8([32]byte{'g', 'o', 't', 'p', 'u'}).Read(big)
	files := map[string][]byte{"big.bin": big, "config.json": []byte(`{"model_type": "gpt2", "n_layer": 1}` + "\n")}
	return files, s.AddRepo("model", "org/big", files, hubtest.RepoOptions{})
}

// downloadEnv is hubEnv with HF_HUB_CACHE at a folder the tests never use, so that the cache
// each names with --cache-dir is the one the flag chose.
func downloadEnv(t *testing.T, s *hubtest.Server) []string {
	return hubEnv(t, s, filepath.Join(t.TempDir(), "not-this-cache"))
}

// bigPartial is where big.bin is being downloaded: blobs/<sha256>.incomplete.
func bigPartial(cache string, files map[string][]byte) string {
	return filepath.Join(cache, "models--org--big", "blobs", hubtest.SHA256(files["big.bin"])+".incomplete")
}

// gotpuChild is a gotpu process started in the background.
type gotpuChild struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	done           chan struct{} // closed when the process has been waited for
	err            error
}

// startGotpu starts the gotpu binary as runGotpu runs it, without waiting; the test's end kills
// it if it is still running.
func startGotpu(t *testing.T, env []string, args ...string) *gotpuChild {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	c := &gotpuChild{cmd: exec.CommandContext(ctx, gotpuBin, args...), done: make(chan struct{})}
	c.cmd.Env = append(os.Environ(), env...)
	c.cmd.Stdout, c.cmd.Stderr = &c.stdout, &c.stderr
	if err := c.cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	go func() {
		defer close(c.done)
		defer cancel()
		c.err = c.cmd.Wait()
	}()
	t.Cleanup(func() {
		cancel()
		<-c.done
	})
	return c
}

// wait waits for the process and returns its stdout, stderr and exit status (-1 if a signal
// ended it).
func (c *gotpuChild) wait() (string, string, int) {
	<-c.done
	return c.stdout.String(), c.stderr.String(), c.cmd.ProcessState.ExitCode()
}

// waitSize waits until the file at p has at least n bytes, failing the test if c ends first.
func waitSize(t *testing.T, c *gotpuChild, p string, n int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, err := os.Stat(p)
		if err == nil && st.Size() >= n {
			return
		}
		select {
		case <-c.done:
			t.Fatalf("gotpu ended (%v) before %s reached %d bytes\nstdout %q\nstderr %s", c.err, p, n, c.stdout.String(), c.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not reach %d bytes (stat: %v)", p, n, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// bigGETs are the logged CDN GETs of big.bin.
func bigGETs(s *hubtest.Server, files map[string][]byte) []hubtest.Request {
	var out []hubtest.Request
	for _, r := range s.Requests() {
		if r.Host == "cdn" && r.Method == "GET" && strings.HasSuffix(r.Path, "/"+hubtest.SHA256(files["big.bin"])) {
			out = append(out, r)
		}
	}
	return out
}

// checkBigCache fails the test unless cache holds org/big complete and intact: every file of the
// snapshot byte-identical, each blob named by its hash with that hash, and no partial file.
func checkBigCache(t *testing.T, cache, commit string, files map[string][]byte) {
	t.Helper()
	repo := filepath.Join(cache, "models--org--big")
	for name, content := range files {
		got, err := os.ReadFile(filepath.Join(repo, "snapshots", commit, name))
		if err != nil || !bytes.Equal(got, content) {
			t.Errorf("snapshot file %s: %d bytes (%v), want %d", name, len(got), err, len(content))
		}
	}
	sum := sha256.Sum256(files["big.bin"])
	blob, err := os.ReadFile(filepath.Join(repo, "blobs", hex.EncodeToString(sum[:])))
	if got := sha256.Sum256(blob); err != nil || got != sum {
		t.Errorf("big.bin's blob: sha256 %x (%v), want %x", got, err, sum)
	}
	filepath.WalkDir(cache, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".incomplete") {
			t.Errorf("partial file left: %s", p)
		}
		return err
	})
}

// TestDownloadKilledResumes (d): a `gotpu download` SIGKILLed in the middle of an LFS file
// leaves its partial file; the next run asks the CDN for the rest only (Range: bytes=<k>-, k
// the bytes kept) and completes a blob with the right sha256.
func TestDownloadKilledResumes(t *testing.T) {
	s := hubtest.New(t)
	files, commit := bigRepo(t, s)
	cache := filepath.Join(t.TempDir(), "hub")
	env := downloadEnv(t, s)
	const n = 1<<20 + 12345
	s.StallAfter("big.bin", n)
	child := startGotpu(t, env, "download", "org/big", "--cache-dir", cache, "--quiet")
	partial := bigPartial(cache, files)
	waitSize(t, child, partial, n)
	if err := child.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	out, errOut, _ := child.wait()
	if ws, ok := child.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the first run was not killed by SIGKILL: %v\nstdout %q\nstderr %s", child.cmd.ProcessState, out, errOut)
	}
	st, err := os.Stat(partial)
	if err != nil || st.Size() != n {
		t.Fatalf("after the kill, %s: %v, %v; want %d bytes kept", partial, st, err, n)
	}
	if _, err := os.Lstat(filepath.Join(cache, "models--org--big", "snapshots", commit, "big.bin")); err == nil {
		t.Fatal("the killed run linked big.bin")
	}

	// The stalled answer is logged when its handler sees the connection gone: wait for it, so
	// that the log is emptied of the first run only.
	for deadline := time.Now().Add(10 * time.Second); len(bigGETs(s, files)) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the stalled GET of big.bin never ended after the kill")
		}
	}
	s.ResetRequests()
	out, errOut, code := runGotpu(t, env, "download", "org/big", "--cache-dir", cache, "--quiet")
	want := filepath.Join(cache, "models--org--big", "snapshots", commit)
	if code != 0 || strings.TrimSpace(out) != want {
		t.Fatalf("rerun: exit %d, stdout %q, stderr %s", code, out, errOut)
	}
	gets := bigGETs(s, files)
	if len(gets) != 1 || gets[0].Range != fmt.Sprintf("bytes=%d-", n) || gets[0].Status != 206 {
		t.Fatalf("rerun's GETs of big.bin: %+v; want one, Range bytes=%d-, answered 206", gets, n)
	}
	checkBigCache(t, cache, commit, files)
	t.Logf("killed after %d bytes; the rerun sent Range %q", n, gets[0].Range)
}

// TestDownloadConcurrentProcesses (e): two `gotpu download` of one repo started at once, while
// the CDN sends the LFS file slowly, both succeed with the same path; the file was served once
// (the second process waited on the blob's lock under .locks/ and found it complete), and the
// cache holds one blob per file.
func TestDownloadConcurrentProcesses(t *testing.T) {
	s := hubtest.New(t)
	files, commit := bigRepo(t, s)
	cache := filepath.Join(t.TempDir(), "hub")
	env := downloadEnv(t, s)
	s.SlowNext("big.bin", 1500*time.Millisecond)
	args := []string{"download", "org/big", "--cache-dir", cache, "--quiet"}
	a, b := startGotpu(t, env, args...), startGotpu(t, env, args...)
	outA, errA, codeA := a.wait()
	outB, errB, codeB := b.wait()
	want := filepath.Join(cache, "models--org--big", "snapshots", commit)
	if codeA != 0 || codeB != 0 || strings.TrimSpace(outA) != want || outA != outB {
		t.Fatalf("exit %d and %d, stdout %q and %q (want %s)\nstderr A: %s\nstderr B: %s", codeA, codeB, outA, outB, want, errA, errB)
	}

	reqs := s.Requests()
	getAt, heads := -1, []int{}
	for i, r := range reqs {
		switch {
		case r.Method == "HEAD" && strings.HasSuffix(r.Path, "/big.bin"):
			heads = append(heads, i)
		case r.Host == "cdn" && r.Method == "GET":
			if getAt >= 0 || r.Range != "" {
				t.Errorf("big.bin served more than once: %+v", bigGETs(s, files))
			}
			getAt = i
		}
	}
	// A request is logged when its answer ends: both processes asked for big.bin's metadata
	// before the slow download finished, so they did overlap.
	if getAt < 0 || len(heads) != 2 || heads[1] > getAt {
		t.Errorf("HEADs of big.bin at %v, its GET at %d in the log: the processes did not overlap\n%+v", heads, getAt, reqs)
	}
	if n := s.CountRequests(func(r hubtest.Request) bool {
		return r.Method == "GET" && strings.HasSuffix(r.Path, "/config.json")
	}); n != 1 {
		t.Errorf("config.json served %d times, want once", n)
	}
	blobs, err := os.ReadDir(filepath.Join(cache, "models--org--big", "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range blobs {
		names = append(names, e.Name())
	}
	wantBlobs := []string{hubtest.SHA256(files["big.bin"]), hubtest.GitBlobSHA1(files["config.json"])}
	slices.Sort(wantBlobs)
	if !slices.Equal(names, wantBlobs) {
		t.Errorf("blobs %q, want %q", names, wantBlobs)
	}
	for _, etag := range wantBlobs {
		if _, err := os.Stat(filepath.Join(cache, ".locks", "models--org--big", etag+".lock")); err != nil {
			t.Errorf("no lock file for blob %s: %v", etag, err)
		}
	}
	checkBigCache(t, cache, commit, files)
	t.Logf("two processes: %d requests in all, big.bin served once in full", len(reqs))
}

// TestDownloadTruncated (f): the CDN closes the connection partway through big.bin: gotpu
// download fails (exit 1) naming the file, links nothing for it, keeps the bytes received, and
// the rerun fetches only the rest.
func TestDownloadTruncated(t *testing.T) {
	s := hubtest.New(t)
	files, commit := bigRepo(t, s)
	cache := filepath.Join(t.TempDir(), "hub")
	env := downloadEnv(t, s)
	const n = 777777
	s.CutAfter("big.bin", n)
	_, cutErr, code := runGotpu(t, env, "download", "org/big", "--cache-dir", cache, "--quiet")
	if code != 1 || !strings.Contains(cutErr, `"big.bin"`) || !strings.Contains(cutErr, "org/big") {
		t.Fatalf("truncated download: exit %d, stderr %q; want 1 naming org/big's big.bin", code, cutErr)
	}
	if _, err := os.Lstat(filepath.Join(cache, "models--org--big", "snapshots", commit, "big.bin")); err == nil {
		t.Error("the failed download linked big.bin")
	}
	if st, err := os.Stat(bigPartial(cache, files)); err != nil || st.Size() != n {
		t.Errorf("partial file after the cut: %v, %v; want %d bytes", st, err, n)
	}

	s.ResetRequests()
	out, errOut, code := runGotpu(t, env, "download", "org/big", "--cache-dir", cache, "--quiet")
	if code != 0 || strings.TrimSpace(out) != filepath.Join(cache, "models--org--big", "snapshots", commit) {
		t.Fatalf("rerun: exit %d, stdout %q, stderr %s", code, out, errOut)
	}
	if gets := bigGETs(s, files); len(gets) != 1 || gets[0].Range != fmt.Sprintf("bytes=%d-", n) {
		t.Errorf("rerun's GETs of big.bin: %+v; want one with Range bytes=%d-", gets, n)
	}
	checkBigCache(t, cache, commit, files)
	t.Logf("cut after %d bytes: %s", n, strings.TrimSpace(cutErr))
}

// TestDownloadOffline (g): with HF_HUB_OFFLINE=1, gotpu download answers a cached repo (and
// file) from the cache with no request, and fails with exit 1 naming what is not cached.
func TestDownloadOffline(t *testing.T) {
	s := hubtest.New(t)
	files, commit := bigRepo(t, s)
	cache := filepath.Join(t.TempDir(), "hub")
	env := downloadEnv(t, s)
	if _, errOut, code := runGotpu(t, env, "download", "org/big", "--cache-dir", cache, "--quiet"); code != 0 {
		t.Fatalf("online download: exit %d: %s", code, errOut)
	}
	s.ResetRequests()
	offline := append(env, "HF_HUB_OFFLINE=1")
	snap := filepath.Join(cache, "models--org--big", "snapshots", commit)
	out, errOut, code := runGotpu(t, offline, "download", "org/big", "--cache-dir", cache, "--quiet")
	if code != 0 || strings.TrimSpace(out) != snap {
		t.Errorf("offline, cached repo: exit %d, stdout %q, stderr %s; want %s", code, out, errOut, snap)
	}
	out, errOut, code = runGotpu(t, offline, "download", "org/big", "config.json", "--cache-dir", cache, "--quiet")
	if got, err := os.ReadFile(strings.TrimSpace(out)); code != 0 || err != nil || !bytes.Equal(got, files["config.json"]) {
		t.Errorf("offline, cached file: exit %d, stdout %q (%v), stderr %s", code, out, err, errOut)
	}
	for _, tc := range []struct {
		args  []string
		names []string
	}{
		{[]string{"org/other", "config.json"}, []string{"org/other", `"config.json"`}},
		{[]string{"org/big", "missing.txt"}, []string{"org/big", `"missing.txt"`}},
		{[]string{"org/other"}, []string{"org/other"}},
	} {
		_, errOut, code := runGotpu(t, offline, append(append([]string{"download"}, tc.args...), "--cache-dir", cache, "--quiet")...)
		named := code == 1 && strings.Contains(errOut, "offline")
		for _, n := range tc.names {
			named = named && strings.Contains(errOut, n)
		}
		if !named {
			t.Errorf("offline, gotpu download %v: exit %d, stderr %q; want 1 naming %v and offline mode", tc.args, code, errOut, tc.names)
		}
	}
	if n := s.RequestCount(); n != 0 {
		t.Errorf("offline runs sent %d requests: %+v", n, s.Requests())
	}
}

// TestDownloadHangingHub: gotpu download against a Hub that accepts connections and never
// answers ends within HF_HUB_ETAG_TIMEOUT with exit 1 naming the repo and the timeout, or, when
// the cache holds the repo, prints the cached snapshot as huggingface_hub does when the Hub
// cannot be reached. Before, the listing call had no timeout and the command waited forever.
func TestDownloadHangingHub(t *testing.T) {
	s := hubtest.New(t)
	_, commit := bigRepo(t, s)
	done := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}))
	t.Cleanup(hang.Close)
	t.Cleanup(func() { close(done) })
	cache := filepath.Join(t.TempDir(), "hub")
	hanging := append(downloadEnv(t, s), "HF_ENDPOINT="+hang.URL, "HF_HUB_ETAG_TIMEOUT=1")

	start := time.Now()
	_, errOut, code := runGotpu(t, hanging, "download", "org/big", "--cache-dir", cache, "--quiet")
	elapsed := time.Since(start)
	if code != 1 || !strings.Contains(errOut, "org/big") || !strings.Contains(errOut, "HF_HUB_ETAG_TIMEOUT") {
		t.Errorf("hanging Hub, empty cache: exit %d, stderr %q; want 1 naming org/big and HF_HUB_ETAG_TIMEOUT", code, errOut)
	}
	if elapsed > 15*time.Second {
		t.Errorf("gotpu download took %v with a 1 s metadata timeout", elapsed)
	}
	t.Logf("hanging Hub: exit %d after %v: %s", code, elapsed.Round(time.Millisecond), strings.TrimSpace(errOut))

	if _, errOut, code := runGotpu(t, downloadEnv(t, s), "download", "org/big", "--cache-dir", cache, "--quiet"); code != 0 {
		t.Fatalf("online download: exit %d: %s", code, errOut)
	}
	out, errOut, code := runGotpu(t, hanging, "download", "org/big", "--cache-dir", cache, "--quiet")
	if snap := filepath.Join(cache, "models--org--big", "snapshots", commit); code != 0 || strings.TrimSpace(out) != snap {
		t.Errorf("hanging Hub, cached repo: exit %d, stdout %q, stderr %s; want %s", code, out, errOut, snap)
	}
}

// TestDownloadCommitPinMismatch: gotpu download at a commit the Hub answers with another commit
// fails (exit 1, corrupt data naming both) and records nothing under refs/.
func TestDownloadCommitPinMismatch(t *testing.T) {
	s := hubtest.New(t)
	asked := strings.Repeat("ab", 20)
	served := s.AddRepo("model", "org/pinned", map[string][]byte{"config.json": []byte(`{"n_layer": 1}`)}, hubtest.RepoOptions{Branch: asked})
	cache := filepath.Join(t.TempDir(), "hub")
	_, errOut, code := runGotpu(t, downloadEnv(t, s), "download", "org/pinned@"+asked, "config.json", "--cache-dir", cache, "--quiet")
	if code != 1 || !strings.Contains(errOut, "corrupt") || !strings.Contains(errOut, served) || !strings.Contains(errOut, asked) {
		t.Errorf("commit answered for another: exit %d, stderr %q; want 1, corrupt data naming both commits", code, errOut)
	}
	if refs, _ := os.ReadDir(filepath.Join(cache, "models--org--pinned", "refs")); len(refs) != 0 {
		t.Errorf("refs/ written for a commit answered by another: %v", refs)
	}
}
