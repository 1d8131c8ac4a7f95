package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path/filepath"
	"sort"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/gotpu/gotpu/internal/atomicfile"
	"github.com/gotpu/gotpu/internal/progress"
)

// maxAPIResponse bounds a JSON answer of the Hub's API read into memory.
const maxAPIResponse = 64 << 20

// DefaultMaxWorkers is snapshot_download's default number of files downloaded at once.
const DefaultMaxWorkers = 8

// SnapshotOptions choose the files of a Snapshot and how many download at once.
type SnapshotOptions struct {
	// Include and Exclude are fnmatch globs as huggingface_hub's allow_patterns and
	// ignore_patterns: "*" matches "/" too, and a pattern ending in "/" means pattern+"*". A
	// file is downloaded if it matches some Include pattern (or Include is empty) and no
	// Exclude pattern.
	Include, Exclude []string
	// MaxWorkers is how many files download at once; 0 means DefaultMaxWorkers.
	MaxWorkers int
	// MarkMissing names files that loaders look for when a repo has them (generation_config.json,
	// tokenizer_config.json, ...): each one the commit's listing lacks gets a .no_exist marker,
	// so that offline lookups answer "the repo has none" (ErrEntryNotFound, FileExists false)
	// instead of ErrNotCached. huggingface_hub's snapshot_download writes no markers; these are
	// the ones its hf_hub_download would write on asking for those files.
	MarkMissing []string
}

// repoInfo is the part of the Hub's repo-info answer the client uses.
type repoInfo struct {
	SHA      string `json:"sha"`
	Siblings []struct {
		RFilename string `json:"rfilename"`
	} `json:"siblings"`
}

// parseRepoInfo decodes and checks a repo-info answer: the sha must be a commit and every file
// name a safe relative path (they become paths under snapshots/). what names the request.
func parseRepoInfo(data []byte, what string) (commit string, files []string, err error) {
	var info repoInfo
	if err := json.Unmarshal(data, &info); err != nil {
		return "", nil, fmt.Errorf("%w: %s: malformed API answer: %w", ErrCorrupt, what, err)
	}
	if !IsCommit(info.SHA) {
		return "", nil, fmt.Errorf("%w: %s: API answer field sha %q is not a 40-hex commit", ErrCorrupt, what, sanitize(info.SHA, 80))
	}
	files = make([]string, 0, len(info.Siblings))
	for i, s := range info.Siblings {
		if err := validRepoPath(s.RFilename); err != nil {
			return "", nil, fmt.Errorf("%w: %s: API answer field siblings[%d].rfilename refused: %w", ErrCorrupt, what, i, err)
		}
		files = append(files, s.RFilename)
	}
	return info.SHA, files, nil
}

// repoInfo asks the Hub which commit repo's revision is and which files it has. The call is
// bounded as a file's download is: the answer's headers must come within Config.EtagTimeout
// (the metadata timeout, as for the HEAD of a file) and its body may go no longer than
// Config.DownloadTimeout without a byte, so that a server that accepts the connection and never
// answers cannot hold Snapshot, ListFiles or `gotpu download` forever; the error (a
// context.DeadlineExceeded) lets the caller answer from the cache, as Download does. An answer
// for a commit revision that names another commit is ErrCorrupt (checkPinned).
func (c *Client) repoInfo(ctx context.Context, repo Repo) (string, []string, error) {
	what := repo.describe()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	noAnswer := fmt.Errorf("%w: no answer within %v (HF_HUB_ETAG_TIMEOUT)", errAPITimeout, c.cfg.EtagTimeout)
	headers := time.AfterFunc(c.cfg.EtagTimeout, func() { cancel(noAnswer) })
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, infoURL(c.cfg.Endpoint, repo), nil)
	if err != nil {
		headers.Stop()
		return "", nil, fmt.Errorf("hub: %s: %w", what, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	headers.Stop()
	if err != nil {
		return "", nil, fmt.Errorf("hub: listing %s: %w", what, c.apiError(ctx, stripURL(err)))
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		return "", nil, httpError(resp, what)
	}
	if resp.StatusCode != http.StatusOK {
		return "", nil, fmt.Errorf("hub: listing %s: unexpected HTTP status %d", what, resp.StatusCode)
	}
	if resp.ContentLength > maxAPIResponse {
		return "", nil, fmt.Errorf("hub: listing %s: answer of %d bytes exceeds the %d-byte limit", what, resp.ContentLength, maxAPIResponse)
	}
	idle := newIdleTimer(c.cfg.DownloadTimeout, cancel)
	defer idle.stop()
	data, err := io.ReadAll(&countingReader{r: io.LimitReader(resp.Body, maxAPIResponse+1), idle: idle})
	if err != nil {
		return "", nil, fmt.Errorf("hub: listing %s: %w", what, c.apiError(ctx, err))
	}
	if len(data) > maxAPIResponse {
		return "", nil, fmt.Errorf("hub: listing %s: answer exceeds the %d-byte limit", what, maxAPIResponse)
	}
	commit, files, err := parseRepoInfo(data, "listing "+what)
	if err != nil {
		return "", nil, err
	}
	if err := checkPinned(repo, commit, "listing "+what); err != nil {
		return "", nil, err
	}
	return commit, files, nil
}

// errAPITimeout is the cause given to an API call's context when the Hub sent no answer within
// Config.EtagTimeout.
var errAPITimeout = errors.New("hub: the Hub's API did not answer")

// apiError names the timeout that ended an API call, when one did: the error then wraps
// context.DeadlineExceeded, which sends the caller to the cache (fallbackOK) and tells the
// service's callers it was the Hub's fault, not theirs.
func (c *Client) apiError(ctx context.Context, err error) error {
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errAPITimeout):
		return fmt.Errorf("%w (%w)", cause, context.DeadlineExceeded)
	case errors.Is(cause, errStalled):
		return fmt.Errorf("%w (%v, HF_HUB_DOWNLOAD_TIMEOUT) (%w)", cause, c.cfg.DownloadTimeout, context.DeadlineExceeded)
	}
	return err
}

// ListFiles returns the commit of repo's revision and its files, in the Hub's order, and
// records the commit under refs/ (so that files downloaded pinned to it are found offline by
// the revision's name). Offline, or when the Hub cannot be reached, it lists the cached
// snapshot instead: only the files downloaded so far, sorted.
func (c *Client) ListFiles(ctx context.Context, repo Repo) (commit string, files []string, err error) {
	if err := repo.validate(); err != nil {
		return "", nil, err
	}
	repo = repo.normalized()
	if c.cfg.Offline {
		return c.listCached(repo, errOffline)
	}
	commit, files, err = c.repoInfo(ctx, repo)
	if err != nil {
		if fallbackOK(ctx, err) {
			c.log.Warn("hub: cannot list the repo on the Hub; listing the cache", "repo", repo.ID, "revision", repo.Revision, "err", err)
			return c.listCached(repo, err)
		}
		return "", nil, err
	}
	if err := c.repoCache(repo).writeRef(repo.Revision, commit); err != nil {
		return "", nil, err
	}
	return commit, files, nil
}

func (c *Client) listCached(repo Repo, cause error) (string, []string, error) {
	dir, commit, err := c.cachedSnapshot(repo, cause)
	if err != nil {
		return "", nil, err
	}
	var files []string
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || (!d.Type().IsRegular() && d.Type()&fs.ModeSymlink == 0) {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		files = append(files, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		return "", nil, fmt.Errorf("hub: listing the cached snapshot %s: %w", dir, err)
	}
	sort.Strings(files)
	return commit, files, nil
}

// Snapshot downloads the files of repo's revision chosen by opts and returns the snapshot
// folder snapshots/<commit>: huggingface_hub's snapshot_download. Files are listed with the
// repo-info API and downloaded as Download does, pinned to the listed commit, MaxWorkers at a
// time; the first error stops the others. Offline, or when the Hub cannot be reached, the
// cached snapshot folder of the revision is returned as it is (ErrNotCached if there is none).
func (c *Client) Snapshot(ctx context.Context, repo Repo, opts SnapshotOptions) (string, error) {
	if err := repo.validate(); err != nil {
		return "", err
	}
	repo = repo.normalized()
	workers := opts.MaxWorkers
	if workers < 0 {
		return "", fmt.Errorf("hub: SnapshotOptions.MaxWorkers %d is negative", workers)
	}
	if workers == 0 {
		workers = DefaultMaxWorkers
	}
	if err := validMarkMissing(opts.MarkMissing); err != nil {
		return "", err
	}
	if c.cfg.Offline {
		dir, _, err := c.cachedSnapshot(repo, errOffline)
		return dir, err
	}
	commit, files, err := c.repoInfo(ctx, repo)
	if err != nil {
		if fallbackOK(ctx, err) {
			c.log.Warn("hub: cannot list the repo on the Hub; using the cached snapshot", "repo", repo.ID, "revision", repo.Revision, "err", err)
			dir, _, err := c.cachedSnapshot(repo, err)
			return dir, err
		}
		return "", err
	}
	rc := c.repoCache(repo)
	if err := rc.writeRef(repo.Revision, commit); err != nil {
		return "", err
	}
	// The listing is complete before filtering: a name absent from it is absent from the commit.
	c.markMissing(rc, commit, files, opts.MarkMissing)
	files = filterFiles(files, opts.Include, opts.Exclude)
	pinned := repo
	pinned.Revision = commit

	var bar *progress.Bar
	if c.cfg.Progress != nil {
		bar = progress.NewWithOptions(c.cfg.Progress, progress.Options{Total: int64(len(files)), Terminal: progress.IsTerminal(c.cfg.Progress)})
		bar.SetPostfix(fmt.Sprintf("fetching %d files", len(files)))
		defer bar.Close()
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for _, f := range files {
		g.Go(func() error {
			if _, err := c.download(gctx, pinned, f, nil); err != nil {
				return err
			}
			if bar != nil {
				bar.Add(1)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return "", err
	}
	dir := rc.snapshotDir(commit)
	// The folder exists even when no file matched, so the returned path is always a folder.
	if err := atomicfile.MkdirAll(dir); err != nil {
		return "", fmt.Errorf("hub: %w", err)
	}
	return dir, nil
}

// FileExists reports whether the revision of repo has filename, asking the Hub (HEAD) and
// recording a missing file as a .no_exist marker, as huggingface_hub does. A commit revision
// already linked or marked is answered from the cache. Offline, or when the Hub cannot be
// reached: true if the file is in the cached snapshot, false if a marker says it is missing,
// ErrNotCached otherwise.
func (c *Client) FileExists(ctx context.Context, repo Repo, filename string) (bool, error) {
	if err := repo.validate(); err != nil {
		return false, err
	}
	repo = repo.normalized()
	if err := validRepoPath(filename); err != nil {
		return false, fmt.Errorf("hub: %s: %w", repo.describe(), err)
	}
	rc := c.repoCache(repo)
	if c.cfg.Offline {
		return c.existsCached(rc, repo, filename, errOffline)
	}
	if IsCommit(repo.Revision) {
		if exists(rc.pointerPath(repo.Revision, filename)) {
			return true, nil
		}
		if rc.hasNoExist(repo.Revision, filename) {
			return false, nil
		}
	}
	meta, missingAt, err := c.headFile(ctx, repo, filename)
	if err == nil {
		err = checkPinned(repo, meta.commit, fmt.Sprintf("%s file %q", repo.describe(), filename))
	}
	switch {
	case err == nil:
		return true, rc.writeRef(repo.Revision, meta.commit)
	case errors.Is(err, ErrEntryNotFound):
		if missingAt != "" {
			c.recordMissing(rc, repo, filename, missingAt)
		}
		return false, nil
	case fallbackOK(ctx, err) && isConnectionError(err):
		c.log.Warn("hub: cannot reach the Hub; answering from the cache", "repo", repo.ID, "file", filename, "err", err)
		return c.existsCached(rc, repo, filename, err)
	}
	return false, err
}

func (c *Client) existsCached(rc repoCache, repo Repo, filename string, cause error) (bool, error) {
	commit, err := rc.resolveCached(repo.Revision)
	if err != nil {
		return false, err
	}
	if commit != "" {
		if exists(rc.pointerPath(commit, filename)) {
			return true, nil
		}
		if rc.hasNoExist(commit, filename) {
			return false, nil
		}
	}
	return false, fmt.Errorf("%w: %s file %q: neither linked nor marked missing under %s (%w)", ErrNotCached, repo.describe(), filename, rc.dir, cause)
}
