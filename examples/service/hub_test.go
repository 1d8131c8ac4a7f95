package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gotpu/gotpu/hub"
	"github.com/gotpu/gotpu/hub/hubtest"
)

// tinyRepo is the repo id the tests publish testdata/models/gpt2-tiny under.
const tinyRepo = "org/tiny-gpt2"

// tinyGPT2Files is what the fake Hub serves as org/tiny-gpt2: testdata/models/gpt2-tiny (a real
// GPT-2: config.json and model.safetensors, vocabulary 1000) and, since that directory has no
// tokenizer, the bpe-prefix-suffix tokenizer of testdata/tokenizers/variants, built by its recipe
// as the tokenizer package's tests build it (124 tokens: it fits the model's vocabulary, which
// the GPT-2 tokenizer's 50257 would not).
func tinyGPT2Files(t testing.TB) map[string][]byte {
	t.Helper()
	root := repoRoot(t)
	files := map[string][]byte{}
	for _, name := range []string{"config.json", "model.safetensors"} {
		b, err := os.ReadFile(filepath.Join(root, "testdata", "models", "gpt2-tiny", name))
		if err != nil {
			t.Fatal(err)
		}
		files[name] = b
	}
	files["tokenizer.json"] = variantTokenizer(t, "bpe-prefix-suffix")
	return files
}

// variantTokenizer builds the tokenizer.json of a recipe of testdata/tokenizers/variants that
// starts from nothing (base null): its top-level keys, and its model file as "model".
func variantTokenizer(t testing.TB, name string) []byte {
	t.Helper()
	dir := filepath.Join(repoRoot(t), "testdata", "tokenizers", "variants")
	data, err := os.ReadFile(filepath.Join(dir, "recipes.json"))
	if err != nil {
		t.Fatal(err)
	}
	var recipes struct {
		Recipes []struct {
			Name      string                     `json:"name"`
			Base      *string                    `json:"base"`
			Set       map[string]json.RawMessage `json:"set"`
			ModelFile string                     `json:"model_file"`
		} `json:"recipes"`
	}
	if err := json.Unmarshal(data, &recipes); err != nil {
		t.Fatal(err)
	}
	for _, r := range recipes.Recipes {
		if r.Name != name {
			continue
		}
		if r.Base != nil || r.ModelFile == "" {
			t.Fatalf("recipe %s is not built from nothing with a model file", name)
		}
		model, err := os.ReadFile(filepath.Join(dir, r.ModelFile))
		if err != nil {
			t.Fatal(err)
		}
		obj := map[string]json.RawMessage{"model": model}
		for k, v := range r.Set {
			obj[k] = v
		}
		out, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	t.Fatalf("no recipe %s in recipes.json", name)
	return nil
}

// writeWords writes a small lowercase text file (one document per line) the variant tokenizer
// covers: its vocabulary is the 26 letters with "##" and "</w>" forms.
func writeWords(t *testing.T, path string) {
	t.Helper()
	words := strings.Fields("the quick brown fox jumps over a lazy dog while seven wizards box jolly quiz")
	var b strings.Builder
	for i := range 40 {
		for k := range 9 {
			fmt.Fprintf(&b, "%s ", words[(i*3+k*5)%len(words)])
		}
		b.WriteString("\n")
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// hubClient is the client -hub builds (newHubClient), from an environment that points at the
// fake Hub and the test's cache; HOME is the test's too, so no token file of the machine's user
// is read.
func hubClient(t *testing.T, fake *hubtest.Server, cache string, env map[string]string) *hub.Client {
	t.Helper()
	vars := map[string]string{"HF_ENDPOINT": fake.URL(), "HF_HUB_CACHE": cache, "HOME": t.TempDir()}
	for k, v := range env {
		vars[k] = v
	}
	c, err := newHubClient(func(k string) string { return vars[k] }, slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// resolvedFiles lists the files the fake Hub was asked for (resolve URLs, by HEAD or GET).
func resolvedFiles(fake *hubtest.Server) []string {
	var out []string
	for _, r := range fake.Requests() {
		if _, file, ok := strings.Cut(r.Path, "/resolve/"); ok && r.Host == "hub" {
			_, file, _ = strings.Cut(file, "/") // the revision
			if !slices.Contains(out, file) {
				out = append(out, file)
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestHubValidationFetchesConfigAndTokenizerOnly: checking a request that names a repo id
// fetches config.json and tokenizer.json (vocabulary size, positions, the tokenizer) and nothing
// else; the job's fetchWeights brings model.safetensors into the same snapshot, from the commit
// config.json came from.
func TestHubValidationFetchesConfigAndTokenizerOnly(t *testing.T) {
	fake, tmp := hubtest.New(t), t.TempDir()
	files := tinyGPT2Files(t)
	sha := fake.AddRepo("model", tinyRepo, files, hubtest.RepoOptions{})
	cache := filepath.Join(tmp, "hf")
	c := hubClient(t, fake, cache, nil)
	text := filepath.Join(tmp, "words.txt")
	writeWords(t, text)
	paths, err := newPathPolicy(tmp, []string{tmp})
	if err != nil {
		t.Fatal(err)
	}
	rt := openRuntime(t)
	env := specEnv{paths: paths, jobDir: t.TempDir(), deviceKind: rt.Kind(), numDevices: rt.NumDevices(), toks: newTokenizerCache(nil), rt: rt,
		hub: &hubFetcher{c: c, timeout: defaultHubTimeout}}
	spec, err := parseSpec(t.Context(), []byte(`{"model_name_or_path": "org/tiny-gpt2", "train_file": "words.txt", "block_size": 16}`), env)
	if err != nil {
		t.Fatal(err)
	}
	defer spec.release()
	snap := filepath.Join(cache, "models--org--tiny-gpt2", "snapshots", sha)
	if spec.ModelRepo == nil || spec.ModelRepo.String() != tinyRepo+"@"+sha || spec.ModelDir != snap ||
		spec.TokenizerPath != filepath.Join(snap, "tokenizer.json") || spec.VocabSize != 1000 || spec.BlockSize != 16 || spec.Tokenizer == nil {
		t.Fatalf("spec: repo %v, dir %s, tokenizer %s, vocab %d, block %d", spec.ModelRepo, spec.ModelDir, spec.TokenizerPath, spec.VocabSize, spec.BlockSize)
	}
	if got := resolvedFiles(fake); !slices.Equal(got, []string{"config.json", "tokenizer.json"}) {
		t.Fatalf("validation asked the Hub for %v, want config.json and tokenizer.json only", got)
	}
	if _, err := os.Stat(filepath.Join(snap, "model.safetensors")); !os.IsNotExist(err) {
		t.Fatalf("model.safetensors fetched at validation (stat: %v)", err)
	}
	// The branch moves after validation: the job still gets the commit that was checked.
	moved := replaced(files, "config.json", []byte(`{"model_type": "gpt2", "vocab_size": 5}`))
	if fake.AddRepo("model", tinyRepo, moved, hubtest.RepoOptions{}) == sha {
		t.Fatal("the new commit has the old sha")
	}
	dir, err := fetchWeights(t.Context(), c, *spec.ModelRepo, spec.ModelDir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "model.safetensors"))
	if err != nil || !bytes.Equal(got, files["model.safetensors"]) {
		t.Fatalf("weights in the snapshot: %d bytes (%v), want testdata's %d", len(got), err, len(files["model.safetensors"]))
	}
	t.Logf("validation fetched %v; the job fetched %v", []string{"config.json", "tokenizer.json"}, resolvedFiles(fake))
}

// replaced is a copy of files with one file replaced, or removed when content is nil.
func replaced(files map[string][]byte, name string, content []byte) map[string][]byte {
	out := map[string][]byte{}
	for k, v := range files {
		out[k] = v
	}
	out[name] = content
	if content == nil {
		delete(out, name)
	}
	return out
}

// generated is the part of a generation answer the Hub tests compare.
type generated struct {
	Model     string  `json:"model"`
	Revision  string  `json:"revision"`
	PromptIDs []int   `json:"prompt_ids"`
	TokenIDs  []int   `json:"token_ids"`
	Text      *string `json:"text"`
}

func generate(t *testing.T, url string) generated {
	t.Helper()
	var g generated
	callJSON(t, "GET", url, "", http.StatusOK, &g)
	if g.Text == nil || len(g.PromptIDs) == 0 || len(g.TokenIDs) == 0 || len(g.TokenIDs) > 5 {
		t.Fatalf("GET %s: %+v", url, g)
	}
	return g
}

// TestHubJobsAndGeneration: through a service started with a Hub client (the fake Hub on
// loopback), a job fine-tunes org/tiny-gpt2 to completion and GET /generate?model=org/tiny-gpt2
// generates what the same model from testdata generates; a second service with HF_HUB_OFFLINE
// on the same cache does both again without a single request to the Hub; a local directory
// spelled like the repo id wins over the Hub; and the cache stays out of reach of request paths.
func TestHubJobsAndGeneration(t *testing.T) {
	root, tmp := repoRoot(t), t.TempDir()
	fake := hubtest.New(t)
	files := tinyGPT2Files(t)
	sha := fake.AddRepo("model", tinyRepo, files, hubtest.RepoOptions{})
	cache := filepath.Join(tmp, "hf")
	in := filepath.Join(tmp, "in")
	if err := os.Mkdir(in, 0o755); err != nil {
		t.Fatal(err)
	}
	text := filepath.Join(in, "words.txt")
	writeWords(t, text)
	tokFile := filepath.Join(in, "tokenizer.json")
	if err := os.WriteFile(tokFile, files["tokenizer.json"], 0o644); err != nil {
		t.Fatal(err)
	}
	rt := openRuntime(t)
	job := fmt.Sprintf(`{"model_name_or_path": %q, "train_file": %q, "block_size": 16, "per_device_train_batch_size": 2,
		"max_steps": 3, "learning_rate": 1e-3, "logging_steps": 1, "save_steps": 3}`, tinyRepo, text)
	prompt := "?prompt=" + url.QueryEscape("the quick brown") + "&max_new_tokens=5"

	train := func(ts *testServer) Progress {
		t.Helper()
		var created Progress
		callJSON(t, "POST", ts.url+"/jobs", job, http.StatusCreated, &created)
		done := waitFor(t, ts.url+"/jobs/"+created.ID, "the end", func(p Progress) bool { return p.State.Done() })
		if done.State != StateCompleted || done.Step != 3 || done.Loss == nil {
			t.Fatalf("job ended %+v", done)
		}
		return done
	}

	// Online: the first run fetches into the cache.
	online := startServer(t, rt, Config{DataDir: filepath.Join(tmp, "data1"), InputRoots: []string{root, in}, BaseDir: root, Hub: hubClient(t, fake, cache, nil)})
	done := train(online)
	fromJob := generate(t, online.url+"/jobs/"+done.ID+"/generate"+prompt)
	fromHub := generate(t, online.url+"/generate"+prompt+"&model="+tinyRepo)
	if fromHub.Model != tinyRepo || fromHub.Revision != sha {
		t.Fatalf("GET /generate answered model %q revision %q, want %s at %s", fromHub.Model, fromHub.Revision, tinyRepo, sha)
	}
	fromDisk := generate(t, online.url+"/generate"+prompt+"&model=testdata/models/gpt2-tiny&tokenizer="+url.QueryEscape(tokFile))
	if !slices.Equal(fromHub.PromptIDs, fromDisk.PromptIDs) || !slices.Equal(fromHub.TokenIDs, fromDisk.TokenIDs) || fromDisk.Revision != "" {
		t.Fatalf("the Hub's org/tiny-gpt2 generated %v from %v, testdata/models/gpt2-tiny %v from %v", fromHub.TokenIDs, fromHub.PromptIDs, fromDisk.TokenIDs, fromDisk.PromptIDs)
	}
	onlineRequests := fake.RequestCount()
	t.Logf("online: job %s completed (loss %.4f), %d requests to the fake Hub; generation %v -> %v (job: %v)",
		done.ID, *done.Loss, onlineRequests, fromHub.PromptIDs, fromHub.TokenIDs, fromJob.TokenIDs)

	// Paths into the cache are refused like any other path outside the service's directories:
	// only the snapshot a repo id led to is read, and only through the repo id.
	snap := filepath.Join(cache, "models--org--tiny-gpt2", "snapshots", sha)
	for _, body := range []string{
		fmt.Sprintf(`{"model_name_or_path": %q, "train_file": %q}`, snap, text),
		fmt.Sprintf(`{"model_name_or_path": %q, "train_file": %q}`, tinyRepo, filepath.Join(snap, "config.json")),
		fmt.Sprintf(`{"model_name_or_path": %q, "train_file": %q, "tokenizer_name": %q}`, tinyRepo, text, filepath.Join(snap, "tokenizer.json")),
	} {
		code, ans := call(t, "POST", online.url+"/jobs", body)
		if code != http.StatusBadRequest || !strings.Contains(string(ans), errPathRefused.Error()) {
			t.Fatalf("a path into the Hub cache: %d %s", code, ans)
		}
	}
	if code, ans := call(t, "GET", online.url+"/generate?prompt_ids=1&model="+url.QueryEscape(snap), ""); code != http.StatusBadRequest || !strings.Contains(string(ans), errPathRefused.Error()) {
		t.Fatalf("GET /generate of the snapshot's path: %d %s", code, ans)
	}

	// Offline (HF_HUB_OFFLINE=1) on the same cache: the same job and generation, no request.
	fake.ResetRequests()
	offline := startServer(t, rt, Config{DataDir: filepath.Join(tmp, "data2"), InputRoots: []string{root, in}, BaseDir: root,
		Hub: hubClient(t, fake, cache, map[string]string{"HF_HUB_OFFLINE": "1"})})
	again := train(offline)
	fromCache := generate(t, offline.url+"/generate"+prompt+"&model="+tinyRepo)
	if !slices.Equal(fromCache.TokenIDs, fromHub.TokenIDs) || fromCache.Revision != sha {
		t.Fatalf("offline generation %+v, online %+v", fromCache, fromHub)
	}
	code, ans := call(t, "POST", offline.url+"/jobs", fmt.Sprintf(`{"model_name_or_path": "org/never-fetched", "train_file": %q}`, text))
	if code != http.StatusBadRequest || !strings.Contains(string(ans), "HF_HUB_OFFLINE") || !strings.Contains(string(ans), `"field": "model_name_or_path"`) {
		t.Fatalf("offline, a repo not in the cache: %d %s", code, ans)
	}
	if n := fake.RequestCount(); n != 0 {
		t.Fatalf("offline: %d requests reached the Hub: %+v", n, fake.Requests())
	}
	t.Logf("offline: job %s completed (loss %.4f) and generated %v with 0 requests to the Hub", again.ID, *again.Loss, fromCache.TokenIDs)

	// A local directory spelled like the repo id wins, as in transformers: nothing is fetched.
	local := filepath.Join(tmp, "local")
	dir := filepath.Join(local, "org", "tiny-gpt2")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	shadow := startServer(t, rt, Config{DataDir: filepath.Join(tmp, "data3"), InputRoots: []string{local, in}, BaseDir: local, Hub: hubClient(t, fake, cache, nil)})
	localDone := train(shadow)
	fromLocal := generate(t, shadow.url+"/generate"+prompt+"&model="+tinyRepo)
	if fromLocal.Revision != "" || !slices.Equal(fromLocal.TokenIDs, fromHub.TokenIDs) {
		t.Fatalf("the local org/tiny-gpt2 generated %+v", fromLocal)
	}
	if n := fake.RequestCount(); n != 0 {
		t.Fatalf("a local directory of the repo id's spelling: %d requests reached the Hub: %+v", n, fake.Requests())
	}
	t.Logf("local directory org/tiny-gpt2: job %s completed, 0 requests to the Hub", localDone.ID)
}

// TestHubRefusals: what the Hub refuses is a 400 naming the request's field, with what to do,
// never the service's token nor its cache directory; a repo whose weights cannot be fetched
// passes validation (config.json is there) and fails as a job naming the repo and the file.
func TestHubRefusals(t *testing.T) {
	tmp := t.TempDir()
	fake := hubtest.New(t)
	files := tinyGPT2Files(t)
	fake.AddRepo("model", tinyRepo, files, hubtest.RepoOptions{})
	fake.AddRepo("model", "org/gated", files, hubtest.RepoOptions{Gated: true})
	fake.AddRepo("model", "org/no-weights", replaced(files, "model.safetensors", nil), hubtest.RepoOptions{})
	// A GPT-2 of ~640G parameters (2.5 TB of float32), which no test machine holds.
	huge := replaced(files, "config.json", []byte(`{"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": 1000,
		"n_positions": 64, "n_embd": 16384, "n_layer": 200, "n_head": 128}`))
	fake.AddRepo("model", "org/huge", huge, hubtest.RepoOptions{})
	const secret = "hf_serviceSecretThatMustNotLeak42"
	cache := filepath.Join(tmp, "hf")
	text := filepath.Join(tmp, "words.txt")
	writeWords(t, text)
	if err := os.WriteFile(filepath.Join(tmp, "tokenizer.json"), files["tokenizer.json"], 0o644); err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, openRuntime(t), Config{DataDir: filepath.Join(tmp, "data"), InputRoots: []string{tmp}, BaseDir: tmp,
		Hub: hubClient(t, fake, cache, map[string]string{"HF_TOKEN": secret})})

	const requestSecret = "hf_requestSecretThatMustNotLeak7"
	cases := []struct {
		name, extra, field, want string
	}{
		{"unknown repo", `"model_name_or_path": "org/unknown"`, "model_name_or_path", "no repo on the Hub"},
		{"gated repo", `"model_name_or_path": "org/gated"`, "model_name_or_path", "set HF_TOKEN"},
		{"unknown revision", `"model_name_or_path": "org/tiny-gpt2", "model_revision": "v9"`, "model_revision", `no revision "v9"`},
		{"unknown revision in the id", `"model_name_or_path": "org/tiny-gpt2@v9"`, "model_name_or_path", `no revision "v9"`},
		{"unknown tokenizer repo", `"model_name_or_path": "org/tiny-gpt2", "tokenizer_name": "org/unknown-tok"`, "tokenizer_name", "no repo on the Hub"},
		{"config_name repo without config", `"config_name": "org/unknown", "tokenizer_name": "tokenizer.json"`, "config_name", "no repo on the Hub"},
		{"token in the request", `"model_name_or_path": "org/tiny-gpt2", "token": "` + requestSecret + `"`, "token", "HF_TOKEN in its environment"},
		{"cache_dir", `"model_name_or_path": "org/tiny-gpt2", "cache_dir": "/tmp/x"`, "cache_dir", "set by the service"},
	}
	for _, c := range cases {
		body := fmt.Sprintf(`{%s, "train_file": %q}`, c.extra, text)
		code, ans := call(t, "POST", ts.url+"/jobs", body)
		var eb errorBody
		if err := json.Unmarshal(ans, &eb); err != nil || code != http.StatusBadRequest {
			t.Fatalf("%s: %d %s", c.name, code, ans)
		}
		if len(eb.Fields) != 1 || eb.Fields[0].Field != c.field || !strings.Contains(eb.Fields[0].Message, c.want) {
			t.Fatalf("%s: fields %+v, want one for %s saying %q", c.name, eb.Fields, c.field, c.want)
		}
		for _, leak := range []string{secret, requestSecret, tmp} {
			if strings.Contains(string(ans), leak) {
				t.Fatalf("%s: the answer holds %q: %s", c.name, leak, ans)
			}
		}
		t.Logf("%s: %s", c.name, eb.Fields[0].Message)
	}
	for _, r := range fake.Requests() {
		if r.Host == "hub" && r.Authorization != "Bearer "+secret {
			t.Fatalf("a request to the Hub without the service's token: %+v", r)
		}
	}

	// Generation names the field "model".
	code, ans := call(t, "GET", ts.url+"/generate?prompt_ids=1,2&model=org/unknown", "")
	if code != http.StatusBadRequest || !strings.Contains(string(ans), `"field": "model"`) || !strings.Contains(string(ans), "no repo on the Hub") {
		t.Fatalf("GET /generate of an unknown repo: %d %s", code, ans)
	}
	// Too large for the host: refused from config.json, before any weight is fetched.
	fake.ResetRequests()
	code, ans = call(t, "GET", ts.url+"/generate?prompt_ids=1,2&model=org/huge", "")
	if code != http.StatusBadRequest || !strings.Contains(string(ans), `"field": "model"`) || !strings.Contains(string(ans), "available on the host") {
		t.Fatalf("GET /generate of a model larger than the host's memory: %d %s", code, ans)
	}
	if got := resolvedFiles(fake); !slices.Equal(got, []string{"config.json"}) {
		t.Fatalf("for a model too large, the Hub was asked for %v, want config.json only", got)
	}
	t.Logf("org/huge: %s", ans)
	// The weights are missing: the request is checked against config.json alone, so generation
	// finds out once it fetches them (400: the repo's doing), and a job fails naming the file.
	code, ans = call(t, "GET", ts.url+"/generate?prompt_ids=1,2&model=org/no-weights", "")
	if code != http.StatusBadRequest || !strings.Contains(string(ans), "model.safetensors") || strings.Contains(string(ans), tmp) {
		t.Fatalf("GET /generate of a repo without weights: %d %s", code, ans)
	}
	var created Progress
	callJSON(t, "POST", ts.url+"/jobs", fmt.Sprintf(`{"model_name_or_path": "org/no-weights", "train_file": %q}`, text), http.StatusCreated, &created)
	p := waitFor(t, ts.url+"/jobs/"+created.ID, "the end", func(p Progress) bool { return p.State.Done() })
	if p.State != StateFailed || !strings.Contains(p.Error, "org/no-weights") || !strings.Contains(p.Error, "model.safetensors") {
		t.Fatalf("a job on a repo without weights ended %s: %q", p.State, p.Error)
	}
	t.Logf("job on org/no-weights: %s: %s", p.State, p.Error)
}

// TestNoHubRefusesRepoIDs: a service without a Hub client refuses a repo id with the refusal
// every unreadable path gets, plus the hint that repo ids need -hub; a path not spelled like a
// repo id gets no hint.
func TestNoHubRefusesRepoIDs(t *testing.T) {
	tmp := t.TempDir()
	text := filepath.Join(tmp, "words.txt")
	writeWords(t, text)
	ts := startServer(t, openRuntime(t), Config{DataDir: filepath.Join(tmp, "data"), InputRoots: []string{tmp}, BaseDir: tmp})
	for _, c := range []struct{ body, field string }{
		{fmt.Sprintf(`{"model_name_or_path": %q, "train_file": %q}`, tinyRepo, text), "model_name_or_path"},
		{fmt.Sprintf(`{"model_type": "gpt2", "tokenizer_name": %q, "train_file": %q}`, tinyRepo, text), "tokenizer_name"},
		{fmt.Sprintf(`{"config_name": %q, "train_file": %q}`, tinyRepo, text), "config_name"},
	} {
		code, ans := call(t, "POST", ts.url+"/jobs", c.body)
		want := fmt.Sprintf("%s: %q: %v; %s", c.field, tinyRepo, errPathRefused, needsHubHint)
		if code != http.StatusBadRequest || !strings.Contains(string(ans), strings.ReplaceAll(want, `"`, `\"`)) {
			t.Fatalf("%s: %d %s\nwant %s", c.field, code, ans, want)
		}
	}
	code, ans := call(t, "GET", ts.url+"/generate?prompt_ids=1&model="+tinyRepo, "")
	if code != http.StatusBadRequest || !strings.Contains(string(ans), needsHubHint) || !strings.Contains(string(ans), `"field": "model"`) {
		t.Fatalf("GET /generate of a repo id without -hub: %d %s", code, ans)
	}
	code, ans = call(t, "POST", ts.url+"/jobs", fmt.Sprintf(`{"model_name_or_path": "/etc/passwd", "train_file": %q}`, text))
	if code != http.StatusBadRequest || strings.Contains(string(ans), "-hub") {
		t.Fatalf("a path that is no repo id: %d %s", code, ans)
	}
}

// testHubFlag: the binary started with -hub takes the Hub's settings from the environment as
// huggingface_hub does (HF_ENDPOINT, HF_HUB_CACHE, HF_TOKEN): it generates from a repo id of the
// fake Hub, sending the token to the Hub and writing it to no log, and exits 0 on SIGTERM;
// without -hub the same request is refused with the hint; an HF_ variable that does not parse
// stops it at start, named.
func testHubFlag(t *testing.T, bin string) {
	const token = "hf_binaryTokenThatMustNotBeLogged9"
	fake, tmp := hubtest.New(t), t.TempDir()
	sha := fake.AddRepo("model", tinyRepo, tinyGPT2Files(t), hubtest.RepoOptions{})
	env := []string{"HF_ENDPOINT=" + fake.URL(), "HF_HUB_CACHE=" + filepath.Join(tmp, "hf"), "HOME=" + tmp, "HF_TOKEN=" + token, "HF_HUB_OFFLINE="}
	args := []string{"-addr", "127.0.0.1:0", "-device", "go", "-data_dir", filepath.Join(tmp, "data"), "-input_roots", tmp}
	query := "/generate?model=" + tinyRepo + "&prompt=" + url.QueryEscape("the quick") + "&max_new_tokens=3"

	c := startChild(t, bin, tmp, env, append([]string{"-hub"}, args...)...)
	g := generate(t, c.base+query)
	if g.Revision != sha {
		t.Fatalf("generated from revision %q, want %s", g.Revision, sha)
	}
	if err := c.stop(t, time.Minute); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
	reqs := fake.Requests()
	for _, r := range reqs {
		if (r.Host == "hub") != (r.Authorization == "Bearer "+token) {
			t.Fatalf("%s %s on the %s host carried Authorization %q: want the token of HF_TOKEN on the Hub's host only", r.Method, r.Path, r.Host, r.Authorization)
		}
	}
	if len(reqs) == 0 {
		t.Fatal("no request reached the Hub")
	}
	if strings.Contains(c.stderr.String(), token) {
		t.Fatalf("the token is in the log:\n%s", c.stderr.String())
	}

	c = startChild(t, bin, tmp, env, args...)
	code, ans := call(t, "GET", c.base+query, "")
	if code != http.StatusBadRequest || !strings.Contains(string(ans), needsHubHint) {
		t.Fatalf("without -hub: %d %s", code, ans)
	}
	if err := c.stop(t, time.Minute); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}

	cmd := exec.CommandContext(t.Context(), bin, append([]string{"-hub"}, args...)...)
	cmd.Dir, cmd.Env = tmp, serviceEnv(append(env, "HF_HUB_ETAG_TIMEOUT=soon")...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "HF_HUB_ETAG_TIMEOUT") || strings.Contains(string(out), "listening on") {
		t.Fatalf("-hub with HF_HUB_ETAG_TIMEOUT=soon: %v\n%s", err, out)
	}
	t.Logf("-hub: generated %v from %s@%s; %d requests, the token on those to the Hub's host", g.TokenIDs, tinyRepo, sha[:8], len(reqs))
}

// TestCheckSnapshotFile: a file the hub client returns is read only if it is
// <cache>/<repo folder>/snapshots/<commit>/<file> and links inside that repo folder: a cache
// tampered with by something else cannot turn a repo id into a read of any file.
func TestCheckSnapshotFile(t *testing.T) {
	cache := t.TempDir()
	commit := strings.Repeat("ab", 20)
	repoDir := filepath.Join(cache, "models--org--x")
	snap := filepath.Join(repoDir, "snapshots", commit)
	for _, d := range []string{snap, filepath.Join(repoDir, "blobs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	outside := filepath.Join(t.TempDir(), "secret")
	for path, content := range map[string]string{filepath.Join(repoDir, "blobs", "e1"): "{}", outside: "secret"} {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{"config.json": filepath.Join("..", "..", "blobs", "e1"), "tokenizer.json": outside}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(snap, name)); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := checkSnapshotFile(cache, filepath.Join(snap, "config.json"), "config.json"); err != nil || got != commit {
		t.Fatalf("a linked blob: commit %q, %v", got, err)
	}
	for _, c := range []struct{ path, file, want string }{
		{filepath.Join(snap, "tokenizer.json"), "tokenizer.json", "links outside"},
		{filepath.Join(snap, "config.json"), "tokenizer.json", "not the file"},
		{filepath.Join(repoDir, "blobs", "e1"), "e1", "not in a snapshot"},
		{filepath.Join(repoDir, "snapshots", "main", "config.json"), "config.json", "not in a snapshot"},
		{outside, "secret", "not in a snapshot"},
	} {
		_, err := checkSnapshotFile(cache, c.path, c.file)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), cache) {
			t.Fatalf("%s as %s: %v, want an error saying %q without the cache's path", c.path, c.file, err, c.want)
		}
	}
}
