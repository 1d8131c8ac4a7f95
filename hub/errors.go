package hub

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
)

// Sentinel errors; test for them with errors.Is. Returned errors wrap them with the repo,
// revision and file concerned.
var (
	// ErrNotCached: the file or snapshot is not in the cache and the Hub was not asked (offline)
	// or could not be reached.
	ErrNotCached = errors.New("hub: not in the local cache")
	// ErrRepoNotFound: the Hub has no such repository, or it is private and no valid token was
	// sent (X-Error-Code RepoNotFound, or a 401 without a code).
	ErrRepoNotFound = errors.New("hub: repository not found")
	// ErrRevisionNotFound: the repository has no such branch, tag or commit.
	ErrRevisionNotFound = errors.New("hub: revision not found")
	// ErrEntryNotFound: the revision has no such file (also from a cached .no_exist marker).
	ErrEntryNotFound = errors.New("hub: file not found in the repository")
	// ErrGated: the repository is gated (or forbidden) and the token is missing or not granted.
	ErrGated = errors.New("hub: gated repository: access denied")
	// ErrCorrupt: downloaded or cached bytes do not match the size or hash the Hub announced,
	// or the server answered something that cannot be right.
	ErrCorrupt = errors.New("hub: corrupt data")
	// ErrTooLarge: a file is larger than the limit the caller set (Client.WithLimits), as the
	// Hub announces it (refused before a byte is written) or as the cache holds it.
	ErrTooLarge = errors.New("hub: file larger than the limit")
)

// errMetadata marks a HEAD answer without the headers a download needs (huggingface_hub's
// FileMetadataError): like a connection error, it sends a download to the cache.
var errMetadata = errors.New("hub: incomplete file metadata from the Hub")

// statusError is an HTTP error answer from the Hub, mapped to a sentinel when its code is known.
type statusError struct {
	sentinel error // one of the Err* above, or nil
	what     string
	status   int
	code     string // X-Error-Code
	message  string // X-Error-Message, sanitized
}

func (e *statusError) Error() string {
	var b strings.Builder
	if e.sentinel != nil {
		b.WriteString(e.sentinel.Error())
		b.WriteString(": ")
	} else {
		b.WriteString("hub: ")
	}
	b.WriteString(e.what)
	fmt.Fprintf(&b, " (HTTP %d", e.status)
	if e.code != "" {
		b.WriteString(" " + e.code)
	}
	if e.message != "" {
		b.WriteString(": " + e.message)
	}
	b.WriteString(")")
	return b.String()
}

func (e *statusError) Unwrap() error { return e.sentinel }

// maxErrorMessage bounds the server's X-Error-Message copied into an error.
const maxErrorMessage = 200

// httpError maps an error response (status ≥ 400) to a *statusError; what names the repo,
// revision and file for the message.
func httpError(resp *http.Response, what string) error {
	code := resp.Header.Get("X-Error-Code")
	e := &statusError{what: what, status: resp.StatusCode, code: sanitize(code, 64), message: sanitize(resp.Header.Get("X-Error-Message"), maxErrorMessage)}
	switch code {
	case "RepoNotFound":
		e.sentinel = ErrRepoNotFound
	case "RevisionNotFound":
		e.sentinel = ErrRevisionNotFound
	case "EntryNotFound":
		e.sentinel = ErrEntryNotFound
	case "GatedRepo":
		e.sentinel = ErrGated
	default:
		switch resp.StatusCode {
		case http.StatusUnauthorized:
			// The Hub answers 401 for private repos without a valid token and for missing
			// ones alike; huggingface_hub raises RepositoryNotFoundError.
			e.sentinel = ErrRepoNotFound
			if e.message == "" {
				e.message = "the repository does not exist, or it is private and no valid token was sent"
			}
		case http.StatusForbidden:
			e.sentinel = ErrGated
		}
	}
	return e
}

// sanitize keeps printable characters of a server-sent string, cut to n bytes, so a hostile
// header cannot forge log lines.
func sanitize(s string, n int) string {
	var b strings.Builder
	for _, r := range s {
		if b.Len() >= n {
			b.WriteString("…")
			break
		}
		if r < 0x20 || r == 0x7f {
			r = ' '
		}
		b.WriteRune(r)
	}
	return b.String()
}

// fallbackOK says whether a failed Hub call may be answered from the cache, as
// huggingface_hub decides: yes for connection errors, timeouts, incomplete metadata and HTTP
// errors other than RevisionNotFound and EntryNotFound (the Hub answered that the thing does
// not exist); no for TLS failures (a wrong certificate is not "offline") and for the caller's
// own cancellation.
func fallbackOK(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	if errors.Is(err, ErrRevisionNotFound) || errors.Is(err, ErrEntryNotFound) {
		return false
	}
	var certErr *tls.CertificateVerificationError
	var unknownAuth x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var invalid x509.CertificateInvalidError
	var recordErr tls.RecordHeaderError
	if errors.As(err, &certErr) || errors.As(err, &unknownAuth) || errors.As(err, &hostErr) ||
		errors.As(err, &invalid) || errors.As(err, &recordErr) {
		return false
	}
	var se *statusError
	var netErr net.Error
	return errors.As(err, &se) || errors.As(err, &netErr) || errors.Is(err, errMetadata) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

// isConnectionError says whether err means the Hub did not answer (as opposed to answering
// with an HTTP error).
func isConnectionError(err error) bool {
	var se *statusError
	return !errors.As(err, &se)
}
