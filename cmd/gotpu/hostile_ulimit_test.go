package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gotpu/gotpu/data/table/tabletest"
	"github.com/gotpu/gotpu/hub/hubtest"
)

// The hostile inputs of issue 38 given to gotpu commands as a user would, under an
// address-space limit of 2 GiB (`ulimit -v 2097152`).
//
// The hostile dataset files of issue 38 (findings 4, 5, 6 and 10), given to `gotpu train` as a
// user would, under an address-space limit of 2 GiB (`ulimit -v 2097152`): none may kill the
// process with an out-of-memory error or run on; each ends within 30 s, with an error naming the
// file and the limit it passed. The Parquet file of 5,000 rows of one 1 MiB string is legitimate
// (finding 10: refusing it was the bug): it decodes to 5 GiB of text, which takes a quarter of an
// hour to tokenize, with bounded memory; it must be still running, not dead, after 10 s, and
// stop on SIGINT with the spill file of its token blocks removed.

// hostileLimitKiB is the address-space limit the commands run under, in KiB (ulimit -v).
const hostileLimitKiB = 2 << 20

// hostileDeadline is how long one command may take.
const hostileDeadline = 30 * time.Second

// writeLines writes path from a generator of its bytes, buffered.
func writeGenerated(t *testing.T, path string, gen func(w *bufio.Writer)) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	gen(w)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// nestedText writes a record whose "text" is depth nested arrays, each level padded with pad
// (finding 4: typing the first row re-parsed the rest of the value at each level).
func nestedText(w *bufio.Writer, depth int, pad string) {
	w.WriteString(`{"text": `)
	w.WriteString(strings.Repeat("[", depth))
	w.WriteString("1")
	for range depth {
		w.WriteString(`,"` + pad + `"]`)
	}
	w.WriteString("}")
}

// manyKeysRecord writes one object of n keys besides "text" (finding 5: 5M keys in 54 MB).
func manyKeysRecord(w *bufio.Writer, n int) {
	w.WriteString(`{"text": "x"`)
	for i := range n {
		w.WriteString(`,"k`)
		w.WriteString(strconv.Itoa(i))
		w.WriteString(`":0`)
	}
	w.WriteString("}")
}

// writeFanOutDataset writes a local dataset of 2,000 small CSV files whose README lists 20,000
// distinct globs that each match every file for split train (finding 6).
func writeFanOutDataset(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 2000 {
		if err := os.WriteFile(filepath.Join(dir, "data", fmt.Sprintf("f%05d.csv", i)), []byte("text\nhello world\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeGenerated(t, filepath.Join(dir, "README.md"), func(w *bufio.Writer) {
		w.WriteString("---\nconfigs:\n- config_name: default\n  data_files:\n  - split: train\n    path:\n")
		for i := range 20000 {
			letters := ""
			for j := i; ; j /= 26 {
				letters += string(rune('a' + j%26))
				if j < 26 {
					break
				}
			}
			fmt.Fprintf(w, "    - \"data/*[!%s].csv\"\n", letters)
		}
		w.WriteString("---\n# fan-out\n")
	})
}

// hostileCase is one hostile source and what its error must name.
type hostileCase struct {
	name  string   // file or directory name in the test's directory
	flags []string // how the source is given, besides the common flags
	want  []string // what the error must name besides the file: the limit
	legit bool     // a legitimate file too large to finish: interrupted after legitRun
}

// legitRun is how long a legitimate file's run goes before it is interrupted.
const legitRun = 10 * time.Second

// TestHostileDataFilesUnder2GB runs `gotpu train` on each hostile file under `ulimit -v 2097152`.
func TestHostileDataFilesUnder2GB(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("ulimit -v: linux")
	}
	if testing.Short() {
		t.Skip("writes about 120 MB of hostile files")
	}
	dir := t.TempDir()
	model := filepath.Join(dir, "model")
	makeTinyGPT2Dir(t, model)
	pad := strings.Repeat("p", 1000)
	writeGenerated(t, filepath.Join(dir, "nested.jsonl"), func(w *bufio.Writer) { nestedText(w, 998, pad); w.WriteString("\n") })
	writeGenerated(t, filepath.Join(dir, "deep.jsonl"), func(w *bufio.Writer) {
		w.WriteString(`{"text": "x", "meta": `)
		nestedText(w, 5000, pad[:400])
		w.WriteString("}\n")
	})
	writeGenerated(t, filepath.Join(dir, "deep.json"), func(w *bufio.Writer) {
		w.WriteString("[")
		nestedText(w, 5000, pad[:400])
		w.WriteString("]")
	})
	writeGenerated(t, filepath.Join(dir, "commas.csv"), func(w *bufio.Writer) {
		w.WriteString("text")
		w.Write(bytes.Repeat([]byte{','}, 50<<20))
		w.WriteString("\nhello\n")
	})
	writeGenerated(t, filepath.Join(dir, "keys.jsonl"), func(w *bufio.Writer) { manyKeysRecord(w, 5_000_000); w.WriteString("\n") })
	writeGenerated(t, filepath.Join(dir, "keys.json"), func(w *bufio.Writer) {
		w.WriteString("[")
		manyKeysRecord(w, 5_000_000)
		w.WriteString("]")
	})
	writeGenerated(t, filepath.Join(dir, "messages.jsonl"), func(w *bufio.Writer) {
		w.WriteString(`{"messages": [`)
		w.Write(bytes.Repeat([]byte("{},"), 20<<20))
		w.WriteString("{}]}\n")
	})
	if err := tabletest.WriteRepeatedParquet(filepath.Join(dir, "dict.parquet"), 0, 5000, 1<<20, true); err != nil {
		t.Fatal(err)
	}
	writeFanOutDataset(t, filepath.Join(dir, "fanout"))

	levels := []string{"1000", "levels"}
	keys := []string{"65536"}
	sftFlags := []string{"--packing", "--train_file"}
	cases := []hostileCase{
		{name: "nested.jsonl", want: []string{"text"}},
		{name: "deep.jsonl", want: levels},
		{name: "deep.json", want: levels},
		{name: "commas.csv", want: []string{"65536", "fields"}},
		{name: "keys.jsonl", want: keys},
		{name: "keys.json", want: keys},
		{name: "dict.parquet", legit: true},
		// TRL's SFT preparation (--packing) reads rows its own way.
		{name: "keys.jsonl", flags: sftFlags, want: keys},
		{name: "keys.json", flags: sftFlags, want: keys},
		{name: "deep.jsonl", flags: sftFlags, want: levels},
		{name: "messages.jsonl", flags: sftFlags, want: []string{"65536", "messages"}},
		{name: "fanout", flags: []string{"--dataset_name"}, want: []string{"README.md", "data_files"}},
	}
	for _, c := range cases {
		name := c.name
		if len(c.flags) > 0 {
			name += "_" + strings.TrimLeft(c.flags[0], "-")
		}
		t.Run(name, func(t *testing.T) {
			src := []string{"--train_file", filepath.Join(dir, c.name)}
			if len(c.flags) > 0 {
				src = append(c.flags, filepath.Join(dir, c.name))
			}
			args := append([]string{"train", "--model_name_or_path", model, "--output_dir", filepath.Join(t.TempDir(), "out"),
				"--block_size", "32", "--max_steps", "1", "--save_strategy", "no", "--device", "go"}, src...)
			tmp := t.TempDir() // where token blocks spill
			start := time.Now()
			run := limitRun{tmp: tmp}
			if c.legit {
				run.interrupt = legitRun
			}
			_, stderr, code, err := runUnderLimit(t, hostileLimitKiB, hostileDeadline, run, args...)
			took := time.Since(start)
			last := lastLines(stderr, 3)
			t.Logf("%s: exit %d in %v: %s", c.name, code, took.Round(time.Millisecond), last)
			if err != nil {
				t.Fatalf("%s: %v (stderr %s)", c.name, err, last)
			}
			if bad := diedOf(stderr); bad != "" {
				t.Fatalf("%s: the process died (%q):\n%s", c.name, bad, last)
			}
			if c.legit {
				if code != 130 || !strings.Contains(last, "stopped by SIGINT") {
					t.Errorf("%s: exit %d after SIGINT, want 130 and \"stopped by SIGINT\":\n%s", c.name, code, last)
				}
				if left, _ := os.ReadDir(tmp); len(left) > 0 {
					t.Errorf("%s: %s left in the temporary directory after SIGINT", c.name, left[0].Name())
				}
				return
			}
			if code != 1 {
				t.Fatalf("%s: exit %d, want 1 (an error)", c.name, code)
			}
			for _, part := range append([]string{c.name}, c.want...) {
				if !strings.Contains(last, part) {
					t.Errorf("%s: the error does not name %q:\n%s", c.name, part, last)
				}
			}
		})
	}
}

// limitRun is how runUnderLimit runs a command besides its arguments.
type limitRun struct {
	tmp       string        // TMPDIR ("" leaves it)
	stdin     string        // the command's standard input
	env       []string      // added to the environment
	interrupt time.Duration // > 0: the command must still run then, and is sent SIGINT
}

// runUnderLimit runs gotpu under `ulimit -v limitKiB`, killed after deadline (an error then),
// and returns its stdout, stderr and exit status.
func runUnderLimit(t *testing.T, limitKiB int, deadline time.Duration, o limitRun, args ...string) (string, string, int, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	script := fmt.Sprintf(`ulimit -v %d && exec "$0" "$@"`, limitKiB)
	cmd := exec.CommandContext(ctx, "/bin/sh", append([]string{"-c", script, gotpuBin}, args...)...)
	cmd.Env = append(os.Environ(), "GOTPU_PLUGIN_PATH=")
	if o.tmp != "" {
		cmd.Env = append(cmd.Env, "TMPDIR="+o.tmp)
	}
	cmd.Env = append(cmd.Env, o.env...)
	cmd.Stdin = strings.NewReader(o.stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		return "", "", -1, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	if o.interrupt > 0 {
		select {
		case err := <-done:
			return stdout.String(), stderr.String(), -1, fmt.Errorf("ended (%v), want it still running after %v", err, o.interrupt)
		case <-time.After(o.interrupt):
			if status, rerr := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)); rerr == nil {
				for _, l := range strings.Split(string(status), "\n") {
					if strings.HasPrefix(l, "VmPeak") || strings.HasPrefix(l, "VmHWM") {
						t.Logf("after %v: %s", o.interrupt, strings.Join(strings.Fields(l), " "))
					}
				}
			}
			if err := cmd.Process.Signal(os.Interrupt); err != nil {
				return stdout.String(), stderr.String(), -1, err
			}
		}
	}
	err := <-done
	if ctx.Err() != nil {
		return stdout.String(), stderr.String(), -1, fmt.Errorf("still running after %v", deadline)
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return stdout.String(), stderr.String(), ee.ExitCode(), nil
	}
	if err != nil {
		return stdout.String(), stderr.String(), -1, err
	}
	return stdout.String(), stderr.String(), 0, nil
}

// diedOf returns what in stderr says the process died instead of returning an error ("" if
// nothing does).
func diedOf(stderr string) string {
	for _, bad := range []string{"out of memory", "fatal error", "panic:", "goroutine "} {
		if strings.Contains(stderr, bad) {
			return bad
		}
	}
	return ""
}

// lastLines returns the last n non-empty lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestHostileTemplatesAndAdaptersUnder2GB: the chat templates of findings 2 and 3 (a value
// doubled 40 times and compared; a 100 MB string split into 50M pieces) and the adapters of
// findings 1 and 7 (a target regex nested 999 deep; adapter weights far larger than its config
// implies, on the Hub) end, under `ulimit -v 2097152` and within 30 s, with an error naming the
// file and the limit: no out-of-memory death, no panic.
func TestHostileTemplatesAndAdaptersUnder2GB(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("ulimit -v: linux")
	}
	split := filepath.Join(t.TempDir(), "tokenizer_config.json")
	b, err := json.Marshal(map[string]string{"chat_template": "{% set s = 'a,' * 50000000 %}{{ s.split(',') | length }}"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(split, b, 0o644); err != nil {
		t.Fatal(err)
	}
	doubling := doublingChatConfig(t)
	slow := `{"messages": [{"role": "user", "content": "slow"}]}` + "\n"

	deep := strings.Repeat("(", 999) + "a" + strings.Repeat(")", 999)
	regexAdapter := adapterVariant(t, filepath.Join(t.TempDir(), "regex"), func(c map[string]any) { c["target_modules"] = deep }, "adapter_model.safetensors")
	s := hubtest.New(t)
	cfg, err := os.ReadFile(filepath.Join(loraFixtureDir("gpt2-lora-tiny"), "adapter_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	s.AddRepo("model", "org/lora-big", map[string][]byte{"adapter_config.json": cfg, "adapter_model.safetensors": hubtest.Noise(32<<20, 7)}, hubtest.RepoOptions{})
	env := hubEnv(t, s, filepath.Join(t.TempDir(), "hub"))
	base := baseModelDir("gpt2-tiny")

	for _, c := range []struct {
		name   string
		run    limitRun
		args   []string
		code   int
		inLast []string // in the error's line: the file and the limit
	}{
		{"doubling template", limitRun{stdin: slow}, []string{"chat-template", "--tokenizer_config", doubling}, 0, []string{doubling, "MaxSteps"}},
		{"split template", limitRun{stdin: slow}, []string{"chat-template", "--tokenizer_config", split}, 0, []string{split, "MaxBytes"}},
		{"adapter regex", limitRun{}, []string{"merge", "--model", base, "--adapter", regexAdapter, "--output", filepath.Join(t.TempDir(), "m"), "--device", "go"},
			1, []string{"adapter_config.json: LoraConfig.target_modules", "nests too deeply"}},
		{"adapter weights", limitRun{env: env}, []string{"merge", "--model", base, "--adapter", "org/lora-big", "--output", filepath.Join(t.TempDir(), "m"), "--device", "go"},
			1, []string{"adapter_model.safetensors", "over the limit of"}},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			start := time.Now()
			stdout, stderr, code, err := runUnderLimit(t, hostileLimitKiB, hostileDeadline, c.run, c.args...)
			out := lastLines(stdout+stderr, 2)
			t.Logf("exit %d in %v: %.400s", code, time.Since(start).Round(time.Millisecond), out)
			if err != nil {
				t.Fatalf("%v (output %.600s)", err, out)
			}
			if bad := diedOf(stderr); bad != "" {
				t.Fatalf("the process died (%q):\n%.600s", bad, lastLines(stderr, 5))
			}
			if code != c.code {
				t.Errorf("exit %d, want %d", code, c.code)
			}
			for _, part := range c.inLast {
				if !strings.Contains(out, part) {
					t.Errorf("the error does not name %q:\n%.600s", part, out)
				}
			}
		})
	}
}
