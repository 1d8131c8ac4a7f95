package main

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
	"unicode"
)

// tokenEnv is the environment variable that can hold the bearer token instead of a file.
const tokenEnv = "GOTPU_SERVICE_TOKEN"

// maxTokenFileBytes bounds what -auth_token_file reads: a token is a line, not a document.
const maxTokenFileBytes = 4096

// minTokenLen is the length below which a token is warned about (16 random bytes, hex-encoded,
// are 32 characters; `openssl rand -hex 32` gives 64).
const minTokenLen = 16

// loadAuthToken returns the service's bearer token: the contents of file (-auth_token_file, one
// trailing newline trimmed) or the value of GOTPU_SERVICE_TOKEN, or "" when neither is set
// (no authentication). lookupEnv is os.LookupEnv outside tests. Setting both is an error rather
// than a silent precedence, since one of them is then stale.
func loadAuthToken(file string, lookupEnv func(string) (string, bool), log *slog.Logger) (string, error) {
	envTok, envSet := lookupEnv(tokenEnv)
	switch {
	case file != "" && envSet:
		return "", fmt.Errorf("-auth_token_file and %s are both set: set one, not both", tokenEnv)
	case envSet:
		if err := checkToken(envTok); err != nil {
			return "", fmt.Errorf("%s: %w", tokenEnv, err)
		}
		warnShortToken(envTok, tokenEnv, log)
		return envTok, nil
	case file == "":
		return "", nil
	}
	tok, err := readTokenFile(file, log)
	if err != nil {
		return "", fmt.Errorf("-auth_token_file %s: %w", file, err)
	}
	warnShortToken(tok, "-auth_token_file "+file, log)
	return tok, nil
}

func readTokenFile(path string, log *slog.Logger) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !st.Mode().IsRegular() {
		return "", errors.New("not a regular file")
	}
	if perm := st.Mode().Perm(); perm&0o044 != 0 {
		// A warning, not an error: the operator may have reasons (a group of service accounts),
		// but a token any local user can read protects nothing from them.
		log.Warn("the auth token file is readable by group or others; chmod 600 it", "file", path, "mode", fmt.Sprintf("%04o", perm))
	}
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFileBytes+1))
	if err != nil {
		return "", err
	}
	if len(b) > maxTokenFileBytes {
		return "", fmt.Errorf("longer than %d bytes: not a token", maxTokenFileBytes)
	}
	// Editors and `echo` end a file with a newline; it is not part of the token.
	s := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if err := checkToken(s); err != nil {
		return "", err
	}
	return s, nil
}

// checkToken refuses what could not be sent as one bearer token in an Authorization header.
func checkToken(s string) error {
	if s == "" {
		return errors.New("the token is empty")
	}
	for _, r := range s {
		if unicode.IsSpace(r) || unicode.IsControl(r) || r > unicode.MaxASCII {
			return errors.New("the token contains whitespace, control or non-ASCII characters; an Authorization header cannot carry it")
		}
	}
	return nil
}

func warnShortToken(tok, source string, log *slog.Logger) {
	if len(tok) < minTokenLen {
		log.Warn("the auth token is short; use at least 16 random characters (openssl rand -hex 32)", "source", source, "length", len(tok))
	}
}

// authenticator checks bearer tokens in constant time.
type authenticator struct {
	// sum is the SHA-256 of the token. Comparing digests of fixed length keeps the comparison's
	// time independent of where the given token differs and of its length
	// (subtle.ConstantTimeCompare returns at once on a length mismatch).
	sum [sha256.Size]byte
}

func newAuthenticator(token string) *authenticator {
	if token == "" {
		return nil
	}
	return &authenticator{sum: sha256.Sum256([]byte(token))}
}

// allowed reports whether r carries the token as "Authorization: Bearer <token>" (the scheme is
// case-insensitive, RFC 7235).
func (a *authenticator) allowed(r *http.Request) bool {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	sum := sha256.Sum256([]byte(tok))
	return subtle.ConstantTimeCompare(sum[:], a.sum[:]) == 1
}

// requireToken wraps h so that requests without the token are answered 401 with a Bearer
// challenge (RFC 6750). Failed attempts are counted in /metrics rather than logged one by one,
// so that a client guessing tokens cannot flood the log.
func (s *Server) requireToken(h http.Handler) http.Handler {
	if s.auth == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.auth.allowed(r) {
			s.met.unauthorized.Inc()
			challenge := `Bearer realm="gotpu-service"`
			if r.Header.Get("Authorization") != "" {
				challenge += `, error="invalid_token"`
			}
			w.Header().Set("WWW-Authenticate", challenge)
			writeError(w, http.StatusUnauthorized, "a bearer token is required: Authorization: Bearer <token>", nil)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// addrIsLoopback reports whether a listen address (host:port) reaches only this machine: a
// loopback IP, or a host name all of whose addresses are loopback. An empty or unspecified host
// (":8080", "0.0.0.0", "[::]") listens on every interface; a name that does not resolve counts as
// not loopback (with the resolver's error), since what it will mean later is unknown.
func addrIsLoopback(ctx context.Context, addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, err
	}
	if host == "" {
		return false, nil
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback(), nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil {
		return false, err
	}
	for _, ip := range ips {
		if !ip.IP.IsLoopback() {
			return false, nil
		}
	}
	return len(ips) > 0, nil
}

// checkExposure is the rule for the -addr flag: beyond loopback, a token is required.
func checkExposure(ctx context.Context, addr string, hasToken bool) error {
	if hasToken {
		return nil
	}
	if ok, _ := addrIsLoopback(ctx, addr); ok {
		return nil
	}
	return fmt.Errorf("-addr %s listens beyond loopback: anyone who reaches it could start, cancel and read jobs; "+
		"set -auth_token_file (or %s) to require a bearer token, or listen on 127.0.0.1", addr, tokenEnv)
}

// listenerIsLoopback reports whether ln accepts connections from this machine only.
func listenerIsLoopback(ln net.Listener) bool {
	switch a := ln.Addr().(type) {
	case *net.TCPAddr:
		return a.IP.IsLoopback()
	case *net.UnixAddr:
		return true // a socket file: reachable only on this machine, guarded by its mode
	}
	return false
}
