//go:build unix

package interop_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gotpu/gotpu/hub"
	"github.com/gotpu/gotpu/hub/hubtest"
)

// childTimeout bounds one Node or gotpu child process.
const childTimeout = 2 * time.Minute

// tmpDir holds what TestMain's tests build once (the gotpu binary); removed when they end.
var tmpDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gotpu-interop")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	tmpDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildGotpu builds cmd/gotpu into tmpDir, once for all the tests.
var buildGotpu = sync.OnceValues(func() (string, error) {
	bin := filepath.Join(tmpDir, "gotpu")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/gotpu/gotpu/cmd/gotpu").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build ./cmd/gotpu: %w\n%s", err, out)
	}
	return bin, nil
})

// gotpuBin is the path of the gotpu binary, built on first use.
func gotpuBin(t *testing.T) string {
	t.Helper()
	bin, err := buildGotpu()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// setupNode finds node and runs setup.sh (npm ci when the pinned package is not installed),
// once for all the tests. An absent node is errNoNode.
var setupNode = sync.OnceValues(func() (string, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return "", fmt.Errorf("%w: %w", errNoNode, err)
	}
	if out, err := exec.Command("sh", "setup.sh").CombinedOutput(); err != nil {
		return "", fmt.Errorf("hub/interop/setup.sh: %w\n%s", err, out)
	}
	return node, nil
})

var errNoNode = errors.New("node is not installed")

// needNode returns the node binary, skipping the test (with the reason logged) only when node
// is not installed; a failed install of @huggingface/hub fails the test.
func needNode(t *testing.T) string {
	t.Helper()
	node, err := setupNode()
	if errors.Is(err, errNoNode) {
		t.Skipf("skipping the @huggingface/hub interop test: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return node
}

// jsRepo is a repo as @huggingface/hub names it.
type jsRepo struct {
	Type string `json:"type"`
	Name string `json:"name"`
}

// jsArgs are the arguments of an hfjs.mjs command (unused ones are left out).
type jsArgs struct {
	Repo     *jsRepo  `json:"repo,omitempty"`
	HubURL   string   `json:"hubUrl,omitempty"`
	CacheDir string   `json:"cacheDir,omitempty"`
	Revision string   `json:"revision,omitempty"`
	Paths    []string `json:"paths,omitempty"`
}

// runJS runs `node hfjs.mjs command args` and decodes its JSON answer into out.
func runJS(t *testing.T, command string, args jsArgs, out any) {
	t.Helper()
	node := needNode(t)
	arg, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), childTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "hfjs.mjs", command, string(arg))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("node hfjs.mjs %s %s: %v\n%s", command, arg, err, stderr.Bytes())
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		t.Fatalf("node hfjs.mjs %s: answer %q: %v\nstderr:\n%s", command, stdout.Bytes(), err, stderr.Bytes())
	}
	t.Logf("node hfjs.mjs %s: %v", command, time.Since(start).Round(time.Millisecond))
}

// runGotpu runs the gotpu binary with env added to a clean Hub environment pointing at s (no
// token, no offline mode, every proxy variable at a closed port so only loopback is reachable)
// and returns stdout, stderr and the exit status.
func runGotpu(t *testing.T, s *hubtest.Server, env []string, args ...string) (string, string, int) {
	t.Helper()
	bin := gotpuBin(t)
	ctx, cancel := context.WithTimeout(context.Background(), childTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	proxy := hubtest.ClosedURL(t)
	cmd.Env = append(os.Environ(), "HF_ENDPOINT="+s.URL(), "HF_HOME="+t.TempDir(), "HF_HUB_CACHE=", "HF_TOKEN=",
		"HF_HUB_OFFLINE=", "HTTP_PROXY="+proxy, "HTTPS_PROXY="+proxy, "http_proxy="+proxy, "https_proxy="+proxy,
		"NO_PROXY=", "no_proxy=")
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return stdout.String(), stderr.String(), ee.ExitCode()
	case err != nil:
		t.Fatalf("running gotpu %v: %v", args, err)
	}
	return stdout.String(), stderr.String(), 0
}

// newClient is a hub.Client on cache and the fake Hub s, logging to the test.
func newClient(t *testing.T, s *hubtest.Server, cache string, offline bool) *hub.Client {
	t.Helper()
	cfg := hub.DefaultConfig()
	cfg.Endpoint, cfg.CacheDir, cfg.Offline = s.URL(), cache, offline
	cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	c, err := hub.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// readFixture reads a file of the repository's testdata, gunzipping a ".gz" one.
func readFixture(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(rel, ".gz") {
		return b
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	b, err = io.ReadAll(zr)
	if err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	return b
}

// tinyGPT2 is a small GPT-2 repo made of real files: the gpt2-tiny checkpoint's config.json
// (a regular git file) and model.safetensors (LFS), GPT-2's tokenizer.json (LFS), and a copy of
// the config in a subfolder (two paths, one blob).
func tinyGPT2(t *testing.T) map[string][]byte {
	config := readFixture(t, "models/gpt2-tiny/config.json")
	return map[string][]byte{
		"config.json":          config,
		"model.safetensors":    readFixture(t, "models/gpt2-tiny/model.safetensors"),
		"tokenizer.json":       readFixture(t, "tokenizers/gpt2/tokenizer.json.gz"),
		"original/config.json": config,
	}
}

// tinyCorpus is a dataset repo as the Hub holds a JSON-lines dataset: a card and data/.
func tinyCorpus(t *testing.T) map[string][]byte {
	return map[string][]byte{
		"README.md":        []byte("---\nlicense: mit\nconfigs:\n- config_name: default\n  data_files: data/train.jsonl\n---\n# tiny corpus\n"),
		"data/train.jsonl": readFixture(t, "tokenizers/corpus.jsonl"),
	}
}

// etagOf is the blob name a file gets in the cache: the sha256 of an LFS file (at least
// hubtest.DefaultLFSThreshold bytes), the git blob sha1 of any other.
func etagOf(content []byte) string {
	if len(content) >= hubtest.DefaultLFSThreshold {
		return hubtest.SHA256(content)
	}
	return hubtest.GitBlobSHA1(content)
}

// isContentGET says whether a logged request fetched file bytes: a GET of a resolve URL
// (answered with the bytes or a redirect to them) or any GET on the CDN host. Metadata requests
// (HEAD, the API) are not.
func isContentGET(r hubtest.Request) bool {
	return r.Method == "GET" && (r.Host == "cdn" || strings.Contains(r.Path, "/resolve/"))
}

// contentGETs lists the content GETs of s's log.
func contentGETs(s *hubtest.Server) []hubtest.Request {
	var out []hubtest.Request
	for _, r := range s.Requests() {
		if isContentGET(r) {
			out = append(out, r)
		}
	}
	return out
}

// blobIDs maps each file of a repo's blobs/ to its inode and modification time, to show a blob
// was reused as it was rather than written again.
func blobIDs(t *testing.T, repoDir string) map[string]string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(repoDir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, e := range ents {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		ids[e.Name()] = fmt.Sprintf("%v %d", sysIno(info), info.ModTime().UnixNano())
	}
	return ids
}

// sysIno is a file's inode number.
func sysIno(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}
