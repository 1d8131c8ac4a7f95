package checkpoint

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
)

var (
	committedName = regexp.MustCompile(`^checkpoint-([0-9]+)$`)
	leftoverName  = regexp.MustCompile(`^checkpoint-([0-9]+)\.(tmp|old|del)-([0-9a-f]+)$`)
)

// ParseDirName returns the step of a checkpoint directory's name: "checkpoint-<N>" exactly as
// DirName writes it (decimal, no sign, no leading zero). ok is false for any other name,
// including a path.
func ParseDirName(name string) (step int, ok bool) {
	m := committedName.FindStringSubmatch(name)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[1])
	if err != nil || DirName(n) != name {
		return 0, false
	}
	return n, true
}

// Entry is a committed checkpoint found by List.
type Entry struct {
	Dir  string
	Step int
}

// List returns outputDir's committed checkpoints, oldest step first: directories named
// checkpoint-<N> whose commit marker matches their manifest. Leftovers of crashed saves and
// directories written by other tools are not listed. A missing outputDir lists nothing.
func List(outputDir string) ([]Entry, error) {
	des, err := os.ReadDir(outputDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: listing %s: %w", outputDir, err)
	}
	var out []Entry
	for _, de := range des {
		m := committedName.FindStringSubmatch(de.Name())
		if m == nil || !de.IsDir() {
			continue
		}
		step, err := strconv.Atoi(m[1])
		if err != nil {
			continue
		}
		dir := filepath.Join(outputDir, de.Name())
		if _, err := readCommitted(dir); err != nil {
			continue
		}
		out = append(out, Entry{Dir: dir, Step: step})
	}
	slices.SortFunc(out, func(a, b Entry) int { return a.Step - b.Step })
	return out, nil
}

// Latest returns the committed checkpoint of the highest step, or ErrNoCheckpoint.
func Latest(outputDir string) (Entry, error) {
	l, err := List(outputDir)
	if err != nil {
		return Entry{}, err
	}
	if len(l) == 0 {
		return Entry{}, fmt.Errorf("%w in %s", ErrNoCheckpoint, outputDir)
	}
	return l[len(l)-1], nil
}

// readCommitted reads and checks dir's manifest against its commit marker (not the files).
func readCommitted(dir string) (*Manifest, error) {
	marker, err := readCapped(filepath.Join(dir, CommitFile), 4096)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s has no %s", ErrNotCommitted, dir, CommitFile)
		}
		return nil, err
	}
	mb, err := readCapped(filepath.Join(dir, ManifestFile), MaxManifestSize)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, dir, err)
	}
	if !bytes.Equal(marker, commitMarker(mb)) {
		return nil, fmt.Errorf("%w: %s: %s does not match %s", ErrCorrupt, dir, CommitFile, ManifestFile)
	}
	m, err := ParseManifest(mb)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	return m, nil
}

// readCapped reads a regular file of at most limit bytes.
func readCapped(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	if st.Size() > limit {
		return nil, fmt.Errorf("%s: %d bytes exceeds the %d byte limit", path, st.Size(), limit)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: exceeds the %d byte limit", path, limit)
	}
	return b, nil
}

// Cleanup removes the leftovers of crashed saves in outputDir, as the single writer does at its
// start: a checkpoint-N.tmp-* that was committed (valid marker and checksums) but not yet renamed
// rolls forward when no checkpoint-N exists; other tmp directories are removed; a checkpoint-N.old-*
// (moved aside by a re-save) is restored when checkpoint-N is missing, removed otherwise; a
// checkpoint-N.del-* (retention in progress) is removed. It returns what it removed or restored.
func Cleanup(outputDir string) ([]string, error) { return cleanup(outputDir, "") }

// cleanup is Cleanup leaving alone the staging directories of runID: in a multi-host run other
// hosts may already be writing their parts of this attempt when the primary starts.
func cleanup(outputDir, runID string) ([]string, error) {
	des, err := os.ReadDir(outputDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	var done []string
	var errs []error
	// tmp before old: a committed tmp supersedes the checkpoint it was replacing.
	for _, kind := range []string{"tmp", "old", "del"} {
		for _, de := range des {
			m := leftoverName.FindStringSubmatch(de.Name())
			if m == nil || m[2] != kind || (kind == "tmp" && runID != "" && m[3] == runID) {
				continue
			}
			path := filepath.Join(outputDir, de.Name())
			final := filepath.Join(outputDir, "checkpoint-"+m[1])
			_, ferr := os.Lstat(final)
			finalMissing := errors.Is(ferr, os.ErrNotExist)
			switch {
			case kind == "tmp" && finalMissing && de.IsDir() && verifyDir(path) == nil:
				errs = append(errs, renameSync(path, final))
				done = append(done, "rolled forward "+path)
			case kind == "old" && finalMissing && de.IsDir():
				errs = append(errs, renameSync(path, final))
				done = append(done, "restored "+path)
			default:
				errs = append(errs, removeLeftover(path))
				done = append(done, "removed "+path)
			}
		}
	}
	return done, errors.Join(errs...)
}

func renameSync(from, to string) error {
	if err := os.Rename(from, to); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return syncDir(filepath.Dir(to))
}

// removeLeftover removes a leftover directory; its name says it is not a committed checkpoint,
// so a crash half way through is harmless (the next Cleanup finishes it).
func removeLeftover(path string) error {
	if err := os.RemoveAll(path); err != nil {
		return fmt.Errorf("checkpoint: removing %s: %w", path, err)
	}
	return nil
}

// Prune applies save_total_limit after a commit: it deletes the oldest committed checkpoints of
// outputDir so that at most limit remain, never the newest one and never one named in keep (the
// best checkpoint, which HF keeps in addition when limit is 1). limit <= 0 keeps everything. A
// checkpoint is first renamed to checkpoint-N.del-<id> (so a crash never leaves a half-deleted
// checkpoint that lists as committed), then removed.
func Prune(outputDir string, limit int, keep ...string) ([]string, error) {
	if limit <= 0 {
		return nil, nil
	}
	l, err := List(outputDir)
	if err != nil {
		return nil, err
	}
	isKept := func(e Entry) bool {
		for _, k := range keep {
			if k != "" && (filepath.Clean(k) == filepath.Clean(e.Dir) || k == filepath.Base(e.Dir)) {
				return true
			}
		}
		return false
	}
	kept := 0
	keepSet := make([]bool, len(l))
	// Newest and kept ones first, then fill up to limit from the newest down.
	for i := len(l) - 1; i >= 0; i-- {
		if i == len(l)-1 || isKept(l[i]) {
			keepSet[i] = true
			kept++
		}
	}
	for i := len(l) - 1; i >= 0 && kept < limit; i-- {
		if !keepSet[i] {
			keepSet[i] = true
			kept++
		}
	}
	var removed []string
	for i, e := range l {
		if keepSet[i] {
			continue
		}
		id, err := randomID()
		if err != nil {
			return removed, err
		}
		del := e.Dir + ".del-" + id
		if err := renameSync(e.Dir, del); err != nil {
			return removed, err
		}
		if err := removeLeftover(del); err != nil {
			return removed, err
		}
		removed = append(removed, e.Dir)
	}
	return removed, nil
}
