package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/gotpu/gotpu/hub/hubtest"
)

// textColumnFormats are the file formats run_clm's text-column rule must treat alike.
var textColumnFormats = []string{"jsonl", "json", "csv", "parquet", "arrow"}

// twoColumnRecord is texts with an integer id beside them, the id column first (idFirst) or
// second, as an Arrow record.
func twoColumnRecord(texts []string, idFirst bool) arrow.RecordBatch {
	body := array.NewStringBuilder(memory.DefaultAllocator)
	defer body.Release()
	body.AppendValues(texts, nil)
	ids := array.NewInt64Builder(memory.DefaultAllocator)
	defer ids.Release()
	for i := range texts {
		ids.Append(int64(i))
	}
	bodyCol, idCol := body.NewArray(), ids.NewArray()
	defer bodyCol.Release()
	defer idCol.Release()
	fields := []arrow.Field{{Name: "body", Type: arrow.BinaryTypes.String}, {Name: "id", Type: arrow.PrimitiveTypes.Int64}}
	cols := []arrow.Array{bodyCol, idCol}
	if idFirst {
		slices.Reverse(fields)
		slices.Reverse(cols)
	}
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, int64(len(texts)))
}

// writeTwoColumn writes texts and their ids in format (textColumnFormats) under dir, with the
// writers HF's loaders read: JSON lines / a JSON array with keys in column order, CSV with a
// header (ids as plain digits, as datasets.to_csv writes them), Parquet, Arrow IPC file.
func writeTwoColumn(t *testing.T, dir, format string, texts []string, idFirst bool) string {
	t.Helper()
	order := "body-id"
	if idFirst {
		order = "id-body"
	}
	path := filepath.Join(dir, order+"."+format)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// One JSON object with its keys in column order (a Go map would sort them).
	object := func(i int) string {
		b, _ := json.Marshal(texts[i])
		if idFirst {
			return `{"id": ` + strconv.Itoa(i) + `, "body": ` + string(b) + `}`
		}
		return `{"body": ` + string(b) + `, "id": ` + strconv.Itoa(i) + `}`
	}
	switch format {
	case "jsonl", "json":
		var lines []string
		for i := range texts {
			lines = append(lines, object(i))
		}
		s := strings.Join(lines, "\n") + "\n"
		if format == "json" {
			s = "[" + strings.Join(lines, ",\n") + "]\n"
		}
		_, err = f.WriteString(s)
	case "csv":
		w := csv.NewWriter(f)
		head := []string{"body", "id"}
		if idFirst {
			head = []string{"id", "body"}
		}
		_ = w.Write(head)
		for i, s := range texts {
			row := []string{s, strconv.Itoa(i)}
			if idFirst {
				row = []string{strconv.Itoa(i), s}
			}
			_ = w.Write(row)
		}
		w.Flush()
		err = w.Error()
	case "parquet", "arrow":
		rec := twoColumnRecord(texts, idFirst)
		defer rec.Release()
		if format == "parquet" {
			tbl := array.NewTableFromRecords(rec.Schema(), []arrow.RecordBatch{rec})
			defer tbl.Release()
			err = pqarrow.WriteTable(tbl, f, 16, parquet.NewWriterProperties(), pqarrow.DefaultWriterProps())
		} else {
			var w *ipc.FileWriter
			if w, err = ipc.NewFileWriter(f, ipc.WithSchema(rec.Schema())); err == nil {
				if err = w.Write(rec); err == nil {
					err = w.Close()
				}
			}
		}
	}
	if err != nil {
		t.Fatalf("writing %s: %v", path, err)
	}
	return path
}

// openBlocks opens path as `gotpu train` does with extra flags and returns its blocks, or the
// error.
func openBlocks(t *testing.T, modelDir, path string, extra ...string) ([][]int32, error) {
	t.Helper()
	ctx := context.Background()
	args := append([]string{"--model_name_or_path", modelDir, "--train_file", path, "--block_size", "16",
		"--device", "go", "--output_dir", t.TempDir()}, extra...)
	r, err := parseRunArgs("train", args, io.Discard, "")
	if err != nil {
		t.Fatal(err)
	}
	rt, model, err := r.openModel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	ds, _, closeDS, err := r.openDataset(ctx, fileSource("train_file", r.md.TrainFile), nil, model, nil)
	if err != nil {
		return nil, err
	}
	defer closeDS()
	var blocks [][]int32
	for i := range ds.Len() {
		ex, err := ds.Get(i)
		if err != nil {
			t.Fatalf("%s: block %d: %v", path, i, err)
		}
		blocks = append(blocks, slices.Clone(ex.InputIDs))
	}
	return blocks, nil
}

// TestTextColumnRule: run_clm's text_column_name = "text" if "text" in column_names else
// column_names[0], the same for every format. {body, id}: body, the same blocks as the corpus's
// "text" column; {id, body}: id, which holds numbers, so an error listing the columns (CSV too,
// whose cells pandas reads as numbers); --text_column_name body: body everywhere; a named column
// that is absent: an error listing the columns.
func TestTextColumnRule(t *testing.T) {
	dir := t.TempDir()
	modelDir := filepath.Join(dir, "model")
	makeTinyGPT2Dir(t, modelDir)
	texts := corpusTexts(t)[:60]
	var ref strings.Builder
	for _, s := range texts {
		b, _ := json.Marshal(map[string]string{"text": s})
		ref.Write(append(b, '\n'))
	}
	refPath := writeFile(t, filepath.Join(dir, "text.jsonl"), ref.String())
	want, err := openBlocks(t, modelDir, refPath)
	if err != nil || len(want) == 0 {
		t.Fatalf("reference (a \"text\" column): %d blocks, %v", len(want), err)
	}
	t.Logf("reference: %d blocks of 16 tokens from %d documents", len(want), len(texts))
	for _, format := range textColumnFormats {
		bodyFirst := writeTwoColumn(t, dir, format, texts, false)
		idFirst := writeTwoColumn(t, dir, format, texts, true)
		if got, err := openBlocks(t, modelDir, bodyFirst); err != nil || !slices.EqualFunc(got, want, slices.Equal) {
			t.Errorf("%s {body, id}: %d blocks, %v; want the %d blocks of the text column", format, len(got), err, len(want))
		}
		_, err := openBlocks(t, modelDir, idFirst)
		if err == nil || !strings.Contains(err.Error(), `column "id" holds numbers, not text`) ||
			!strings.Contains(err.Error(), "columns: id, body") || !strings.Contains(err.Error(), "--text_column_name") {
			t.Errorf("%s {id, body}: %v; want an error saying column \"id\" holds numbers and listing id, body", format, err)
		} else {
			t.Logf("%s {id, body}: %v", format, err)
		}
		if got, err := openBlocks(t, modelDir, idFirst, "--text_column_name", "body"); err != nil || !slices.EqualFunc(got, want, slices.Equal) {
			t.Errorf("%s {id, body} --text_column_name body: %d blocks, %v; want the %d blocks", format, len(got), err, len(want))
		}
		_, err = openBlocks(t, modelDir, idFirst, "--text_column_name", "nope")
		if err == nil || !strings.Contains(err.Error(), `"nope"`) || !strings.Contains(err.Error(), "columns: id, body") {
			t.Errorf("%s --text_column_name nope: %v; want an error naming nope and listing id, body", format, err)
		}
	}
}

// TestTextColumnRuleCLI: the command line says which column it took when there is no "text"
// column (an info line naming it and the columns), for files of three formats and for a Hub
// dataset; {id, body} is exit 1 with the listing.
func TestTextColumnRuleCLI(t *testing.T) {
	dir := t.TempDir()
	modelDir := filepath.Join(dir, "model")
	makeTinyGPT2Dir(t, modelDir)
	texts := corpusTexts(t)[:60]
	train := func(env []string, data ...string) (string, int) {
		t.Helper()
		args := append([]string{"train", "--model_name_or_path", modelDir, "--block_size", "16", "--max_steps", "1",
			"--save_strategy", "no", "--device", "go", "--output_dir", filepath.Join(t.TempDir(), "out")}, data...)
		_, stderr, code := runGotpu(t, env, args...)
		return stderr, code
	}
	const logged = `using column "body" for text (no "text" column; columns: body, id)`
	for _, format := range []string{"jsonl", "csv", "parquet"} {
		stderr, code := train(nil, "--train_file", writeTwoColumn(t, dir, format, texts, false))
		if code != 0 || !strings.Contains(stderr, logged) {
			t.Errorf("%s {body, id}: exit %d; want 0 and the log line %s\n%s", format, code, logged, stderr)
		}
	}
	stderr, code := train(nil, "--train_file", writeTwoColumn(t, dir, "csv", texts, true))
	if code != 1 || !strings.Contains(stderr, `column "id" holds numbers, not text`) || !strings.Contains(stderr, "columns: id, body") {
		t.Errorf("csv {id, body}: exit %d, stderr %q; want 1 and the listing", code, stderr)
	}
	t.Logf("csv {id, body}: %s", strings.TrimSpace(stderr))

	raw, err := os.ReadFile(writeTwoColumn(t, t.TempDir(), "parquet", texts, false))
	if err != nil {
		t.Fatal(err)
	}
	s := hubtest.New(t)
	s.AddRepo("dataset", "org/bodies", map[string][]byte{"data/train-00000-of-00001.parquet": raw}, hubtest.RepoOptions{})
	stderr, code = train(hubEnv(t, s, filepath.Join(t.TempDir(), "hub")), "--dataset_name", "org/bodies")
	if code != 0 || !strings.Contains(stderr, logged) {
		t.Errorf("Hub dataset {body, id}: exit %d; want 0 and the log line\n%s", code, stderr)
	}
	for _, l := range strings.Split(stderr, "\n") {
		if strings.Contains(l, "using column") {
			t.Logf("Hub dataset: %s", l)
		}
	}
}
