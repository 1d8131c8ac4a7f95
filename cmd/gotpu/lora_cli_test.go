package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/hub/hubtest"
	"github.com/gotpu/gotpu/internal/safetensors"
)

// loraCLIRef is the part of a LoRA fixture's reference.json (testdata/models/lora/*) that the
// score and merge tests read: the batch, base + adapter logits and loss, and the checksums of
// every tensor of merge_and_unload's model (checksum_def: sum, abs_sum, sq_sum, weighted_sum
// with weights ((i % 13) - 6) / 6).
type loraCLIRef struct {
	InputIDs [][]int `json:"input_ids"`
	Logits   struct {
		Values [][][]float64 `json:"values"`
	} `json:"logits"`
	Loss          float64 `json:"loss"`
	BaseLoss      float64 `json:"base_loss"`
	MergedInitial struct {
		Tensors map[string]struct {
			Shape       []int   `json:"shape"`
			Sum         float64 `json:"sum"`
			AbsSum      float64 `json:"abs_sum"`
			SqSum       float64 `json:"sq_sum"`
			WeightedSum float64 `json:"weighted_sum"`
		} `json:"tensors"`
	} `json:"merged_initial"`
}

func readLoraCLIRef(t *testing.T, fixture string) *loraCLIRef {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(loraFixtureDir(fixture), "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref loraCLIRef
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	return &ref
}

func baseModelDir(base string) string {
	return filepath.Join("..", "..", "testdata", "models", base)
}

// writeIDs writes the fixture's batch as score's input: input_ids only, so labels are input_ids
// (shifted inside), as the reference's loss has them.
func writeIDs(t *testing.T, ref *loraCLIRef, path string) {
	t.Helper()
	var sb strings.Builder
	for _, ids := range ref.InputIDs {
		b, _ := json.Marshal(map[string]any{"input_ids": ids})
		sb.Write(append(b, '\n'))
	}
	if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// scoreLoss runs `gotpu score` and returns the batch's loss: the mean of the per-example losses,
// which is the reference's mean over all B·(T−1) tokens because every row has the same length
// and no padding.
func scoreLoss(t *testing.T, input string, args ...string) float64 {
	t.Helper()
	out, errOut, code := runGotpu(t, nil, append([]string{"score", "--input", input, "--device", "go"}, args...)...)
	if code != 0 {
		t.Fatalf("gotpu score %v: exit %d\n%s", args, code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	sum := 0.0
	for _, l := range lines {
		var r struct {
			Loss *float64 `json:"loss"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil || r.Loss == nil {
			t.Fatalf("score output line %q: want {\"loss\": x} (%v)", l, err)
		}
		sum += *r.Loss
	}
	return sum / float64(len(lines))
}

// TestScoreAdapterReproducesFixtures: `gotpu score --adapter_name_or_path` on each fixture's
// batch gives PEFT's loss (1e-5) and logits (max |d| ≤ 1e-5, from the --logits file); the base
// alone gives the base's loss, so the adapter is what moves it (by 0.03 on gpt2, 5.4 in logits
// on llama: far above the tolerance).
func TestScoreAdapterReproducesFixtures(t *testing.T) {
	for fixture, base := range loraFixtureBases {
		t.Run(fixture, func(t *testing.T) {
			ref := readLoraCLIRef(t, fixture)
			dir := t.TempDir()
			input := filepath.Join(dir, "batch.jsonl")
			writeIDs(t, ref, input)
			logitsPath := filepath.Join(dir, "logits.safetensors")
			loss := scoreLoss(t, input, "--model", baseModelDir(base), "--adapter_name_or_path", loraFixtureDir(fixture), "--logits", logitsPath)
			if d := math.Abs(loss - ref.Loss); d > 1e-5 {
				t.Errorf("loss %.9f, reference %.9f (|d| %.2g > 1e-5)", loss, ref.Loss, d)
			}
			vals, shapes, err := safetensors.ReadFloat32File(logitsPath)
			if err != nil {
				t.Fatal(err)
			}
			want := []int{len(ref.Logits.Values), len(ref.Logits.Values[0]), len(ref.Logits.Values[0][0])}
			if !slices.Equal(shapes["logits"], want) {
				t.Fatalf("logits shape %v, reference %v", shapes["logits"], want)
			}
			got := vals["logits"]
			worst, i := 0.0, 0
			for _, row := range ref.Logits.Values {
				for _, pos := range row {
					for _, w := range pos {
						worst = max(worst, math.Abs(float64(got[i])-w))
						i++
					}
				}
			}
			if worst > 1e-5 {
				t.Errorf("logits max |d| %.3g > 1e-5", worst)
			}
			baseLoss := scoreLoss(t, input, "--model", baseModelDir(base))
			if d := math.Abs(baseLoss - ref.BaseLoss); d > 1e-5 {
				t.Errorf("base model alone: loss %.9f, reference %.9f", baseLoss, ref.BaseLoss)
			}
			t.Logf("loss %.9f (reference %.9f, |d| %.2g); logits max |d| %.2g over %d values; base alone %.9f (reference %.9f)",
				loss, ref.Loss, math.Abs(loss-ref.Loss), worst, len(got), baseLoss, ref.BaseLoss)
		})
	}
}

// checkMergedChecksums compares every tensor of the model file at path with the fixture's
// merged_initial checksums (abs_sum, sq_sum 1e-5 relative; sum, weighted_sum 1e-4 absolute:
// they can be near 0) and requires the same tensor set. GPT-2's reference names lack the
// "transformer." prefix its saved names have. It returns the worst relative and absolute
// differences.
func checkMergedChecksums(t *testing.T, ref *loraCLIRef, files ...string) (worstRel, worstAbs float64) {
	t.Helper()
	seen := map[string]bool{}
	for _, path := range files {
		vals, shapes, err := safetensors.ReadFloat32File(path)
		if err != nil {
			t.Fatal(err)
		}
		for name, v := range vals {
			refName := strings.TrimPrefix(name, "transformer.")
			w, ok := ref.MergedInitial.Tensors[refName]
			if !ok {
				t.Errorf("%s: tensor %s is not in the reference's merged model", path, name)
				continue
			}
			seen[refName] = true
			if !slices.Equal(shapes[name], w.Shape) {
				t.Errorf("%s: shape %v, reference %v", name, shapes[name], w.Shape)
				continue
			}
			var sum, abs, sq, weighted float64
			for i, x := range v {
				x := float64(x)
				sum += x
				abs += math.Abs(x)
				sq += x * x
				weighted += x * (float64(i%13) - 6) / 6
			}
			rel := func(a, b float64) float64 { return math.Abs(a-b) / max(math.Abs(b), 1e-30) }
			r := max(rel(abs, w.AbsSum), rel(sq, w.SqSum))
			a := max(math.Abs(sum-w.Sum), math.Abs(weighted-w.WeightedSum))
			if r > 1e-5 || a > 1e-4 {
				t.Errorf("%s: sum %.9g abs_sum %.9g sq_sum %.9g weighted_sum %.9g; reference %.9g %.9g %.9g %.9g",
					name, sum, abs, sq, weighted, w.Sum, w.AbsSum, w.SqSum, w.WeightedSum)
			}
			worstRel, worstAbs = max(worstRel, r), max(worstAbs, a)
		}
	}
	for name := range ref.MergedInitial.Tensors {
		if !seen[name] {
			t.Errorf("the merged model lacks the reference's tensor %s", name)
		}
	}
	return worstRel, worstAbs
}

// TestMergeAdapterFixtures: `gotpu merge` writes PEFT's merge_and_unload model (every tensor's
// checksums equal to merged_initial's, the same tensor set, no adapter file) as a plain HF
// directory, prints it, and the merged model scores the adapted model's loss without an adapter.
func TestMergeAdapterFixtures(t *testing.T) {
	for fixture, base := range loraFixtureBases {
		t.Run(fixture, func(t *testing.T) {
			ref := readLoraCLIRef(t, fixture)
			dir := t.TempDir()
			out := filepath.Join(dir, "merged")
			stdout, errOut, code := runGotpu(t, nil, "merge", "--model", baseModelDir(base), "--adapter", loraFixtureDir(fixture),
				"--output", out, "--device", "go")
			if code != 0 {
				t.Fatalf("gotpu merge: exit %d\n%s", code, errOut)
			}
			if stdout != out+"\n" {
				t.Errorf("stdout %q, want the output directory %q on one line", stdout, out)
			}
			names := dirNames(t, out)
			if want := []string{"config.json", "model.safetensors"}; !slices.Equal(names, want) {
				t.Errorf("%s holds %v, want %v", out, names, want)
			}
			worstRel, worstAbs := checkMergedChecksums(t, ref, filepath.Join(out, "model.safetensors"))
			input := filepath.Join(dir, "batch.jsonl")
			writeIDs(t, ref, input)
			loss := scoreLoss(t, input, "--model", out)
			if d := math.Abs(loss - ref.Loss); d > 1e-5 {
				t.Errorf("merged model's loss %.9f, reference %.9f (|d| %.2g > 1e-5)", loss, ref.Loss, d)
			}
			t.Logf("%d tensors: checksums worst rel %.2g (abs_sum, sq_sum), worst abs %.2g (sum, weighted_sum); merged loss %.9f (reference %.9f, |d| %.2g)",
				len(ref.MergedInitial.Tensors), worstRel, worstAbs, loss, ref.Loss, math.Abs(loss-ref.Loss))
		})
	}
}

// dirNames lists a directory's entries, sorted.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names
}

func copyTree(t *testing.T, src, dst string, skip ...string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range dirNames(t, src) {
		if slices.Contains(skip, name) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMergeIntoExistingDirectory: the merged directory carries the base's tokenizer files and
// generation_config.json; an existing --output is overwritten as save_pretrained overwrites (a
// stale weights file of an earlier save removed, other files kept); --max_shard_size shards the
// weights, which still hold merge_and_unload's tensors and score the adapted loss; and
// `gotpu generate` on the merged directory gives what the adapter gives on the base.
func TestMergeIntoExistingDirectory(t *testing.T) {
	const fixture, base = "gpt2-lora-tiny", "gpt2-tiny"
	ref := readLoraCLIRef(t, fixture)
	dir := t.TempDir()
	baseCopy := filepath.Join(dir, "base")
	copyTree(t, baseModelDir(base), baseCopy, "reference.json")
	extra := map[string]string{
		"tokenizer.json":          `{"version": "1.0", "model": {"type": "BPE"}}`,
		"tokenizer_config.json":   `{"model_max_length": 64}`,
		"special_tokens_map.json": `{"eos_token": "<|endoftext|>"}`,
		"generation_config.json":  `{"eos_token_id": 3, "max_new_tokens": 4}`,
	}
	for name, content := range extra {
		if err := os.WriteFile(filepath.Join(baseCopy, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "merged")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"README.md": "model card\n", "model.safetensors": "stale weights"} {
		if err := os.WriteFile(filepath.Join(out, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, errOut, code := runGotpu(t, nil, "merge", "--model", baseCopy, "--adapter", loraFixtureDir(fixture),
		"--output", out, "--max_shard_size", "200KB", "--device", "go")
	if code != 0 {
		t.Fatalf("gotpu merge: exit %d\n%s", code, errOut)
	}
	names := dirNames(t, out)
	var shards []string
	for _, n := range names {
		if strings.HasPrefix(n, "model-") && strings.HasSuffix(n, ".safetensors") {
			shards = append(shards, filepath.Join(out, n))
		}
	}
	if len(shards) < 2 || !slices.Contains(names, "model.safetensors.index.json") || slices.Contains(names, "model.safetensors") {
		t.Fatalf("%s holds %v: want shards of at most 200KB, their index, and no stale model.safetensors", out, names)
	}
	if b, err := os.ReadFile(filepath.Join(out, "README.md")); err != nil || string(b) != "model card\n" {
		t.Errorf("README.md of the existing directory: %q, %v; want it kept", b, err)
	}
	for name, content := range extra {
		if b, err := os.ReadFile(filepath.Join(out, name)); err != nil || string(b) != content {
			t.Errorf("%s in the merged directory: %q, %v; want the base's %q", name, b, err, content)
		}
	}
	worstRel, worstAbs := checkMergedChecksums(t, ref, shards...)
	input := filepath.Join(dir, "batch.jsonl")
	writeIDs(t, ref, input)
	loss := scoreLoss(t, input, "--model", out)
	if d := math.Abs(loss - ref.Loss); d > 1e-5 {
		t.Errorf("sharded merged model's loss %.9f, reference %.9f", loss, ref.Loss)
	}
	t.Logf("%d shards: checksums worst rel %.2g, abs %.2g; loss |d| %.2g", len(shards), worstRel, worstAbs, math.Abs(loss-ref.Loss))

	// Greedy decoding: the adapter on the base and the merged weights pick the same tokens
	// (merged and unmerged logits differ by float32 rounding only), and not the base's.
	gen := func(args ...string) string {
		t.Helper()
		stdout, errOut, code := runGotpu(t, nil, append([]string{"generate", "--prompt_ids", "116,151,318,914",
			"--max_new_tokens", "12", "--eos_token_id", "none", "--device", "go"}, args...)...)
		if code != 0 {
			t.Fatalf("gotpu generate %v: exit %d\n%s", args, code, errOut)
		}
		return strings.TrimSpace(stdout)
	}
	adapted := gen("--model", baseModelDir(base), "--adapter_name_or_path", loraFixtureDir(fixture))
	merged := gen("--model", out)
	plain := gen("--model", baseModelDir(base))
	if adapted != merged {
		t.Errorf("generate --adapter_name_or_path: %s; on the merged model: %s", adapted, merged)
	}
	if adapted == plain {
		t.Errorf("generate with the adapter gave the base model's tokens %s", plain)
	}
	if n := len(strings.Fields(adapted)); n != 12 {
		t.Errorf("generated %d tokens (%s), want 12", n, adapted)
	}
	t.Logf("greedy tokens with the adapter / merged: %s; base: %s", adapted, plain)
}

// TestAdapterErrors: adapters that do not fit the base, or that gotpu does not read, are refused
// by merge and by score with an error naming the file and the field or tensor; merge leaves no
// output directory (nor a staging one) and score no logits file.
func TestAdapterErrors(t *testing.T) {
	llama := loraFixtureDir("llama-lora-tiny")
	src := t.TempDir()
	variant := func(name string, edit func(map[string]any), weights ...string) string {
		return adapterVariant(t, filepath.Join(src, name), edit, weights...)
	}
	keep := func(map[string]any) {}
	cases := []struct {
		name, adapter string
		want          []string
	}{
		{"llama adapter on gpt2", llama, []string{"adapter_config.json", "target_modules", `"q_proj"`, "GPT2LMHeadModel"}},
		{"llama tensors under a gpt2 config", variant("foreign", keep, "llama:adapter_model.safetensors"),
			[]string{"adapter_model.safetensors", "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight", "another base model"}},
		{"r changed", variant("r8", func(c map[string]any) { c["r"] = 8 }, "adapter_model.safetensors"),
			[]string{"adapter_model.safetensors", "base_model.model.transformer.h.0.attn.c_attn.lora_A.weight", "[4 64]", "r=8", "[8 64]"}},
		{"unknown target module", variant("target", func(c map[string]any) { c["target_modules"] = []string{"c_attn", "c_atn"} }, "adapter_model.safetensors"),
			[]string{"adapter_config.json", "target_modules", `"c_atn"`}},
		{"r 0", variant("r0", func(c map[string]any) { c["r"] = 0 }, "adapter_model.safetensors"),
			[]string{"adapter_config.json", "LoraConfig.r", "must be positive"}},
		{"prefix tuning", variant("prefix", func(c map[string]any) { c["peft_type"] = "PREFIX_TUNING" }, "adapter_model.safetensors"),
			[]string{"adapter_config.json", "peft_type", "PREFIX_TUNING", "only LORA"}},
		{"no adapter_config.json", variant("nocfg", nil, "adapter_model.safetensors"),
			[]string{"no adapter_config.json", "not a PEFT adapter directory"}},
		{"adapter_model.bin only", variant("bin", keep, "adapter_model.bin"),
			[]string{"adapter_model.bin", "pickle", "safe_serialization=True"}},
	}
	base := baseModelDir("gpt2-tiny")
	ref := readLoraCLIRef(t, "gpt2-lora-tiny")
	input := filepath.Join(src, "batch.jsonl")
	writeIDs(t, ref, input)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			parent := t.TempDir()
			out := filepath.Join(parent, "merged")
			stdout, errOut, code := runGotpu(t, nil, "merge", "--model", base, "--adapter", c.adapter, "--output", out, "--device", "go")
			if code != 1 || stdout != "" {
				t.Errorf("merge: exit %d, stdout %q; want 1 and nothing", code, stdout)
			}
			for _, w := range c.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("merge: stderr %q lacks %q", errOut, w)
				}
			}
			if left := dirNames(t, parent); len(left) != 0 {
				t.Errorf("merge left %v in the output's directory", left)
			}
			logits := filepath.Join(parent, "logits.safetensors")
			stdout, errScore, code := runGotpu(t, nil, "score", "--model", base, "--adapter_name_or_path", c.adapter,
				"--input", input, "--logits", logits, "--device", "go")
			if code != 1 || stdout != "" {
				t.Errorf("score: exit %d, stdout %q; want 1 and nothing", code, stdout)
			}
			for _, w := range c.want {
				if !strings.Contains(errScore, w) {
					t.Errorf("score: stderr %q lacks %q", errScore, w)
				}
			}
			if left := dirNames(t, parent); len(left) != 0 {
				t.Errorf("score left %v", left)
			}
			t.Logf("merge: %s", strings.TrimSpace(errOut))
		})
	}
}

// TestMergeUsageErrors: missing or bad flags are usage errors (exit 2) naming the flag, before
// anything is loaded or written.
func TestMergeUsageErrors(t *testing.T) {
	// A copy: were the refusal of --output naming the base broken, the fixture must not suffer.
	base, adapter := filepath.Join(t.TempDir(), "base"), loraFixtureDir("gpt2-lora-tiny")
	copyTree(t, baseModelDir("gpt2-tiny"), base, "reference.json")
	parent := t.TempDir()
	out := filepath.Join(parent, "merged")
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--adapter", adapter, "--output", out}, "--model is required"},
		{[]string{"--model", base, "--output", out}, "--adapter is required"},
		{[]string{"--model", base, "--adapter", adapter}, "--output is required"},
		{[]string{"--model", base, "--adapter", adapter, "--output", out, "--dtype", "float8"}, "--dtype"},
		{[]string{"--model", base, "--adapter", adapter, "--output", out, "--max_shard_size", "lots"}, "--max_shard_size"},
		{[]string{"--model", base, "--adapter", adapter, "--output", file}, "is a file"},
		{[]string{"--model", base, "--adapter", adapter, "--output", base}, "is the --model directory"},
	} {
		stdout, errOut, code := runGotpu(t, nil, append([]string{"merge", "--device", "go"}, c.args...)...)
		if code != 2 || stdout != "" || !strings.Contains(errOut, c.want) {
			t.Errorf("merge %v: exit %d, stdout %q, stderr %q; want 2 naming %q", c.args, code, stdout, errOut, c.want)
		}
	}
	if left := dirNames(t, parent); len(left) != 0 {
		t.Errorf("usage errors left %v", left)
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "x" {
		t.Errorf("--output naming a file changed it: %q, %v", b, err)
	}
}

// TestMergeFromHub: base model and adapter named by Hub repo ids come through the shared cache
// (adapter_config.json and adapter_model.safetensors for the adapter, the base's tokenizer files
// at its weights' commit); offline, score --adapter_name_or_path answers from the cache with no
// request.
func TestMergeFromHub(t *testing.T) {
	const fixture, base = "gpt2-lora-tiny", "gpt2-tiny"
	ref := readLoraCLIRef(t, fixture)
	s := hubtest.New(t)
	baseFiles := hubtest.DirFiles(t, baseModelDir(base))
	delete(baseFiles, "reference.json")
	baseFiles["tokenizer.json"] = []byte(`{"version": "1.0"}`)
	baseFiles["tokenizer_config.json"] = []byte(`{"model_max_length": 64}`)
	s.AddRepo("model", "org/tiny-gpt2", baseFiles, hubtest.RepoOptions{})
	adapterFiles := hubtest.DirFiles(t, loraFixtureDir(fixture))
	delete(adapterFiles, "reference.json")
	s.AddRepo("model", "org/tiny-gpt2-lora", adapterFiles, hubtest.RepoOptions{})
	env := hubEnv(t, s, filepath.Join(t.TempDir(), "hub"))
	dir := t.TempDir()
	out := filepath.Join(dir, "merged")
	stdout, errOut, code := runGotpu(t, env, "merge", "--model", "org/tiny-gpt2", "--adapter", "org/tiny-gpt2-lora", "--output", out, "--device", "go")
	if code != 0 || stdout != out+"\n" {
		t.Fatalf("gotpu merge from the Hub: exit %d, stdout %q\n%s", code, stdout, errOut)
	}
	for _, name := range []string{"tokenizer.json", "tokenizer_config.json"} {
		if b, err := os.ReadFile(filepath.Join(out, name)); err != nil || string(b) != string(baseFiles[name]) {
			t.Errorf("%s in the merged directory: %q, %v; want the base repo's", name, b, err)
		}
	}
	worstRel, worstAbs := checkMergedChecksums(t, ref, filepath.Join(out, "model.safetensors"))
	input := filepath.Join(dir, "batch.jsonl")
	writeIDs(t, ref, input)
	s.ResetRequests()
	stdout, errOut, code = runGotpu(t, append(env, "HF_HUB_OFFLINE=1"), "score", "--model", "org/tiny-gpt2",
		"--adapter_name_or_path", "org/tiny-gpt2-lora", "--input", input, "--device", "go")
	if code != 0 {
		t.Fatalf("offline score: exit %d\n%s", code, errOut)
	}
	if n := s.RequestCount(); n != 0 {
		t.Errorf("offline score made %d requests to the Hub", n)
	}
	var losses []float64
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var r struct{ Loss float64 }
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("score output %q: %v", l, err)
		}
		losses = append(losses, r.Loss)
	}
	if loss := (losses[0] + losses[1]) / 2; math.Abs(loss-ref.Loss) > 1e-5 {
		t.Errorf("offline score with the Hub adapter: loss %.9f, reference %.9f", loss, ref.Loss)
	}
	t.Logf("merged from the Hub: checksums worst rel %.2g, abs %.2g", worstRel, worstAbs)
}
