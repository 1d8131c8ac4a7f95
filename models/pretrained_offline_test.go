package models

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/hub"
	"github.com/gotpu/gotpu/hub/hubtest"
	"github.com/gotpu/gotpu/models/internal/core"
)

// TestResolvePretrainedOfflineAfterSnapshot: a sharded repo without generation_config.json,
// fetched whole with a plain Snapshot (huggingface_hub's snapshot_download, which records no
// .no_exist markers), resolves offline with no request: the optional generation_config.json and
// the single-file model.safetensors the repo does not have are absent, not errors, as transformers
// finds them. With the shards not in the cache, the error names both weight spellings and wraps
// hub.ErrNotCached.
func TestResolvePretrainedOfflineAfterSnapshot(t *testing.T) {
	rt := openGo(t)
	ctx := context.Background()
	local, err := Load(ctx, rt, fixtureDir(t, "gpt2-tiny"), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sharded := t.TempDir()
	if err := local.Save(sharded, SaveOptions{MaxShardSize: 64 << 10}); err != nil {
		t.Fatal(err)
	}
	files := hubtest.DirFiles(t, sharded)
	delete(files, core.GenerationFile)
	s := hubtest.New(t)
	s.AddRepo("model", "org/sharded", files, hubtest.RepoOptions{})
	c := testHub(t, s, false)
	if _, err := c.Snapshot(ctx, hub.Repo{ID: "org/sharded"}, hub.SnapshotOptions{}); err != nil {
		t.Fatal(err)
	}
	off, err := hub.New(hub.Config{Endpoint: s.URL(), CacheDir: c.CacheDir(), Offline: true})
	if err != nil {
		t.Fatal(err)
	}
	s.ResetRequests()
	if _, err := Load(ctx, rt, "org/sharded", LoadOptions{Hub: off}); err != nil {
		t.Fatalf("offline load after a snapshot without markers: %v", err)
	}
	if n := s.RequestCount(); n != 0 {
		t.Errorf("offline load made %d requests", n)
	}

	// Only config.json cached: the weights are required, and the error says they are not cached.
	c2 := testHub(t, s, false)
	if _, err := c2.Snapshot(ctx, hub.Repo{ID: "org/sharded"}, hub.SnapshotOptions{Include: []string{core.ConfigFile}}); err != nil {
		t.Fatal(err)
	}
	off2, err := hub.New(hub.Config{Endpoint: s.URL(), CacheDir: c2.CacheDir(), Offline: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = ResolvePretrained(ctx, "org/sharded", HubOptions{Hub: off2})
	if !errors.Is(err, hub.ErrNotCached) || !strings.Contains(err.Error(), core.WeightsFile) || !strings.Contains(err.Error(), core.WeightsIndex) {
		t.Errorf("offline, weights not cached: %v; want ErrNotCached naming %s and %s", err, core.WeightsFile, core.WeightsIndex)
	}
	t.Logf("weights not cached: %v", err)
}
