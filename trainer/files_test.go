package trainer_test

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/trainer"
)

// writeFilesChildEnv names the directory TestWriteFilesChild writes into; the child runs only
// when it is set.
const writeFilesChildEnv = "GOTPU_WRITE_FILES_CHILD_DIR"

// TestWriteFilesChild is the child process of the file-policy tests: it writes every kind of
// file gotpu leaves behind after training — a checkpoint (output_dir/checkpoint-2, through the
// checkpoint writer), trainer_state.json (SaveState), the final model (SaveModel: config.json +
// model.safetensors) and a sharded model (shards + index) — into the directory named by
// writeFilesChildEnv, creating every directory below it itself.
func TestWriteFilesChild(t *testing.T) {
	root := os.Getenv(writeFilesChildEnv)
	if root == "" {
		t.Skip("the child process of TestFileModesFollowUmask and TestRenamesAreDurable")
	}
	rt := openRT(t, 1)
	a := baseArgs(t)
	a.OutputDir = filepath.Join(root, "out")
	a.MaxSteps, a.SaveSteps, a.SaveStrategy = 2, 2, "steps"
	tr, err := trainer.New(a, tinyGPT2(t, rt), counting(16, 0), nil, trainer.Options{Runtime: rt, Logger: quiet(), SyncCheckpoints: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := tr.SaveState(); err != nil {
		t.Fatal(err)
	}
	if err := tr.SaveModel(filepath.Join(root, "model")); err != nil {
		t.Fatal(err)
	}
	if err := tr.Model().Save(filepath.Join(root, "sharded", "model"), models.SaveOptions{MaxShardSize: 16 << 10}); err != nil {
		t.Fatal(err)
	}
}

// runWriteFilesChild runs TestWriteFilesChild as a real process (argv0 and its arguments first,
// for wrappers such as sh or strace) and fails the test with its output if it fails.
func runWriteFilesChild(t *testing.T, root string, wrapper ...string) {
	t.Helper()
	argv := append(wrapper, os.Args[0], "-test.run=^TestWriteFilesChild$", "-test.count=1")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), writeFilesChildEnv+"="+root)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %v\n%s", argv, err, out)
	}
}

// TestFileModesFollowUmask: under umask 077 and 022 (set in a real shell that then execs the
// child), every file gotpu writes — model.safetensors, config.json, the shards and their index,
// every checkpoint file, trainer_state.json — has mode 0666 &^ umask and every directory it
// creates 0777 &^ umask: the one policy of internal/atomicfile, the same for final models and
// checkpoints (before it, model files were forced to 0644 while checkpoint files were 0600).
func TestFileModesFollowUmask(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh to set the umask in")
	}
	for _, umask := range []fs.FileMode{0o077, 0o022} {
		t.Run(fmt.Sprintf("%03o", umask), func(t *testing.T) {
			root := t.TempDir()
			runWriteFilesChild(t, root, sh, "-c", fmt.Sprintf(`umask %03o && exec "$@"`, umask), "sh")
			seen := map[string]bool{}
			err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
				if err != nil || p == root {
					return err
				}
				info, err := d.Info()
				if err != nil {
					return err
				}
				rel, _ := filepath.Rel(root, p)
				want := 0o666 &^ umask
				if d.IsDir() {
					want = 0o777 &^ umask
				}
				if got := info.Mode().Perm(); got != want {
					t.Errorf("%s: mode %04o, want %04o under umask %03o", rel, got, want, umask)
				}
				seen[rel] = true
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{
				"model/model.safetensors", "model/config.json", "out/trainer_state.json",
				"out/checkpoint-2", "out/checkpoint-2/model.safetensors", "out/checkpoint-2/config.json",
				"out/checkpoint-2/optimizer.safetensors", "out/checkpoint-2/trainer_state.json", "out/checkpoint-2/gotpu_commit",
				"sharded/model/model.safetensors.index.json", "sharded/model/config.json",
			} {
				if !seen[want] {
					t.Errorf("the child did not write %s", want)
				}
			}
		})
	}
}

// TestRenamesAreDurable traces the child's system calls with strace (the real file system, no
// seam) and checks every rename into a path under its directory: the source was fsynced after it
// was last opened and before the rename (a file, or a staged checkpoint directory), and the
// destination's directory is fsynced after it. It fails for TrainerState.Save renaming without
// fsync, or config.json written without one.
func TestRenamesAreDurable(t *testing.T) {
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("strace is not installed")
	}
	root := t.TempDir()
	trace := filepath.Join(t.TempDir(), "trace")
	probe := exec.Command(strace, "-f", "-o", os.DevNull, "true")
	if out, err := probe.CombinedOutput(); err != nil {
		t.Skipf("strace cannot trace here (ptrace not permitted?): %v\n%s", err, out)
	}
	runWriteFilesChild(t, root, strace, "-f", "-qq", "-s", "4096", "-e", "signal=none",
		"-e", "trace=open,openat,fsync,fdatasync,close,rename,renameat,renameat2", "-o", trace)
	calls, err := readStrace(trace)
	if err != nil {
		t.Fatal(err)
	}
	renames := checkDurableRenames(t, calls, root)
	// Files of the final models, trainer_state.json and the checkpoint directory itself.
	for _, want := range []string{"model/model.safetensors", "model/config.json", "out/trainer_state.json",
		"out/checkpoint-2", "sharded/model/model.safetensors.index.json"} {
		if !renames[want] {
			t.Errorf("no rename into %s traced (renames: %v)", want, renames)
		}
	}
}

// syscallRecord is one completed system call of an strace log.
type syscallRecord struct {
	name string
	args string
	ret  int64
}

var (
	straceDone       = regexp.MustCompile(`^(\d+)\s+(\w+)\((.*)\)\s+=\s+(-?\d+)`)
	straceUnfinished = regexp.MustCompile(`^(\d+)\s+(\w+)\((.*) <unfinished \.\.\.>$`)
	straceResumed    = regexp.MustCompile(`^(\d+)\s+<\.\.\. (\w+) resumed>(.*)\)\s+=\s+(-?\d+)`)
	straceString     = regexp.MustCompile(`"((?:[^"\\]|\\.)*)"`)
)

// readStrace parses an `strace -f -o` log into calls in completion order, joining the halves of
// calls that other threads' calls interrupted.
func readStrace(path string) ([]syscallRecord, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	pending := map[string]syscallRecord{} // by thread id
	var out []syscallRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := straceUnfinished.FindStringSubmatch(line); m != nil {
			pending[m[1]] = syscallRecord{name: m[2], args: m[3]}
			continue
		}
		var r syscallRecord
		var ret string
		if m := straceResumed.FindStringSubmatch(line); m != nil {
			p, ok := pending[m[1]]
			if !ok || p.name != m[2] {
				return nil, fmt.Errorf("%s: resumed call without its start: %s", path, line)
			}
			delete(pending, m[1])
			r, ret = syscallRecord{name: p.name, args: p.args + m[3]}, m[4]
		} else if m := straceDone.FindStringSubmatch(line); m != nil {
			r, ret = syscallRecord{name: m[2], args: m[3]}, m[4]
		} else {
			continue // exits, errors written as "= ? <unavailable>"…
		}
		r.ret, _ = strconv.ParseInt(ret, 10, 64)
		out = append(out, r)
	}
	return out, sc.Err()
}

// fsEvent is a system call of the trace with its descriptor resolved to the path it was opened
// with: "open", "fsync" (path) or "rename" (path → to).
type fsEvent struct {
	kind, path, to string
}

// resolveFDs turns calls into fsEvents, following which path each descriptor was opened on.
func resolveFDs(calls []syscallRecord) []fsEvent {
	fds := map[int64]string{}
	fd := func(args string) int64 {
		n, _ := strconv.ParseInt(strings.TrimSpace(strings.SplitN(args, ",", 2)[0]), 10, 64)
		return n
	}
	var out []fsEvent
	for _, c := range calls {
		strs := straceString.FindAllStringSubmatch(c.args, -1)
		switch c.name {
		case "open", "openat":
			if c.ret >= 0 && len(strs) > 0 {
				p := filepath.Clean(strs[0][1])
				fds[c.ret] = p
				out = append(out, fsEvent{kind: "open", path: p})
			}
		case "close":
			delete(fds, fd(c.args))
		case "fsync", "fdatasync":
			if p, ok := fds[fd(c.args)]; ok && c.ret == 0 {
				out = append(out, fsEvent{kind: "fsync", path: p})
			}
		case "rename", "renameat", "renameat2":
			if c.ret == 0 && len(strs) >= 2 {
				out = append(out, fsEvent{kind: "rename", path: filepath.Clean(strs[0][1]), to: filepath.Clean(strs[1][1])})
			}
		}
	}
	return out
}

// checkDurableRenames checks the fsync discipline of every successful rename into root: the
// source fsynced after its last open and before the rename, the destination's directory fsynced
// after it. It returns the renamed destinations, relative to root.
func checkDurableRenames(t *testing.T, calls []syscallRecord, root string) map[string]bool {
	t.Helper()
	ev := resolveFDs(calls)
	done := map[string]bool{}
	for k, r := range ev {
		if r.kind != "rename" {
			continue
		}
		rel, err := filepath.Rel(root, r.to)
		if err != nil || !filepath.IsLocal(rel) {
			continue
		}
		done[rel] = true
		lastOpen, lastSync := -1, -1
		for i, e := range ev[:k] {
			switch {
			case e.kind == "open" && e.path == r.path:
				lastOpen = i
			case e.kind == "fsync" && e.path == r.path:
				lastSync = i
			}
		}
		if lastOpen < 0 || lastSync < lastOpen {
			t.Errorf("rename %s -> %s: the source was not fsynced between its last open and the rename", r.path, rel)
		}
		dirSynced := false
		for _, e := range ev[k+1:] {
			dirSynced = dirSynced || (e.kind == "fsync" && e.path == filepath.Dir(r.to))
		}
		if !dirSynced {
			t.Errorf("rename %s -> %s: %s was not fsynced after the rename", r.path, rel, filepath.Dir(r.to))
		}
	}
	if len(done) == 0 {
		t.Fatal("no rename under the child's directory was traced")
	}
	return done
}
