package datasets

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
)

// maxLocalFiles bounds the files a local dataset directory may hold: the listing is kept in memory
// and matched against every pattern. maxLocalEntries bounds all entries visited, so links that
// reach one directory by many ways cannot make the walk run without end.
const (
	maxLocalFiles   = 1 << 20
	maxLocalEntries = 4 << 20
)

// Standalone YAML that datasets merges over the README's (config.REPOYAML_FILENAME).
const standaloneYAML = ".huggingface.yaml"

// ResolveLocal resolves a local dataset directory as load_dataset("path/to/dir") does: its
// README.md (and .huggingface.yaml) configs, or the default patterns, over the files below it.
// The split files are absolute paths. Symbolic links are followed (a link cycle is skipped);
// ".git" directories are not walked, since only a pattern naming them could select their files.
func ResolveLocal(dir, config string) (*Resolved, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("datasets: %s: %w", dir, err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("datasets: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("datasets: %s is not a directory", abs)
	}
	files, err := listLocal(abs)
	if err != nil {
		return nil, err
	}
	doc, err := localCard(abs)
	if err != nil {
		return nil, err
	}
	r, err := resolve(files, doc, config)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, abs)
	}
	r.Repo = abs
	for _, files := range r.Splits {
		for i, f := range files {
			files[i] = filepath.Join(abs, filepath.FromSlash(f))
		}
	}
	return r, nil
}

// localCard reads README.md and .huggingface.yaml of dir, where they are regular files.
func localCard(dir string) (*yamlDoc, error) {
	readme, err := readBounded(filepath.Join(dir, "README.md"))
	if err != nil {
		return nil, err
	}
	doc, err := readmeYAML(readme)
	if err != nil {
		return nil, fmt.Errorf("datasets: %s: %w", dir, err)
	}
	extra, err := readBounded(filepath.Join(dir, standaloneYAML))
	if err != nil || extra == nil {
		return doc, err
	}
	o, err := parseStandalone(extra)
	if err != nil {
		return nil, fmt.Errorf("datasets: %s: %w", dir, err)
	}
	return doc.merge(o), nil
}

// parseStandalone parses a .huggingface.yaml.
func parseStandalone(b []byte) (*yamlDoc, error) {
	if len(b) > MaxReadmeBytes {
		return nil, fmt.Errorf("%s: %d bytes exceeds the %d-byte limit", standaloneYAML, len(b), MaxReadmeBytes)
	}
	return parseYAMLMapping(standaloneYAML, 0, b)
}

// readBounded reads a small metadata file: nil if it does not exist, an error if it is larger
// than MaxReadmeBytes (checked before reading).
func readBounded(p string) ([]byte, error) {
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("datasets: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("datasets: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, nil // a directory named README.md is no card
	}
	if st.Size() > MaxReadmeBytes {
		return nil, fmt.Errorf("datasets: %s: %d bytes exceeds the %d-byte limit", p, st.Size(), MaxReadmeBytes)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxReadmeBytes+1))
	if err != nil {
		return nil, fmt.Errorf("datasets: %s: %w", p, err)
	}
	if len(b) > MaxReadmeBytes {
		return nil, fmt.Errorf("datasets: %s: grew past the %d-byte limit while read", p, MaxReadmeBytes)
	}
	return b, nil
}

// listLocal lists the regular files below root as "/"-separated relative paths.
func listLocal(root string) ([]string, error) {
	var files []string
	visited := 0
	rootInfo, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("datasets: %w", err)
	}
	var walk func(dir, rel string, ancestors []os.FileInfo) error
	walk = func(dir, rel string, ancestors []os.FileInfo) error {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("datasets: %w", err)
		}
		for _, e := range entries {
			if visited++; visited > maxLocalEntries {
				return fmt.Errorf("datasets: %s: more than %d entries below it", root, maxLocalEntries)
			}
			name := e.Name()
			full, r := filepath.Join(dir, name), path.Join(rel, name)
			st, err := os.Stat(full) // follows links, as fsspec's local listing does
			if err != nil {
				continue // a dangling link is no file
			}
			switch {
			case st.Mode().IsRegular():
				if len(files) >= maxLocalFiles {
					return fmt.Errorf("datasets: %s holds more than %d files", root, maxLocalFiles)
				}
				files = append(files, r)
			case st.IsDir() && name != ".git":
				cycle := false
				for _, a := range ancestors {
					cycle = cycle || os.SameFile(a, st)
				}
				if cycle {
					continue
				}
				if err := walk(full, r, append(ancestors, st)); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(root, "", []os.FileInfo{rootInfo}); err != nil {
		return nil, err
	}
	return files, nil
}
