//go:build unix

package checkpoint

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The multi-host tests run each "host" as a real process (this test binary re-executed with
// hostChildEnv set), all sharing one output directory as hosts of a pod slice share a mounted
// file system. Each simulated host has its own lock directory, as each real host has its own /tmp.
const hostChildEnv = "GOTPU_CKPT_HOST_CHILD"

// hostFiles is what host h saves at step: the primary the (whole) model, every other host its
// replicas' RNG state — distinct bytes per host and step, so a mix-up is caught by checksums.
func hostFiles(h, step int) []File {
	data := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*31 + h*7 + step)
		}
		return b
	}
	if h == 0 {
		return []File{{Name: "weights.bin", Data: data(1 << 20)}, {Name: "trainer_state.json", Data: []byte(`{"global_step": ` + strconv.Itoa(step) + "}\n")}}
	}
	return []File{{Name: fmt.Sprintf("rng_state_host%d.bin", h), Data: data(4096 + h)}}
}

// TestHostChild is one host of the tests below; it runs only when re-executed.
func TestHostChild(t *testing.T) {
	role := os.Getenv(hostChildEnv)
	if role == "" {
		t.Skip("a child process of the multi-host tests")
	}
	env := func(k string) int {
		v, err := strconv.Atoi(os.Getenv(k))
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		return v
	}
	host, step := env("GOTPU_HOST"), env("GOTPU_STEP")
	cfg := WriterConfig{
		OutputDir: os.Getenv("GOTPU_OUT"),
		LockDir:   os.Getenv("GOTPU_LOCKDIR"),
		Hosts: Hosts{Host: host, Count: env("GOTPU_HOSTS"), RunID: os.Getenv("GOTPU_RUNID"),
			CommitTimeout: time.Duration(env("GOTPU_TIMEOUT_MS")) * time.Millisecond, Poll: 10 * time.Millisecond},
	}
	w, err := NewWriter(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "NewWriter:", err)
		os.Exit(3)
	}
	snap := Snapshot{Step: step, Files: hostFiles(host, step)}
	switch role {
	case "hold":
		fmt.Println("ready")
		time.Sleep(time.Hour)
	case "hang":
		// Writes half a file, says so, and never finishes: the parent SIGKILLs it mid-part.
		snap.Files = append(snap.Files, File{Name: "slow.bin", WriteTo: func(out io.Writer) error {
			out.Write(make([]byte, 1<<20))
			out.(interface{ Flush() error }).Flush()
			fmt.Println("ready")
			time.Sleep(time.Hour)
			return nil
		}})
	}
	if err := w.Save(context.Background(), snap); err != nil {
		fmt.Fprintln(os.Stderr, "Save:", err)
		os.Exit(1)
	}
	if err := w.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "Close:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

type hostRun struct {
	out, runID string
	hosts      int
	timeout    time.Duration
}

func (r hostRun) start(t *testing.T, role string, host, step int) (*exec.Cmd, *bytes.Buffer, *bufio.Reader) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestHostChild$")
	lockDir := filepath.Join(r.out, "..", fmt.Sprintf("host%d-tmp", host))
	if err := os.MkdirAll(lockDir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd.Env = append(os.Environ(), hostChildEnv+"="+role, "GOTPU_OUT="+r.out, "GOTPU_LOCKDIR="+lockDir,
		"GOTPU_HOST="+strconv.Itoa(host), "GOTPU_HOSTS="+strconv.Itoa(r.hosts), "GOTPU_STEP="+strconv.Itoa(step),
		"GOTPU_RUNID="+r.runID, "GOTPU_TIMEOUT_MS="+strconv.Itoa(int(r.timeout/time.Millisecond)))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, &stderr, bufio.NewReader(stdout)
}

// waitReady reads the child's stdout until its "ready" line.
func waitReady(t *testing.T, r *bufio.Reader) {
	t.Helper()
	line, err := r.ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		t.Fatalf("child: %q, %v", line, err)
	}
}

func exitCode(cmd *exec.Cmd) int {
	err := cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// leftovers lists what in out is not a committed checkpoint directory.
func leftovers(t *testing.T, out string) []string {
	t.Helper()
	des, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	var l []string
	for _, de := range des {
		if !committedName.MatchString(de.Name()) {
			l = append(l, de.Name())
		}
	}
	return l
}

// TestMultiHostSave: four host processes, the others starting after the primary, one commit
// that holds every host's files (attributed to their host), verified by Open.
func TestMultiHostSave(t *testing.T) {
	r := hostRun{out: filepath.Join(t.TempDir(), "out"), runID: "a1b2c3", hosts: 4, timeout: 30 * time.Second}
	p, perr, _ := r.start(t, "save", 0, 7)
	var others []*exec.Cmd
	var errs []*bytes.Buffer
	for h := 1; h < r.hosts; h++ {
		time.Sleep(150 * time.Millisecond) // hosts reach the save at different times
		c, e, _ := r.start(t, "save", h, 7)
		others, errs = append(others, c), append(errs, e)
	}
	for i, c := range others {
		if code := exitCode(c); code != 0 {
			t.Fatalf("host %d exited %d: %s", i+1, code, errs[i])
		}
	}
	if code := exitCode(p); code != 0 {
		t.Fatalf("primary exited %d: %s", code, perr)
	}
	ck, err := Open(filepath.Join(r.out, "checkpoint-7"), "weights.bin", "trainer_state.json")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, f := range ck.Manifest.Files {
		got[f.Name] = f.Host
	}
	want := map[string]int{"weights.bin": 0, "trainer_state.json": 0, "rng_state_host1.bin": 1, "rng_state_host2.bin": 2, "rng_state_host3.bin": 3}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("manifest files by host: %v, want %v", got, want)
	}
	for h := range r.hosts {
		for _, f := range hostFiles(h, 7) {
			b, err := os.ReadFile(filepath.Join(ck.Dir, f.Name))
			if err != nil || !bytes.Equal(b, f.Data) {
				t.Errorf("%s: not host %d's bytes (%v)", f.Name, h, err)
			}
		}
	}
	des, _ := os.ReadDir(ck.Dir)
	if len(des) != len(want)+2 {
		t.Errorf("checkpoint-7 holds %d entries, want %d files + manifest + marker (no part manifests)", len(des), len(want))
	}
	if l := leftovers(t, r.out); len(l) != 0 {
		t.Errorf("left behind: %v", l)
	}
}

// TestMultiHostMissingHost: a host that never reaches the save fails the primary's save after
// the timeout, naming the host; the previous checkpoint stays the latest and nothing is left.
func TestMultiHostMissingHost(t *testing.T) {
	r := hostRun{out: filepath.Join(t.TempDir(), "out"), runID: "5eed", hosts: 3, timeout: 30 * time.Second}
	var all []*exec.Cmd
	for h := range 3 {
		c, _, _ := r.start(t, "save", h, 3)
		all = append(all, c)
	}
	for h, c := range all {
		if code := exitCode(c); code != 0 {
			t.Fatalf("step 3, host %d exited %d", h, code)
		}
	}
	r.timeout = time.Second
	p, perr, _ := r.start(t, "save", 0, 6)
	h1, _, _ := r.start(t, "save", 1, 6)
	if code := exitCode(h1); code != 0 {
		t.Fatalf("host 1 exited %d", code)
	}
	begin := time.Now()
	if code := exitCode(p); code != 1 {
		t.Fatalf("primary exited %d, want 1: %s", code, perr)
	}
	t.Logf("primary gave up after %v: %s", time.Since(begin).Round(time.Millisecond), strings.TrimSpace(perr.String()))
	if !strings.Contains(perr.String(), "host(s) [2] did not deliver their part of step 6") {
		t.Errorf("primary's error does not name host 2: %s", perr)
	}
	if e, err := Latest(r.out); err != nil || e.Step != 3 {
		t.Fatalf("latest: %v, %v; want checkpoint-3", e, err)
	}
	if _, err := Open(filepath.Join(r.out, "checkpoint-3")); err != nil {
		t.Fatal(err)
	}
	if l := leftovers(t, r.out); len(l) != 0 {
		t.Errorf("left behind: %v", l)
	}
}

// TestMultiHostKilledHost: a host SIGKILLed half way through writing its part never completes
// the checkpoint; the primary fails naming it, and a late staging directory (the dead host's
// files) is removed by the next primary's Cleanup.
func TestMultiHostKilledHost(t *testing.T) {
	r := hostRun{out: filepath.Join(t.TempDir(), "out"), runID: "dead", hosts: 2, timeout: 1500 * time.Millisecond}
	h1, _, h1out := r.start(t, "hang", 1, 4)
	waitReady(t, h1out)
	h1.Process.Signal(syscall.SIGKILL)
	exitCode(h1)
	p, perr, _ := r.start(t, "save", 0, 4)
	if code := exitCode(p); code != 1 || !strings.Contains(perr.String(), "host(s) [1]") {
		t.Fatalf("primary exited %d: %s", code, perr)
	}
	if _, err := Latest(r.out); !errors.Is(err, ErrNoCheckpoint) {
		t.Fatalf("latest: %v, want none", err)
	}
	// A part that arrives after the primary gave up recreates the staging directory …
	if err := WritePart(r.out, Hosts{Host: 1, Count: 2, RunID: r.runID}, Snapshot{Step: 4, Files: hostFiles(1, 4)}); err != nil {
		t.Fatal(err)
	}
	if l := leftovers(t, r.out); len(l) != 1 {
		t.Fatalf("leftovers: %v", l)
	}
	// … which the next primary removes at its start.
	w, err := NewWriter(WriterConfig{OutputDir: r.out, LockDir: t.TempDir(), Hosts: Hosts{Host: 0, Count: 2, RunID: "beef"}})
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if l := leftovers(t, r.out); len(l) != 0 {
		t.Errorf("left behind: %v", l)
	}
}

// TestMultiHostBadParts: parts that do not match their files, claim the primary's files or are
// not part manifests fail the primary's save with an error naming the host and file.
func TestMultiHostBadParts(t *testing.T) {
	cases := []struct {
		name, want string
		damage     func(stage string)
	}{
		{"checksum", "sha256", func(stage string) {
			p := filepath.Join(stage, "rng_state_host1.bin")
			b, _ := os.ReadFile(p)
			b[10] ^= 1
			os.WriteFile(p, b, 0o644)
		}},
		{"truncated", "bytes, the part lists", func(stage string) {
			os.Truncate(filepath.Join(stage, "rng_state_host1.bin"), 100)
		}},
		{"claims the primary's file", "which host 0 wrote", func(stage string) {
			p := filepath.Join(stage, PartFile(1))
			b, _ := os.ReadFile(p)
			os.WriteFile(p, bytes.Replace(b, []byte("rng_state_host1.bin"), []byte("weights.bin"), 1), 0o644)
		}},
		{"not a part", "format", func(stage string) {
			p := filepath.Join(stage, PartFile(1))
			b, _ := os.ReadFile(p)
			os.WriteFile(p, bytes.Replace(b, []byte(PartFormat), []byte(Format), 1), 0o644)
		}},
		{"another host's part", "want host 1", func(stage string) {
			p := filepath.Join(stage, PartFile(1))
			b, _ := os.ReadFile(p)
			os.WriteFile(p, bytes.Replace(b, []byte(`"host": 1`), []byte(`"host": 2`), 1), 0o644)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := t.TempDir()
			hosts := Hosts{Count: 3, RunID: "0bad", CommitTimeout: 5 * time.Second, Poll: 5 * time.Millisecond}
			for h := 1; h < 3; h++ {
				hosts.Host = h
				if err := WritePart(out, hosts, Snapshot{Step: 2, Files: hostFiles(h, 2)}); err != nil {
					t.Fatal(err)
				}
			}
			c.damage(stagingDir(out, 2, "0bad"))
			hosts.Host = 0
			_, err := commitPrimary(context.Background(), out, hosts, Snapshot{Step: 2, Files: hostFiles(0, 2)})
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "host") {
				t.Fatalf("got %v, want an error with %q", err, c.want)
			}
			t.Log(err)
			if l, _ := List(out); len(l) != 0 {
				t.Errorf("committed %v", l)
			}
		})
	}
}

// TestWriterElection: one writer per directory per host. A second process (or a second writer
// in the same process) is refused while the first holds the election; once the holder dies —
// even by SIGKILL — the next writer is elected. Replicas (local rank ≠ 0) never write.
func TestWriterElection(t *testing.T) {
	r := hostRun{out: filepath.Join(t.TempDir(), "out"), runID: "1", hosts: 1, timeout: time.Second}
	lockDir := filepath.Join(r.out, "..", "host0-tmp")
	holder, _, hout := r.start(t, "hold", 0, 1)
	waitReady(t, hout)
	_, err := NewWriter(WriterConfig{OutputDir: r.out, LockDir: lockDir})
	if !errors.Is(err, ErrWriterHeld) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(holder.Process.Pid)) {
		t.Fatalf("second writer: %v", err)
	}
	t.Log(err)
	holder.Process.Signal(syscall.SIGKILL)
	exitCode(holder)
	w1, err := NewWriter(WriterConfig{OutputDir: r.out, LockDir: lockDir})
	if err != nil {
		t.Fatalf("after the holder died: %v", err)
	}
	if _, err := NewWriter(WriterConfig{OutputDir: r.out + "/", LockDir: lockDir}); !errors.Is(err, ErrWriterHeld) {
		t.Fatalf("second writer in the same process: %v", err)
	}
	// Another output directory has its own writer.
	w2, err := NewWriter(WriterConfig{OutputDir: r.out + "-other", LockDir: lockDir})
	if err != nil {
		t.Fatal(err)
	}
	w2.Close()
	w1.Close()
	w3, err := NewWriter(WriterConfig{OutputDir: r.out, LockDir: lockDir})
	if err != nil {
		t.Fatalf("after Close: %v", err)
	}
	w3.Close()
	if _, err := NewWriter(WriterConfig{OutputDir: r.out, LocalRank: 1}); err == nil || !strings.Contains(err.Error(), "LocalRank") {
		t.Fatalf("local rank 1: %v", err)
	}
}

func TestHostsValidate(t *testing.T) {
	for _, c := range []struct {
		h    Hosts
		want string
	}{
		{Hosts{Count: -1}, "Count"},
		{Hosts{Host: 1}, "Host"},
		{Hosts{Host: 3, Count: 3, RunID: "ab"}, "Host"},
		{Hosts{Host: 0, Count: 2}, "RunID"},
		{Hosts{Host: 0, Count: 2, RunID: "../x"}, "RunID"},
		{Hosts{Host: 0, Count: 2, RunID: "ab", CommitTimeout: -1}, "CommitTimeout"},
	} {
		err := c.h.Validate()
		if err == nil || !strings.Contains(err.Error(), "checkpoint.Hosts."+c.want) {
			t.Errorf("%+v: %v, want an error naming %s", c.h, err, c.want)
		}
	}
	if err := (Hosts{Host: 1, Count: 2, RunID: "ab"}).Validate(); err != nil {
		t.Error(err)
	}
}

// TestPrimaryStartKeepsCurrentRun: parts of the current attempt that reach the shared directory
// before the primary's writer starts survive its Cleanup and are committed with its save.
func TestPrimaryStartKeepsCurrentRun(t *testing.T) {
	out := t.TempDir()
	hosts := Hosts{Host: 1, Count: 2, RunID: "c0ffee", CommitTimeout: 5 * time.Second}
	if err := WritePart(out, hosts, Snapshot{Step: 1, Files: hostFiles(1, 1)}); err != nil {
		t.Fatal(err)
	}
	hosts.Host = 0
	w, err := NewWriter(WriterConfig{OutputDir: out, LockDir: t.TempDir(), Hosts: hosts})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Save(context.Background(), Snapshot{Step: 1, Files: hostFiles(0, 1)}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(filepath.Join(out, "checkpoint-1"), "weights.bin", "rng_state_host1.bin"); err != nil {
		t.Fatal(err)
	}
}
