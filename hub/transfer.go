package hub

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"sync"
	"time"
)

// verifier hashes a blob as it is written and checks it against its etag: the sha256 of the
// content for LFS files (64-hex etags), the git blob sha1 (sha1 of "blob <size>\0" + content)
// for regular files (40-hex etags). Other etags are not hashes the client can check; only the
// size is verified then.
type verifier struct {
	h    hash.Hash // nil: nothing to check
	kind string    // "sha256", "git blob sha1"
	want string
	size int64
}

func newVerifier(etag string, size int64) *verifier {
	v := &verifier{want: etag, size: size}
	switch {
	case isHex(etag, 64):
		v.h, v.kind = sha256.New(), "sha256"
	case isHex(etag, 40):
		v.h, v.kind = sha1.New(), "git blob sha1"
	}
	v.reset()
	return v
}

// reset forgets what was hashed (a download that restarts from byte 0).
func (v *verifier) reset() {
	if v.h == nil {
		return
	}
	v.h.Reset()
	if v.kind == "git blob sha1" {
		fmt.Fprintf(v.h, "blob %d\x00", v.size)
	}
}

func (v *verifier) Write(p []byte) (int, error) {
	if v.h != nil {
		v.h.Write(p)
	}
	return len(p), nil
}

// check returns the digest and whether it matches the etag (true when nothing can be checked).
func (v *verifier) check() (string, bool) {
	if v.h == nil {
		return "", true
	}
	got := hex.EncodeToString(v.h.Sum(nil))
	return got, got == v.want
}

// checkContentRange checks a 206 answer to "Range: bytes=<from>-" for a file of size bytes:
// Content-Range must be "bytes <from>-<size-1>/<size>" (the total may be "*").
func checkContentRange(h string, from, size int64) error {
	start, end, total, err := parseContentRange(h)
	if err != nil {
		return err
	}
	if start != from || end != size-1 || (total >= 0 && total != size) {
		return fmt.Errorf("the server answered Content-Range %q to a request for bytes %d- of a %d-byte file", sanitize(h, 80), from, size)
	}
	return nil
}

// parseContentRange parses "bytes <start>-<end>/<total>"; total is -1 for "*".
func parseContentRange(h string) (start, end, total int64, err error) {
	bad := func() (int64, int64, int64, error) {
		return 0, 0, 0, fmt.Errorf("malformed Content-Range %q", sanitize(h, 80))
	}
	rest, ok := strings.CutPrefix(strings.TrimSpace(h), "bytes ")
	if !ok {
		return bad()
	}
	rng, tot, ok := strings.Cut(rest, "/")
	if !ok {
		return bad()
	}
	s, e, ok := strings.Cut(rng, "-")
	if !ok {
		return bad()
	}
	if start, err = strconv.ParseInt(s, 10, 64); err != nil || start < 0 {
		return bad()
	}
	if end, err = strconv.ParseInt(e, 10, 64); err != nil || end < start {
		return bad()
	}
	total = -1
	if tot != "*" {
		if total, err = strconv.ParseInt(tot, 10, 64); err != nil || total <= end {
			return bad()
		}
	}
	return start, end, total, nil
}

// errStalled is the cause given to a download's context when no byte arrived for
// Config.DownloadTimeout.
var errStalled = errors.New("hub: no data received within the download timeout")

// idleTimer cancels a download that receives nothing for a while (huggingface_hub's
// HF_HUB_DOWNLOAD_TIMEOUT is a read timeout). Its goroutine is time.AfterFunc's, which stop
// ends.
type idleTimer struct {
	d  time.Duration
	mu sync.Mutex
	t  *time.Timer
}

func newIdleTimer(d time.Duration, cancel func(error)) *idleTimer {
	it := &idleTimer{d: d}
	it.t = time.AfterFunc(d, func() { cancel(errStalled) })
	return it
}

func (it *idleTimer) touch() {
	it.mu.Lock()
	defer it.mu.Unlock()
	it.t.Reset(it.d)
}

func (it *idleTimer) stop() {
	it.mu.Lock()
	defer it.mu.Unlock()
	it.t.Stop()
}
