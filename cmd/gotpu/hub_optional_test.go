package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/hub/hubtest"
)

// scoreLosses parses score's JSON lines into their losses.
func scoreLosses(t *testing.T, stdout string) []float64 {
	t.Helper()
	var ls []float64
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var r struct{ Loss *float64 }
		if err := json.Unmarshal([]byte(l), &r); err != nil || r.Loss == nil {
			t.Fatalf("score output line %q: %v", l, err)
		}
		ls = append(ls, *r.Loss)
	}
	return ls
}

// TestOfflineOptionalFiles is the repro: `gotpu download` of a repo without
// generation_config.json (nor tokenizer_config.json, chat_template.jinja, ...), then
// HF_HUB_OFFLINE=1 score, generate and generate --chat of it work with no request, as
// transformers treats those files as optional; the same holds for a cache without the .no_exist
// markers (filled before gotpu wrote them). A required file stays an error naming it.
func TestOfflineOptionalFiles(t *testing.T) {
	modelDir := filepath.Join(t.TempDir(), "model")
	makeTinyGPT2Dir(t, modelDir)
	files := hubtest.DirFiles(t, modelDir)
	delete(files, "generation_config.json")
	s := hubtest.New(t)
	commit := s.AddRepo("model", "org/nogen", files, hubtest.RepoOptions{})
	cache := filepath.Join(t.TempDir(), "hub")
	env := hubEnv(t, s, cache)
	if out, errOut, code := runGotpu(t, env, "download", "org/nogen", "--quiet"); code != 0 {
		t.Fatalf("gotpu download: exit %d, stdout %q\n%s", code, out, errOut)
	}
	noExist := filepath.Join(cache, "models--org--nogen", ".no_exist", commit)
	for _, f := range []string{"generation_config.json", "tokenizer_config.json", "chat_template.jinja", "model.safetensors.index.json"} {
		if _, err := os.Stat(filepath.Join(noExist, f)); err != nil {
			t.Errorf("gotpu download recorded no .no_exist marker for %s: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(noExist, "config.json")); err == nil {
		t.Error("a .no_exist marker for config.json, which the repo has")
	}

	tmp := t.TempDir()
	input := writeFile(t, filepath.Join(tmp, "in.jsonl"), "{\"input_ids\": [464, 2068, 7586, 21831]}\n{\"input_ids\": [15496, 11, 995]}\n")
	jinja := writeFile(t, filepath.Join(tmp, "plain.jinja"),
		"{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}")
	offline := append(env, "HF_HUB_OFFLINE=1")
	online, errOut, code := runGotpu(t, env, "score", "--model", "org/nogen", "--input", input, "--device", "go")
	if code != 0 {
		t.Fatalf("online score: exit %d\n%s", code, errOut)
	}
	want := scoreLosses(t, online)
	run := func(what string) {
		t.Helper()
		s.ResetRequests()
		out, errOut, code := runGotpu(t, offline, "score", "--model", "org/nogen", "--input", input, "--device", "go")
		if code != 0 {
			t.Fatalf("%s: offline score: exit %d\n%s", what, code, errOut)
		}
		got := scoreLosses(t, out)
		if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
			t.Errorf("%s: offline losses %v, online %v", what, got, want)
		}
		out, errOut, code = runGotpu(t, offline, "generate", "--model", "org/nogen", "--prompt_ids", "464,2068", "--max_new_tokens", "3", "--device", "go")
		if code != 0 || len(strings.Fields(out)) != 3 {
			t.Errorf("%s: offline generate: exit %d, stdout %q\n%s", what, code, out, errOut)
		}
		out, errOut, code = runGotpu(t, offline, "generate", "--chat", "--model", "org/nogen", "--prompt", "Hi", "--max_new_tokens", "2",
			"--chat_template_path", jinja, "--device", "go", "--json")
		if code != 0 || !strings.Contains(out, `"prompt":"user: Hi\nassistant: "`) {
			t.Errorf("%s: offline generate --chat: exit %d, stdout %q\n%s", what, code, out, errOut)
		}
		if n := s.RequestCount(); n != 0 {
			t.Errorf("%s: offline runs sent %d requests: %+v", what, n, s.Requests())
		}
		t.Logf("%s: offline score losses %v (online %v), generate and generate --chat exit 0, 0 requests", what, got, want)
	}
	run("with .no_exist markers")
	if err := os.RemoveAll(filepath.Join(cache, "models--org--nogen", ".no_exist")); err != nil {
		t.Fatal(err)
	}
	run("without markers")

	// Required files: weights not downloaded (only config.json), and a repo never downloaded.
	partial := filepath.Join(t.TempDir(), "hub")
	penv := hubEnv(t, s, partial)
	if _, errOut, code := runGotpu(t, penv, "download", "org/nogen", "--include", "config.json", "--quiet"); code != 0 {
		t.Fatalf("gotpu download --include config.json: exit %d\n%s", code, errOut)
	}
	_, errOut, code = runGotpu(t, append(penv, "HF_HUB_OFFLINE=1"), "score", "--model", "org/nogen", "--input", input, "--device", "go")
	if code != 1 || !strings.Contains(errOut, `"model.safetensors"`) || !strings.Contains(errOut, "not in the local cache") {
		t.Errorf("offline score without weights: exit %d, stderr %q; want 1 naming model.safetensors and the cache", code, errOut)
	}
	t.Logf("weights not cached: %s", strings.TrimSpace(errOut))
	_, errOut, code = runGotpu(t, offline, "score", "--model", "org/never", "--input", input, "--device", "go")
	if code != 1 || !strings.Contains(errOut, `"config.json"`) || !strings.Contains(errOut, "org/never") {
		t.Errorf("offline score of an uncached repo: exit %d, stderr %q; want 1 naming org/never's config.json", code, errOut)
	}
	t.Logf("repo not cached: %s", strings.TrimSpace(errOut))
}
