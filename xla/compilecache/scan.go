package compilecache

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// staleTempAge is how old a writer's temporary file must be to count as a crashed writer's:
// far longer than writing any executable takes.
const staleTempAge = time.Hour

// dirFile is one file of the cache directory as a scan sees it.
type dirFile struct {
	name string
	info fs.FileInfo
}

// scan lists the directory's entry files and its writers' temporary files. Files that vanish
// during the scan (another process evicting) are skipped; other files are not ours and ignored.
func (s *Store) scan() (entries, temps []dirFile, err error) {
	des, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, nil, fmt.Errorf("compilation cache: listing %s: %w", s.dir, err)
	}
	for _, de := range des {
		name := de.Name()
		isEntry := strings.HasSuffix(name, entrySuffix) && !strings.HasPrefix(name, ".")
		if !isEntry && !isTemp(name) {
			continue
		}
		fi, err := de.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("compilation cache: %w", err)
		}
		if isEntry {
			entries = append(entries, dirFile{name, fi})
		} else {
			temps = append(temps, dirFile{name, fi})
		}
	}
	return entries, temps, nil
}

// isTemp reports whether name is an entry writer's temporary file (atomicfile's naming).
func isTemp(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, entrySuffix+".tmp-")
}

// remove removes name from the directory; a file already gone is not an error.
func (s *Store) remove(name string) error {
	err := os.Remove(filepath.Join(s.dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// removeStaleTemps removes the temporary files of writers that crashed; it returns the number
// removed.
func (s *Store) removeStaleTemps(temps []dirFile) int {
	n := 0
	for _, t := range temps {
		if time.Since(t.info.ModTime()) < staleTempAge {
			continue // a writer at work
		}
		if err := s.remove(t.name); err != nil {
			s.log.Warn("compilation cache: cannot remove a stale temporary file", "file", filepath.Join(s.dir, t.name), "err", err.Error())
			continue
		}
		n++
	}
	return n
}

// evict removes entries, least recently used first, until the entries total at most MaxBytes,
// keeping keep (the entry just written). It returns how many it removed; problems are logged.
func (s *Store) evict(keep string) int {
	entries, temps, err := s.scan()
	if err != nil {
		s.log.Warn("compilation cache: cannot evict", "err", err.Error())
		return 0
	}
	s.removeStaleTemps(temps)
	var total int64
	for _, e := range entries {
		total += e.info.Size()
	}
	// Oldest first; equal times (a coarse clock) in name order, so that every process picks alike.
	slices.SortFunc(entries, func(a, b dirFile) int {
		return cmp.Or(a.info.ModTime().Compare(b.info.ModTime()), strings.Compare(a.name, b.name))
	})
	n := 0
	for _, e := range entries {
		if total <= s.maxBytes {
			break
		}
		p := filepath.Join(s.dir, e.name)
		if p == keep {
			continue
		}
		if err := s.remove(e.name); err != nil {
			s.log.Warn("compilation cache: cannot evict an entry", "file", p, "err", err.Error())
			continue
		}
		total -= e.info.Size()
		n++
	}
	return n
}

// List returns every entry, most recently used first (equal times in ID order). It reads and
// checks each file whole, as Get does, so a corrupt or foreign entry shows with Problem set; it
// takes as long as reading the cache. Temporary files are not listed.
func (s *Store) List() ([]Entry, error) {
	entries, _, err := s.scan()
	if err != nil {
		return nil, err
	}
	out := make([]Entry, 0, len(entries))
	for _, de := range entries {
		id := strings.TrimSuffix(de.name, entrySuffix)
		p := filepath.Join(s.dir, de.name)
		e, err := s.check(id, p)
		if errors.Is(err, fs.ErrNotExist) {
			continue // evicted meanwhile
		}
		if err != nil {
			e = Entry{ID: id, Path: p, Bytes: de.info.Size(), LastUsed: de.info.ModTime(), Problem: err.Error()}
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b Entry) int {
		return cmp.Or(b.LastUsed.Compare(a.LastUsed), strings.Compare(a.ID, b.ID))
	})
	return out, nil
}

// check reads the entry at p through, in constant memory, and describes it.
func (s *Store) check(id, p string) (Entry, error) {
	f, err := os.Open(p)
	if err != nil {
		return Entry{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Entry{}, err
	}
	if !fi.Mode().IsRegular() {
		return Entry{}, fmt.Errorf("not a regular file (%s)", fi.Mode())
	}
	h, _, err := readEntry(bufio.NewReaderSize(f, 1<<20), fi.Size(), false)
	if err != nil {
		return Entry{}, err
	}
	if got := (Key{h.Key}).ID(); got != id {
		return Entry{}, fmt.Errorf("it holds another key (ID %s): not an entry of this name", got)
	}
	return entryOf(id, p, fi.Size(), fi.ModTime(), h), nil
}

// Stats counts and sums the entries' files, without reading them.
func (s *Store) Stats() (Stats, error) {
	entries, _, err := s.scan()
	if err != nil {
		return Stats{}, err
	}
	st := Stats{Entries: len(entries)}
	for _, e := range entries {
		st.Bytes += e.info.Size()
	}
	return st, nil
}

// Clear removes every entry and the temporary files of crashed writers (older than an hour;
// younger ones belong to writers at work), and returns the entries removed and their bytes. The
// directory and files that are not the cache's stay.
func (s *Store) Clear() (removed int, bytes int64, err error) {
	entries, temps, err := s.scan()
	if err != nil {
		return 0, 0, err
	}
	s.removeStaleTemps(temps)
	var errs []error
	for _, e := range entries {
		if err := s.remove(e.name); err != nil {
			errs = append(errs, err)
			continue
		}
		removed++
		bytes += e.info.Size()
	}
	if len(errs) > 0 {
		return removed, bytes, fmt.Errorf("compilation cache: clearing %s: %w", s.dir, errors.Join(errs...))
	}
	return removed, bytes, nil
}
