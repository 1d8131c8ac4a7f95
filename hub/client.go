package hub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
)

// maxRedirects bounds the redirects followed by one request.
const maxRedirects = 10

// Client downloads from a Hub into a cache directory. It is safe for concurrent use.
type Client struct {
	cfg      Config
	endpoint *url.URL
	log      *slog.Logger
	// http follows redirects (downloads); head follows only those that stay on the endpoint's
	// host, so that the metadata of a file redirected to a CDN is read from the redirect itself.
	http *http.Client
	head *http.Client
	// limits, set by WithLimits, bound the sizes of the files handed out; nil: none.
	limits *sizeBudget
}

// New validates cfg, fills its defaults and returns a Client.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Endpoint = strings.TrimRight(cfg.Endpoint, "/")
	cfg.CacheDir = filepath.Clean(cfg.CacheDir)
	if cfg.EtagTimeout == 0 {
		cfg.EtagTimeout = DefaultEtagTimeout
	}
	if cfg.DownloadTimeout == 0 {
		cfg.DownloadTimeout = DefaultDownloadTimeout
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = defaultUserAgent()
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	endpoint, err := url.Parse(cfg.Endpoint)
	if err != nil { // Validate parsed it already
		return nil, fmt.Errorf("hub: Config.Endpoint: %w", err)
	}
	base := cfg.HTTPClient
	if base == nil {
		base = &http.Client{}
	}
	rt := base.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	c := &Client{cfg: cfg, endpoint: endpoint, log: log}
	tr := &authTransport{base: rt, scheme: endpoint.Scheme, host: endpoint.Host, token: cfg.Token, userAgent: cfg.UserAgent}

	dl := *base
	dl.Transport = tr
	userCheck := base.CheckRedirect
	dl.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= maxRedirects {
			return fmt.Errorf("hub: stopped after %d redirects", maxRedirects)
		}
		if userCheck != nil {
			return userCheck(req, via)
		}
		return nil
	}
	c.http = &dl

	head := dl
	head.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		// huggingface_hub follows only relative redirects (a renamed repo) for metadata; a
		// redirect to another host (the LFS CDN) carries the metadata in its own headers.
		if req.URL.Host != endpoint.Host || req.URL.Scheme != endpoint.Scheme {
			return http.ErrUseLastResponse
		}
		return dl.CheckRedirect(req, via)
	}
	c.head = &head
	return c, nil
}

// CacheDir returns the hub cache directory the client reads and writes.
func (c *Client) CacheDir() string { return c.cfg.CacheDir }

// authTransport adds the User-Agent to every request and the token to requests for the
// endpoint's own scheme and host only. Setting the header here, per hop, rather than on the
// request means a redirect to another host (the CDN) never carries it: net/http's own rule
// compares host names without ports and would forward it between two ports of one host.
type authTransport struct {
	base      http.RoundTripper
	scheme    string
	host      string
	token     string
	userAgent string
}

func (t *authTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.Header.Set("User-Agent", t.userAgent)
	r.Header.Del("Authorization")
	if t.token != "" && req.URL.Host == t.host && req.URL.Scheme == t.scheme {
		r.Header.Set("Authorization", "Bearer "+t.token)
	}
	return t.base.RoundTrip(r)
}

// fileMeta is what a HEAD of a resolve URL tells: huggingface_hub's HfFileMetadata.
type fileMeta struct {
	commit   string // X-Repo-Commit
	etag     string // X-Linked-Etag, else ETag, unquoted
	size     int64  // X-Linked-Size, else Content-Length
	location string // where to GET the bytes: the redirect target, else the URL asked
}

// headFile sends huggingface_hub's metadata request for one file. An error answer is mapped by
// httpError; on EntryNotFound the commit (if the Hub sent it) is returned with the error so the
// caller can record a .no_exist marker.
func (c *Client) headFile(ctx context.Context, repo Repo, filename string) (fileMeta, string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.EtagTimeout)
	defer cancel()
	u := resolveURL(c.cfg.Endpoint, repo, filename)
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, u, nil)
	if err != nil {
		return fileMeta{}, "", fmt.Errorf("hub: %s file %q: %w", repo.describe(), filename, err)
	}
	// Identity, so Content-Length is the file's size and not that of a compressed body.
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := c.head.Do(req)
	if err != nil {
		return fileMeta{}, "", fmt.Errorf("hub: HEAD %s file %q: %w", repo.describe(), filename, stripURL(err))
	}
	resp.Body.Close()
	what := fmt.Sprintf("%s file %q", repo.describe(), filename)
	if resp.StatusCode >= 400 {
		commit := resp.Header.Get("X-Repo-Commit")
		if !IsCommit(commit) {
			commit = ""
		}
		return fileMeta{}, commit, httpError(resp, what)
	}
	meta, err := parseFileMeta(resp.Header, resp.Request.URL)
	if err != nil {
		return fileMeta{}, "", fmt.Errorf("%w: %s: %w", errMetadata, what, err)
	}
	if meta.location == "" {
		meta.location = resp.Request.URL.String()
	}
	return meta, "", nil
}

// parseFileMeta reads the metadata headers of a HEAD answer; reqURL resolves a relative
// Location.
func parseFileMeta(h http.Header, reqURL *url.URL) (fileMeta, error) {
	var m fileMeta
	m.commit = h.Get("X-Repo-Commit")
	if !IsCommit(m.commit) {
		return m, fmt.Errorf("X-Repo-Commit %q is not a 40-hex commit", sanitize(m.commit, 80))
	}
	etag := h.Get("X-Linked-Etag")
	if etag == "" {
		etag = h.Get("ETag")
	}
	m.etag = normalizeETag(etag)
	if !validEtag(m.etag) {
		return m, fmt.Errorf("ETag %q is not a usable blob name", sanitize(etag, 80))
	}
	sizeText := h.Get("X-Linked-Size")
	if sizeText == "" {
		sizeText = h.Get("Content-Length")
	}
	size, err := strconv.ParseInt(strings.TrimSpace(sizeText), 10, 64)
	if err != nil || size < 0 {
		return m, fmt.Errorf("file size %q (X-Linked-Size or Content-Length) is not a byte count", sanitize(sizeText, 80))
	}
	m.size = size
	if loc := h.Get("Location"); loc != "" && reqURL != nil {
		u, err := reqURL.Parse(loc)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
			return m, fmt.Errorf("redirect Location %q is not an http(s) URL", sanitize(loc, 120))
		}
		m.location = u.String()
	}
	return m, nil
}

// normalizeETag is huggingface_hub's _normalize_etag: drop a weak "W/" prefix and the quotes.
func normalizeETag(etag string) string {
	etag = strings.TrimSpace(etag)
	etag = strings.TrimPrefix(etag, "W/")
	return strings.Trim(etag, `"`)
}

// validEtag accepts etags usable as a file name in blobs/: 1 to 128 characters of
// [A-Za-z0-9_.-], not starting with "." (the Hub's are hex digests).
func validEtag(etag string) bool {
	if etag == "" || len(etag) > 128 || etag[0] == '.' {
		return false
	}
	for i := 0; i < len(etag); i++ {
		if c := etag[i]; !isWordByte(c) && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

// stripURL removes the URL from a *url.Error's message: the URL holds nothing secret, but a
// CDN's signed query string is long and useless in an error.
func stripURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		u, perr := url.Parse(ue.URL)
		if perr == nil && u.RawQuery != "" {
			u.RawQuery = ""
			return &url.Error{Op: ue.Op, URL: u.String(), Err: ue.Err}
		}
	}
	return err
}
