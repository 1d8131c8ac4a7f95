package models

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/hub"
	"github.com/gotpu/gotpu/hub/hubtest"
	"github.com/gotpu/gotpu/models/internal/core"
	"github.com/gotpu/gotpu/models/internal/reftest"
)

func testHub(t *testing.T, s *hubtest.Server, offline bool) *hub.Client {
	t.Helper()
	cfg := hub.DefaultConfig()
	cfg.Endpoint, cfg.CacheDir, cfg.Offline = s.URL(), filepath.Join(t.TempDir(), "hub"), offline
	c, err := hub.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestLoadFromHubSharded: a repo id is fetched through the cache; a sharded checkpoint follows its
// index (every shard, nothing else); the loaded model gives the fixture's logits as the local
// directory does; a local directory spelled like a repo id wins.
func TestLoadFromHubSharded(t *testing.T) {
	rt := openGo(t)
	ctx := context.Background()
	ref := reftest.Read(t, "gpt2-tiny")
	local, err := Load(ctx, rt, fixtureDir(t, "gpt2-tiny"), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sharded := t.TempDir()
	if err := local.Save(sharded, SaveOptions{MaxShardSize: 64 << 10}); err != nil {
		t.Fatal(err)
	}
	files := hubtest.DirFiles(t, sharded)
	nShards := 0
	for name := range files {
		if strings.HasPrefix(name, "model-") {
			nShards++
		}
	}
	if nShards < 2 || files[core.WeightsIndex] == nil {
		t.Fatalf("the sharded save has %d shards (files %v): want several and an index", nShards, len(files))
	}
	files["README.md"] = []byte("not needed by a model: must not be downloaded\n")
	s := hubtest.New(t)
	s.AddRepo("model", "org/gpt2-sharded", files, hubtest.RepoOptions{LFSThreshold: 1024})
	c := testHub(t, s, false)

	m, err := Load(ctx, rt, "org/gpt2-sharded", LoadOptions{Hub: c})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := logitsOf(t, rt, m, ref)
	want, _ := logitsOf(t, rt, local, ref)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("logit %d: %v from the hub, %v locally", i, got[i], want[i])
		}
	}
	for _, r := range s.Requests() {
		if strings.Contains(r.Path, "README.md") {
			t.Errorf("fetched %s: a model needs only its config and weights", r.Path)
		}
	}
	dir, err := ResolvePretrained(ctx, "org/gpt2-sharded", HubOptions{Hub: c})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(hubtest.DirFiles(t, dir)); got != nShards+2 {
		t.Errorf("snapshot holds %d files: want %d shards, the index and config.json", got, nShards)
	}

	// Offline: the same id loads from the cache with no request.
	s.ResetRequests()
	off, err := hub.New(hub.Config{Endpoint: s.URL(), CacheDir: c.CacheDir(), Offline: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Load(ctx, rt, "org/gpt2-sharded", LoadOptions{Hub: off}); err != nil {
		t.Fatal(err)
	}
	if n := s.RequestCount(); n != 0 {
		t.Errorf("offline load made %d requests", n)
	}

	// A local directory named like a repo id wins, as in transformers.
	wd := t.TempDir()
	t.Chdir(wd)
	if err := os.MkdirAll("org/gpt2-sharded", 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(ctx, rt, "org/gpt2-sharded", LoadOptions{Hub: c}); err == nil || !strings.Contains(err.Error(), "config.json") {
		t.Errorf("an empty local directory org/gpt2-sharded: err %v, want the local directory's missing config.json", err)
	}
}

// TestResolvePretrainedErrors: pickle-only repos, unknown repos and malicious indexes get errors
// naming the repo and file.
func TestResolvePretrainedErrors(t *testing.T) {
	ctx := context.Background()
	cfg, err := os.ReadFile(filepath.Join(fixtureDir(t, "gpt2-tiny"), "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	s := hubtest.New(t)
	s.AddRepo("model", "org/pickle", map[string][]byte{"config.json": cfg, "pytorch_model.bin": []byte("pickle")}, hubtest.RepoOptions{})
	s.AddRepo("model", "org/evil", map[string][]byte{"config.json": cfg,
		core.WeightsIndex: []byte(`{"weight_map": {"wte.weight": "../../../../etc/passwd"}}`)}, hubtest.RepoOptions{})
	c := testHub(t, s, false)
	_, err = ResolvePretrained(ctx, "org/pickle", HubOptions{Hub: c})
	if !errors.Is(err, core.ErrPickle) || !strings.Contains(err.Error(), "pytorch_model.bin") {
		t.Errorf("pickle-only repo: %v", err)
	}
	_, err = ResolvePretrained(ctx, "org/missing", HubOptions{Hub: c})
	if !errors.Is(err, hub.ErrRepoNotFound) || !strings.Contains(err.Error(), "org/missing") {
		t.Errorf("unknown repo: %v", err)
	}
	_, err = ResolvePretrained(ctx, "org/evil", HubOptions{Hub: c})
	if err == nil || !strings.Contains(err.Error(), "not a file name") {
		t.Errorf("index naming ../: %v", err)
	}
	_, err = ResolvePretrained(ctx, "not a repo!", HubOptions{Hub: c})
	if err == nil || !strings.Contains(err.Error(), "not a Hugging Face repo id") {
		t.Errorf("bad name: %v", err)
	}
}
