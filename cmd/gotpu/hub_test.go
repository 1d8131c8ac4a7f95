package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/gotpu/gotpu/hub/hubtest"
	"github.com/gotpu/gotpu/trainer"
)

// corpusTexts are the text column of the shared table fixtures (testdata/tables, written by
// independent Parquet/Arrow/CSV writers from this one corpus).
func corpusTexts(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "tables", "corpus.expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rows []struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(b, &rows); err != nil {
		t.Fatal(err)
	}
	texts := make([]string, len(rows))
	for i, r := range rows {
		texts[i] = r.Text
	}
	return texts
}

// textParquet writes texts as a one-column ("text") Parquet file, as datasets.push_to_hub stores a
// text dataset, in row groups of rowGroup rows.
func textParquet(t *testing.T, texts []string, rowGroup int) []byte {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{{Name: "text", Type: arrow.BinaryTypes.String}}, nil)
	b := array.NewStringBuilder(memory.DefaultAllocator)
	defer b.Release()
	b.AppendValues(texts, nil)
	col := b.NewArray()
	defer col.Release()
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, int64(len(texts)))
	defer rec.Release()
	tbl := array.NewTableFromRecords(schema, []arrow.RecordBatch{rec})
	defer tbl.Release()
	path := filepath.Join(t.TempDir(), "t.parquet")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy))
	if err := pqarrow.WriteTable(tbl, f, int64(rowGroup), props, pqarrow.DefaultWriterProps()); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// fakeHub serves org/tiny-gpt2 (a tiny GPT-2 with the real GPT-2 tokenizer.json) and the
// dataset org/tiny-text laid out as datasets.push_to_hub writes it (data/{split}-00000-of-00001.parquet).
func fakeHub(t *testing.T) *hubtest.Server {
	t.Helper()
	modelDir := filepath.Join(t.TempDir(), "model")
	makeTinyGPT2Dir(t, modelDir)
	s := hubtest.New(t)
	s.AddRepo("model", "org/tiny-gpt2", hubtest.DirFiles(t, modelDir), hubtest.RepoOptions{})
	texts := corpusTexts(t)
	s.AddRepo("dataset", "org/tiny-text", map[string][]byte{
		"data/train-00000-of-00001.parquet":      textParquet(t, texts[:120], 32),
		"data/validation-00000-of-00001.parquet": textParquet(t, texts[120:], 32),
	}, hubtest.RepoOptions{})
	return s
}

// hubEnv points gotpu at the fake Hub and a fresh cache, and every proxy variable at a closed
// port, so that any request for anything but the local hub fails (Go's proxy rules leave
// loopback alone).
func hubEnv(t *testing.T, s *hubtest.Server, cache string) []string {
	proxy := hubtest.ClosedURL(t)
	return []string{"HF_ENDPOINT=" + s.URL(), "HF_HUB_CACHE=" + cache, "HF_HOME=" + filepath.Join(t.TempDir(), "hfhome"),
		"HF_TOKEN=", "HF_HUB_OFFLINE=", "HTTP_PROXY=" + proxy, "HTTPS_PROXY=" + proxy, "ALL_PROXY=" + proxy,
		"http_proxy=" + proxy, "https_proxy=" + proxy, "NO_PROXY=", "no_proxy="}
}

// TestTrainFromHub is the acceptance run: model, tokenizer and dataset named by Hub ids,
// fetched from a local hub into the shared cache; then the same command offline succeeds from the
// cache without one request.
func TestTrainFromHub(t *testing.T) {
	s := fakeHub(t)
	cache := filepath.Join(t.TempDir(), "hub")
	env := hubEnv(t, s, cache)
	args := func(out string) []string {
		return []string{"train", "--model_name_or_path", "org/tiny-gpt2", "--tokenizer_name", "org/tiny-gpt2",
			"--dataset_name", "org/tiny-text", "--max_steps", "5", "--output_dir", out, "--device", "go"}
	}
	out1 := filepath.Join(t.TempDir(), "out1")
	stdout, stderr, code := runGotpu(t, env, args(out1)...)
	if code != 0 {
		t.Fatalf("online run: exit %d\n%s", code, stderr)
	}
	if !strings.Contains(stdout, "trained 5 steps") {
		t.Fatalf("online run: stdout %q", stdout)
	}
	online := s.RequestCount()
	if online == 0 {
		t.Fatal("the online run made no request to the hub")
	}
	for _, p := range []string{"models--org--tiny-gpt2/refs/main", "datasets--org--tiny-text/refs/main"} {
		if _, err := os.Stat(filepath.Join(cache, p)); err != nil {
			t.Errorf("cache lacks %s: %v", p, err)
		}
	}
	s.ResetRequests()
	out2 := filepath.Join(t.TempDir(), "out2")
	stdout, stderr, code = runGotpu(t, append(env, "HF_HUB_OFFLINE=1"), args(out2)...)
	if code != 0 || !strings.Contains(stdout, "trained 5 steps") {
		t.Fatalf("offline run: exit %d, stdout %q\n%s", code, stdout, stderr)
	}
	if n := s.RequestCount(); n != 0 {
		t.Fatalf("offline run made %d requests: %+v", n, s.Requests())
	}
	l1, l2 := trainLosses(t, out1), trainLosses(t, out2)
	if fmt.Sprint(l1) != fmt.Sprint(l2) {
		t.Errorf("online losses %v, offline %v: the same data and seed must give the same run", l1, l2)
	}
	t.Logf("online run: %d hub requests; offline run: 0; final train_loss online %v offline %v", online, l1, l2)

	// Offline, a repo that was never downloaded is an error naming it.
	_, stderr, code = runGotpu(t, append(env, "HF_HUB_OFFLINE=1"), "train", "--model_name_or_path", "org/other",
		"--dataset_name", "org/tiny-text", "--max_steps", "1", "--output_dir", filepath.Join(t.TempDir(), "o"), "--device", "go")
	if code != 1 || !strings.Contains(stderr, "org/other") || !strings.Contains(stderr, "config.json") {
		t.Errorf("offline, uncached model: exit %d, stderr %q: want 1 naming org/other's config.json", code, stderr)
	}
}

// trainLosses is the run's train_loss (train_results.json) and its logged losses.
func trainLosses(t *testing.T, out string) []float64 {
	t.Helper()
	st, err := trainer.LoadTrainerState(filepath.Join(out, "trainer_state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ls []float64
	for _, e := range st.LogHistory {
		if l, ok := e.Loss(); ok {
			ls = append(ls, l)
		}
	}
	b, err := os.ReadFile(filepath.Join(out, "train_results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res map[string]float64
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	return append(ls, res["train_loss"])
}

// TestDatasetNameErrors: a wrong split lists the splits; a local directory of the same spelling
// as a repo id wins over the Hub.
func TestDatasetNameErrors(t *testing.T) {
	s := fakeHub(t)
	env := hubEnv(t, s, filepath.Join(t.TempDir(), "hub"))
	_, stderr, code := runGotpu(t, env, "train", "--model_name_or_path", "org/tiny-gpt2", "--dataset_name", "org/tiny-text",
		"--train_split", "nope", "--max_steps", "1", "--output_dir", filepath.Join(t.TempDir(), "o"), "--device", "go")
	if code != 1 || !strings.Contains(stderr, "nope") || !strings.Contains(stderr, "train") || !strings.Contains(stderr, "validation") {
		t.Errorf("wrong split: exit %d, stderr %q: want 1 naming nope and listing train, validation", code, stderr)
	}
}
