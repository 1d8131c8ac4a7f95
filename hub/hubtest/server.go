package hubtest

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// DefaultToken is the token a new Server accepts for gated and private repos.
const DefaultToken = "hf_hubtest_0123456789abcdef"

// Server is a fake Hub and its CDN. Create it with New or NewServer.
type Server struct {
	hub, cdn *httptest.Server
	tb       testing.TB // nil for NewServer
	closing  chan struct{}
	closed   sync.Once

	mu      sync.Mutex
	token   string
	repos   map[string]*fakeRepo
	renamed map[string]string
	blobs   map[string][]byte // sha256 → content, what the CDN serves
	faults  map[string]*fault // file path → the fault for its next download
	log     []Request
	// treePage is the most entries one tree answer holds (0: all, in one page); see
	// SetTreePageSize.
	treePage int
}

// Request is one logged request.
type Request struct {
	Host          string // "hub" or "cdn"
	Method        string
	Path          string // as sent (escaped)
	Query         string
	Range         string // the Range header
	Authorization string // the Authorization header
	Status        int    // the status answered
	// Bytes is how many body bytes the handler got written to the connection: what a test
	// asserts to show that a client stopped (or never started) a download.
	Bytes int64
}

// fault breaks the next download of a file.
type fault struct {
	cutAfter    int64         // ≥ 0: send this many bytes, then drop the connection
	stallAfter  int64         // ≥ 0: send this many bytes, then send nothing until the client gives up
	corrupt     bool          // flip a byte
	extra       int           // send this many bytes past the end, without Content-Length
	ignoreRange bool          // answer 200 with the whole file to a Range request
	slow        time.Duration // > 0: spread the body over about this long
}

func newFault() *fault { return &fault{cutAfter: -1, stallAfter: -1} }

// New starts a Server closed when the test ends; AddRepo mistakes fail tb.
func New(tb testing.TB) *Server {
	tb.Helper()
	s := NewServer()
	s.tb = tb
	tb.Cleanup(s.Close)
	return s
}

// NewServer starts a Server; call Close when done.
func NewServer() *Server {
	s := &Server{
		closing: make(chan struct{}),
		token:   DefaultToken,
		repos:   map[string]*fakeRepo{},
		renamed: map[string]string{},
		blobs:   map[string][]byte{},
		faults:  map[string]*fault{},
	}
	s.hub = httptest.NewServer(s.logged("hub", http.HandlerFunc(s.serveHub)))
	s.cdn = httptest.NewServer(s.logged("cdn", http.HandlerFunc(s.serveCDN)))
	return s
}

// Close stops both servers, first releasing handlers stalled by StallAfter.
func (s *Server) Close() {
	s.closed.Do(func() {
		close(s.closing)
		s.hub.Close()
		s.cdn.Close()
	})
}

// URL is the Hub endpoint (for Config.Endpoint / HF_ENDPOINT).
func (s *Server) URL() string { return s.hub.URL }

// CDNURL is the base URL of the host serving LFS files.
func (s *Server) CDNURL() string { return s.cdn.URL }

// Token returns the token accepted for gated and private repos.
func (s *Server) Token() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.token
}

// SetToken changes the accepted token.
func (s *Server) SetToken(tok string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.token = tok
}

// Requests returns a copy of the request log.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.log...)
}

// RequestCount is the number of requests received by both hosts.
func (s *Server) RequestCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.log)
}

// CountRequests is the number of logged requests for which match is true.
func (s *Server) CountRequests(match func(Request) bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.log {
		if match(r) {
			n++
		}
	}
	return n
}

// BytesServed is the number of body bytes written by both hosts to the requests logged so far
// (a request is logged when its handler returns).
func (s *Server) BytesServed() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, r := range s.log {
		n += r.Bytes
	}
	return n
}

// BytesServedFor is the number of body bytes written for the file named file (a path in a repo)
// by both hosts to the requests logged so far: the Hub's resolve answers and the CDN's, which
// name the file in their query (LFS files). It tells a test how much of a file a client fetched
// before refusing it.
func (s *Server) BytesServedFor(file string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, r := range s.log {
		cdn := r.Host == "cdn" && strings.Contains(r.Query, "filename="+url.QueryEscape(file)+"&")
		if cdn || strings.HasSuffix(r.Path, "/"+file) {
			n += r.Bytes
		}
	}
	return n
}

// Noise is n pseudo-random bytes drawn from seed: a file of the size a test's repo announces,
// whose content no reader accepts (it is no safetensors header, no JSON).
func Noise(n int, seed byte) []byte {
	b := make([]byte, n)
	rand.NewChaCha8([32]byte{seed}).Read(b)
	return b
}

// ResetRequests empties the request log.
func (s *Server) ResetRequests() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = nil
}

// CutAfter makes the next download of the file at path (in any repo) send n bytes and then
// drop the connection.
func (s *Server) CutAfter(path string, n int64) { s.setFault(path, func(f *fault) { f.cutAfter = n }) }

// StallAfter makes the next download of path send n bytes and then nothing, until the client
// gives up or the server closes.
func (s *Server) StallAfter(path string, n int64) {
	s.setFault(path, func(f *fault) { f.stallAfter = n })
}

// CorruptNext makes the next download of path send wrong bytes (the right number of them).
func (s *Server) CorruptNext(path string) { s.setFault(path, func(f *fault) { f.corrupt = true }) }

// ExtraNext makes the next download of path send n bytes more than the file has, chunked (no
// Content-Length), so only a client counting what arrives notices.
func (s *Server) ExtraNext(path string, n int) { s.setFault(path, func(f *fault) { f.extra = n }) }

// SlowNext makes the next download of path send its body in slowChunks pieces spread over
// about d, so that a test can act (start a second client, watch a partial file grow) while it
// is under way. The handler stops early when the client goes away or the server closes.
func (s *Server) SlowNext(path string, d time.Duration) {
	s.setFault(path, func(f *fault) { f.slow = d })
}

// IgnoreRangeNext makes the next download of path answer a Range request with 200 and the
// whole file, as a server without range support does.
func (s *Server) IgnoreRangeNext(path string) {
	s.setFault(path, func(f *fault) { f.ignoreRange = true })
}

func (s *Server) setFault(path string, set func(*fault)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.faults[path]
	if f == nil {
		f = newFault()
		s.faults[path] = f
	}
	set(f)
}

// takeFault removes and returns the pending fault of path, nil if none.
func (s *Server) takeFault(path string) *fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.faults[path]
	delete(s.faults, path)
	return f
}

func (s *Server) fail(format string, args ...any) {
	if s.tb != nil {
		s.tb.Helper()
		s.tb.Fatalf(format, args...)
		return
	}
	panic(fmt.Sprintf(format, args...))
}

// statusRecorder keeps the status for the log; Unwrap lets http.ResponseController reach the
// connection (Flush, Hijack).
type statusRecorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *statusRecorder) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusRecorder) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(p)
	w.bytes += int64(n)
	return n, err
}

func (w *statusRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (s *Server) logged(host string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w}
		h.ServeHTTP(rec, r)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.log = append(s.log, Request{Host: host, Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery,
			Range: r.Header.Get("Range"), Authorization: r.Header.Get("Authorization"), Status: rec.status, Bytes: rec.bytes})
	})
}

// hubError answers an error the way the Hub does: status, X-Error-Code, X-Error-Message and a
// JSON body {"error": message}.
func hubError(w http.ResponseWriter, status int, code, msg string) {
	if code != "" {
		w.Header().Set("X-Error-Code", code)
	}
	w.Header().Set("X-Error-Message", msg)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, "{\"error\":%q}\n", msg)
}

// lookup finds the repo typ/id and checks the request's token against it. It writes the error
// answer (and returns nil) for a missing, renamed, gated or private repo.
func (s *Server) lookup(w http.ResponseWriter, r *http.Request, typ, id string, rename func(to string) string) *fakeRepo {
	s.mu.Lock()
	repo := s.repos[repoKey(typ, id)]
	to, renamed := s.renamed[repoKey(typ, id)]
	authorized := r.Header.Get("Authorization") == "Bearer "+s.token
	s.mu.Unlock()
	switch {
	case repo == nil && renamed:
		http.Redirect(w, r, rename(to), http.StatusTemporaryRedirect)
		return nil
	case repo == nil:
		hubError(w, http.StatusNotFound, "RepoNotFound", "Repository not found")
		return nil
	case repo.private && !authorized:
		hubError(w, http.StatusUnauthorized, "RepoNotFound", "Repository not found")
		return nil
	case repo.gated && !authorized:
		hubError(w, http.StatusUnauthorized, "GatedRepo",
			fmt.Sprintf("Access to %s %s is restricted. You must have access to it and be authenticated to access it. Please log in.", typ, id))
		return nil
	}
	return repo
}

// repoType maps a URL prefix ("datasets") to a repo type ("dataset").
func repoType(prefix string) (string, bool) {
	switch prefix {
	case "models":
		return "model", true
	case "datasets":
		return "dataset", true
	case "spaces":
		return "space", true
	}
	return "", false
}

// splitPath splits an escaped path into unescaped segments; ok is false if one does not
// unescape.
func splitPath(escaped string) ([]string, bool) {
	segs := strings.Split(strings.Trim(escaped, "/"), "/")
	for i, s := range segs {
		u, err := url.PathUnescape(s)
		if err != nil {
			return nil, false
		}
		segs[i] = u
	}
	return segs, true
}

// takeRevision reads a revision from segs: one segment (escaped "refs%2Fpr%2F1" included), or
// "refs/pr/N" and "refs/convert/X" sent unescaped. It returns the revision and the rest.
func takeRevision(segs []string) (string, []string) {
	if len(segs) == 0 {
		return "", nil
	}
	if segs[0] == "refs" && len(segs) >= 3 && (segs[1] == "pr" || segs[1] == "convert") {
		return strings.Join(segs[:3], "/"), segs[3:]
	}
	return segs[0], segs[1:]
}

func (s *Server) serveHub(w http.ResponseWriter, r *http.Request) {
	segs, ok := splitPath(r.URL.EscapedPath())
	if !ok {
		http.Error(w, "bad path escaping", http.StatusBadRequest)
		return
	}
	if len(segs) > 0 && segs[0] == "api" {
		s.serveAPI(w, r, segs[1:])
		return
	}
	typ, prefix := "model", ""
	if len(segs) > 0 {
		if t, ok := repoType(segs[0]); ok && t != "model" {
			typ, prefix, segs = t, segs[0]+"/", segs[1:]
		}
	}
	var id string
	switch {
	case len(segs) >= 3 && segs[2] == "resolve":
		id, segs = segs[0]+"/"+segs[1], segs[3:]
	case len(segs) >= 2 && segs[1] == "resolve":
		id, segs = segs[0], segs[2:]
	default:
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	repo := s.lookup(w, r, typ, id, func(to string) string {
		return "/" + prefix + to + "/resolve/" + strings.SplitN(r.URL.EscapedPath(), "/resolve/", 2)[1]
	})
	if repo == nil {
		return
	}
	rev, rest := takeRevision(segs)
	s.mu.Lock()
	c := repo.resolveRev(rev)
	s.mu.Unlock()
	if c == nil {
		hubError(w, http.StatusNotFound, "RevisionNotFound", fmt.Sprintf("Invalid rev id: %s", rev))
		return
	}
	path := strings.Join(rest, "/")
	w.Header().Set("X-Repo-Commit", c.sha)
	f := c.files[path]
	if f == nil {
		hubError(w, http.StatusNotFound, "EntryNotFound", fmt.Sprintf("Entry not found: %s", path))
		return
	}
	w.Header().Set("ETag", `"`+f.gitOID+`"`)
	if f.lfs {
		w.Header().Set("X-Linked-Etag", `"`+f.sha256+`"`)
		w.Header().Set("X-Linked-Size", strconv.Itoa(len(f.content)))
		loc := s.cdn.URL + "/repos/" + f.sha256 + "?filename=" + url.QueryEscape(f.path) + "&X-Amz-Signature=fake"
		w.Header().Set("Location", loc)
		w.WriteHeader(http.StatusFound)
		return
	}
	s.serveContent(w, r, f.path, f.content, f.gitOID)
}

func (s *Server) serveCDN(w http.ResponseWriter, r *http.Request) {
	sha, ok := strings.CutPrefix(r.URL.Path, "/repos/")
	if !ok || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		http.NotFound(w, r)
		return
	}
	s.mu.Lock()
	content, found := s.blobs[sha]
	s.mu.Unlock()
	if !found {
		http.NotFound(w, r)
		return
	}
	s.serveContent(w, r, r.URL.Query().Get("filename"), content, sha)
}

// serveContent sends content (or the requested range of it), applying the pending fault of
// path to a GET.
func (s *Server) serveContent(w http.ResponseWriter, r *http.Request, path string, content []byte, etag string) {
	var flt *fault
	if r.Method == http.MethodGet {
		flt = s.takeFault(path)
	}
	if flt == nil {
		flt = newFault()
	}
	h := w.Header()
	h.Set("Accept-Ranges", "bytes")
	h.Set("Content-Type", "application/octet-stream")
	if h.Get("ETag") == "" {
		h.Set("ETag", `"`+etag+`"`)
	}
	size := int64(len(content))
	start, end, status := int64(0), size-1, http.StatusOK
	if rg := r.Header.Get("Range"); rg != "" && !flt.ignoreRange {
		a, b, ok := parseRange(rg, size)
		if !ok {
			h.Set("Content-Range", fmt.Sprintf("bytes */%d", size))
			http.Error(w, "range not satisfiable", http.StatusRequestedRangeNotSatisfiable)
			return
		}
		start, end, status = a, b, http.StatusPartialContent
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", a, b, size))
	}
	body := content[start : end+1]
	if flt.corrupt && len(body) > 0 {
		body = append([]byte(nil), body...)
		body[len(body)/2] ^= 0xff
	}
	rc := http.NewResponseController(w)
	if flt.extra > 0 {
		w.WriteHeader(status)
		rc.Flush() // headers out now, without Content-Length: the body is chunked
		if r.Method == http.MethodGet {
			// The body, then the extra zeros in pieces, stopping when the client has gone, so
			// that BytesServed shows how much a client let through.
			if _, err := w.Write(body); err != nil {
				return
			}
			zeros := make([]byte, 32<<10)
			for left := flt.extra; left > 0; left -= len(zeros) {
				if _, err := w.Write(zeros[:min(left, len(zeros))]); err != nil {
					return
				}
			}
		}
		return
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}
	switch {
	case flt.cutAfter >= 0:
		w.Write(body[:min(flt.cutAfter, int64(len(body)))])
		rc.Flush()
		if conn, _, err := rc.Hijack(); err == nil {
			conn.Close()
		}
	case flt.stallAfter >= 0:
		w.Write(body[:min(flt.stallAfter, int64(len(body)))])
		rc.Flush()
		select {
		case <-r.Context().Done():
		case <-s.closing:
		}
	case flt.slow > 0:
		s.writeSlowly(w, r, body, flt.slow)
	default:
		w.Write(body)
	}
}

// slowChunks is how many pieces SlowNext cuts a body into.
const slowChunks = 32

// writeSlowly sends body in slowChunks pieces with a pause of about d/slowChunks before each,
// flushing each piece so the client sees it arrive.
func (s *Server) writeSlowly(w http.ResponseWriter, r *http.Request, body []byte, d time.Duration) {
	rc := http.NewResponseController(w)
	step := (len(body) + slowChunks - 1) / slowChunks
	pause := time.NewTimer(0)
	defer pause.Stop()
	<-pause.C
	for off := 0; off < len(body); off += step {
		pause.Reset(d / slowChunks)
		select {
		case <-pause.C:
		case <-r.Context().Done():
			return
		case <-s.closing:
			return
		}
		if _, err := w.Write(body[off:min(off+step, len(body))]); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}

// parseRange parses a single "bytes=a-b", "bytes=a-" or "bytes=-n" range of a size-byte body.
func parseRange(h string, size int64) (start, end int64, ok bool) {
	spec, found := strings.CutPrefix(h, "bytes=")
	if !found || strings.Contains(spec, ",") {
		return 0, 0, false
	}
	a, b, found := strings.Cut(spec, "-")
	if !found {
		return 0, 0, false
	}
	if a == "" { // suffix: the last n bytes
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n <= 0 || size == 0 {
			return 0, 0, false
		}
		return max(size-n, 0), size - 1, true
	}
	start, err := strconv.ParseInt(a, 10, 64)
	if err != nil || start < 0 || start >= size {
		return 0, 0, false
	}
	end = size - 1
	if b != "" {
		if end, err = strconv.ParseInt(b, 10, 64); err != nil || end < start {
			return 0, 0, false
		}
		end = min(end, size-1)
	}
	return start, end, true
}
