package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gotpu/gotpu/hub/hubtest"
	"github.com/gotpu/gotpu/models/peft"
)

// adapterBytesServed sums the body bytes the fake Hub sent for adapter_model.safetensors (from
// the Hub host, or the CDN, where LFS files are).
func adapterBytesServed(fake *hubtest.Server) int64 {
	var n int64
	for _, r := range fake.Requests() {
		cdn := r.Host == "cdn" && strings.Contains(r.Query, "filename="+peft.WeightsFile)
		if r.Method == http.MethodGet && (cdn || strings.HasSuffix(r.Path, "/"+peft.WeightsFile)) {
			n += r.Bytes
		}
	}
	return n
}

// TestHubAdapterOversizedWeights: GET /generate?model=...&adapter= naming a Hub adapter whose
// adapter_config.json is the gpt2-lora-tiny fixture's (r 4 on c_attn: at most 1,067,008 bytes of
// weights on gpt2-tiny, peft.MaxWeightsBytes) but whose adapter_model.safetensors is 32 MiB is a
// 400 naming the adapter field, the file, the announced size and the limit, answered quickly and
// without one byte of the weights served; a job continuing that adapter fails with the same
// reason, fetching nothing either; and the next ordinary request, with the legitimate adapter
// from the same Hub, answers.
func TestHubAdapterOversizedWeights(t *testing.T) {
	root, tmp := repoRoot(t), t.TempDir()
	fake := hubtest.New(t)
	fake.AddRepo("model", tinyRepo, tinyGPT2Files(t), hubtest.RepoOptions{})
	adapterFiles := map[string][]byte{}
	for _, f := range []string{peft.ConfigFile, peft.WeightsFile} {
		b, err := os.ReadFile(filepath.Join(root, loraAdapter, f))
		if err != nil {
			t.Fatal(err)
		}
		adapterFiles[f] = b
	}
	fake.AddRepo("model", "org/tiny-gpt2-lora", adapterFiles, hubtest.RepoOptions{})
	const bigWeights = 32 << 20
	fake.AddRepo("model", "org/lora-big-weights", replaced(adapterFiles, peft.WeightsFile, hubtest.Noise(bigWeights, 3)), hubtest.RepoOptions{})
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

	start := time.Now()
	msg := refused(t, "GET", q+"&adapter=org/lora-big-weights", "", "adapter")
	elapsed := time.Since(start)
	for _, part := range []string{"org/lora-big-weights", peft.WeightsFile, fmt.Sprint(bigWeights), "over the limit of 1067008", "adapter_config.json implies"} {
		if !strings.Contains(msg, part) {
			t.Errorf("the answer does not say %q: %s", part, msg)
		}
	}
	if n := adapterBytesServed(fake); n != 0 {
		t.Errorf("%d bytes of the oversized adapter weights were served before the refusal", n)
	}
	if elapsed > 10*time.Second {
		t.Errorf("the refusal took %v", elapsed)
	}
	t.Logf("oversized adapter: 400 after %v, %d adapter bytes served: %s", elapsed.Round(time.Millisecond), adapterBytesServed(fake), msg)

	// A job continuing the adapter passes validation (its config is fine) and fails fetching its
	// weights, with the same reason and nothing fetched.
	fake.ResetRequests()
	body := fmt.Sprintf(`{"model_name_or_path": %q, "train_file": %q, "adapter_name_or_path": "org/lora-big-weights", "max_steps": 1,
		"save_strategy": "no", "per_device_train_batch_size": 4}`, tinyRepo, tokens)
	var created Progress
	callJSON(t, "POST", ts.url+"/jobs", body, http.StatusCreated, &created)
	done := waitFor(t, ts.url+"/jobs/"+created.ID, "the end", func(p Progress) bool { return p.State.Done() })
	if done.State != StateFailed || !strings.Contains(done.Error, "adapter_name_or_path") || !strings.Contains(done.Error, peft.WeightsFile) ||
		!strings.Contains(done.Error, "over the limit of 1067008") {
		t.Errorf("job on the oversized adapter ended %s: %q", done.State, done.Error)
	}
	if n := adapterBytesServed(fake); n != 0 {
		t.Errorf("the job fetched %d bytes of the oversized adapter weights", n)
	}
	t.Logf("job: %s: %s", done.State, done.Error)

	// The service is unharmed: an ordinary request with the legitimate adapter answers.
	if g := generateTokens(t, q+"&adapter=org/tiny-gpt2-lora"); g.Adapter != "org/tiny-gpt2-lora" {
		t.Errorf(`"adapter": %q`, g.Adapter)
	}
}
