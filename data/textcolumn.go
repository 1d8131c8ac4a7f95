package data

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	"github.com/gotpu/gotpu/data/table"
)

// ErrTextColumn marks a text column that cannot be chosen: named but absent, or not text.
var ErrTextColumn = errors.New("data: no usable text column")

// TextColumn is run_clm.py's choice of the column a causal LM is trained on, for every format
// alike (JSON lines, JSON arrays, CSV, Parquet, Arrow, Hub datasets):
//
//	text_column_name = named if given, else "text" if "text" in column_names, else column_names[0]
//
// with t's columns in their order (a dataset of several files takes its first file's). When the
// choice falls back to the first column, an info line names it and lists the columns, so that the
// choice is never silent. A named column that is absent, and a chosen column that holds no text
// (numbers, booleans, lists: HF's tokenizer refuses them; for CSV, a column pandas.read_csv reads
// as numbers), are errors wrapping ErrTextColumn that list the columns there are and say to name
// one with --text_column_name. where names the source in the log line.
func TextColumn(ctx context.Context, log *slog.Logger, where string, t *table.Table, named string) (string, error) {
	cols := t.Columns()
	col, fallback, err := pickTextColumn(cols, named)
	if err != nil {
		return "", err
	}
	if err := checkCSVTextColumn(ctx, t, col); err != nil {
		return "", err
	}
	if fallback && log != nil {
		log.Info(fmt.Sprintf("using column %q for text (no \"text\" column; columns: %s)", col, columnNames(cols)), "source", where)
	}
	return col, nil
}

// pickTextColumn applies run_clm's rule to cols; fallback says the first column was taken for
// want of a "text" one.
func pickTextColumn(cols []table.Column, named string) (col string, fallback bool, err error) {
	if len(cols) == 0 {
		return "", false, fmt.Errorf("%w: the data has no columns", ErrTextColumn)
	}
	want := named
	if want == "" {
		want = "text"
	}
	pick := slices.IndexFunc(cols, func(c table.Column) bool { return c.Name == want })
	switch {
	case pick < 0 && named != "":
		return "", false, fmt.Errorf("%w: --text_column_name %q is not a column; columns: %s", ErrTextColumn, named, columnNames(cols))
	case pick < 0:
		pick, fallback = 0, true
	}
	c := cols[pick]
	if what := nonText(c.Type); what != "" {
		return "", false, fmt.Errorf("%w: column %q holds %s, not text; columns: %s; name one with --text_column_name",
			ErrTextColumn, c.Name, what, columnNames(cols))
	}
	return c.Name, fallback, nil
}

// nonText describes a column type HF's tokenizer would refuse ("" for text, or for a column whose
// type is not known yet: "null", a JSON key whose first value was null).
func nonText(typ string) string {
	switch {
	case typ == "string" || typ == "null":
		return ""
	case strings.HasPrefix(typ, "int") || strings.HasPrefix(typ, "uint") || typ == "float16" || typ == "float" ||
		typ == "double" || strings.HasPrefix(typ, "decimal"):
		return "numbers"
	case typ == "bool":
		return "booleans"
	case strings.HasPrefix(typ, "list<"):
		return "lists (" + typ + ")"
	}
	return typ + " values"
}

func columnNames(cols []table.Column) string {
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.Name
	}
	return strings.Join(names, ", ")
}

// checkCSVTextColumn refuses a CSV column that pandas.read_csv (HF's csv loader) would read as
// numbers: every non-empty cell a number. CSV cells carry no type, so table reads every column as
// strings; without this check an "id" column would be tokenized as digits where HF fails. The
// scan stops at the first cell that is not a number (the first row, for a column of text). Other
// formats carry their types and pass.
func checkCSVTextColumn(ctx context.Context, t *table.Table, column string) error {
	if t.Format() != table.FormatCSV {
		return nil
	}
	errText := errors.New("text found")
	numbers := 0
	err := t.ScanStrings(ctx, column, func(_ int64, s string, valid bool) error {
		if !valid || s == "" {
			return nil
		}
		if !isPandasNumber(s) {
			return errText
		}
		numbers++
		return nil
	})
	if errors.Is(err, errText) {
		return nil
	}
	if err != nil {
		return err
	}
	if numbers > 0 {
		return fmt.Errorf("%w: column %q holds numbers, not text (as pandas.read_csv reads it); columns: %s; name one with --text_column_name",
			ErrTextColumn, column, columnNames(t.Columns()))
	}
	return nil
}

// isPandasNumber approximates pandas' numeric parsing of a CSV cell: a decimal integer or float
// (with an exponent, "inf" or "nan" spellings), surrounding spaces allowed; not Go's hex floats
// or digit separators.
func isPandasNumber(s string) bool {
	s = strings.TrimSpace(s)
	if s == "" || strings.ContainsAny(s, "_xXpP") {
		return false
	}
	_, err := strconv.ParseFloat(s, 64)
	return err == nil || errors.Is(err, strconv.ErrRange)
}
