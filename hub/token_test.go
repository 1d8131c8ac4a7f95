package hub

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/hub/hubtest"
)

// TestTokenGoesToTheHubOnly: a gated repo downloads with the token; every request to the Hub
// host carries it, no request to the CDN host does (the CDN is another port of 127.0.0.1,
// where net/http's own redirect rule would have forwarded it).
func TestTokenGoesToTheHubOnly(t *testing.T) {
	srv := hubtest.New(t)
	srv.AddRepo("model", "org/gated", map[string][]byte{
		"config.json": []byte("{}"), "model.safetensors": payload(10<<10, 10),
	}, hubtest.RepoOptions{Gated: true})
	c, logs := newClient(t, srv, func(cfg *Config) { cfg.Token = srv.Token() })
	repo := Repo{ID: "org/gated"}
	if _, err := c.Snapshot(context.Background(), repo, SnapshotOptions{}); err != nil {
		t.Fatalf("gated repo with the token: %v", err)
	}
	hubN, cdnN := 0, 0
	for _, r := range srv.Requests() {
		switch r.Host {
		case "hub":
			hubN++
			if r.Authorization != "Bearer "+srv.Token() {
				t.Errorf("hub request %s %s without the token", r.Method, r.Path)
			}
		case "cdn":
			cdnN++
			if r.Authorization != "" {
				t.Errorf("CDN request %s %s carried Authorization", r.Method, r.Path)
			}
		}
	}
	if hubN == 0 || cdnN == 0 {
		t.Fatalf("requests: %d to the hub, %d to the CDN; want both", hubN, cdnN)
	}
	if strings.Contains(logs.String(), srv.Token()) {
		t.Error("the token appears in the log")
	}
	t.Logf("%d hub requests with the token, %d CDN requests without", hubN, cdnN)
}

// TestGatedWithoutToken: no token or a wrong one is ErrGated, and the wrong token is never
// echoed in the error or the log.
func TestGatedWithoutToken(t *testing.T) {
	srv := hubtest.New(t)
	srv.AddRepo("model", "org/gated", map[string][]byte{"config.json": []byte("{}")}, hubtest.RepoOptions{Gated: true})
	srv.AddRepo("model", "org/private", map[string][]byte{"config.json": []byte("{}")}, hubtest.RepoOptions{Private: true})
	const wrong = "hf_wrong_secret_value_123"
	for _, tok := range []string{"", wrong} {
		c, logs := newClient(t, srv, func(cfg *Config) { cfg.Token = tok })
		ctx := context.Background()
		_, err := c.Download(ctx, Repo{ID: "org/gated"}, "config.json")
		if !errors.Is(err, ErrGated) || !strings.Contains(err.Error(), "org/gated") {
			t.Errorf("token %q: %v, want ErrGated naming the repo", tok, err)
		}
		_, err2 := c.Snapshot(ctx, Repo{ID: "org/gated"}, SnapshotOptions{})
		if !errors.Is(err2, ErrGated) {
			t.Errorf("token %q: Snapshot: %v, want ErrGated", tok, err2)
		}
		_, err3 := c.Download(ctx, Repo{ID: "org/private"}, "config.json")
		if !errors.Is(err3, ErrRepoNotFound) {
			t.Errorf("token %q: private repo: %v, want ErrRepoNotFound", tok, err3)
		}
		for _, e := range []error{err, err2, err3} {
			if tok != "" && e != nil && strings.Contains(e.Error(), tok) {
				t.Errorf("error %q contains the token", e)
			}
		}
		if tok != "" && strings.Contains(logs.String(), tok) {
			t.Error("the token appears in the log")
		}
	}
}

// TestRenamedRepoKeepsToken: a same-host redirect (a renamed repo) is followed for the
// metadata and keeps the token, as huggingface_hub does.
func TestRenamedRepoKeepsToken(t *testing.T) {
	srv := hubtest.New(t)
	srv.AddRepo("model", "org/new", map[string][]byte{"config.json": []byte(`{"renamed": true}`)}, hubtest.RepoOptions{Gated: true})
	srv.Rename("model", "org/old", "org/new")
	c, _ := newClient(t, srv, func(cfg *Config) { cfg.Token = srv.Token() })
	p := mustDownload(t, c, Repo{ID: "org/old"}, "config.json")
	if got := string(readFile(t, p)); got != `{"renamed": true}` {
		t.Errorf("content %q", got)
	}
	var sawRedirect, sawNew bool
	for _, r := range srv.Requests() {
		sawRedirect = sawRedirect || (r.Status == 307 && strings.HasPrefix(r.Path, "/org/old/"))
		sawNew = sawNew || (strings.HasPrefix(r.Path, "/org/new/") && r.Authorization == "Bearer "+srv.Token())
	}
	if !sawRedirect || !sawNew {
		t.Errorf("redirect %v, token on the new path %v: %+v", sawRedirect, sawNew, srv.Requests())
	}
}
