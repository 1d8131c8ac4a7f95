package models

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/internal/safetensors"
	"github.com/gotpu/gotpu/models/internal/reftest"
)

func TestLoadFixturesThroughDispatcher(t *testing.T) {
	rt := openGo(t)
	want := map[string]string{"gpt2": "GPT2LMHeadModel", "llama": "LlamaForCausalLM", "bert": "BertForSequenceClassification"}
	want["gemma3"] = "Gemma3ForCausalLM"
	for _, f := range fixtures {
		m, err := Load(context.Background(), rt, fixtureDir(t, f.name), LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if m.Architecture() != want[f.kind] {
			t.Errorf("%s: architecture %s", f.name, m.Architecture())
		}
		ref := reftest.Read(t, f.name)
		logits, loss := logitsOf(t, rt, m, ref)
		if d := reftest.MaxAbsDiff(logits, ref.FlatLogits(t)); d > 1e-4 {
			t.Errorf("%s: max logits diff %.3g", f.name, d)
		}
		if math.Abs(loss-ref.Loss) > 1e-5 {
			t.Errorf("%s: loss %.8g, want %.8g", f.name, loss, ref.Loss)
		}
	}
}

// dirFiles reads every file of a directory.
func dirFiles(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

// tensorBytes maps each tensor of a model directory's weights to its dtype and bytes.
func tensorBytes(t testing.TB, dir string) map[string]string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	out := map[string]string{}
	for _, p := range files {
		f, err := safetensors.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range f.Names() {
			info, _ := f.Info(n)
			b, _ := f.Bytes(n)
			out[n] = string(info.DType) + ":" + string(b)
		}
		f.Close()
	}
	return out
}

// Save, load, save again: byte-identical directories, weights bit-identical to the fixture, and
// the reloaded model computes the same logits bit for bit.
func TestSaveLoadSaveByteIdentical(t *testing.T) {
	rt := openGo(t)
	for _, f := range fixtures {
		t.Run(f.name, func(t *testing.T) {
			ref := reftest.Read(t, f.name)
			m, err := Load(context.Background(), rt, fixtureDir(t, f.name), LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			before, _ := logitsOf(t, rt, m, ref)
			d1, d2 := t.TempDir(), t.TempDir()
			if err := m.Save(d1, SaveOptions{}); err != nil {
				t.Fatal(err)
			}
			m2, err := Load(context.Background(), rt, d1, LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := m2.Save(d2, SaveOptions{}); err != nil {
				t.Fatal(err)
			}
			f1, f2 := dirFiles(t, d1), dirFiles(t, d2)
			if len(f1) != 2 || len(f2) != 2 {
				t.Fatalf("saved files %v / %v, want config.json and model.safetensors", keys(f1), keys(f2))
			}
			for name, b := range f1 {
				if !bytes.Equal(b, f2[name]) {
					t.Errorf("%s differs between the first and second save", name)
				}
			}
			orig, saved := tensorBytes(t, fixtureDir(t, f.name)), tensorBytes(t, d1)
			for name, b := range orig {
				sn := name
				if f.kind == "gpt2" {
					sn = "transformer." + name // gotpu writes save_pretrained's naming
				}
				if saved[sn] != b {
					t.Errorf("tensor %s changed in the round trip", name)
				}
			}
			if len(orig) != len(saved) {
				t.Errorf("%d tensors saved, fixture has %d", len(saved), len(orig))
			}
			after, _ := logitsOf(t, rt, m2, ref)
			if !slices.Equal(before, after) {
				t.Errorf("logits changed after the round trip (max diff %.3g)", reftest.MaxAbsDiff(before, after))
			}
			// The fixtures' configs were written as HF writes them; gotpu writes them back unchanged.
			origCfg, _ := os.ReadFile(filepath.Join(fixtureDir(t, f.name), "config.json"))
			if !bytes.Equal(origCfg, f1["config.json"]) {
				t.Errorf("config.json changed:\n%s\nwant\n%s", f1["config.json"], origCfg)
			}
			var cfg map[string]any
			if err := json.Unmarshal(f1["config.json"], &cfg); err != nil {
				t.Fatal(err)
			}
			if cfg["torch_dtype"] != "float32" && cfg["dtype"] != "float32" { // transformers 4.56+ writes "dtype"
				t.Errorf("saved torch_dtype %v, dtype %v", cfg["torch_dtype"], cfg["dtype"])
			}
		})
	}
}

func keys[V any](m map[string]V) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	slices.Sort(k)
	return k
}

func TestShardedSaveAndLoad(t *testing.T) {
	rt := openGo(t)
	const fixture = "gpt2-tiny"
	ref := reftest.Read(t, fixture)
	m, err := Load(context.Background(), rt, fixtureDir(t, fixture), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before, _ := logitsOf(t, rt, m, ref)
	dir := t.TempDir()
	// A previous single-file save must be replaced, not left beside the shards.
	if err := m.Save(dir, SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	limit, err := ParseSize("150KB")
	if err != nil || limit != 150_000 {
		t.Fatalf("ParseSize: %d, %v", limit, err)
	}
	if err := m.Save(dir, SaveOptions{MaxShardSize: limit}); err != nil {
		t.Fatal(err)
	}
	files := dirFiles(t, dir)
	if _, stale := files["model.safetensors"]; stale {
		t.Fatal("stale model.safetensors left next to the shards")
	}
	var idx struct {
		Metadata  map[string]int64  `json:"metadata"`
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(files["model.safetensors.index.json"], &idx); err != nil {
		t.Fatal(err)
	}
	shards := map[string]bool{}
	for _, s := range idx.WeightMap {
		shards[s] = true
	}
	if len(shards) < 3 {
		t.Fatalf("%d shards, want at least 3", len(shards))
	}
	var total int64
	for s := range shards {
		if !strings.HasSuffix(s, "-of-0000"+string(rune('0'+len(shards)))+".safetensors") {
			t.Errorf("shard name %s", s)
		}
		f, err := safetensors.Open(filepath.Join(dir, s))
		if err != nil {
			t.Fatal(err)
		}
		size := f.Header().DataSize()
		// HF semantics: a shard only exceeds the limit when it holds a single larger tensor.
		if size > limit && len(f.Names()) != 1 {
			t.Errorf("%s holds %d bytes in %d tensors, over the %d limit", s, size, len(f.Names()), limit)
		}
		for _, n := range f.Names() {
			if idx.WeightMap[n] != s {
				t.Errorf("index puts %s in %s, found in %s", n, idx.WeightMap[n], s)
			}
		}
		total += size
		f.Close()
	}
	if idx.Metadata["total_size"] != total {
		t.Errorf("total_size %d, shards hold %d", idx.Metadata["total_size"], total)
	}
	if len(idx.WeightMap) != len(m.Params()) {
		t.Errorf("index lists %d tensors, model has %d", len(idx.WeightMap), len(m.Params()))
	}
	m2, err := Load(context.Background(), rt, dir, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	after, _ := logitsOf(t, rt, m2, ref)
	if !slices.Equal(before, after) {
		t.Error("logits changed through the sharded round trip")
	}
	dir2 := t.TempDir()
	if err := m2.Save(dir2, SaveOptions{MaxShardSize: limit}); err != nil {
		t.Fatal(err)
	}
	for name, b := range dirFiles(t, dir2) {
		if !bytes.Equal(b, files[name]) {
			t.Errorf("%s differs between sharded saves", name)
		}
	}
	// Saving again without a limit removes the shards and the index.
	if err := m2.Save(dir2, SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	if names := keys(dirFiles(t, dir2)); !slices.Equal(names, []string{"config.json", "model.safetensors"}) {
		t.Errorf("after an unsharded save: %v", names)
	}
}

// Half-precision files load (as float32 master weights by default, or as they are with "auto"),
// and a bf16 model saves back bit-exactly.
func TestHalfPrecisionFiles(t *testing.T) {
	rt := openGo(t)
	const fixture = "llama-tiny"
	ref := reftest.Read(t, fixture)
	m, err := Load(context.Background(), rt, fixtureDir(t, fixture), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	full, _ := logitsOf(t, rt, m, ref)
	for _, dt := range []struct{ name, file string }{{"bfloat16", "BF16"}, {"float16", "F16"}} {
		t.Run(dt.name, func(t *testing.T) {
			half := t.TempDir()
			if err := m.Save(half, SaveOptions{DType: dt.name}); err != nil {
				t.Fatal(err)
			}
			for name, b := range tensorBytes(t, half) {
				if !strings.HasPrefix(b, dt.file+":") {
					t.Fatalf("%s saved as %s", name, b[:4])
				}
			}
			master, err := Load(context.Background(), rt, half, LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			lf, _ := logitsOf(t, rt, master, ref)
			tol := map[string]float64{"bfloat16": 0.1, "float16": 0.01}[dt.name]
			if d := reftest.MaxAbsDiff(lf, full); d > tol || d == 0 {
				t.Errorf("float32 master weights from %s: logits differ by %.3g (want 0 < d <= %g)", dt.name, d, tol)
			}
			// float32 master weights saved back as the half type reproduce the file bit for bit.
			back := t.TempDir()
			if err := master.Save(back, SaveOptions{DType: dt.name}); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(dirFiles(t, half)["model.safetensors"], dirFiles(t, back)["model.safetensors"]) {
				t.Error("half -> float32 -> half is not bit-exact")
			}
			native, err := Load(context.Background(), rt, half, LoadOptions{DType: "auto"})
			if dt.name == "float16" && rt.Kind() == "go" {
				// The pure-Go backend has no float16 arithmetic: loading must say so, naming the file.
				if err == nil || !strings.Contains(err.Error(), "cannot compute in float16") || !strings.Contains(err.Error(), "model.safetensors") {
					t.Fatalf("float16 on the pure-Go backend: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ln, _ := logitsOf(t, rt, native, ref)
			if d := reftest.MaxAbsDiff(ln, full); d > 5*tol || math.IsNaN(d) {
				t.Errorf("%s compute: logits differ by %.3g", dt.name, d)
			}
			again := t.TempDir()
			if err := native.Save(again, SaveOptions{}); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(dirFiles(t, half)["model.safetensors"], dirFiles(t, again)["model.safetensors"]) {
				t.Errorf("%s model saved in its own dtype is not bit-exact", dt.name)
			}
		})
	}
}

// pythonWithTorch returns Debian's python3 when it can import torch, or skips the test.
func pythonWithTorch(t *testing.T) string {
	const py = "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		t.Skipf("skipping: %s not installed (apt-get install python3-torch python3-numpy)", py)
	}
	if out, err := exec.Command(py, "-c", "import torch, numpy").CombinedOutput(); err != nil {
		t.Skipf("skipping: %s cannot import torch (apt-get install python3-torch python3-numpy): %s", py, strings.TrimSpace(string(out)))
	}
	return py
}

// What gotpu saves loads in the independent PyTorch reference implementation with exactly the
// logits the original fixture gives there, and within float32 rounding of gotpu's own.
func TestPythonLoadsSavedModels(t *testing.T) {
	py := pythonWithTorch(t)
	rt := openGo(t)
	type job struct {
		Kind string `json:"kind"`
		Dir  string `json:"dir"`
		Ref  string `json:"ref"`
	}
	var jobs []job
	ours := map[string][]float64{}
	for _, f := range fixtures {
		m, err := Load(context.Background(), rt, fixtureDir(t, f.name), LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := m.Save(dir, SaveOptions{}); err != nil {
			t.Fatal(err)
		}
		ours[f.name], _ = logitsOf(t, rt, m, reftest.Read(t, f.name))
		refPath := filepath.Join(fixtureDir(t, f.name), "reference.json")
		jobs = append(jobs, job{f.kind, fixtureDir(t, f.name), refPath}, job{f.kind, dir, refPath})
	}
	tmp := t.TempDir()
	jobsPath, outPath := filepath.Join(tmp, "jobs.json"), filepath.Join(tmp, "out.json")
	b, _ := json.Marshal(jobs)
	if err := os.WriteFile(jobsPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(reftest.Dir(t), "reference", "run_saved.py")
	if out, err := exec.Command(py, script, jobsPath, outPath).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	var res []struct {
		Logits []float64 `json:"logits"`
	}
	b, _ = os.ReadFile(outPath)
	if err := json.Unmarshal(b, &res); err != nil || len(res) != len(jobs) {
		t.Fatalf("%d results for %d jobs: %v", len(res), len(jobs), err)
	}
	for i, f := range fixtures {
		fromFixture, fromSaved := res[2*i].Logits, res[2*i+1].Logits
		if len(fromSaved) == 0 || !slices.Equal(fromFixture, fromSaved) {
			t.Errorf("%s: Python logits differ between the fixture and gotpu's save (max %.3g)", f.name, reftest.MaxAbsDiff(fromFixture, fromSaved))
		}
		d := reftest.MaxAbsDiff(ours[f.name], fromSaved)
		t.Logf("%s: Python float32 logits from gotpu's save vs gotpu: max diff %.3g", f.name, d)
		if d > 1e-4 {
			t.Errorf("%s: max diff %.3g", f.name, d)
		}
	}
}
