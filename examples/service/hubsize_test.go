package main

import (
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gotpu/gotpu/hub/hubtest"
)

// TestGenerateOversizedHubWeights: GET /generate?model= naming a repo whose config.json is
// org/tiny-gpt2's (168,768 parameters: at most about 17 MiB of files with the float64 and buffer
// allowance) but whose model.safetensors is 32 MiB is a 400 naming the model field, the file and
// the limit, answered quickly and without one byte of the weights served; a job on the same repo
// fails with the same reason, fetching nothing either; a repo whose weights are within the limit
// but do not load is a 400 naming the file, not a 500; and the next ordinary request answers.
func TestGenerateOversizedHubWeights(t *testing.T) {
	root, tmp := repoRoot(t), t.TempDir()
	fake := hubtest.New(t)
	files := tinyGPT2Files(t)
	fake.AddRepo("model", tinyRepo, files, hubtest.RepoOptions{})
	const bigWeights = 32 << 20
	fake.AddRepo("model", "org/tiny-config-big-weights", replaced(files, "model.safetensors", hubtest.Noise(bigWeights, 1)), hubtest.RepoOptions{})
	fake.AddRepo("model", "org/tiny-broken", replaced(files, "model.safetensors", hubtest.Noise(1<<20, 2)), hubtest.RepoOptions{})
	text := filepath.Join(tmp, "words.txt")
	writeWords(t, text)
	rt := openRuntime(t)
	ts := startServer(t, rt, Config{DataDir: filepath.Join(tmp, "data"), InputRoots: []string{root, tmp}, BaseDir: root,
		Hub: hubClient(t, fake, filepath.Join(tmp, "hf"), nil)})
	prompt := "/generate?prompt=" + url.QueryEscape("the quick brown") + "&max_new_tokens=3&model="

	start := time.Now()
	code, ans := call(t, "GET", ts.url+prompt+"org/tiny-config-big-weights", "")
	elapsed := time.Since(start)
	if code != http.StatusBadRequest {
		t.Fatalf("oversized weights: status %d, want 400: %s", code, ans)
	}
	for _, part := range []string{`"field": "model"`, "model.safetensors", fmt.Sprint(bigWeights), "over the limit of", "config.json implies"} {
		if !strings.Contains(string(ans), part) {
			t.Errorf("answer does not name %s: %s", part, ans)
		}
	}
	if n := fake.BytesServedFor("model.safetensors"); n != 0 {
		t.Errorf("%d bytes of the oversized weights were served before the refusal", n)
	}
	if elapsed > 10*time.Second {
		t.Errorf("the refusal took %v", elapsed)
	}
	t.Logf("oversized weights: %d after %v, %d weight bytes served: %s", code, elapsed.Round(time.Millisecond), fake.BytesServedFor("model.safetensors"), ans)

	// A job naming the repo passes validation (config.json is fine) and fails fetching its
	// weights, with the same reason and nothing fetched.
	fake.ResetRequests()
	var created Progress
	callJSON(t, "POST", ts.url+"/jobs", fmt.Sprintf(`{"model_name_or_path": "org/tiny-config-big-weights", "train_file": %q, "block_size": 16, "max_steps": 1}`, text),
		http.StatusCreated, &created)
	done := waitFor(t, ts.url+"/jobs/"+created.ID, "the end", func(p Progress) bool { return p.State.Done() })
	if done.State != StateFailed || !strings.Contains(done.Error, "model.safetensors") || !strings.Contains(done.Error, "over the limit of") {
		t.Errorf("job on oversized weights ended %s: %q", done.State, done.Error)
	}
	if n := fake.BytesServedFor("model.safetensors"); n != 0 {
		t.Errorf("the job fetched %d bytes of the oversized weights", n)
	}

	// Weights within the limit that are not a safetensors file: 400 naming the file.
	code, ans = call(t, "GET", ts.url+prompt+"org/tiny-broken", "")
	if code != http.StatusBadRequest || !strings.Contains(string(ans), "model.safetensors") || !strings.Contains(string(ans), `"field": "model"`) {
		t.Errorf("weights that do not load: status %d, want 400 naming model.safetensors: %s", code, ans)
	}
	t.Logf("broken weights: %d %s", code, ans)

	// The service is unharmed: an ordinary request answers.
	generate(t, ts.url+prompt+tinyRepo)
}
