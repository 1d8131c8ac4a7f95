package main

import (
	"context"
	"errors"
	"fmt"
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
	if evalSplit == "" && wantEval && r.md.ValidationSplitPercentage != nil && *r.md.ValidationSplitPercentage > 0 {
		// run_clm carves train[:N%] out as validation here; gotpu does not split a split, and
		// must not pretend to by evaluating nothing.
		return nil, nil, cli.UsageError("--validation_split_percentage: %s has no validation split and gotpu does not carve one out of train; "+
			"name one with --validation_split (splits: %s)", name, strings.Join(resolved.SplitNames(), ", "))
	}
	if evalSplit != "" {
		if eval, err = pick(evalSplit); err != nil {
			return nil, nil, err
		}
	}
	return train, eval, nil
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

// tableTextColumn is run_clm's choice of the text column: --text_column_name, else "text" when
// there is one, else the first column.
func (r *runArgs) tableTextColumn(t *table.Table) string {
	if c := stringOr(r.md.TextColumnName, ""); c != "" {
		return c
	}
	if hasColumn(t, "text") {
		return "text"
	}
	if cols := t.Columns(); len(cols) > 0 {
		return cols[0].Name
	}
	return "text"
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
		return store, func() { store.Close() }, nil
	}
	tok, err := r.tokenizer(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("%s is text: %w", s.what, err)
	}
	blocks, err := r.groupTexts(ctx, tok, tableDocuments(ctx, ts, r.tableTextColumn(ts[0])), lm)
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
	return data.GroupTextsWith(ctx, tok, docs, block, true, data.DefaultGroupOptions())
}
