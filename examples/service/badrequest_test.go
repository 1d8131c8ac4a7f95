package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBadJobRequests: each bad POST /jobs body is a 400 whose message and fields name the
// offending field, and leaves no job and no directory behind.
func TestBadJobRequests(t *testing.T) {
	root, tmp := repoRoot(t), t.TempDir()
	src := goSrc(t)
	dataDir := filepath.Join(tmp, "data")
	ts := startServer(t, openRuntime(t), Config{DataDir: dataDir, InputRoots: []string{root, src}, BaseDir: root})
	text := filepath.Join(src, "fmt", "print.go")
	outside := filepath.Join(tmp, "outside.jsonl")
	writeTokenJSONL(t, outside, 2, 8, 100)
	for _, c := range badJobCases(text, outside) {
		t.Run(c.name, func(t *testing.T) {
			code, body := call(t, "POST", ts.url+"/jobs", c.body)
			if code != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %s", code, body)
			}
			var eb errorBody
			if err := json.Unmarshal(body, &eb); err != nil {
				t.Fatalf("%v in %s", err, body)
			}
			t.Logf("400: %s", eb.Error)
			if !strings.Contains(eb.Error, c.msg) {
				t.Fatalf("error %q does not say %q", eb.Error, c.msg)
			}
			if c.field == "" {
				return
			}
			found := false
			for _, f := range eb.Fields {
				if f.Field == c.field && strings.Contains(f.Message, c.field) {
					found = true
				}
			}
			if !found || !strings.Contains(eb.Error, c.field) {
				t.Fatalf("no field %q in %s", c.field, body)
			}
		})
	}
	var list struct{ Jobs []Progress }
	callJSON(t, "GET", ts.url+"/jobs", "", http.StatusOK, &list)
	if len(list.Jobs) != 0 {
		t.Fatalf("bad requests created jobs: %+v", list.Jobs)
	}
	des, err := os.ReadDir(filepath.Join(dataDir, "jobs"))
	if err != nil || len(des) != 0 {
		t.Fatalf("bad requests left %d job directories (%v)", len(des), err)
	}
}

// TestBadGenerateRequests: generation parameters are checked before any model is loaded.
func TestBadGenerateRequests(t *testing.T) {
	for _, c := range []struct{ query, field string }{
		{"", "prompt"},
		{"prompt=a&prompt_ids=1", "prompt_ids"},
		{"prompt_ids=1,x", "prompt_ids"},
		{"prompt=a&max_new_tokens=0", "max_new_tokens"},
		{"prompt=a&max_new_tokens=100000", "max_new_tokens"},
		{"prompt=a&top_p=2", "top_p"},
		{"prompt=a&do_sample=maybe", "do_sample"},
		{"prompt=a&seed=-1", "seed"},
		{"prompt=a&do_sample=true&temperature=0", "temperature"}, // the library's rule: > 0 when sampling
		{"prompt=a&do_sample=true&top_p=0", "top_p"},
	} {
		q, err := url.ParseQuery(c.query)
		if err != nil {
			t.Fatal(err)
		}
		_, re := parseGenerateParams(q)
		if re == nil || re.Fields[0].Field != c.field || !strings.HasPrefix(re.Fields[0].Message, c.field+": ") {
			t.Fatalf("%q: %v, want a problem with %s", c.query, re, c.field)
		}
	}
	q, _ := url.ParseQuery("prompt=hi&max_new_tokens=7&do_sample=true&temperature=0.5&top_k=3&top_p=0.9&seed=11")
	g, re := parseGenerateParams(q)
	if re != nil || g.prompt != "hi" || g.opts.MaxNewTokens != 7 || !g.opts.DoSample || g.opts.Temperature != 0.5 ||
		g.opts.TopK != 3 || g.opts.TopP != 0.9 || g.opts.Seed != 11 {
		t.Fatalf("parsed %+v, %v", g, re)
	}
}

// badJobCase is a POST /jobs body with one problem: the field it names and a piece of the
// message. text is a text file inside the allowed directories, outside a JSON-lines file
// outside them. FuzzParseSpec seeds its corpus with these bodies.
type badJobCase struct{ name, body, field, msg string }

func badJobCases(text, outside string) []badJobCase {
	// A valid from-scratch job, which each case breaks in one way.
	good := func(extra string) string {
		return fmt.Sprintf(`{"model_type": "gpt2", "config_overrides": "n_embd=32,n_layer=1,n_head=2,n_positions=32",
			"tokenizer_name": "testdata/tokenizers/gpt2/tokenizer.json.gz", "train_file": %q, "max_steps": 1%s}`, text, extra)
	}
	// A valid LoRA job on a pretrained base (with token ids below its vocabulary of 1000) but for
	// the PEFT fields given.
	lora := func(fields string) string {
		return fmt.Sprintf(`{"model_name_or_path": "testdata/models/gpt2-tiny", "train_file": "testdata/loghistory/v1000.jsonl", "max_steps": 1, %s}`, fields)
	}
	return []badJobCase{
		{"not JSON", `{"learning_rate": 3e-4,`, "", "POST /jobs body"},
		{"not an object", `[1, 2]`, "", "top level"},
		{"negative learning rate", good(`, "learning_rate": -1`), "learning_rate", "negative"},
		{"wrong type", good(`, "per_device_train_batch_size": "eight"`), "per_device_train_batch_size", "per_device_train_batch_size"},
		{"typo", good(`, "lerning_rate": 3e-4`), "lerning_rate", "did you mean learning_rate"},
		{"fp16", good(`, "fp16": true`), "fp16", "bf16"},
		{"unknown scheduler", good(`, "lr_scheduler_type": "sawtooth"`), "lr_scheduler_type", "sawtooth"},
		{"output_dir", good(`, "output_dir": "/tmp/elsewhere"`), "output_dir", "set by the service"},
		{"device", good(`, "device": "tpu"`), "device", `runs on "go"`},
		{"num_devices", good(`, "num_devices": 4`), "num_devices", "1 device"},
		{"resume true", good(`, "resume_from_checkpoint": "true"`), "resume_from_checkpoint", "new for each job"},
		{"resume not a checkpoint", good(`, "resume_from_checkpoint": "testdata/models/gpt2-tiny"`), "resume_from_checkpoint", "not a committed checkpoint"},
		{"no model", fmt.Sprintf(`{"train_file": %q, "tokenizer_name": "testdata/tokenizers/gpt2/tokenizer.json.gz"}`, text), "model_name_or_path", "required"},
		{"bad model_type", `{"model_type": "t5", "train_file": "x"}`, "model_type", `"t5"`},
		{"override key", `{"model_type": "gpt2", "config_overrides": "n_embed=32", "train_file": "x"}`, "config_overrides", "n_embed isn't in the original config dict"},
		{"override value", `{"model_type": "gpt2", "config_overrides": "n_layer=two", "train_file": "x"}`, "config_overrides", "n_layer=two: not an int"},
		{"overrides with a model", `{"model_name_or_path": "testdata/models/gpt2-tiny", "config_overrides": "n_layer=1", "train_file": "x"}`, "config_overrides", "model_type"},
		{"missing model dir", `{"model_name_or_path": "testdata/models/nope", "train_file": "x"}`, "model_name_or_path", "not a file this service can read"},
		{"not a causal LM", `{"model_name_or_path": "testdata/models/bert-tiny", "train_file": "x"}`, "model_name_or_path", "not a causal language model"},
		{"no train_file", `{"model_name_or_path": "testdata/models/gpt2-tiny"}`, "train_file", "required"},
		{"train_file outside the roots", fmt.Sprintf(`{"model_name_or_path": "testdata/models/gpt2-tiny", "train_file": %q}`, outside), "train_file", "not a file this service can read"},
		{"text without tokenizer", fmt.Sprintf(`{"model_name_or_path": "testdata/models/gpt2-tiny", "train_file": %q}`, text), "tokenizer_name", "required"},
		{"tokenizer larger than the model", fmt.Sprintf(`{"model_name_or_path": "testdata/models/gpt2-tiny", "train_file": %q, "tokenizer_name": "testdata/tokenizers/gpt2/tokenizer.json.gz"}`, text), "tokenizer_name", "vocab_size is 1000"},
		{"block_size", good(`, "block_size": 0`), "block_size", "positive"},
		{"hub dataset", good(`, "dataset_name": "wikitext"`), "dataset_name", "train_file"},
		{"use_peft from scratch", good(`, "use_peft": true`), "use_peft", "needs model_name_or_path"},
		{"lora_r without use_peft", good(`, "lora_r": 8`), "lora_r", "set without use_peft"},
		{"lora_r 0", lora(`"use_peft": true, "lora_r": 0`), "lora_r", "must be positive"},
		{"use_dora", lora(`"use_peft": true, "use_dora": true`), "use_dora", "DoRA"},
		{"lora_modules_to_save", lora(`"use_peft": true, "lora_modules_to_save": ["lm_head"]`), "lora_modules_to_save", "not supported"},
		{"unknown target module", lora(`"use_peft": true, "lora_target_modules": ["c_attn", "c_atn"]`), "lora_target_modules", `"c_atn" matches no layer`},
		{"adapter outside the roots", lora(fmt.Sprintf(`"adapter_name_or_path": %q`, filepath.Dir(outside))), "adapter_name_or_path", "not a file this service can read"},
		{"adapter without adapter_config.json", lora(`"adapter_name_or_path": "testdata/models/gpt2-tiny"`), "adapter_name_or_path", "no adapter_config.json"},
		{"lora_r against the adapter", lora(`"adapter_name_or_path": "testdata/models/lora/gpt2-lora-tiny", "lora_r": 8`), "lora_r", "adapter_config.json decides"},
	}
}
