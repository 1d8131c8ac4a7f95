package hub

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

const (
	// DefaultEndpoint is the public Hub.
	DefaultEndpoint = "https://huggingface.co"
	// DefaultEtagTimeout is huggingface_hub's HF_HUB_ETAG_TIMEOUT: how long the metadata HEAD
	// request may take before the cache is used instead.
	DefaultEtagTimeout = 10 * time.Second
	// DefaultDownloadTimeout is huggingface_hub's HF_HUB_DOWNLOAD_TIMEOUT: how long a download
	// may go without receiving a byte before it is abandoned (and left to resume).
	DefaultDownloadTimeout = 10 * time.Second
	// maxTokenFileSize bounds the token file read from disk.
	maxTokenFileSize = 64 << 10
)

// Config configures a Client. Build it with DefaultConfig or ConfigFromEnv and adjust fields.
type Config struct {
	// Endpoint is the Hub's base URL (HF_ENDPOINT); default DefaultEndpoint.
	Endpoint string
	// CacheDir is the hub cache shared with huggingface_hub (see the package comment).
	CacheDir string
	// Token is sent as "Authorization: Bearer" to the Endpoint's host only; "" sends none.
	Token string
	// Offline makes every call use the cache only, opening no connection (HF_HUB_OFFLINE).
	Offline bool
	// HTTPClient is used for all requests; nil means a new client on http.DefaultTransport.
	// Its Transport and CheckRedirect are wrapped, never modified.
	HTTPClient *http.Client
	// Progress is where download progress bars go (drawn only on a terminal); nil means none.
	Progress io.Writer
	// Logger receives warnings (cache fallbacks, re-downloads); nil discards them.
	Logger *slog.Logger
	// UserAgent is sent with every request; "" means "gotpu/<version>; go/<go version>".
	UserAgent string
	// EtagTimeout bounds each metadata request (HF_HUB_ETAG_TIMEOUT); 0 means the default.
	EtagTimeout time.Duration
	// DownloadTimeout is the longest a download may receive nothing before it fails
	// (HF_HUB_DOWNLOAD_TIMEOUT); 0 means the default. The partial file is kept for resuming.
	DownloadTimeout time.Duration
	// TrustCache skips re-hashing a cached blob before Download returns it, as huggingface_hub
	// does (a size check only). By default (false) a cached blob is hashed against its etag on
	// every Download that does not fetch it: online, a blob that fails is fetched again;
	// offline, it is ErrCorrupt naming the file — never handed to a model or a dataset.
	TrustCache bool
}

// DefaultConfig returns the configuration that reads no environment variable: the public
// endpoint, ~/.cache/huggingface/hub, no token, online.
func DefaultConfig() Config {
	home, _ := os.UserHomeDir()
	return Config{
		Endpoint:        DefaultEndpoint,
		CacheDir:        filepath.Join(home, ".cache", "huggingface", "hub"),
		EtagTimeout:     DefaultEtagTimeout,
		DownloadTimeout: DefaultDownloadTimeout,
	}
}

// ConfigFromEnv reads the environment variables huggingface_hub reads, through getenv (pass
// os.Getenv): HF_ENDPOINT, HF_HUB_CACHE (legacy HUGGINGFACE_HUB_CACHE), HF_HOME,
// XDG_CACHE_HOME, HF_TOKEN (legacy HUGGING_FACE_HUB_TOKEN), HF_TOKEN_PATH, HF_HUB_OFFLINE
// (legacy TRANSFORMERS_OFFLINE), HF_HUB_DISABLE_PROGRESS_BARS, HF_HUB_ETAG_TIMEOUT and
// HF_HUB_DOWNLOAD_TIMEOUT. Progress defaults to os.Stderr. A value that does not parse is an
// error naming the variable.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	cfg := DefaultConfig()
	home := getenv("HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	expand := func(p string) string { return expandUser(p, home) }

	if e := strings.TrimSpace(getenv("HF_ENDPOINT")); e != "" {
		cfg.Endpoint = strings.TrimRight(e, "/")
	}
	hfHome := filepath.Join(home, ".cache", "huggingface")
	if x := getenv("XDG_CACHE_HOME"); x != "" {
		hfHome = filepath.Join(expand(x), "huggingface")
	}
	if h := getenv("HF_HOME"); h != "" {
		hfHome = expand(h)
	}
	cfg.CacheDir = filepath.Join(hfHome, "hub")
	if c := firstNonEmpty(getenv("HF_HUB_CACHE"), getenv("HUGGINGFACE_HUB_CACHE")); c != "" {
		cfg.CacheDir = expand(c)
	}

	// huggingface_hub strips the token and treats an empty one as none.
	cfg.Token = strings.TrimSpace(firstNonEmpty(getenv("HF_TOKEN"), getenv("HUGGING_FACE_HUB_TOKEN")))
	if cfg.Token == "" {
		tokenPath := filepath.Join(hfHome, "token")
		if p := getenv("HF_TOKEN_PATH"); p != "" {
			tokenPath = expand(p)
		}
		tok, err := readTokenFile(tokenPath)
		if err != nil {
			return Config{}, err
		}
		cfg.Token = tok
	}

	cfg.Offline = isTrue(firstNonEmpty(getenv("HF_HUB_OFFLINE"), getenv("TRANSFORMERS_OFFLINE")))
	cfg.Progress = os.Stderr
	if isTrue(getenv("HF_HUB_DISABLE_PROGRESS_BARS")) {
		cfg.Progress = nil
	}
	var err error
	if cfg.EtagTimeout, err = envSeconds(getenv, "HF_HUB_ETAG_TIMEOUT", DefaultEtagTimeout); err != nil {
		return Config{}, err
	}
	if cfg.DownloadTimeout, err = envSeconds(getenv, "HF_HUB_DOWNLOAD_TIMEOUT", DefaultDownloadTimeout); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// Validate checks the configuration and names the first bad field.
func (c Config) Validate() error {
	u, err := url.Parse(c.Endpoint)
	switch {
	case c.Endpoint == "":
		return errors.New("hub: Config.Endpoint is empty")
	case err != nil:
		return fmt.Errorf("hub: Config.Endpoint %q: %w", c.Endpoint, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("hub: Config.Endpoint %q: scheme must be http or https", c.Endpoint)
	case u.Host == "":
		return fmt.Errorf("hub: Config.Endpoint %q: no host", c.Endpoint)
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return fmt.Errorf("hub: Config.Endpoint %q: must not have a query, fragment or user info", c.Endpoint)
	}
	if c.CacheDir == "" {
		return errors.New("hub: Config.CacheDir is empty")
	}
	if !validHeaderValue(c.Token) {
		// The token itself is never printed.
		return errors.New("hub: Config.Token holds a control character or space; it cannot be sent in a header")
	}
	if !validHeaderValue(strings.ReplaceAll(c.UserAgent, " ", "")) {
		return fmt.Errorf("hub: Config.UserAgent %q holds a control character", c.UserAgent)
	}
	if c.EtagTimeout < 0 {
		return fmt.Errorf("hub: Config.EtagTimeout %v is negative", c.EtagTimeout)
	}
	if c.DownloadTimeout < 0 {
		return fmt.Errorf("hub: Config.DownloadTimeout %v is negative", c.DownloadTimeout)
	}
	return nil
}

// validHeaderValue accepts printable ASCII without spaces (tokens, and the user agent once its
// spaces are removed).
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= 0x20 || c >= 0x7f {
			return false
		}
	}
	return true
}

// defaultUserAgent is "gotpu/<module version>; go/<go version>".
func defaultUserAgent() string {
	version := "devel"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		version = bi.Main.Version
	}
	return "gotpu/" + version + "; go/" + strings.TrimPrefix(runtime.Version(), "go")
}

// isTrue is huggingface_hub's _is_true: 1, ON, YES or TRUE, in any case.
func isTrue(v string) bool {
	switch strings.ToUpper(strings.TrimSpace(v)) {
	case "1", "ON", "YES", "TRUE":
		return true
	}
	return false
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// expandUser replaces a leading "~" as Python's os.path.expanduser does.
func expandUser(p, home string) string {
	if p == "~" {
		return home
	}
	if strings.HasPrefix(p, "~/") {
		return filepath.Join(home, p[2:])
	}
	return p
}

// envSeconds parses a duration in seconds (huggingface_hub reads these with int(); a decimal
// is accepted too).
func envSeconds(getenv func(string) string, name string, def time.Duration) (time.Duration, error) {
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		return def, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f <= 0 || f > 1e6 {
		return 0, fmt.Errorf("hub: %s=%q: want a positive number of seconds", name, v)
	}
	return time.Duration(f * float64(time.Second)), nil
}

// readTokenFile reads a token file as huggingface_hub does: stripped, missing file = no token.
func readTokenFile(path string) (string, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("hub: reading the token file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFileSize+1))
	if err != nil {
		return "", fmt.Errorf("hub: reading the token file %s: %w", path, err)
	}
	if len(b) > maxTokenFileSize {
		return "", fmt.Errorf("hub: token file %s: larger than %d bytes", path, maxTokenFileSize)
	}
	return strings.TrimSpace(string(b)), nil
}
