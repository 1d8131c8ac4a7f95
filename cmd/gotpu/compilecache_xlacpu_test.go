//go:build !noxla

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/xla/pjrttest"
)

// TestTrainCompilationCacheOnXLACPU: `gotpu train --compilation_cache_dir D` on XLA's CPU plugin
// compiles and stores its programs at the first start; the second start (a new process) loads
// them, says so in its log and trains to the same losses; `gotpu cache` lists what is there; the
// directory also comes from GOTPU_COMPILATION_CACHE_DIR; and --compilation_cache_max_bytes below
// an executable's size keeps it out.
func TestTrainCompilationCacheOnXLACPU(t *testing.T) {
	pjrttest.OpenCPUPlugin(t, 2).Close() // skips without the plugin (fails under CI)
	dir := t.TempDir()
	cache := filepath.Join(dir, "xla-cache")
	source := regexp.MustCompile(`compiled the training step in \S+ s .*source=(\w+)`)
	train := func(name string, env []string, extra ...string) (string, []string) {
		t.Helper()
		args := append([]string{"--device", "cpu", "--num_devices", "2", "--eval_strategy", "no"}, extra...)
		out, errOut := ckptTrainEnv(t, dir, name, env, args...)
		m := source.FindStringSubmatch(errOut)
		if m == nil {
			t.Fatalf("%s: no compiled-training-step line with a source:\n%s", name, errOut)
		}
		return m[1], ckptLosses(t, out)
	}
	src1, loss1 := train("first", nil, "--compilation_cache_dir", cache)
	src2, loss2 := train("second", nil, "--compilation_cache_dir", cache)
	if src1 != "xla" || src2 != "cache" {
		t.Errorf("train step source: first start %q, second %q; want xla, then cache", src1, src2)
	}
	if strings.Join(loss1, ",") != strings.Join(loss2, ",") {
		t.Errorf("losses: first start %v, second %v", loss1, loss2)
	}
	src3, loss3 := train("env", []string{"GOTPU_COMPILATION_CACHE_DIR=" + cache})
	if src3 != "cache" || strings.Join(loss3, ",") != strings.Join(loss1, ",") {
		t.Errorf("GOTPU_COMPILATION_CACHE_DIR: source %q, losses %v; want cache and %v", src3, loss3, loss1)
	}
	out, errOut, code := runGotpu(t, nil, "cache", "--compilation_cache_dir", cache, "--json")
	if code != 0 {
		t.Fatalf("gotpu cache: exit %d\n%s", code, errOut)
	}
	var listing struct {
		Entries []struct {
			Name string            `json:"name"`
			Key  map[string]string `json:"key"`
		} `json:"entries"`
	}
	if err := json.Unmarshal([]byte(out), &listing); err != nil {
		t.Fatalf("gotpu cache --json: %v\n%s", err, out)
	}
	var names []string
	for _, e := range listing.Entries {
		names = append(names, e.Name)
		if e.Key["devices"] != "2" || e.Key["platform"] != "cpu" {
			t.Errorf("entry %s: key devices=%q platform=%q, want 2 and cpu", e.Name, e.Key["devices"], e.Key["platform"])
		}
	}
	if len(names) == 0 || !strings.Contains(strings.Join(names, ","), "gotpu_train_step") {
		t.Errorf("gotpu cache lists %v: want the train step among them", names)
	}
	small := filepath.Join(dir, "small-cache")
	_, _ = train("small", nil, "--compilation_cache_dir", small, "--compilation_cache_max_bytes", "1000")
	if es, _ := os.ReadDir(small); len(es) != 0 {
		t.Errorf("--compilation_cache_max_bytes 1000 stored %d files; no executable is that small", len(es))
	}
	t.Logf("first start %s, second %s, from the environment %s; losses %v; entries %v", src1, src2, src3, loss1, names)
}

// TestTrainCompilationCacheFlagErrors: the cache's flags refuse what cannot work, naming it.
func TestTrainCompilationCacheFlagErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--device", "go", "--compilation_cache_dir", filepath.Join(dir, "c")}, `--compilation_cache_dir ` + filepath.Join(dir, "c") + `: --device go`},
		{[]string{"--device", "cpu", "--compilation_cache_max_bytes", "-1"}, "--compilation_cache_max_bytes -1"},
	} {
		args := append([]string{"train", "--model_name_or_path", tinyModelDir(t), "--train_file", filepath.Join(dir, "none.jsonl"),
			"--output_dir", filepath.Join(dir, "out")}, c.args...)
		_, errOut, code := runGotpu(t, nil, args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("gotpu %v: exit %d, stderr %q; want a usage error naming %s", c.args, code, errOut, c.want)
		}
	}
	// --device auto that picks the pure-Go backend (no accelerator plugin here) caches nothing:
	// the flag is not refused (auto may find a TPU elsewhere) but it says so.
	out, _, _ := runGotpu(t, nil, "devices", "--json")
	if !strings.Contains(out, `"backend":"go"`) {
		t.Skipf("--device auto picks an accelerator on this machine: %s", out)
	}
	ids := filepath.Join(dir, "ids.jsonl")
	if err := os.WriteFile(ids, []byte(`{"input_ids": [1, 2, 3]}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(dir, "auto-cache")
	_, errOut, code := runGotpu(t, nil, "score", "--model", tinyModelDir(t), "--input", ids, "--compilation_cache_dir", cache)
	if code != 0 || !strings.Contains(errOut, "--compilation_cache_dir is unused: --device auto chose the pure-Go backend") {
		t.Errorf("score --compilation_cache_dir on the pure-Go backend (auto): exit %d, stderr %q; want a warning that it is unused", code, errOut)
	}
	if _, err := os.Stat(cache); err == nil {
		t.Errorf("the pure-Go backend created the cache directory %s", cache)
	}
}
