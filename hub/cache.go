package hub

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/gotpu/gotpu/internal/atomicfile"
)

// maxRepoPathLen and maxSegmentLen bound a file path in a repo (PATH_MAX and NAME_MAX).
const (
	maxRepoPathLen = 4096
	maxSegmentLen  = 255
)

// repoCache is one repo's folder in the cache and the paths huggingface_hub lays out in it.
type repoCache struct {
	root   string // the hub cache
	folder string // "models--org--name"
	dir    string // root/folder
}

func (c *Client) repoCache(r Repo) repoCache {
	folder := r.folderName()
	return repoCache{root: c.cfg.CacheDir, folder: folder, dir: filepath.Join(c.cfg.CacheDir, folder)}
}

func (rc repoCache) refPath(rev string) string {
	return filepath.Join(rc.dir, "refs", filepath.FromSlash(rev))
}
func (rc repoCache) blobPath(etag string) string { return filepath.Join(rc.dir, "blobs", etag) }
func (rc repoCache) snapshotDir(commit string) string {
	return filepath.Join(rc.dir, "snapshots", commit)
}
func (rc repoCache) pointerPath(commit, file string) string {
	return filepath.Join(rc.snapshotDir(commit), filepath.FromSlash(file))
}
func (rc repoCache) noExistPath(commit, file string) string {
	return filepath.Join(rc.dir, ".no_exist", commit, filepath.FromSlash(file))
}
func (rc repoCache) lockPath(etag string) string {
	return filepath.Join(rc.root, ".locks", rc.folder, etag+".lock")
}

// validRepoPath refuses file paths that could leave the snapshot folder or do not name a file:
// empty, absolute, with a backslash, a NUL, an empty, "." or ".." segment, or too long. Paths
// come from the caller and from the Hub's file list, which is not trusted.
func validRepoPath(p string) error {
	switch {
	case p == "":
		return errors.New("empty file path")
	case len(p) > maxRepoPathLen:
		return fmt.Errorf("file path longer than %d bytes", maxRepoPathLen)
	case strings.ContainsAny(p, "\\\x00"):
		return fmt.Errorf("file path %q holds a backslash or NUL", p)
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("file path %q is absolute", p)
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("file path %q has an empty, \".\" or \"..\" segment", p)
		}
		if len(seg) > maxSegmentLen {
			return fmt.Errorf("file path %q has a segment longer than %d bytes", p, maxSegmentLen)
		}
	}
	return nil
}

// readRef returns the commit that refs/<rev> records, "" if there is no such file.
func (rc repoCache) readRef(rev string) (string, error) {
	p := rc.refPath(rev)
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("hub: reading ref: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 256))
	if err != nil {
		return "", fmt.Errorf("hub: reading ref %s: %w", p, err)
	}
	commit := strings.TrimSpace(string(b))
	if !IsCommit(commit) {
		return "", fmt.Errorf("%w: ref file %s holds %q, not a 40-hex commit", ErrCorrupt, p, sanitize(commit, 80))
	}
	return commit, nil
}

// writeRef records that rev resolved to commit (atomically; nothing is written when the file
// already says so, and nothing for a revision that is itself a commit). The commit's snapshot
// folder is created first, even if no file is downloaded into it: cache scanners
// (huggingface_hub's scan_cache_dir, @huggingface/hub's scanCacheDir) reject a ref to a
// missing snapshot. A commit never resolves to another commit: such a ref is ErrCorrupt (the
// callers check the Hub's answer first; this is the last guard).
func (rc repoCache) writeRef(rev, commit string) error {
	if rev == commit {
		return nil
	}
	if IsCommit(rev) {
		return fmt.Errorf("%w: %s: refusing to record commit %s as resolving to commit %s", ErrCorrupt, rc.dir, rev, commit)
	}
	if old, err := rc.readRef(rev); err == nil && old == commit {
		return nil
	}
	if err := atomicfile.MkdirAll(rc.snapshotDir(commit)); err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	p := rc.refPath(rev)
	if err := atomicfile.MkdirAll(filepath.Dir(p)); err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	if err := atomicfile.WriteFileBytes(p, []byte(commit)); err != nil {
		return fmt.Errorf("hub: writing ref %s: %w", p, err)
	}
	return nil
}

// resolveCached maps a revision to a commit with the cache alone: a commit is itself, a branch
// or tag is what refs/ recorded ("" when nothing is recorded).
func (rc repoCache) resolveCached(rev string) (string, error) {
	if IsCommit(rev) {
		return rev, nil
	}
	return rc.readRef(rev)
}

// markNoExist records that the Hub said file does not exist at commit (an empty file under
// .no_exist/, as huggingface_hub does).
func (rc repoCache) markNoExist(commit, file string) error {
	p := rc.noExistPath(commit, file)
	if err := atomicfile.MkdirAll(filepath.Dir(p)); err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE, atomicfile.FileMode)
	if err != nil {
		return fmt.Errorf("hub: recording a missing file: %w", err)
	}
	return f.Close()
}

func (rc repoCache) hasNoExist(commit, file string) bool {
	st, err := os.Lstat(rc.noExistPath(commit, file))
	return err == nil && st.Mode().IsRegular()
}

// link points snapshots/<commit>/<file> at blobs/<etag> with a relative symlink (so the cache
// can be moved), created under a temporary name and renamed over the final one so that a
// reader never sees the link missing or half made.
func (rc repoCache) link(commit, file, etag string) (string, error) {
	pointer := rc.pointerPath(commit, file)
	dir := filepath.Dir(pointer)
	if err := atomicfile.MkdirAll(dir); err != nil {
		return "", fmt.Errorf("hub: %w", err)
	}
	target, err := filepath.Rel(dir, rc.blobPath(etag))
	if err != nil {
		return "", fmt.Errorf("hub: linking %s: %w", pointer, err)
	}
	if cur, err := os.Readlink(pointer); err == nil && cur == target {
		return pointer, nil
	}
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("hub: %w", err)
	}
	tmp := filepath.Join(dir, "."+filepath.Base(pointer)+".tmp-"+hex.EncodeToString(b[:]))
	if err := os.Symlink(target, tmp); err != nil {
		return "", fmt.Errorf("hub: linking %s: %w", pointer, err)
	}
	if err := os.Rename(tmp, pointer); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("hub: linking %s: %w", pointer, err)
	}
	return pointer, nil
}

// cachedFile answers Download from the cache alone. cause says why the Hub was not asked (the
// offline setting or the error of the Hub call); it is wrapped into the error when nothing is
// cached.
func (c *Client) cachedFile(repo Repo, filename string, cause error) (string, error) {
	rc := c.repoCache(repo)
	commit, err := rc.resolveCached(repo.Revision)
	if err != nil {
		return "", err
	}
	what := fmt.Sprintf("%s file %q", repo.describe(), filename)
	if commit != "" {
		p := rc.pointerPath(commit, filename)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		if rc.hasNoExist(commit, filename) {
			return "", fmt.Errorf("%w: %s (recorded at commit %s in %s; %v)", ErrEntryNotFound, what, commit, rc.dir, cause)
		}
	}
	var se *statusError
	if errors.As(cause, &se) {
		// The Hub answered with an error (gated, missing repo, server error): that is the
		// error to report, as huggingface_hub re-raises it.
		return "", fmt.Errorf("%w (and it is not in the cache %s)", cause, rc.dir)
	}
	return "", fmt.Errorf("%w: %s: not under %s (%w)", ErrNotCached, what, rc.dir, cause)
}

// cachedSnapshot answers Snapshot from the cache alone (see cachedFile for cause).
func (c *Client) cachedSnapshot(repo Repo, cause error) (string, string, error) {
	rc := c.repoCache(repo)
	commit, err := rc.resolveCached(repo.Revision)
	if err != nil {
		return "", "", err
	}
	if commit != "" {
		dir := rc.snapshotDir(commit)
		if st, err := os.Stat(dir); err == nil && st.IsDir() {
			return dir, commit, nil
		}
	}
	var se *statusError
	if errors.As(cause, &se) {
		return "", "", fmt.Errorf("%w (and it is not in the cache %s)", cause, rc.dir)
	}
	return "", "", fmt.Errorf("%w: %s: no snapshot under %s (%w)", ErrNotCached, repo.describe(), rc.dir, cause)
}

// errOffline is the cause given when Config.Offline kept the Hub from being asked.
var errOffline = errors.New("offline mode (HF_HUB_OFFLINE) is on")
