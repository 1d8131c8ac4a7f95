package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/gotpu/gotpu/hub"
	"github.com/gotpu/gotpu/hub/hubtest"
	"github.com/gotpu/gotpu/trainer"
)

// maxParseAlloc bounds what one POST /jobs body may make the spec parser allocate (cumulative
// bytes, garbage included), the first load of a tokenizer file aside: that is bounded by the
// tokenizer library's own limits (the GPT-2 tokenizer's load allocates ~46 MiB), and is shared
// by every job on the file afterwards. What the parser reads itself is capped: the body (1 MiB),
// a config.json (1 MiB), and the first record of a data file (16 MiB, read token by token: at
// worst one 16 MiB string, with the decoder's buffer growing to hold it). Typical bodies
// allocate under 100 kB.
const maxParseAlloc = 64 << 20

// FuzzParseSpec drives the job-spec parser with arbitrary bodies: it must never panic; every
// refusal must be a 400 (*requestError) with at least one field; an accepted spec must carry the
// service's own settings and fit the resource budget (trainer.CheckBudget on the runtime the
// service would train on: a body must not get a job accepted that would then take the process
// down); every tokenizer reference taken must be given back; and no body may make the parser
// allocate more than maxParseAlloc. The seed corpus is TestBadJobRequests' bodies, valid ones,
// and the out-of-memory requests (n_embd=1073741824; a batch of 10^9). Names that are
// Hub repo ids go to an offline Hub client whose cache holds org/tiny-gpt2 (fetched from the fake
// Hub before the run): no body makes a connection.
//
//	go test ./examples/service -run '^$' -fuzz FuzzParseSpec -fuzztime 60s -parallel 1
func FuzzParseSpec(f *testing.F) {
	root, src, tmp := repoRoot(f), goSrc(f), f.TempDir()
	text := filepath.Join(src, "fmt", "print.go")
	outside := filepath.Join(tmp, "outside.jsonl")
	writeTokenJSONL(f, outside, 2, 8, 100)
	in := filepath.Join(tmp, "in")
	if err := os.Mkdir(in, 0o755); err != nil {
		f.Fatal(err)
	}
	tokens := filepath.Join(in, "tokens.jsonl")
	writeTokenJSONL(f, tokens, 20, 16, 1000)
	for _, c := range badJobCases(text, outside) {
		f.Add([]byte(c.body))
	}
	for _, body := range []string{
		fmt.Sprintf(`{"model_type": "gpt2", "config_overrides": "n_embd=16,n_layer=1,n_head=2,n_positions=32",
			"tokenizer_name": "testdata/tokenizers/gpt2/tokenizer.json.gz", "train_file": %q, "block_size": 16,
			"per_device_train_batch_size": 1, "max_steps": 10, "save_steps": 5, "logging_steps": 1}`, text),
		fmt.Sprintf(`{"model_name_or_path": "testdata/models/gpt2-tiny", "train_file": %q, "max_steps": 3}`, tokens),
		fmt.Sprintf(`{"model_type": "llama", "config_overrides": "hidden_size=8,num_hidden_layers=1,num_attention_heads=2,num_key_value_heads=2,head_dim=4,intermediate_size=16,vocab_size=1000", "train_file": %q}`, tokens),
		fmt.Sprintf(`{"config_name": "testdata/models/llama-tiny", "train_file": %q, "save_total_limit": 1}`, tokens),
		`{"model_type": "gpt2", "config_overrides": "n_embd=1073741824,n_head=1", "train_file": "testdata/tokenizers/corpus.jsonl", "tokenizer_name": "testdata/tokenizers/gpt2/tokenizer.json.gz"}`,
		fmt.Sprintf(`{"model_name_or_path": "testdata/models/gpt2-tiny", "train_file": %q, "per_device_train_batch_size": 1000000000}`, tokens),
		fmt.Sprintf(`{"model_type": "gpt2", "train_file": %q, "per_device_train_batch_size": 4096, "block_size": 1024}`, tokens),
		fmt.Sprintf(`{"model_name_or_path": "testdata/models/gpt2-tiny", "train_file": %q, "use_peft": true, "lora_r": 4, "lora_target_modules": ["c_attn"]}`, tokens),
		fmt.Sprintf(`{"model_name_or_path": "testdata/models/gpt2-tiny", "train_file": %q, "adapter_name_or_path": "testdata/models/lora/gpt2-lora-tiny"}`, tokens),
		fmt.Sprintf(`{"model_name_or_path": "testdata/models/llama-tiny", "train_file": %q, "use_peft": true, "lora_target_modules": "all-linear", "per_device_train_batch_size": 1000000}`, tokens),
	} {
		f.Add([]byte(body))
	}
	for _, body := range []string{
		fmt.Sprintf(`{"model_name_or_path": "org/tiny-gpt2", "train_file": %q, "max_steps": 3}`, tokens),
		fmt.Sprintf(`{"model_name_or_path": "org/tiny-gpt2@main", "model_revision": "v1", "train_file": %q, "block_size": 8}`, text),
		fmt.Sprintf(`{"model_type": "gpt2", "tokenizer_name": "org/tiny-gpt2", "train_file": %q}`, text),
		fmt.Sprintf(`{"config_name": "org/absent", "train_file": %q, "token": "hf_x"}`, tokens),
	} {
		f.Add([]byte(body))
	}
	hf := offlineHub(f, filepath.Join(tmp, "hf"))
	paths, err := newPathPolicy(root, []string{root, src, in})
	if err != nil {
		f.Fatal(err)
	}
	rt := openRuntime(f)
	toks := newTokenizerCache(nil)
	// The GPT-2 tokenizer stays held for the whole run, as a queued job would hold it, so that
	// inputs naming it do not each reload it.
	if _, release, err := toks.acquire(f.Context(), filepath.Join(root, "testdata", "tokenizers", "gpt2", "tokenizer.json.gz")); err != nil {
		f.Fatal(err)
	} else {
		f.Cleanup(release)
	}
	sample := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	allocated := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) > maxBodyBytes {
			return // POST /jobs refuses these before parsing (http.MaxBytesReader)
		}
		env := specEnv{paths: paths, jobDir: t.TempDir(), deviceKind: rt.Kind(), numDevices: rt.NumDevices(), toks: toks, rt: rt, hub: hf}
		loads, held := toks.stats()
		before := allocated()
		spec, err := parseSpec(t.Context(), body, env)
		used := allocated() - before
		if after, _ := toks.stats(); after == loads && used > maxParseAlloc {
			t.Fatalf("parsing a %d-byte body allocated %d MiB (bound %d MiB)", len(body), used>>20, maxParseAlloc>>20)
		}
		defer func() {
			if _, now := toks.stats(); now != held {
				t.Fatalf("%d tokenizers held after the spec was released, %d before", now, held)
			}
		}()
		if err != nil {
			var re *requestError
			if !errors.As(err, &re) || len(re.Fields) == 0 {
				t.Fatalf("error %T %v: want a *requestError with fields (a 400)", err, err)
			}
			for _, fe := range re.Fields {
				if fe.Message == "" || (fe.Field != "" && !strings.Contains(fe.Message, fe.Field)) {
					t.Fatalf("field error %+v does not name its field", fe)
				}
			}
			return
		}
		defer spec.release()
		if _, err := trainer.CheckBudget(rt, spec.budgetRequest(spec.Args)); err != nil {
			t.Fatalf("accepted a job over the resource budget: %v", err)
		}
		if spec.Args.OutputDir != env.jobDir || spec.Args.SaveTotalLimit == nil || *spec.Args.SaveTotalLimit < 0 ||
			spec.TrainFile == "" || (spec.ModelDir == "" && spec.Config == nil) || spec.BlockSize <= 0 {
			t.Fatalf("accepted spec %+v", spec)
		}
		if !spec.Pretokenized && spec.Tokenizer == nil {
			t.Fatalf("text data without a tokenizer accepted")
		}
	})
}

// offlineHub is a Hub fetcher on an offline client whose cache holds org/tiny-gpt2's config.json
// and tokenizer.json, fetched from a fake Hub that is closed before it is returned.
func offlineHub(tb testing.TB, cache string) *hubFetcher {
	tb.Helper()
	fake := hubtest.NewServer()
	defer fake.Close()
	fake.AddRepo("model", tinyRepo, tinyGPT2Files(tb), hubtest.RepoOptions{})
	cfg := hub.DefaultConfig()
	cfg.Endpoint, cfg.CacheDir = fake.URL(), cache
	online, err := hub.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	repo := hub.Repo{ID: tinyRepo}
	for _, file := range []string{"config.json", "tokenizer.json"} {
		if _, err := online.Download(tb.Context(), repo, file); err != nil {
			tb.Fatal(err)
		}
	}
	cfg.Offline = true
	c, err := hub.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return &hubFetcher{c: c, timeout: time.Second}
}
