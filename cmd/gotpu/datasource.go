package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/data/datasets"
	"github.com/gotpu/gotpu/data/table"
	"github.com/gotpu/gotpu/data/tokenizer"
	"github.com/gotpu/gotpu/hub"
	"github.com/gotpu/gotpu/internal/cli"
	"github.com/gotpu/gotpu/models"
)

// dataSource is where one split comes from: --train_file / --validation_file (one file or a
// save_to_disk directory), or a split of --dataset_name (its files, in order, one format).
type dataSource struct {
	// what names the source in errors: "--train_file x.parquet", "--dataset_name org/name split train".
	what  string
	files []string
	// format is the datasets format of a --dataset_name split; "" for a --*_file path, whose
	// extension decides.
	format string
	// span is set when the source is part of a split (validation_split_percentage).
	span *rowSpan
}

// single is the path of a one-file source.
func (s *dataSource) single() (string, bool) {
	if s == nil || len(s.files) != 1 {
		return "", false
	}
	return s.files[0], true
}

// fileSource is --train_file / --validation_file, or nil when not given.
func fileSource(flagName string, path *string) *dataSource {
	if path == nil || *path == "" {
		return nil
	}
	return &dataSource{what: "--" + flagName + " " + *path, files: []string{*path}}
}

// datasetSplits resolves --dataset_name (a local dataset directory, which wins as in
// load_dataset, or a Hub dataset repo id "org/name[@rev]") and its --dataset_config_name to the
// files of the training split (--train_split, default "train") and of the evaluation split
// (--validation_split; by default "validation" when the dataset has it and evaluation is asked
// for). Hub files come through the shared Hugging Face cache, all from one commit.
func (r *runArgs) datasetSplits(ctx context.Context, wantTrain, wantEval bool) (train, eval *dataSource, err error) {
	name := stringOr(r.md.DatasetName, "")
	config := stringOr(r.md.DatasetConfigName, "")
	var resolved *datasets.Resolved
	var repo hub.Repo
	var c *hub.Client
	if st, statErr := os.Stat(name); statErr == nil && st.IsDir() {
		if resolved, err = datasets.ResolveLocal(name, config); err != nil {
			return nil, nil, fmt.Errorf("--dataset_name %s: %w", name, err)
		}
	} else {
		if repo, err = hub.ParseRepo(name, hub.DatasetRepo); err != nil {
			return nil, nil, cli.UsageError("--dataset_name: %v (a Hub dataset id org/name, or a local dataset directory)", err)
		}
		if c, err = r.hub(); err != nil {
			return nil, nil, err
		}
		if resolved, err = datasets.ResolveHub(ctx, c, repo, config); err != nil {
			return nil, nil, fmt.Errorf("--dataset_name %s: %w", name, err)
		}
	}
	pick := func(split string) (*dataSource, error) {
		files, err := resolved.Split(split)
		if err != nil {
			return nil, fmt.Errorf("--dataset_name %s (config %s): %w", name, resolved.Config, err)
		}
		if c != nil {
			if files, err = datasets.DownloadSplit(ctx, c, repo, resolved, split); err != nil {
				return nil, fmt.Errorf("--dataset_name %s (config %s) split %s: %w", name, resolved.Config, split, err)
			}
		}
		return &dataSource{what: fmt.Sprintf("--dataset_name %s split %s", name, split), files: files, format: resolved.Format}, nil
	}
	if wantTrain {
		if train, err = pick(stringOr(r.md.TrainSplit, "train")); err != nil {
			return nil, nil, err
		}
	}
	evalSplit := stringOr(r.md.ValidationSplit, "")
	if evalSplit == "" && wantEval && slices.Contains(resolved.SplitNames(), "validation") {
		evalSplit = "validation"
	}
	if evalSplit != "" {
		if eval, err = pick(evalSplit); err != nil {
			return nil, nil, err
		}
	}
	// No validation split: run_clm carves train[:N%] out of train (validation_split_percentage).
	return r.percentSplit(train, eval, wantTrain)
}

// isTableSource tells whether a source is read through data/table (Parquet, Arrow, CSV, a JSON
// array, several files) rather than the JSON-lines and text readers gotpu has always had for
// single .jsonl/.json/.txt files.
func isTableSource(s *dataSource) (bool, error) {
	path, ok := s.single()
	if !ok {
		return true, nil
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return true, nil // a save_to_disk directory
	}
	switch strings.ToLower(filepath.Ext(path)) {
	case ".txt":
		return false, nil
	case ".json", ".jsonl":
		arr, err := table.IsJSONArray(path)
		if err != nil {
			return false, fmt.Errorf("%s: %w", s.what, err)
		}
		return arr, nil
	}
	return true, nil
}

// openTables opens every file of a source; the caller closes them.
func openTables(s *dataSource) ([]*table.Table, func(), error) {
	var ts []*table.Table
	closeAll := func() {
		for _, t := range ts {
			t.Close()
		}
	}
	for _, p := range s.files {
		opts := table.Options{Format: table.Format(s.format)}
		t, err := table.Open(p, opts)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("%s: %w", s.what, err)
		}
		ts = append(ts, t)
	}
	return ts, closeAll, nil
}

func hasColumn(t *table.Table, name string) bool {
	return slices.ContainsFunc(t.Columns(), func(c table.Column) bool { return c.Name == name })
}

// tableDocuments streams one string column of every table, in order, as documents; a null cell is
// an error naming the file, row and column (HF's tokenizer refuses None too).
func tableDocuments(ctx context.Context, ts []*table.Table, column string) data.Documents {
	return func(yield func(string, error) bool) {
		stop := errors.New("stop")
		for _, t := range ts {
			err := t.ScanStrings(ctx, column, func(row int64, s string, valid bool) error {
				if !valid {
					return fmt.Errorf("%s: row %d: column %q is null", t.Path(), row, column)
				}
				// s may share the reader's buffers, valid during this call only; the consumer
				// (GroupTexts) holds documents across calls.
				if !yield(strings.Clone(s), nil) {
					return stop
				}
				return nil
			})
			if errors.Is(err, stop) {
				return
			}
			if err != nil {
				yield("", err)
				return
			}
		}
	}
}

// tableExamples stores the pre-tokenized rows of every table (input_ids, and attention_mask,
// token_type_ids and labels when present) in a disk-backed data.TokenStore under dir, streaming
// them row group by row group: memory stays bounded however large the files. The store's file
// lives in the system's temporary directory, unlinked at creation.
func tableExamples(ctx context.Context, ts []*table.Table, what string, maxSeq int) (*data.TokenStore, error) {
	b, err := data.NewTokenStoreBuilder(data.StoreOptions{MaxSeqLength: maxSeq, Source: what})
	if err != nil {
		return nil, err
	}
	// position_ids: rows packed ahead of time (TRL's pack_dataset writes them), whose positions
	// restart per packed example.
	cols := []string{"input_ids", "attention_mask", "token_type_ids", "labels", "position_ids"}
	for _, t := range ts {
		err := t.ScanIntLists(ctx, cols, cols[1:], func(row int64, lists [][]int32) error {
			if lists[0] == nil {
				return fmt.Errorf("%s: row %d: column \"input_ids\" is null", t.Path(), row)
			}
			// Add copies: the lists are the scanner's buffers.
			return b.Add(data.Example{InputIDs: lists[0], AttentionMask: lists[1], TokenTypeIDs: lists[2], Labels: lists[3], PositionIDs: lists[4]})
		})
		if err != nil {
			b.Abort()
			return nil, err
		}
	}
	return b.Finish()
}

// openTableDataset prepares a tabular source the way run_clm.py does: pre-tokenized rows
// (an input_ids column, unless --text_column_name names the text to use) as they are, else the
// text column tokenized and grouped into blocks. Spill files (the token store, grouped blocks
// beyond memory) are unlinked temporary files; the returned close function releases them.
func (r *runArgs) openTableDataset(ctx context.Context, s *dataSource, model models.Model) (data.Dataset, func(), error) {
	lm, causal := model.(models.CausalLM)
	if !causal {
		return nil, nil, fmt.Errorf("%s: Parquet, Arrow, CSV and JSON-array data feed causal language models; "+
			"%s classification reads JSON lines (--train_file x.jsonl with text and label fields)", s.what, model.Config().Architecture())
	}
	ts, closeTables, err := openTables(s)
	if err != nil {
		return nil, nil, err
	}
	defer closeTables()
	if len(ts) == 0 {
		return nil, nil, fmt.Errorf("%s: no data files", s.what)
	}
	if hasColumn(ts[0], "input_ids") && stringOr(r.md.TextColumnName, "") == "" {
		store, err := tableExamples(ctx, ts, s.what, lm.MaxPositions())
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", s.what, err)
		}
		return s.spanDataset(store), func() { store.Close() }, nil
	}
	col, err := r.textColumn(ctx, s.what, ts[0]) // textcolumn.go: run_clm's one rule
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", s.what, err)
	}
	tok, err := r.tokenizer(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("%s is text: %w", s.what, err)
	}
	blocks, err := r.groupTexts(ctx, tok, s.spanDocs(tableDocuments(ctx, ts, col)), lm)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", s.what, err)
	}
	return blocks, func() { blocks.Close() }, nil
}

// groupTexts is run_clm's tokenize + group_texts with --block_size (default min(1024,
// n_positions)), spilling to an unlinked temporary file beyond memory.
func (r *runArgs) groupTexts(ctx context.Context, tok tokenizer.Tokenizer, docs data.Documents, lm models.CausalLM) (*data.TokenBlocks, error) {
	block := min(1024, lm.MaxPositions())
	if r.md.BlockSize != nil && *r.md.BlockSize > 0 {
		block = min(*r.md.BlockSize, lm.MaxPositions())
	}
	return data.GroupTexts(ctx, tok, docs, block, data.GroupOptions{})
}

// rowSpan is run_clm.py's validation_split_percentage split of a split without a validation
// part: the validation rows are train[:pct%], the training rows train[pct%:], counted in the
// raw rows (text lines, JSON records, table rows) before tokenization and grouping, with
// datasets' "closest" rounding of the boundary (Python's round: half to even).
type rowSpan struct {
	pct     int
	holdout bool // the first pct% (validation) rather than the rest (training)
}

// bounds are the rows [lo, hi) of n that the span keeps.
func (s rowSpan) bounds(n int) (lo, hi int) {
	k := int(math.RoundToEven(float64(s.pct) * float64(n) / 100))
	if s.holdout {
		return 0, k
	}
	return k, n
}

// percentSplit carves run_clm.py's validation split out of the training source when there is
// no evaluation source: train[:N%] evaluates, train[N%:] trains. N is
// --validation_split_percentage; unset, run_clm's default 5 applies when the run evaluates
// (do_eval, eval_strategy), and when it does not, gotpu trains on all the data rather than
// hold out rows nothing evaluates on (run_clm drops them all the same). 0 splits nothing.
func (r *runArgs) percentSplit(train, eval *dataSource, training bool) (*dataSource, *dataSource, error) {
	if !training || train == nil || eval != nil {
		return train, eval, nil
	}
	pct := 0
	switch p := r.md.ValidationSplitPercentage; {
	case p != nil:
		pct = *p
	case r.evalWanted():
		pct = 5
	}
	if pct <= 0 {
		return train, eval, nil
	}
	if pct >= 100 {
		return nil, nil, cli.UsageError("--validation_split_percentage: %d leaves no training data; use a value in [0, 100)", pct)
	}
	tr, ev := *train, *train
	tr.what, tr.span = fmt.Sprintf("%s [%d%%:]", train.what, pct), &rowSpan{pct: pct}
	ev.what, ev.span = fmt.Sprintf("%s [:%d%%] (validation_split_percentage)", train.what, pct), &rowSpan{pct: pct, holdout: true}
	return &tr, &ev, nil
}

// spanDocs keeps the documents of the source's span (all without one). The rows are counted in
// a first pass, as datasets knows a split's length before slicing it.
func (s *dataSource) spanDocs(docs data.Documents) data.Documents {
	if s == nil || s.span == nil {
		return docs
	}
	span := *s.span
	return func(yield func(string, error) bool) {
		n := 0
		for _, err := range docs {
			if err != nil {
				yield("", err)
				return
			}
			n++
		}
		lo, hi := span.bounds(n)
		i := 0
		for d, err := range docs {
			if err != nil {
				yield("", err)
				return
			}
			if i >= lo && i < hi && !yield(d, nil) {
				return
			}
			i++
			if i >= hi {
				return
			}
		}
	}
}

// spanDataset is the source's span of a dataset of pre-tokenized rows (all without one).
func (s *dataSource) spanDataset(ds data.Dataset) data.Dataset {
	if s == nil || s.span == nil {
		return ds
	}
	lo, hi := s.span.bounds(ds.Len())
	return rowRange{ds, lo, hi - lo}
}

// spanSlice is the source's span of records read whole (a classifier's labeled rows).
func spanSlice[T any](s *dataSource, recs []T) []T {
	if s == nil || s.span == nil {
		return recs
	}
	lo, hi := s.span.bounds(len(recs))
	return recs[lo:hi]
}

// rowRange is n rows of a dataset from off.
type rowRange struct {
	data.Dataset
	off, n int
}

func (r rowRange) Len() int { return r.n }

func (r rowRange) Get(i int) (data.Example, error) {
	if i < 0 || i >= r.n {
		return data.Example{}, fmt.Errorf("data: example %d of %d", i, r.n)
	}
	return r.Dataset.Get(r.off + i)
}

// textLines reads a .txt file as run_clm.py's text loader does: one row per line, with its line
// break when keep_linebreaks is true or unset (run_clm's default; datasets'
// splitlines(keepends=True)) and without it when false.
func (r *runArgs) textLines(path string) data.Documents {
	if r.md.KeepLinebreaks != nil && !*r.md.KeepLinebreaks {
		return data.TextLines(path)
	}
	return func(yield func(string, error) bool) {
		f, err := os.Open(path)
		if err != nil {
			yield("", fmt.Errorf("data: %w", err))
			return
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), maxTextLine)
		sc.Split(linesWithBreaks)
		for sc.Scan() {
			if !yield(sc.Text(), nil) {
				return
			}
		}
		if err := sc.Err(); err != nil {
			yield("", fmt.Errorf("data: %s: %w", path, err))
		}
	}
}

// linesWithBreaks is bufio.ScanLines keeping each line's "\n" (and "\r\n").
func linesWithBreaks(b []byte, atEOF bool) (int, []byte, error) {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return i + 1, b[:i+1], nil
	}
	if atEOF && len(b) > 0 {
		return len(b), b, nil
	}
	return 0, nil, nil
}

// maxTextLine bounds one line of a text file held in memory (data.TextLines' limit).
const maxTextLine = 256 << 20
