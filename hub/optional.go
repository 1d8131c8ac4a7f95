package hub

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
)

// DownloadOptional is Download for a file a repo may or may not have (generation_config.json,
// tokenizer_config.json, special_tokens_map.json, chat_template.jinja, ...): it returns "" and
// no error when the file is absent, as transformers' cached_file does with
// _raise_exceptions_for_missing_entries=False and _raise_exceptions_for_connection_errors=False.
//
// Absent means: the Hub answered that the revision has no such file (EntryNotFound, or a plain
// 404 without an error code, which huggingface_hub also turns into a missing entry), a .no_exist
// marker records that it has none, or — offline, or with the Hub unreachable — the cache holds
// neither the file nor a marker. The last case cannot tell "the repo has none" from "it was not
// downloaded", exactly as transformers cannot; it is logged so that the choice is not silent.
// Every other failure (gated or missing repo, revision not found, corrupt bytes, a file over
// the limit, a server error with nothing cached) is returned as Download returns it.
func (c *Client) DownloadOptional(ctx context.Context, repo Repo, filename string) (string, error) {
	p, err := c.Download(ctx, repo, filename)
	switch {
	case err == nil:
		return p, nil
	case errors.Is(err, ErrEntryNotFound), isPlainNotFound(err):
		c.log.Debug("hub: optional file absent", "repo", repo.ID, "revision", repo.Revision, "file", filename)
		return "", nil
	case errors.Is(err, ErrNotCached):
		c.log.Info("hub: optional file not in the cache; going on without it",
			"repo", repo.ID, "revision", repo.Revision, "file", filename, "why", err)
		return "", nil
	}
	return "", err
}

// isPlainNotFound says whether err is an HTTP 404 the Hub sent without an X-Error-Code that
// names what is missing (a mirror or proxy that answers a bare 404 for a missing file).
func isPlainNotFound(err error) bool {
	var se *statusError
	return errors.As(err, &se) && se.status == http.StatusNotFound && se.sentinel == nil
}

// markMissing records a .no_exist marker under commit for each name in names that files (the
// commit's complete listing) does not hold: the listing is the Hub's word that the commit has no
// such file, the same answer a HEAD's EntryNotFound gives, so a later offline lookup of an
// optional file answers "absent" instead of "not cached". The names were checked by
// validMarkMissing; a marker that cannot be written only costs a request later and is logged.
func (c *Client) markMissing(rc repoCache, commit string, files, names []string) {
	for _, n := range names {
		if slices.Contains(files, n) || rc.hasNoExist(commit, n) {
			continue
		}
		if err := rc.markNoExist(commit, n); err != nil {
			c.log.Warn("hub: cannot record a missing file", "file", n, "err", err)
		}
	}
}

// validMarkMissing refuses a SnapshotOptions.MarkMissing name that could not be a file of the
// repo (it becomes a path under .no_exist/), before any request is sent.
func validMarkMissing(names []string) error {
	for _, n := range names {
		if err := validRepoPath(n); err != nil {
			return fmt.Errorf("hub: SnapshotOptions.MarkMissing: %w", err)
		}
	}
	return nil
}
