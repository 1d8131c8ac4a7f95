package table

import (
	"fmt"
	"path/filepath"
	"strings"
)

// inferFormat maps a file's extension to its format as the Hub's loaders do (a .tsv is CSV with
// tabs); a directory is a save_to_disk dataset, read as Arrow.
func inferFormat(path string, isDir bool) (Format, error) {
	if isDir {
		return FormatArrow, nil
	}
	switch strings.ToLower(filepath.Ext(path)) {
	case ".parquet", ".pq":
		return FormatParquet, nil
	case ".arrow", ".feather", ".ipc":
		return FormatArrow, nil
	case ".csv", ".tsv":
		return FormatCSV, nil
	case ".json", ".jsonl", ".ndjson":
		return FormatJSON, nil
	case ".txt", ".text":
		return FormatText, nil
	}
	return "", fmt.Errorf("table: %s: cannot tell the format from the extension %q; set Options.Format (parquet, arrow, csv, json, text)", path, filepath.Ext(path))
}

// csvDelimiter is a tab for .tsv files and a comma otherwise.
func csvDelimiter(path string) rune {
	if strings.EqualFold(filepath.Ext(path), ".tsv") {
		return '\t'
	}
	return ','
}
