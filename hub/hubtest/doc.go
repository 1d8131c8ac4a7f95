// Package hubtest is an in-process fake Hugging Face Hub for tests: two httptest servers, the
// Hub itself and a separate "CDN" host that serves LFS files, answering as the real Hub does
// (the protocol huggingface_hub and @huggingface/hub speak):
//
//   - HEAD/GET /{id}/resolve/{rev}/{path} (datasets/ and spaces/ prefixed for those types):
//     X-Repo-Commit on every answer; small files served directly with ETag = git blob sha1;
//     LFS files (at least RepoOptions.LFSThreshold bytes) answered with a 302 to the CDN host,
//     with X-Linked-Etag = sha256, X-Linked-Size and ETag = the git sha1 of the LFS pointer.
//     Range requests are answered 206 with Content-Range, on both hosts.
//   - GET /api/{models,datasets,spaces}/{id}/revision/{rev} (?blobs=true adds sizes and lfs),
//     GET /api/.../tree/{rev}/{path}?recursive=&expand= (one page, no Link header; or pages
//     chained by `Link: <url>; rel="next"` after SetTreePageSize) and
//     POST /api/.../paths-info/{rev} (JSON or form body).
//   - Errors carry X-Error-Code: RepoNotFound, RevisionNotFound, EntryNotFound (with
//     X-Repo-Commit), GatedRepo (401 without the accepted "Authorization: Bearer" token).
//
// Repos live in memory (AddRepo); commit shas are a deterministic sha1 of the contents. Every
// request is logged (Requests) with its host, range, Authorization header and the body bytes
// written (BytesServed sums them), so tests can assert what a client sent where and how much it
// was sent. One-shot faults (CutAfter, StallAfter, CorruptNext, ExtraNext, IgnoreRangeNext)
// break the next download of a file; SlowNext spreads it over a while, so that a test can act
// while it is under way. File names are not checked:
// a test may serve "../x" to see a client refuse it.
//
// # Errors
//
// AddRepo reports a bad option (a Commit that is not 40 hex digits) through the testing.TB of
// New, or panics for a Server from NewServer: it is a mistake in the test, not input.
//
// # Concurrency
//
// A Server is safe for concurrent use by any number of clients and test goroutines. Its
// goroutines are those of the two httptest servers; Close stops them, and releases handlers
// stalled by StallAfter.
package hubtest
