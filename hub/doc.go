// Package hub downloads files from the Hugging Face Hub into the cache that Python's
// huggingface_hub (and transformers, and @huggingface/hub) use, laid out exactly as theirs, so
// a model downloaded by one is found by the others:
//
//	<cache>/models--org--name/refs/main                 the commit "main" resolved to
//	<cache>/models--org--name/blobs/<etag>              file contents, named by etag (sha256 for
//	                                                    LFS files, git blob sha1 otherwise)
//	<cache>/models--org--name/blobs/<etag>.incomplete   a partial download, resumed with Range
//	<cache>/models--org--name/snapshots/<commit>/<path> relative symlink to ../../blobs/<etag>
//	<cache>/models--org--name/.no_exist/<commit>/<path> the Hub said this file does not exist
//	<cache>/.locks/models--org--name/<etag>.lock        per-blob flock(2) lock
//
// The cache is HF_HUB_CACHE, else $HF_HOME/hub, HF_HOME defaulting to
// $XDG_CACHE_HOME/huggingface or ~/.cache/huggingface (ConfigFromEnv). A branch or tag ref is
// refs/<revision> as huggingface_hub writes it, so "refs/pr/1" is refs/refs/pr/1.
//
// Download is hf_hub_download, Snapshot is snapshot_download, ListFiles and FileExists the
// listing calls, with huggingface_hub's protocol (HEAD of the resolve URL for metadata, the
// repo-info API for file lists) and its offline behaviour: with Config.Offline no connection is
// opened, and when the Hub cannot be reached (connection refused, timeout, server error) the
// cache answers instead, with a warning logged. Beyond huggingface_hub, every download is
// verified (size, and the sha256 or git blob sha1 its etag names) before it is linked, a cached
// blob is hashed again before Download hands it out (re-fetched online, ErrCorrupt offline;
// Config.TrustCache skips this, as huggingface_hub does), and Verify re-hashes a cached snapshot.
//
// Package hubtest is an in-process fake Hub speaking the same protocol, for tests.
//
// Why not github.com/gomlx/go-huggingface: it keeps revisions in info/<rev> rather than
// refs/, ignores HF_HOME and HF_HUB_CACHE, asks the network before every file (so offline use
// cannot work), downloads to ".downloading" without resuming, verifies no hash, locks next to
// the blob instead of under .locks/, and logs with the global logger.
//
// # Errors
//
// Errors wrap one of ErrNotCached, ErrRepoNotFound, ErrRevisionNotFound, ErrEntryNotFound,
// ErrGated, ErrCorrupt and ErrTooLarge (test with errors.Is) and name the repo, revision and
// file, and the cache folder or the limit where relevant. The token is never part of an error
// or a log line. Names and headers sent by the server are untrusted: a file name that is
// absolute, has "..", empty segments or backslashes, an etag that is not a plain file name, or a
// commit that is not 40 hex digits is refused before anything is written. A download whose size or hash does not
// match is ErrCorrupt and its partial file is removed; one that breaks off keeps its partial
// file, and the next call (in any process) resumes it. An answer for a commit revision that names
// another commit (X-Repo-Commit, the listing's sha) is ErrCorrupt too: a commit is never linked
// under another's snapshot nor recorded in refs/ as another.
//
// # Limits
//
// Beyond huggingface_hub, a client from WithLimits refuses (ErrTooLarge) a file above a size, or
// files adding up to more than a total, from the size the Hub announces, before a byte is
// written; the download then reads no more than that size. Every request is bounded in time: a
// file's metadata and the repo-info listing must be answered within Config.EtagTimeout, and a
// body (a file's, the listing's) may go no longer than Config.DownloadTimeout without a byte; a
// call that times out is answered from the cache where the cache has the revision.
//
// # Concurrency
//
// A Client is safe for concurrent use, and several processes may share one cache: each blob is
// downloaded under an exclusive flock(2) on its lock file (which also excludes goroutines of
// one process, flock locks belonging to open files), re-checked once the lock is held, and
// renamed into place complete; symlinks and refs are replaced atomically by rename. Snapshot
// downloads with an errgroup of at most MaxWorkers goroutines, all ended before it returns; a
// download's idle timer (Config.DownloadTimeout) is a time.AfterFunc stopped when the download
// ends. A client from WithLimits shares its parent's connections and cache; its count of the
// sizes handed out is its own, under a mutex. The package has no global mutable state.
package hub
