package docs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gotpu/gotpu/xla"
)

// sampleChecks are the checks named by <!-- doccheck: NAME --> comments. Each must be used once:
// a sample dropped from the runbook would otherwise silently stop being checked.
var sampleChecks = map[string]func(t *testing.T, b block){
	"devices-go-text":        checkDevicesGoText,
	"devices-go-json":        checkDevicesGoJSON,
	"devices-tpu-text-shape": checkDevicesTPUTextShape,
	"devices-tpu-json-shape": checkDevicesTPUJSONShape,
	"tpu-missing":            checkTPUMissing,
	"tpu-not-elf":            checkTPUNotELF,
	"resume-no-checkpoint":   checkResumeNoCheckpoint,
	"sigterm":                nil, // checked with output-files, by one preempted run
	"output-files":           nil,
}

// TestRunbookSamples: every output sample and message the runbook quotes is what gotpu prints.
func TestRunbookSamples(t *testing.T) {
	d := readDoc(t, runbook)
	found := map[string]block{}
	for _, b := range d.blocks {
		if b.check == "" {
			continue
		}
		if _, ok := sampleChecks[b.check]; !ok {
			t.Fatalf("%s:%d: unknown doccheck %q", runbook, b.line, b.check)
		}
		if _, dup := found[b.check]; dup {
			t.Fatalf("%s:%d: doccheck %q used twice", runbook, b.line, b.check)
		}
		found[b.check] = b
	}
	for name, check := range sampleChecks {
		b, ok := found[name]
		if !ok {
			t.Errorf("%s: no block is checked by %q", runbook, name)
			continue
		}
		if check != nil {
			t.Run(name, func(t *testing.T) { check(t, b) })
		}
	}
	if sig, ok := found["sigterm"]; ok {
		if files, ok := found["output-files"]; ok {
			t.Run("sigterm+output-files", func(t *testing.T) { checkPreemptedRun(t, sig, files) })
		}
	}
}

// gemmKernel matches the GEMM kernel the backend's description names, which depends on the CPU
// (the runbook shows this machine's avx512); the samples are compared with it masked.
var gemmKernel = regexp.MustCompile(`GEMM \((avx512|avx2|generic)\)`)

func maskKernel(s string) string { return gemmKernel.ReplaceAllString(s, "GEMM (<kernel>)") }

func checkDevicesGoText(t *testing.T, b block) {
	r := run(t, t.TempDir(), nil, gotpu, "devices", "--device", "go", "--num_devices", "2")
	if r.code != 0 || maskKernel(r.stdout) != maskKernel(b.text+"\n") {
		t.Errorf("%s:%d: gotpu devices --device go --num_devices 2 printed (exit %d):\n%s\nthe runbook shows:\n%s",
			runbook, b.line, r.code, r.stdout+r.stderr, b.text)
	}
}

func checkDevicesGoJSON(t *testing.T, b block) {
	r := run(t, t.TempDir(), nil, gotpu, "devices", "--device", "go", "--num_devices", "2", "--json")
	var got, want any
	if err := json.Unmarshal([]byte(maskKernel(r.stdout)), &got); err != nil || r.code != 0 {
		t.Fatalf("gotpu devices --json (exit %d): %v\n%s", r.code, err, r.stdout+r.stderr)
	}
	if err := json.Unmarshal([]byte(maskKernel(b.text)), &want); err != nil {
		t.Fatalf("%s:%d: %v", runbook, b.line, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:%d: gotpu devices --json printed\n%s\nthe runbook shows\n%s", runbook, b.line, r.stdout, b.text)
	}
}

// checkDevicesTPUTextShape: the TPU sample cannot be produced here, but its keys, column layout,
// plugin line and device lines must be those devices.go prints (taken from a real go-backend run).
func checkDevicesTPUTextShape(t *testing.T, b block) {
	r := run(t, t.TempDir(), nil, gotpu, "devices", "--device", "go", "--num_devices", "1")
	goLines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	lines := strings.Split(b.text, "\n")
	const header = 5
	if len(goLines) != header+1 || len(lines) <= header {
		t.Fatalf("unexpected sizes: go output %d lines, sample %d", len(goLines), len(lines))
	}
	keyWidth := len("description  ")
	for i := range header {
		if len(lines[i]) <= keyWidth || lines[i][:keyWidth] != goLines[i][:keyWidth] {
			t.Errorf("%s:%d: line %q should start like gotpu's %q", runbook, b.line+1+i, lines[i], goLines[i][:keyWidth])
		}
	}
	value := func(i int) string { return lines[i][keyWidth:] }
	if value(0) != "tpu" || !strings.HasPrefix(value(2), "tpu /") || value(3) != "compiled in" {
		t.Errorf("%s:%d: backend/plugin/xla lines of the TPU sample: %q", runbook, b.line, lines[:header])
	}
	var n int
	if _, err := fmt.Sscanf(value(4), "%d", &n); err != nil || len(lines) != header+n {
		t.Fatalf("%s:%d: devices %q but %d device lines", runbook, b.line, value(4), len(lines)-header)
	}
	goDev := regexp.MustCompile(`^  0  go  `)
	if !goDev.MatchString(goLines[header]) {
		t.Fatalf("go device line %q changed shape; update this check and the runbook", goLines[header])
	}
	for i := range n {
		if want := fmt.Sprintf("  %d  tpu  ", i); !strings.HasPrefix(lines[header+i], want) {
			t.Errorf("%s:%d: device line %q should start with %q", runbook, b.line+1+header+i, lines[header+i], want)
		}
	}
}

// checkDevicesTPUJSONShape: the TPU JSON sample has exactly xla.Info's keys, a plugin with
// xla.Plugin's keys and devices with xla.Device's keys.
func checkDevicesTPUJSONShape(t *testing.T, b block) {
	var sample map[string]any
	if err := json.Unmarshal([]byte(b.text), &sample); err != nil {
		t.Fatalf("%s:%d: %v", runbook, b.line, err)
	}
	assertKeys(t, "top level", sample, reflect.TypeOf(xla.Info{}))
	plugin, _ := sample["plugin"].(map[string]any)
	assertKeys(t, "plugin", plugin, reflect.TypeOf(xla.Plugin{}))
	devs, _ := sample["devices"].([]any)
	if len(devs) == 0 {
		t.Fatalf("%s:%d: no devices in the TPU JSON sample", runbook, b.line)
	}
	for _, d := range devs {
		dm, _ := d.(map[string]any)
		assertKeys(t, "device", dm, reflect.TypeOf(xla.Device{}))
		if dm["kind"] != "tpu" || dm["virtual"] != false {
			t.Errorf("%s:%d: a TPU device has kind tpu and virtual false: %v", runbook, b.line, dm)
		}
	}
	if sample["backend"] != "tpu" || plugin["kind"] != "tpu" {
		t.Errorf("%s:%d: backend and plugin kind of a TPU run are \"tpu\"", runbook, b.line)
	}
}

func assertKeys(t *testing.T, what string, m map[string]any, typ reflect.Type) {
	t.Helper()
	var want, got []string
	for i := range typ.NumField() {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		want = append(want, name)
	}
	for k := range m {
		got = append(got, k)
	}
	sort.Strings(want)
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Errorf("%s: %s keys %v, %s has %v", runbook, what, got, typ, want)
	}
}

// checkTPUMissing runs gotpu devices --device tpu with nothing but an empty HOME: the message the
// runbook quotes (with its HOME) is what a machine without libtpu prints.
func checkTPUMissing(t *testing.T, b block) {
	home := t.TempDir()
	r := run(t, home, nil, gotpu, "devices", "--device", "tpu")
	if r.code == 0 {
		t.Skip("a TPU plugin is installed on this machine; the missing-libtpu message cannot be produced")
	}
	got := normalizeSpace(strings.ReplaceAll(r.stderr, home, b.args["home"]))
	if r.code != 1 || got != normalizeSpace(b.text) {
		t.Errorf("%s:%d: gotpu devices --device tpu without libtpu (exit %d, runbook says 1) prints\n%s\nthe runbook quotes\n%s",
			runbook, b.line, r.code, got, normalizeSpace(b.text))
	}
}

// checkTPUNotELF points TPU_LIBRARY_PATH at an empty file: the runbook quotes the start of the
// error.
func checkTPUNotELF(t *testing.T, b block) {
	dir := t.TempDir()
	file := filepath.Join(dir, "libtpu.so")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := run(t, dir, []string{"TPU_LIBRARY_PATH=" + file}, gotpu, "devices", "--device", "tpu")
	got := normalizeSpace(strings.ReplaceAll(r.stderr, file, b.args["file"]))
	if r.code != 1 || !strings.HasPrefix(got, normalizeSpace(b.text)) {
		t.Errorf("%s:%d: with TPU_LIBRARY_PATH at an empty file gotpu prints (exit %d)\n%s\nthe runbook quotes the start\n%s",
			runbook, b.line, r.code, got, b.text)
	}
}

// trainFixture writes a pre-tokenized training file from the tiny GPT-2 fixture's reference
// inputs and returns its path and the model directory.
func trainFixture(t *testing.T) (model, trainFile string) {
	t.Helper()
	model, err := filepath.Abs(filepath.Join(repo, "testdata", "models", "gpt2-tiny"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(model, "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		InputIDs [][]int `json:"input_ids"`
	}
	if err := json.Unmarshal(raw, &ref); err != nil || len(ref.InputIDs) == 0 {
		t.Fatalf("%s: input_ids: %v", model, err)
	}
	var sb strings.Builder
	for _, ids := range ref.InputIDs {
		line, _ := json.Marshal(map[string][]int{"input_ids": ids})
		sb.Write(append(line, '\n'))
	}
	trainFile = filepath.Join(t.TempDir(), "train.jsonl")
	if err := os.WriteFile(trainFile, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return model, trainFile
}

func checkResumeNoCheckpoint(t *testing.T, b block) {
	model, train := trainFixture(t)
	out := filepath.Join(t.TempDir(), "run")
	r := run(t, t.TempDir(), nil, gotpu, "train", "--device", "go", "--model_name_or_path", model,
		"--train_file", train, "--per_device_train_batch_size", "1", "--max_steps", "1", "--output_dir", out, "--resume_from_checkpoint", "true")
	got := strings.TrimSpace(strings.ReplaceAll(r.stderr, out, b.args["output_dir"]))
	if r.code != 1 || got != strings.TrimSpace(b.text) {
		t.Errorf("%s:%d: a first run with --resume_from_checkpoint true prints (exit %d, runbook says 1)\n%s\nthe runbook quotes\n%s",
			runbook, b.line, r.code, got, b.text)
	}
}

var checkpointDirRe = regexp.MustCompile(`^checkpoint-([0-9]+)(/|$)`)

// checkPreemptedRun preempts a real `gotpu train` with SIGTERM once it is training, then checks
// that it exits 0 with the message the runbook quotes and leaves exactly the files it lists.
func checkPreemptedRun(t *testing.T, msg, files block) {
	model, train := trainFixture(t)
	out := filepath.Join(t.TempDir(), "run")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, gotpu, "train", "--device", "go", "--model_name_or_path", model,
		"--train_file", train, "--per_device_train_batch_size", "1", "--max_steps", "1000000",
		"--save_steps", "1000000", "--logging_steps", "1", "--disable_tqdm", "true", "--output_dir", out)
	cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }() // ends when the process does; ctx bounds it
	// Preempt once training has logged a step (log_history.jsonl has a line).
	for training := false; !training; {
		select {
		case err := <-exited:
			t.Fatalf("gotpu train ended before SIGTERM: %v\n%s", err, stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		st, err := os.Stat(filepath.Join(out, "log_history.jsonl"))
		training = err == nil && st.Size() > 0
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err != nil {
		t.Fatalf("gotpu train after SIGTERM: %v (the runbook says it exits 0)\n%s", err, stderr.String())
	}

	pattern := "^" + strings.ReplaceAll(regexp.QuoteMeta(strings.ReplaceAll(strings.TrimSpace(msg.text), msg.args["output_dir"], out)),
		regexp.QuoteMeta("<N>"), "([0-9]+)") + "$"
	last := strings.TrimSpace(stdout.String())
	if i := strings.LastIndexByte(last, '\n'); i >= 0 {
		last = last[i+1:]
	}
	m := regexp.MustCompile(pattern).FindStringSubmatch(last)
	if m == nil {
		t.Errorf("%s:%d: after SIGTERM gotpu train printed\n%s\nthe runbook quotes\n%s", runbook, msg.line, last, msg.text)
	}

	var got []string
	err := filepath.WalkDir(out, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(out, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if cm := checkpointDirRe.FindStringSubmatch(rel); cm != nil {
			if m != nil && cm[1] != m[1] {
				t.Errorf("checkpoint %s is not at the step the message names (%s)", rel, m[1])
			}
			rel = checkpointDirRe.ReplaceAllString(rel, "checkpoint-<N>$2")
		}
		got = append(got, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Split(strings.TrimSpace(files.text), "\n")
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s:%d: a run stopped by SIGTERM leaves\n%s\nthe runbook lists\n%s", runbook, files.line,
			strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
