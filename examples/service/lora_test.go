package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/hub/hubtest"
	"github.com/gotpu/gotpu/internal/safetensors"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/peft"
	"github.com/gotpu/gotpu/xla"
)

const (
	loraBase    = "testdata/models/gpt2-tiny"
	loraAdapter = "testdata/models/lora/gpt2-lora-tiny"
	loraPrompt  = "116,151,318,914"
	loraNew     = 8
)

// libraryGenerate is what the library generates greedily from the prompt with the model in
// baseDir and, when adapterDir is set, the adapter attached: the reference the service's answers
// are compared with.
func libraryGenerate(t *testing.T, rt *xla.Runtime, baseDir, adapterDir string) []int {
	t.Helper()
	ctx := context.Background()
	m, err := models.Load(ctx, rt, baseDir, models.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if adapterDir != "" {
		if m, err = peft.Load(ctx, rt, m, adapterDir, peft.Options{}); err != nil {
			t.Fatal(err)
		}
	}
	var prompt []int
	for _, f := range strings.Split(loraPrompt, ",") {
		var id int
		fmt.Sscan(f, &id)
		prompt = append(prompt, id)
	}
	opts := models.DefaultGenerateOptions()
	opts.MaxNewTokens = loraNew
	out, err := models.Generate(ctx, rt, m.(models.CausalLM), prompt, opts)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// generateTokens makes a generation request that must succeed and returns its answer.
func generateTokens(t *testing.T, u string) generateResponse {
	t.Helper()
	var g generateResponse
	callJSON(t, "GET", u, "", http.StatusOK, &g)
	if len(g.TokenIDs) == 0 {
		t.Fatalf("GET %s: no tokens: %+v", u, g)
	}
	return g
}

// refused makes a request that must be a 400 naming field, and returns the message.
func refused(t *testing.T, method, u, body, field string) string {
	t.Helper()
	code, ans := call(t, method, u, body)
	var eb errorBody
	if err := json.Unmarshal(ans, &eb); err != nil || code != http.StatusBadRequest {
		t.Fatalf("%s %s: %d %s; want 400", method, u, code, ans)
	}
	for _, f := range eb.Fields {
		if f.Field == field && strings.HasPrefix(f.Message, field+": ") {
			return f.Message
		}
	}
	t.Fatalf("%s %s: no problem with %s in %s", method, u, field, ans)
	return ""
}

// TestGenerateWithAdapter: GET /generate?model=...&adapter=... generates with the PEFT adapter
// attached — other tokens than the base model alone, and the tokens the library generates with
// the same adapter (peft.Load + models.Generate) — and says which adapter in its answer. An
// adapter outside the service's directories, a directory that is no adapter and an adapter made
// for another architecture are 400s naming the adapter; a job's generation takes none.
func TestGenerateWithAdapter(t *testing.T) {
	root, tmp := repoRoot(t), t.TempDir()
	rt := openRuntime(t)
	ts := startServer(t, rt, Config{DataDir: filepath.Join(tmp, "data"), InputRoots: []string{root}, BaseDir: root})
	q := fmt.Sprintf("%s/generate?model=%s&prompt_ids=%s&max_new_tokens=%d", ts.url, loraBase, loraPrompt, loraNew)
	plain := generateTokens(t, q)
	adapted := generateTokens(t, q+"&adapter="+url.QueryEscape(loraAdapter))
	if adapted.Adapter != loraAdapter || plain.Adapter != "" {
		t.Errorf(`"adapter" in the answers: %q with, %q without; want %q and none`, adapted.Adapter, plain.Adapter, loraAdapter)
	}
	if slices.Equal(adapted.TokenIDs, plain.TokenIDs) {
		t.Errorf("the adapter changed nothing: %v", plain.TokenIDs)
	}
	want := libraryGenerate(t, rt, filepath.Join(root, loraBase), filepath.Join(root, loraAdapter))
	if !slices.Equal(adapted.TokenIDs, want) {
		t.Errorf("service with the adapter: %v; library (peft.Load + models.Generate): %v", adapted.TokenIDs, want)
	}
	if base := libraryGenerate(t, rt, filepath.Join(root, loraBase), ""); !slices.Equal(plain.TokenIDs, base) {
		t.Errorf("service without the adapter: %v; library: %v", plain.TokenIDs, base)
	}
	t.Logf("with the adapter %v (library %v); without %v", adapted.TokenIDs, want, plain.TokenIDs)

	outside := filepath.Join(tmp, "adapter")
	copyAdapter(t, filepath.Join(root, loraAdapter), outside)
	rel, err := filepath.Rel(root, outside)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ adapter, want string }{
		{outside, "not a file this service can read"}, // a real adapter, outside -input_roots
		{rel, "not a file this service can read"},     // the same, relative, through ".."
		{loraBase, "has no adapter_config.json"},
		{"testdata/models/lora/llama-lora-tiny", `"q_proj" matches no module of GPT2LMHeadModel`},
	} {
		msg := refused(t, "GET", q+"&adapter="+url.QueryEscape(c.adapter), "", "adapter")
		// The adapter as the request named it may be echoed; no directory of the service.
		shown := strings.ReplaceAll(msg, fmt.Sprintf("%q", c.adapter), "<adapter>")
		if !strings.Contains(msg, c.want) || strings.Contains(shown, tmp) || strings.Contains(shown, root) {
			t.Errorf("adapter %q: %s; want it to say %q and name no directory of the service", c.adapter, msg, c.want)
		}
	}
}

// TestLoRAJob: a use_peft job (TRL's fields: lora_r, lora_alpha, lora_target_modules) trains an
// adapter on a frozen base and leaves the adapter as its output, in PEFT's format
// (adapter_config.json naming the base as the request did, adapter_model.safetensors with PEFT's
// tensor names) and no model weights; its generation attaches the checkpoint's adapter to the
// base, as the library does, also after a restart; a second job continues the adapter
// (adapter_name_or_path: the first job's output), whose config wins over a conflicting lora_r;
// an adapter outside the allowed directories is refused.
func TestLoRAJob(t *testing.T) {
	root, tmp := repoRoot(t), t.TempDir()
	in := filepath.Join(tmp, "in")
	if err := os.MkdirAll(in, 0o755); err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(in, "tokens.jsonl")
	writeTokenJSONL(t, tokens, 16, 16, 1000)
	rt := openRuntime(t)
	dataDir := filepath.Join(tmp, "data")
	cfg := Config{DataDir: dataDir, InputRoots: []string{root, in}, BaseDir: root}
	ts := startServer(t, rt, cfg)
	body := fmt.Sprintf(`{"model_name_or_path": %q, "train_file": %q, "use_peft": true, "lora_r": 4, "lora_alpha": 8,
		"lora_dropout": 0, "lora_target_modules": ["c_attn"], "max_steps": 3, "save_steps": 2, "logging_steps": 1,
		"per_device_train_batch_size": 4, "learning_rate": 0.01}`, loraBase, tokens)
	var p Progress
	callJSON(t, "POST", ts.url+"/jobs", body, http.StatusCreated, &p)
	p = waitFor(t, ts.url+p.URLs["self"], "completion", func(p Progress) bool { return p.State == StateCompleted })
	names := dirEntries(t, p.OutputDir)
	for _, f := range []string{"adapter_config.json", "adapter_model.safetensors"} {
		if !slices.Contains(names, f) {
			t.Errorf("the job's output_dir lacks %s: %v", f, names)
		}
	}
	for _, f := range []string{"model.safetensors", "config.json"} {
		if slices.Contains(names, f) {
			t.Errorf("a LoRA job wrote %s: its output is the adapter", f)
		}
	}
	ad, err := peft.ReadConfig(filepath.Join(p.OutputDir, "adapter_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if ad.R != 4 || ad.LoraAlpha != 8 || !slices.Equal(ad.TargetModules, []string{"c_attn"}) || ad.BaseModelNameOrPath != loraBase {
		t.Errorf("adapter_config.json: r %d, lora_alpha %v, target_modules %v, base_model_name_or_path %q", ad.R, ad.LoraAlpha, ad.TargetModules, ad.BaseModelNameOrPath)
	}
	f, err := safetensors.Open(filepath.Join(p.OutputDir, "adapter_model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	tensorNames := f.Names()
	// PEFT's default init makes lora_B zero: non-zero values show that the adapter was trained.
	trained := false
	for _, name := range tensorNames {
		info, _ := f.Info(name)
		raw, err := f.Bytes(name)
		if err != nil {
			t.Fatal(err)
		}
		v := make([]float32, info.NumElements())
		if err := safetensors.DecodeFloat32(info.DType, raw, v); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(name, "lora_B") && slices.ContainsFunc(v, func(x float32) bool { return x != 0 }) {
			trained = true
		}
	}
	f.Close()
	if !trained {
		t.Errorf("every lora_B is still zero after 3 steps: the adapter was not trained")
	}
	slices.Sort(tensorNames)
	var wantNames []string
	for _, l := range []string{"0", "1"} {
		for _, ab := range []string{"A", "B"} {
			wantNames = append(wantNames, "base_model.model.transformer.h."+l+".attn.c_attn.lora_"+ab+".weight")
		}
	}
	if !slices.Equal(tensorNames, wantNames) {
		t.Errorf("adapter_model.safetensors holds %v, want %v", tensorNames, wantNames)
	}

	// Generation from the job: its latest checkpoint's adapter on its base, as the library does.
	g := generateTokens(t, fmt.Sprintf("%s%s?prompt_ids=%s&max_new_tokens=%d", ts.url, p.URLs["generate"], loraPrompt, loraNew))
	if g.Checkpoint == "" || g.Step != 3 {
		t.Fatalf("generated from checkpoint %q at step %d, want the job's last checkpoint at step 3", g.Checkpoint, g.Step)
	}
	want := libraryGenerate(t, rt, filepath.Join(root, loraBase), g.Checkpoint)
	if !slices.Equal(g.TokenIDs, want) {
		t.Errorf("job generation %v; library with the checkpoint's adapter %v", g.TokenIDs, want)
	}
	refused(t, "GET", fmt.Sprintf("%s%s?prompt_ids=1&adapter=%s", ts.url, p.URLs["generate"], loraAdapter), "", "adapter")

	// Continuing the adapter: a second job loads the first one's output; its config decides.
	cont := fmt.Sprintf(`{"model_name_or_path": %q, "train_file": %q, "adapter_name_or_path": %q, "max_steps": 2,
		"save_strategy": "no", "per_device_train_batch_size": 4, "learning_rate": 0.01}`, loraBase, tokens, p.OutputDir)
	var p2 Progress
	callJSON(t, "POST", ts.url+"/jobs", cont, http.StatusCreated, &p2)
	p2 = waitFor(t, ts.url+p2.URLs["self"], "completion", func(p Progress) bool { return p.State == StateCompleted })
	ad2, err := peft.ReadConfig(filepath.Join(p2.OutputDir, "adapter_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if ad2.R != 4 || ad2.BaseModelNameOrPath != loraBase {
		t.Errorf("continued adapter: r %d, base %q", ad2.R, ad2.BaseModelNameOrPath)
	}
	g2 := generateTokens(t, fmt.Sprintf("%s%s?prompt_ids=%s&max_new_tokens=%d", ts.url, p2.URLs["generate"], loraPrompt, loraNew))
	if want := libraryGenerate(t, rt, filepath.Join(root, loraBase), p2.OutputDir); !slices.Equal(g2.TokenIDs, want) {
		t.Errorf("continued job's generation (final adapter, no checkpoint) %v; library %v", g2.TokenIDs, want)
	}
	msg := refused(t, "POST", ts.url+"/jobs", strings.Replace(cont, `"max_steps": 2`, `"max_steps": 2, "lora_r": 8`, 1), "lora_r")
	if !strings.Contains(msg, "adapter_config.json decides") {
		t.Errorf("lora_r against the adapter's r: %s", msg)
	}
	outside := filepath.Join(tmp, "outside-adapter")
	copyAdapter(t, p2.OutputDir, outside)
	msg = refused(t, "POST", ts.url+"/jobs", strings.Replace(cont, p.OutputDir, outside, 1), "adapter_name_or_path")
	if shown := strings.ReplaceAll(msg, fmt.Sprintf("%q", outside), "<adapter>"); !strings.Contains(msg, "not a file this service can read") || strings.Contains(shown, tmp) {
		t.Errorf("adapter outside the roots: %s", msg)
	}

	// A restarted service still generates from the LoRA job: job.json records its base.
	if err := ts.stop(); err != nil {
		t.Fatal(err)
	}
	ts2 := startServer(t, rt, cfg)
	g3 := generateTokens(t, fmt.Sprintf("%s%s?prompt_ids=%s&max_new_tokens=%d", ts2.url, p.URLs["generate"], loraPrompt, loraNew))
	if !slices.Equal(g3.TokenIDs, g.TokenIDs) {
		t.Errorf("after a restart: %v, before %v", g3.TokenIDs, g.TokenIDs)
	}
}

// dirEntries lists a directory's entry names.
func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

// copyAdapter copies an adapter directory's two files.
func copyAdapter(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"adapter_config.json", "adapter_model.safetensors"} {
		b, err := os.ReadFile(filepath.Join(from, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestHubAdapter: with -hub, adapter= and adapter_name_or_path may be Hub repo ids, as models
// may: generation fetches the adapter (adapter_config.json while the request is checked,
// adapter_model.safetensors once a generation slot is held) and generates what the same adapter
// from testdata gives; a job continues it; a repo without the adapter's config is a 400 naming
// the field.
func TestHubAdapter(t *testing.T) {
	root, tmp := repoRoot(t), t.TempDir()
	fake := hubtest.New(t)
	fake.AddRepo("model", tinyRepo, tinyGPT2Files(t), hubtest.RepoOptions{})
	adapterFiles := map[string][]byte{}
	for _, f := range []string{"adapter_config.json", "adapter_model.safetensors"} {
		b, err := os.ReadFile(filepath.Join(root, loraAdapter, f))
		if err != nil {
			t.Fatal(err)
		}
		adapterFiles[f] = b
	}
	fake.AddRepo("model", "org/tiny-gpt2-lora", adapterFiles, hubtest.RepoOptions{})
	in := filepath.Join(tmp, "in")
	if err := os.MkdirAll(in, 0o755); err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(in, "tokens.jsonl")
	writeTokenJSONL(t, tokens, 8, 16, 1000)
	rt := openRuntime(t)
	ts := startServer(t, rt, Config{DataDir: filepath.Join(tmp, "data"), InputRoots: []string{root, in}, BaseDir: root,
		Hub: hubClient(t, fake, filepath.Join(tmp, "hf"), nil)})
	q := fmt.Sprintf("%s/generate?model=%s&prompt_ids=%s&max_new_tokens=%d", ts.url, tinyRepo, loraPrompt, loraNew)
	g := generateTokens(t, q+"&adapter=org/tiny-gpt2-lora")
	if want := libraryGenerate(t, rt, filepath.Join(root, loraBase), filepath.Join(root, loraAdapter)); !slices.Equal(g.TokenIDs, want) {
		t.Errorf("Hub model and adapter: %v; library with testdata's: %v", g.TokenIDs, want)
	}
	if g.Adapter != "org/tiny-gpt2-lora" {
		t.Errorf(`"adapter": %q`, g.Adapter)
	}
	msg := refused(t, "GET", q+"&adapter="+tinyRepo, "", "adapter")
	if !strings.Contains(msg, "adapter_config.json") {
		t.Errorf("a model repo as the adapter: %s", msg)
	}
	body := fmt.Sprintf(`{"model_name_or_path": %q, "train_file": %q, "adapter_name_or_path": "org/tiny-gpt2-lora", "max_steps": 1,
		"save_strategy": "no", "per_device_train_batch_size": 4}`, tinyRepo, tokens)
	var p Progress
	callJSON(t, "POST", ts.url+"/jobs", body, http.StatusCreated, &p)
	p = waitFor(t, ts.url+p.URLs["self"], "completion", func(p Progress) bool { return p.State == StateCompleted })
	if _, err := peft.ReadConfig(filepath.Join(p.OutputDir, "adapter_config.json")); err != nil {
		t.Errorf("the job continuing the Hub adapter: %v", err)
	}
}
