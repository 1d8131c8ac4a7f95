package table

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// The files of a datasets save_to_disk directory. A Dataset's directory holds state.json (its
// "_data_files", read in that order), dataset_info.json and the Arrow stream files; a
// DatasetDict's holds dataset_dict.json ({"splits": [...]}) and one such directory per split.
const (
	stateFile       = "state.json"
	datasetDictFile = "dataset_dict.json"
	// maxJSONSidecar bounds state.json and dataset_dict.json: kilobytes in practice.
	maxJSONSidecar = 16 << 20
)

type saveState struct {
	DataFiles []struct {
		Filename string `json:"filename"`
	} `json:"_data_files"`
	Split any `json:"_split"`
}

type datasetDict struct {
	Splits []string `json:"splits"`
}

func openSaveToDisk(t *Table) error {
	dir := t.path
	if _, err := os.Stat(filepath.Join(dir, datasetDictFile)); err == nil {
		var dd datasetDict
		if err := readSidecar(filepath.Join(dir, datasetDictFile), &dd); err != nil {
			return err
		}
		if len(dd.Splits) == 0 {
			return fmt.Errorf("table: %s: lists no splits: %w", filepath.Join(dir, datasetDictFile), ErrCorrupt)
		}
		found := false
		for _, s := range dd.Splits {
			found = found || (s == t.opts.Split && t.opts.Split != "")
		}
		if !found {
			what := fmt.Sprintf("no split %q", t.opts.Split)
			if t.opts.Split == "" {
				what = "a DatasetDict: Options.Split must name one"
			}
			return fmt.Errorf("table: %s: %s (splits: %s): %w", dir, what, strings.Join(dd.Splits, ", "), ErrSplit)
		}
		if !validName(t.opts.Split) {
			return fmt.Errorf("table: %s: split %q is not a plain directory name: %w", dir, t.opts.Split, ErrCorrupt)
		}
		dir = filepath.Join(dir, t.opts.Split)
	}
	statePath := filepath.Join(dir, stateFile)
	if _, err := os.Stat(statePath); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("table: %s: a directory is read as a datasets save_to_disk directory, and it has neither %s nor %s", t.path, stateFile, datasetDictFile)
	}
	var st saveState
	if err := readSidecar(statePath, &st); err != nil {
		return err
	}
	if len(st.DataFiles) == 0 {
		return fmt.Errorf("table: %s: lists no _data_files: %w", statePath, ErrCorrupt)
	}
	src := ipcSource{}
	for i, df := range st.DataFiles {
		if !validName(df.Filename) {
			return fmt.Errorf("table: %s: _data_files[%d] %q is not a file name in the directory: %w", statePath, i, df.Filename, ErrCorrupt)
		}
		p := filepath.Join(dir, df.Filename)
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("table: %s lists %s: %w", statePath, df.Filename, err)
		}
		info, sc, err := inspectIPC(p, fi.Size(), t.opts)
		if err != nil {
			return err
		}
		cols := columnsOf(sc)
		if i == 0 {
			t.cols = cols
		} else if !sameColumns(t.cols, cols) {
			return fmt.Errorf("table: %s: schema differs from %s's: %w", p, st.DataFiles[0].Filename, ErrCorrupt)
		}
		if t.nrows+info.rows < t.nrows {
			return fmt.Errorf("table: %s: row count overflows: %w", p, ErrCorrupt)
		}
		t.nrows += info.rows
		src.files = append(src.files, info)
	}
	t.known = true
	t.display = dir
	t.src = batchScanner{src}
	return nil
}

// validName admits a plain file name: no separators, no "..", so that a state.json can name
// nothing outside its directory.
func validName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, `/\`) && filepath.Base(name) == name
}

func sameColumns(a, b []Column) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// readSidecar decodes a small JSON file of the directory, refusing one beyond maxJSONSidecar.
func readSidecar(path string, v any) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("table: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxJSONSidecar+1))
	if err != nil {
		return fmt.Errorf("table: %s: %w", path, err)
	}
	if len(b) > maxJSONSidecar {
		return fmt.Errorf("table: %s: larger than %d bytes: %w", path, maxJSONSidecar, ErrTooLarge)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("table: %s: %w (%w)", path, err, ErrCorrupt)
	}
	return nil
}
