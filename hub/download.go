package hub

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"

	"github.com/gotpu/gotpu/internal/atomicfile"
	"github.com/gotpu/gotpu/internal/progress"
)

// Download returns the path of filename at repo's revision in the cache, downloading it first
// if needed: huggingface_hub's hf_hub_download. The path is snapshots/<commit>/<filename>, a
// relative symlink to blobs/<etag>.
//
// Online it asks the Hub for the file's commit, etag and size (HEAD), records the revision's
// commit under refs/, and links an existing blob of the right size or downloads it (resuming a
// .incomplete file, verifying size and hash, under a per-blob lock). A revision that is a
// commit whose file is already linked needs no request at all. Offline, or when the Hub cannot
// be reached, the file is looked up through refs/ and snapshots/; a missing one is
// ErrNotCached.
func (c *Client) Download(ctx context.Context, repo Repo, filename string) (string, error) {
	return c.download(ctx, repo, filename, c.cfg.Progress)
}

// download is Download with the progress writer chosen by the caller (Snapshot draws its own
// bar and gives nil).
func (c *Client) download(ctx context.Context, repo Repo, filename string, pw io.Writer) (string, error) {
	if err := repo.validate(); err != nil {
		return "", err
	}
	repo = repo.normalized()
	if err := validRepoPath(filename); err != nil {
		return "", fmt.Errorf("hub: %s: %w", repo.describe(), err)
	}
	if c.cfg.Offline {
		return c.checkedCachedFile(ctx, repo, filename, errOffline)
	}
	rc := c.repoCache(repo)
	what := fmt.Sprintf("%s file %q", repo.describe(), filename)
	if IsCommit(repo.Revision) {
		// A commit never changes: a linked file is the file (huggingface_hub's shortcut),
		// once its blob still hashes to its etag.
		if p := rc.pointerPath(repo.Revision, filename); exists(p) {
			if err := c.limits.admitCached(what, p); err != nil {
				return "", err
			}
			if err := c.checkCached(ctx, repo, filename, p); err == nil {
				return p, nil
			} else if !errors.Is(err, ErrCorrupt) {
				return "", err
			}
			// A corrupt blob: ask the Hub and fetch it again below.
		}
	}
	meta, missingAt, err := c.headFile(ctx, repo, filename)
	if err == nil {
		err = checkPinned(repo, meta.commit, what)
	}
	if err != nil {
		if errors.Is(err, ErrEntryNotFound) && missingAt != "" {
			c.recordMissing(rc, repo, filename, missingAt)
		}
		if fallbackOK(ctx, err) {
			c.log.Warn("hub: cannot get the file's metadata from the Hub; looking in the cache",
				"repo", repo.ID, "revision", repo.Revision, "file", filename, "err", err)
			return c.checkedCachedFile(ctx, repo, filename, err)
		}
		return "", err
	}
	// The size the Hub announces is checked before anything is written; fetchBlob then reads no
	// more than that size (one byte more is an error), so a server that sends more than it
	// announced cannot get past the limit either.
	if err := c.limits.admitAnnounced(what, rc.pointerPath(meta.commit, filename), meta.size); err != nil {
		return "", err
	}
	if blob := rc.blobPath(meta.etag); sizeIs(blob, meta.size) && !c.cfg.TrustCache {
		if ok, got, kind, err := verifyBlob(ctx, blob, meta.etag); err != nil {
			return "", fmt.Errorf("hub: %s file %q: %w", repo.describe(), filename, err)
		} else if kind != "" && !ok {
			c.log.Warn("hub: a cached blob does not match its hash; downloading it again",
				"err", fmt.Errorf("%w: %s has %s %s", ErrCorrupt, blob, kind, got))
			if err := os.Remove(blob); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return "", fmt.Errorf("hub: removing a corrupt blob: %w", err)
			}
		}
	}
	if !sizeIs(rc.blobPath(meta.etag), meta.size) {
		if err := c.fetchLocked(ctx, rc, repo, filename, meta, pw); err != nil {
			return "", err
		}
	}
	p, err := rc.link(meta.commit, filename, meta.etag)
	if err != nil {
		return "", err
	}
	// The ref is written once the file is in place, so a failed download leaves no trace in
	// refs/ or snapshots/.
	if err := rc.writeRef(repo.Revision, meta.commit); err != nil {
		return "", err
	}
	return p, nil
}

// checkedCachedFile is cachedFile with the blob re-hashed (checkCached).
func (c *Client) checkedCachedFile(ctx context.Context, repo Repo, filename string, cause error) (string, error) {
	p, err := c.cachedFile(repo, filename, cause)
	if err != nil {
		return "", err
	}
	if err := c.limits.admitCached(fmt.Sprintf("%s file %q", repo.describe(), filename), p); err != nil {
		return "", err
	}
	if err := c.checkCached(ctx, repo, filename, p); err != nil {
		return "", err
	}
	return p, nil
}

// checkCached re-hashes the blob a cached snapshot file links to against its etag (the name of
// the blob), unless Config.TrustCache: a blob altered after it was verified — by a disk error, a
// tool, a hand — is ErrCorrupt naming the file and the blob. A plain file in the snapshot (a
// copy rather than a link) has no etag to check and passes.
func (c *Client) checkCached(ctx context.Context, repo Repo, filename, pointer string) error {
	if c.cfg.TrustCache {
		return nil
	}
	target, err := os.Readlink(pointer)
	if err != nil {
		return nil // not a link: nothing to check it against
	}
	etag := filepath.Base(target)
	blob := filepath.Join(filepath.Dir(pointer), target)
	ok, got, kind, err := verifyBlob(ctx, blob, etag)
	if err != nil {
		return fmt.Errorf("hub: %s file %q: %w", repo.describe(), filename, err)
	}
	if kind != "" && !ok {
		return fmt.Errorf("%w: %s file %q: the cached blob %s has %s %s; delete it and download again (online, gotpu does so itself)",
			ErrCorrupt, repo.describe(), filename, blob, kind, got)
	}
	return nil
}

// checkPinned refuses an answer for a revision that is a commit but that names another commit
// (X-Repo-Commit, the repo-info sha): the bytes would be linked under that other snapshot and
// refs/ would map one commit to another. huggingface_hub trusts the header; a commit pin is a
// promise about content, so here the answer is ErrCorrupt, before anything is written.
func checkPinned(repo Repo, commit, what string) error {
	if IsCommit(repo.Revision) && commit != repo.Revision {
		return fmt.Errorf("%w: %s: the Hub answered for commit %s, not the commit asked for", ErrCorrupt, what, commit)
	}
	return nil
}

// recordMissing writes the .no_exist marker and the ref for a file the Hub said is missing at
// commit. Failing to record it only costs a request later, so it is logged, not returned. An
// answer for another commit than the one pinned is not recorded at all (checkPinned).
func (c *Client) recordMissing(rc repoCache, repo Repo, filename, commit string) {
	if checkPinned(repo, commit, filename) != nil {
		c.log.Warn("hub: the Hub answered for another commit than the one asked for; not recorded",
			"repo", repo.ID, "revision", repo.Revision, "file", filename, "commit", commit)
		return
	}
	if err := rc.markNoExist(commit, filename); err != nil {
		c.log.Warn("hub: cannot record a missing file", "file", filename, "err", err)
	}
	if err := rc.writeRef(repo.Revision, commit); err != nil {
		c.log.Warn("hub: cannot record a revision", "revision", repo.Revision, "err", err)
	}
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// sizeIs reports whether p is a regular file (through links) of exactly size bytes.
func sizeIs(p string, size int64) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Size() == size
}

// fetchLocked downloads the blob of meta under its lock, unless another process or goroutine
// completed it while this one waited. A blob of the wrong size (truncated by hand, a crash of
// a tool that does not rename atomically) is replaced.
func (c *Client) fetchLocked(ctx context.Context, rc repoCache, repo Repo, filename string, meta fileMeta, pw io.Writer) error {
	if err := atomicfile.MkdirAll(filepath.Dir(rc.blobPath(meta.etag))); err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	unlock, err := lockFile(ctx, rc.lockPath(meta.etag))
	if err != nil {
		return err
	}
	defer unlock()
	blob := rc.blobPath(meta.etag)
	st, err := os.Stat(blob)
	switch {
	case err == nil && st.Mode().IsRegular() && st.Size() == meta.size:
		return nil
	case err == nil:
		c.log.Warn("hub: replacing a cached blob of the wrong size",
			"err", fmt.Errorf("%w: %s has %d bytes, the Hub announces %d", ErrCorrupt, blob, st.Size(), meta.size))
		if err := os.Remove(blob); err != nil {
			return fmt.Errorf("hub: removing a corrupt blob: %w", err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("hub: %w", err)
	}
	return c.fetchBlob(ctx, rc, repo, filename, meta, pw)
}

// fetchBlob downloads meta's blob into blobs/<etag>.incomplete, resuming from what is already
// there, verifies its size and hash, and renames it to blobs/<etag>. The caller holds the lock.
func (c *Client) fetchBlob(ctx context.Context, rc repoCache, repo Repo, filename string, meta fileMeta, pw io.Writer) (err error) {
	what := fmt.Sprintf("%s file %q", repo.describe(), filename)
	blob := rc.blobPath(meta.etag)
	inc := blob + ".incomplete"
	f, err := os.OpenFile(inc, os.O_RDWR|os.O_CREATE, atomicfile.FileMode)
	if err != nil {
		return fmt.Errorf("hub: %s: %w", what, err)
	}
	discard := false // the partial file is wrong, not just short: remove it
	defer func() {
		if f != nil {
			f.Close()
		}
		if discard {
			os.Remove(inc)
		}
	}()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("hub: %s: %w", what, err)
	}
	have := st.Size()
	if have > meta.size {
		c.log.Warn("hub: partial download longer than the file; restarting", "file", inc, "size", have, "want", meta.size)
		if err := f.Truncate(0); err != nil {
			return fmt.Errorf("hub: %s: %w", what, err)
		}
		have = 0
	}
	v := newVerifier(meta.etag, meta.size)
	if have > 0 {
		// The hash covers the whole file: feed it the part a previous run wrote.
		if _, err := io.Copy(v, ctxReader{ctx, io.NewSectionReader(f, 0, have)}); err != nil {
			return fmt.Errorf("hub: %s: hashing the partial download %s: %w", what, inc, err)
		}
	}
	if have < meta.size {
		n, corrupt, err := c.receive(ctx, f, v, meta, have, what, filename, pw)
		have = n
		if err != nil {
			discard = corrupt
			return err
		}
	}
	if have != meta.size {
		discard = true
		return fmt.Errorf("%w: %s: received %d bytes, the Hub announced %d", ErrCorrupt, what, have, meta.size)
	}
	if got, ok := v.check(); !ok {
		discard = true
		return fmt.Errorf("%w: %s: %s of the downloaded bytes is %s, the Hub announced %s", ErrCorrupt, what, v.kind, got, meta.etag)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("hub: %s: fsync %s: %w", what, inc, err)
	}
	cerr := f.Close()
	f = nil
	if cerr != nil {
		return fmt.Errorf("hub: %s: closing %s: %w", what, inc, cerr)
	}
	if err := atomicfile.Rename(inc, blob); err != nil {
		return fmt.Errorf("hub: %s: %w", what, err)
	}
	return nil
}

// receive GETs the bytes of meta from offset have on and appends them to f and v. It returns
// the file's new length; corrupt says the partial file must be discarded (the server sent more
// than announced, or data that cannot be appended). A connection that breaks leaves the bytes
// received so far in f for the next attempt.
func (c *Client) receive(ctx context.Context, f *os.File, v *verifier, meta fileMeta, have int64, what, filename string, pw io.Writer) (int64, bool, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	idle := newIdleTimer(c.cfg.DownloadTimeout, cancel)
	defer idle.stop()

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, meta.location, nil)
	if err != nil {
		return have, false, fmt.Errorf("hub: %s: %w", what, err)
	}
	req.Header.Set("Accept-Encoding", "identity")
	if have > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", have))
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return have, false, c.receiveError(ctx, what, have, f.Name(), stripURL(err))
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusPartialContent && have > 0:
		if err := checkContentRange(resp.Header.Get("Content-Range"), have, meta.size); err != nil {
			return have, false, fmt.Errorf("%w: %s: %w", ErrCorrupt, what, err)
		}
	case resp.StatusCode == http.StatusOK:
		if have > 0 {
			// The server ignored the Range: it sends the whole file, so start over.
			c.log.Warn("hub: server ignored the resume request; restarting the download", "file", filename, "had", have)
			if err := f.Truncate(0); err != nil {
				return have, false, fmt.Errorf("hub: %s: %w", what, err)
			}
			have = 0
			v.reset()
		}
	case resp.StatusCode >= 400:
		return have, false, httpError(resp, what)
	default:
		return have, false, fmt.Errorf("hub: %s: unexpected HTTP status %d for a download", what, resp.StatusCode)
	}
	remaining := meta.size - have
	if resp.ContentLength > remaining {
		return have, true, fmt.Errorf("%w: %s: the server announces %d bytes, %d expected", ErrCorrupt, what, resp.ContentLength, remaining)
	}
	if _, err := f.Seek(have, io.SeekStart); err != nil {
		return have, false, fmt.Errorf("hub: %s: %w", what, err)
	}
	var bar *progress.Bar
	if pw != nil {
		bar = progress.NewWithOptions(pw, progress.Options{Total: meta.size, Initial: have, Terminal: progress.IsTerminal(pw), Bytes: true})
		bar.SetPostfix(filename)
		defer bar.Close()
	}
	// One byte more than expected is read, so that a server sending too much is caught.
	body := &countingReader{r: io.LimitReader(resp.Body, remaining+1), idle: idle, bar: bar}
	n, err := io.CopyBuffer(io.MultiWriter(f, v), body, make([]byte, 256<<10))
	have += n
	if n > remaining {
		return have, true, fmt.Errorf("%w: %s: the server sent more than the %d bytes announced", ErrCorrupt, what, meta.size)
	}
	if err != nil {
		return have, false, c.receiveError(ctx, what, have, f.Name(), err)
	}
	return have, false, nil
}

// receiveError explains a failed transfer: a stall past DownloadTimeout is named as such, and
// the partial file kept for resuming is mentioned.
func (c *Client) receiveError(ctx context.Context, what string, have int64, partial string, err error) error {
	if cause := context.Cause(ctx); errors.Is(cause, errStalled) {
		err = fmt.Errorf("%w (%v)", cause, c.cfg.DownloadTimeout)
	}
	return fmt.Errorf("hub: downloading %s: %w (%d bytes kept in %s for resuming)", what, err, have, partial)
}

// ctxReader stops a long local read (hashing a large partial file or blob) when ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (r ctxReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}

// countingReader feeds the idle timer and the progress bar as bytes arrive.
type countingReader struct {
	r    io.Reader
	idle *idleTimer
	bar  *progress.Bar
}

func (r *countingReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 {
		r.idle.touch()
		if r.bar != nil {
			r.bar.Add(int64(n))
		}
	}
	return n, err
}
