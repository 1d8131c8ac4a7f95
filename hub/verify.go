package hub

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Verify re-hashes every blob linked from the cached snapshot of repo's revision and reports
// each file whose blob is missing, has the wrong hash, or whose link leads outside the repo's
// blobs/: ErrCorrupt naming the file (several are joined). Download re-hashes only the files it
// returns (unless Config.TrustCache); Verify checks a whole snapshot at once.
// It reads only the cache (no request), and stops when ctx is done.
func (c *Client) Verify(ctx context.Context, repo Repo) error {
	if err := repo.validate(); err != nil {
		return err
	}
	repo = repo.normalized()
	rc := c.repoCache(repo)
	dir, commit, err := c.cachedSnapshot(repo, errors.New("verification reads only the cache"))
	if err != nil {
		return err
	}
	var problems []error
	checked, unverifiable := 0, 0
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		file := filepath.ToSlash(rel)
		if d.Type()&fs.ModeSymlink == 0 {
			unverifiable++ // a plain file (a copy, not a link): no etag to check it against
			return nil
		}
		target, err := os.Readlink(p)
		if err != nil {
			return err
		}
		etag := filepath.Base(target)
		blob := rc.blobPath(etag)
		if filepath.Join(filepath.Dir(p), target) != blob || !validEtag(etag) {
			problems = append(problems, fmt.Errorf("%w: %s file %q at commit %s: link %s does not point into %s",
				ErrCorrupt, repo.describe(), file, commit, target, filepath.Dir(blob)))
			return nil
		}
		ok, got, kind, err := verifyBlob(ctx, blob, etag)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			problems = append(problems, fmt.Errorf("%w: %s file %q at commit %s: blob %s is missing", ErrCorrupt, repo.describe(), file, commit, blob))
		case err != nil:
			return err
		case kind == "":
			unverifiable++
		case !ok:
			problems = append(problems, fmt.Errorf("%w: %s file %q at commit %s: blob %s has %s %s",
				ErrCorrupt, repo.describe(), file, commit, blob, kind, got))
		default:
			checked++
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("hub: verifying %s: %w", dir, err)
	}
	c.log.Info("hub: verified the cached snapshot", "repo", repo.ID, "commit", commit,
		"ok", checked, "corrupt", len(problems), "unverifiable", unverifiable)
	return errors.Join(problems...)
}

// verifyBlob hashes the blob at path and compares it with its etag. kind is "" when the etag is
// not a hash the client knows (nothing was checked).
func verifyBlob(ctx context.Context, path, etag string) (ok bool, got, kind string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return false, "", "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return false, "", "", err
	}
	v := newVerifier(etag, st.Size())
	if v.h == nil {
		return false, "", "", nil
	}
	if _, err := io.Copy(v, ctxReader{ctx, f}); err != nil {
		return false, "", "", err
	}
	got, ok = v.check()
	return ok, got, v.kind, nil
}
