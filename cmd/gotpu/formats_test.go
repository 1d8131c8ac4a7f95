package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/data"
)

// tableCorpora are one corpus written by independent writers in every format the Hub serves
// (testdata/tables/gen/generate.mjs: hyparquet-writer, parquet-wasm, apache-arrow, csv-stringify):
// training on any of them must see the same documents.
var tableCorpora = []string{
	"corpus.jsonl",      // JSON lines (gotpu's JSON-lines reader)
	"corpus.parquet",    // Parquet, snappy, several row groups
	"save_to_disk",      // datasets.save_to_disk: two Arrow stream files
	"corpus.arrow",      // Arrow IPC stream
	"corpus.file.arrow", // Arrow IPC file
	"corpus.csv",        // CSV with quoted newlines, quotes and commas
	"corpus-array.json", // one JSON array
}

// TestFormatsGiveIdenticalBatches opens each corpus as `gotpu train` does (run_clm: the text
// column tokenized with the model's tokenizer and grouped into blocks) and compares every block,
// then trains 5 steps on four of them and compares the losses: the acceptance's "identical
// batches (same seed) and identical losses".
func TestFormatsGiveIdenticalBatches(t *testing.T) {
	dir := t.TempDir()
	modelDir := filepath.Join(dir, "model")
	makeTinyGPT2Dir(t, modelDir)
	tables := filepath.Join("..", "..", "testdata", "tables")
	ctx := context.Background()
	var want [][]int32
	for _, name := range tableCorpora {
		path := filepath.Join(tables, name)
		r, err := parseRunArgs("train", []string{"--model_name_or_path", modelDir, "--train_file", path,
			"--text_column_name", "text", "--block_size", "16", "--device", "go", "--output_dir", dir}, io.Discard, "")
		if err != nil {
			t.Fatal(err)
		}
		rt, model, err := r.openModel(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ds, _, closeDS, err := r.openDataset(ctx, fileSource("train_file", r.md.TrainFile), nil, model, nil)
		if err != nil {
			rt.Close()
			t.Fatalf("%s: %v", name, err)
		}
		var blocks [][]int32
		for i := range ds.Len() {
			ex, err := ds.Get(i)
			if err != nil {
				t.Fatalf("%s: block %d: %v", name, i, err)
			}
			blocks = append(blocks, slices.Clone(ex.InputIDs))
		}
		closeDS()
		rt.Close()
		if want == nil {
			want = blocks
			t.Logf("%s: %d blocks of 16 tokens", name, len(blocks))
			continue
		}
		if len(blocks) != len(want) {
			t.Errorf("%s: %d blocks, %s has %d", name, len(blocks), tableCorpora[0], len(want))
			continue
		}
		for i := range blocks {
			if !slices.Equal(blocks[i], want[i]) {
				t.Errorf("%s: block %d differs from %s's:\n%v\n%v", name, i, tableCorpora[0], blocks[i], want[i])
				break
			}
		}
	}

	// The same seed on the same blocks: the same batches, hence the same losses, bit for bit.
	var first []float64
	for _, name := range []string{"corpus.parquet", "save_to_disk", "corpus.csv", "corpus.jsonl"} {
		out := filepath.Join(dir, "out-"+name)
		_, stderr, code := runGotpu(t, nil, "train", "--model_name_or_path", modelDir, "--train_file", filepath.Join(tables, name),
			"--text_column_name", "text", "--block_size", "16", "--per_device_train_batch_size", "4", "--max_steps", "5",
			"--logging_steps", "1", "--seed", "7", "--save_strategy", "no", "--device", "go", "--output_dir", out)
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s", name, code, stderr)
		}
		losses := trainLosses(t, out)
		if first == nil {
			first = losses
			t.Logf("losses on %s: %v", name, losses)
			continue
		}
		if fmt.Sprint(losses) != fmt.Sprint(first) {
			t.Errorf("losses on %s: %v, on corpus.parquet: %v", name, losses, first)
		}
	}
}

var _ data.Dataset = firstN{}

// TestTablePositionIDs: pre-tokenized rows packed ahead of time (TRL's pack_dataset writes
// position_ids) keep their position ids through the table reader (here a JSON array, read by
// data/table) and the disk-backed token store, so their examples stay apart in attention.
func TestTablePositionIDs(t *testing.T) {
	dir := t.TempDir()
	modelDir := filepath.Join(dir, "model")
	makeTinyGPT2Dir(t, modelDir)
	path := filepath.Join(dir, "packed.json")
	rows := `[{"input_ids": [5, 6, 7, 8, 9], "position_ids": [0, 1, 2, 0, 1]},
 {"input_ids": [1, 2, 3], "position_ids": [0, 1, 2]},
 {"input_ids": [4, 4]}]`
	if err := os.WriteFile(path, []byte(rows), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := parseRunArgs("train", []string{"--model_name_or_path", modelDir, "--train_file", path,
		"--device", "go", "--output_dir", dir}, io.Discard, "")
	if err != nil {
		t.Fatal(err)
	}
	rt, model, err := r.openModel(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	ds, _, closeDS, err := r.openDataset(context.Background(), fileSource("train_file", r.md.TrainFile), nil, model, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closeDS()
	want := [][]int32{{0, 1, 2, 0, 1}, {0, 1, 2}, nil}
	if ds.Len() != len(want) {
		t.Fatalf("%d examples, want %d", ds.Len(), len(want))
	}
	for i, w := range want {
		ex, err := ds.Get(i)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ex.PositionIDs, w) {
			t.Errorf("example %d: position_ids %v, want %v", i, ex.PositionIDs, w)
		}
	}
	// Positions that neither restart at 0 nor count up are refused, naming the column.
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`[{"input_ids": [5, 6, 7], "position_ids": [0, 2, 3]}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	r.md.TrainFile = &bad
	if _, _, _, err := r.openDataset(context.Background(), fileSource("train_file", r.md.TrainFile), nil, model, nil); err == nil || !strings.Contains(err.Error(), "position_ids") {
		t.Fatalf("bad position_ids: %v, want an error naming position_ids", err)
	}
}
