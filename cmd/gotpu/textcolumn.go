package main

import (
	"context"
	"log/slog"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/data/table"
)

// textColumn is the column a causal LM trains on, by run_clm's one rule for every format
// (data.TextColumn: --text_column_name, else "text", else the first column, logged; CSV cells
// seen as pandas types them). what names the source.
func (r *runArgs) textColumn(ctx context.Context, what string, t *table.Table) (string, error) {
	// The callers' errors name the source (what); the columns are those of its first file.
	return data.TextColumn(ctx, slog.Default(), what, t, stringOr(r.md.TextColumnName, ""))
}

// jsonlTextColumn is textColumn for a JSON-lines file read by data.JSONLTextField: its columns
// are the keys of its first object, in order, as HF's json loader (pyarrow) reads them.
func (r *runArgs) jsonlTextColumn(ctx context.Context, what, path string) (string, error) {
	t, err := table.Open(path, table.Options{Format: table.FormatJSON})
	if err != nil {
		return "", err
	}
	defer t.Close()
	return r.textColumn(ctx, what, t)
}
