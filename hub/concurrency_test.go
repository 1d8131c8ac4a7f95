package hub

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gotpu/gotpu/hub/hubtest"
)

// TestConcurrentDownloadsInProcess: 8 goroutines download one LFS file at once: one GET, one
// blob, the same path for all.
func TestConcurrentDownloadsInProcess(t *testing.T) {
	srv := hubtest.New(t)
	data := payload(2<<20, 11)
	srv.AddRepo("model", "org/name", map[string][]byte{"model.safetensors": data}, hubtest.RepoOptions{})
	c, _ := newClient(t, srv)
	const n = 8
	paths := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { paths[i], errs[i] = c.Download(context.Background(), testRepo, "model.safetensors") })
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || paths[i] != paths[0] {
			t.Errorf("goroutine %d: %q, %v; want %q", i, paths[i], errs[i], paths[0])
		}
	}
	if got := dirNames(t, filepath.Join(c.CacheDir(), "models--org--name", "blobs")); len(got) != 1 || got[0] != hubtest.SHA256(data) {
		t.Errorf("blobs/ = %v, want one blob", got)
	}
	if gets := count(srv, "cdn", "GET", ""); gets != 1 {
		t.Errorf("%d GETs of the blob, want 1", gets)
	}
	if got := readFile(t, paths[0]); sha256Hex(got) != sha256Hex(data) {
		t.Error("blob differs")
	}
	t.Logf("%d goroutines, %d HEADs, %d blob GET", n, count(srv, "hub", "HEAD", ""), count(srv, "cdn", "GET", ""))
}

// The helper process: run by the tests below as a child (os.Args[0] -test.run=TestHelperProcess)
// with HUB_HELPER set; it does one thing and exits.
func TestHelperProcess(t *testing.T) {
	switch os.Getenv("HUB_HELPER") {
	case "":
		t.Skip("run as a child process by the concurrency tests")
	case "lock":
		// Hold the lock until stdin closes.
		unlock, err := lockFile(context.Background(), os.Getenv("HUB_LOCK"))
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("locked")
		bufio.NewReader(os.Stdin).ReadString('\n')
		unlock()
		os.Exit(0)
	case "download":
		cfg := DefaultConfig()
		cfg.Endpoint, cfg.CacheDir = os.Getenv("HUB_ENDPOINT"), os.Getenv("HUB_CACHE")
		c, err := New(cfg)
		if err == nil {
			var p string
			p, err = c.Download(context.Background(), testRepo, "model.safetensors")
			fmt.Println("path:", p)
		}
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

func helper(t *testing.T, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	return cmd
}

// TestLockExcludesAnotherProcess: while a child process holds a blob's flock, this process
// cannot take it; once the child lets go, it can.
func TestLockExcludesAnotherProcess(t *testing.T) {
	lock := filepath.Join(t.TempDir(), ".locks", "models--org--name", "abc.lock")
	cmd := helper(t, "HUB_HELPER=lock", "HUB_LOCK="+lock)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if strings.TrimSpace(line) != "locked" {
		t.Fatalf("child: %q", line)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := lockFile(ctx, lock); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("lock held by another process was taken: %v", err)
	}
	stdin.Close()
	start := time.Now()
	unlock, err := lockFile(context.Background(), lock)
	if err != nil {
		t.Fatal(err)
	}
	unlock()
	t.Logf("lock taken %v after the child released it", time.Since(start).Round(time.Millisecond))
}

// TestTwoProcessesDownloadOneFile: two processes download the same LFS file into one cache at
// the same time: both succeed, one blob, downloaded once.
func TestTwoProcessesDownloadOneFile(t *testing.T) {
	srv := hubtest.New(t)
	data := payload(4<<20, 12)
	srv.AddRepo("model", "org/name", map[string][]byte{"model.safetensors": data}, hubtest.RepoOptions{})
	cache := filepath.Join(t.TempDir(), "hub")
	var wg sync.WaitGroup
	outs := make([]string, 2)
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() {
			cmd := helper(t, "HUB_HELPER=download", "HUB_ENDPOINT="+srv.URL(), "HUB_CACHE="+cache)
			out, err := cmd.Output()
			outs[i], errs[i] = string(out), err
		})
	}
	wg.Wait()
	for i := range 2 {
		if errs[i] != nil || !strings.Contains(outs[i], "path: ") {
			t.Fatalf("process %d: %v\n%s", i, errs[i], outs[i])
		}
	}
	if outs[0] != outs[1] {
		t.Errorf("different paths: %q vs %q", outs[0], outs[1])
	}
	blobs := dirNames(t, filepath.Join(cache, "models--org--name", "blobs"))
	if len(blobs) != 1 || blobs[0] != hubtest.SHA256(data) {
		t.Errorf("blobs/ = %v", blobs)
	}
	if got := readFile(t, filepath.Join(cache, "models--org--name", "blobs", hubtest.SHA256(data))); sha256Hex(got) != sha256Hex(data) {
		t.Error("blob differs")
	}
	if gets := count(srv, "cdn", "GET", ""); gets != 1 {
		t.Errorf("%d GETs of the blob by two processes, want 1", gets)
	}
}
