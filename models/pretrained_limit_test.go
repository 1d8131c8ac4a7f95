package models

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gotpu/gotpu/hub"
	"github.com/gotpu/gotpu/hub/hubtest"
	"github.com/gotpu/gotpu/internal/safetensors"
	"github.com/gotpu/gotpu/models/gpt2"
	"github.com/gotpu/gotpu/models/internal/core"
	"github.com/gotpu/gotpu/models/internal/reftest"
)

// largestBlob is the size of the largest file in the cache's blobs (and .incomplete downloads).
func largestBlob(t *testing.T, cache string) int64 {
	t.Helper()
	var most int64
	err := filepath.WalkDir(cache, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.Contains(p, string(filepath.Separator)+"blobs"+string(filepath.Separator)) {
			return err
		}
		st, err := d.Info()
		if err == nil {
			most = max(most, st.Size())
		}
		return err
	})
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return most
}

// tinyLimit is MaxWeightsBytes of the gpt2-tiny fixture, with its config.json.
func tinyLimit(t *testing.T) (int64, []byte) {
	t.Helper()
	path := filepath.Join(fixtureDir(t, "gpt2-tiny"), core.ConfigFile)
	cfg, err := ParseConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	limit, err := MaxWeightsBytes(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return limit, b
}

// TestResolvePretrainedRefusesOversizedWeights: a repo whose config.json is gpt2-tiny's (168,768
// parameters: about 18 MB of weights at most, MaxWeightsBytes) but whose model.safetensors is 32
// MiB is refused by ResolvePretrained and Load with hub.ErrTooLarge naming the repo, the file, the
// announced size and the limit, quickly, without one byte of the weights served or written —
// whether the Hub announces the size as an LFS file's X-Linked-Size or a plain Content-Length.
// The tiny models of testdata, served the same way, still resolve and load.
func TestResolvePretrainedRefusesOversizedWeights(t *testing.T) {
	ctx := context.Background()
	limit, cfg := tinyLimit(t)
	const big = 32 << 20
	if big <= limit {
		t.Fatalf("the bound for gpt2-tiny is %d bytes: the test's %d-byte weights must exceed it", limit, big)
	}
	s := hubtest.New(t)
	s.AddRepo("model", "org/big-lfs", map[string][]byte{core.ConfigFile: cfg, core.WeightsFile: hubtest.Noise(big, 1)}, hubtest.RepoOptions{})
	s.AddRepo("model", "org/big-plain", map[string][]byte{core.ConfigFile: cfg, core.WeightsFile: hubtest.Noise(big, 2)}, hubtest.RepoOptions{LFSThreshold: -1})
	c := testHub(t, s, false)
	rt := openGo(t)
	for _, id := range []string{"org/big-lfs", "org/big-plain"} {
		s.ResetRequests()
		start := time.Now()
		_, err := ResolvePretrained(ctx, id, HubOptions{Hub: c})
		elapsed := time.Since(start)
		if !errors.Is(err, hub.ErrTooLarge) {
			t.Fatalf("%s: err %v, want hub.ErrTooLarge", id, err)
		}
		for _, part := range []string{id, core.WeightsFile, strconv.Itoa(big), "over the limit of " + strconv.FormatInt(limit, 10), "config.json implies"} {
			if !strings.Contains(err.Error(), part) {
				t.Errorf("%s: the error does not name %q: %v", id, part, err)
			}
		}
		if n := s.BytesServedFor(core.WeightsFile); n != 0 {
			t.Errorf("%s: %d bytes of the oversized weights were served", id, n)
		}
		if elapsed > 10*time.Second {
			t.Errorf("%s: the refusal took %v", id, elapsed)
		}
		t.Logf("%s: refused after %v, %d bytes served in all, %d of %s: %v", id, elapsed.Round(time.Millisecond),
			s.BytesServed(), s.BytesServedFor(core.WeightsFile), core.WeightsFile, err)
		if _, err := Load(ctx, rt, id, LoadOptions{Hub: c}); !errors.Is(err, hub.ErrTooLarge) {
			t.Errorf("Load(%s): err %v, want hub.ErrTooLarge", id, err)
		}
	}
	if n := largestBlob(t, c.CacheDir()); n > 1<<20 {
		t.Errorf("the cache holds a %d-byte blob", n)
	}

	// Legitimate models of every architecture are within their bound.
	entries, err := os.ReadDir(reftest.Dir(t))
	if err != nil {
		t.Fatal(err)
	}
	loaded := 0
	for _, e := range entries {
		dir := filepath.Join(reftest.Dir(t), e.Name())
		if _, err := os.Stat(filepath.Join(dir, core.WeightsFile)); err != nil {
			continue
		}
		id := "org/" + e.Name()
		s.AddRepo("model", id, hubtest.DirFiles(t, dir), hubtest.RepoOptions{})
		got, err := ResolvePretrained(ctx, id, HubOptions{Hub: c})
		if err != nil {
			t.Errorf("%s: %v", id, err)
			continue
		}
		if st, err := os.Stat(filepath.Join(got, core.WeightsFile)); err != nil {
			t.Errorf("%s: %v", id, err)
		} else if want, _ := os.Stat(filepath.Join(dir, core.WeightsFile)); st.Size() != want.Size() {
			t.Errorf("%s: %d bytes of weights fetched, want %d", id, st.Size(), want.Size())
		}
		if _, err := Load(ctx, rt, id, LoadOptions{Hub: c}); err != nil {
			t.Errorf("Load(%s): %v", id, err)
		}
		loaded++
	}
	if loaded < 5 {
		t.Errorf("only %d fixtures loaded from the hub", loaded)
	}
}

// TestResolvePretrainedShardedTotal: a sharded repo whose shards each fit gpt2-tiny's bound but
// add up to more is refused at the shard that would cross it, before any byte of that shard is
// served; what was written before stays within the bound. An index, config.json or
// generation_config.json larger than its reader takes (16 MiB) is refused before any byte of it
// is served.
func TestResolvePretrainedShardedTotal(t *testing.T) {
	ctx := context.Background()
	limit, cfg := tinyLimit(t)
	const shard = 8 << 20
	n := int(limit/shard) + 1 // shards that add up to more than limit
	if shard >= limit || int64(n)*shard <= limit {
		t.Fatalf("limit %d: %d shards of %d bytes must each fit and together exceed it", limit, n, shard)
	}
	files := map[string][]byte{core.ConfigFile: cfg}
	var weightMap []string
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("model-%05d-of-%05d.safetensors", i, n)
		files[name] = hubtest.Noise(shard, byte(i))
		weightMap = append(weightMap, fmt.Sprintf("%q: %q", fmt.Sprintf("t%d", i), name))
	}
	files[core.WeightsIndex] = []byte(`{"metadata": {}, "weight_map": {` + strings.Join(weightMap, ", ") + `}}`)
	s := hubtest.New(t)
	s.AddRepo("model", "org/big-sharded", files, hubtest.RepoOptions{})
	c := testHub(t, s, false)

	start := time.Now()
	_, err := ResolvePretrained(ctx, "org/big-sharded", HubOptions{Hub: c})
	elapsed := time.Since(start)
	last := fmt.Sprintf("model-%05d-of-%05d.safetensors", n, n)
	if !errors.Is(err, hub.ErrTooLarge) {
		t.Fatalf("err %v, want hub.ErrTooLarge", err)
	}
	for _, part := range []string{"org/big-sharded", last, strconv.FormatInt(limit, 10), "config.json implies"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("the error does not name %q: %v", part, err)
		}
	}
	if got := s.BytesServedFor(last); got != 0 {
		t.Errorf("%d bytes of %s, the shard over the bound, were served", got, last)
	}
	var weights int64
	for name := range files {
		if strings.HasPrefix(name, "model-") {
			weights += s.BytesServedFor(name)
		}
	}
	if weights > limit {
		t.Errorf("%d bytes of shards were served, over the bound of %d", weights, limit)
	}
	t.Logf("refused after %v with %d of %d shards' bytes served (bound %d): %v", elapsed.Round(time.Millisecond), weights, int64(n)*shard, limit, err)

	// The small files: one byte over their reader's limit, refused from the announced size.
	over := hubtest.Noise(core.MaxConfigSize+1, 9)
	for _, tc := range []struct {
		id, file string
		files    map[string][]byte
	}{
		{"org/big-config", core.ConfigFile, map[string][]byte{core.ConfigFile: over}},
		{"org/big-generation", core.GenerationFile, map[string][]byte{core.ConfigFile: cfg, core.GenerationFile: over}},
		{"org/big-index", core.WeightsIndex, map[string][]byte{core.ConfigFile: cfg, core.WeightsIndex: hubtest.Noise(core.MaxIndexSize+1, 10)}},
	} {
		s.AddRepo("model", tc.id, tc.files, hubtest.RepoOptions{})
		s.ResetRequests()
		_, err := ResolvePretrained(ctx, tc.id, HubOptions{Hub: c})
		if !errors.Is(err, hub.ErrTooLarge) || !strings.Contains(err.Error(), tc.id) || !strings.Contains(err.Error(), tc.file) ||
			!strings.Contains(err.Error(), "over the limit of 16777216") {
			t.Errorf("%s: err %v, want hub.ErrTooLarge naming the repo, %s and the limit", tc.id, err, tc.file)
		}
		if got := s.BytesServedFor(tc.file); got != 0 {
			t.Errorf("%s: %d bytes of %s were served", tc.id, got, tc.file)
		}
	}
}

// TestResolvePretrainedUnknownArchitecture: a repo whose config.json names an architecture Load
// does not build is refused from config.json, before its weights are asked for: Load would refuse
// it after the download, and there is no bound to put on them.
func TestResolvePretrainedUnknownArchitecture(t *testing.T) {
	s := hubtest.New(t)
	s.AddRepo("model", "org/t5", map[string][]byte{core.ConfigFile: []byte(`{"model_type": "t5", "architectures": ["T5ForConditionalGeneration"]}`),
		core.WeightsFile: hubtest.Noise(1<<20, 3)}, hubtest.RepoOptions{})
	c := testHub(t, s, false)
	_, err := ResolvePretrained(context.Background(), "org/t5", HubOptions{Hub: c})
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "org/t5") || !strings.Contains(err.Error(), "t5") {
		t.Errorf("err %v, want ErrUnsupported naming the repo and model_type", err)
	}
	if n := s.CountRequests(func(r hubtest.Request) bool { return strings.Contains(r.Path+r.Query, core.WeightsFile) }); n != 0 {
		t.Errorf("%d requests for the weights of a model gotpu does not build", n)
	}
}

// TestMaxWeightsBytes: the bound holds every tensor of each fixture at 8 bytes an element, and
// openai-community/gpt2's published 548,105,171-byte F32 file (weights and 12 layers of 1024²
// mask buffers) even at F64; configs of unknown architectures are ErrUnsupported, not "no
// bound"; a GPT-2 config cannot inflate the bound through n_positions².
func TestMaxWeightsBytes(t *testing.T) {
	entries, err := os.ReadDir(reftest.Dir(t))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, e := range entries {
		dir := filepath.Join(reftest.Dir(t), e.Name())
		f, err := safetensors.Open(filepath.Join(dir, core.WeightsFile))
		if err != nil {
			continue // not a model fixture
		}
		var elems int64
		for _, ti := range f.Header().Tensors {
			elems += ti.NumElements()
		}
		f.Close()
		cfg, err := ParseConfig(filepath.Join(dir, core.ConfigFile))
		if err != nil {
			t.Fatal(err)
		}
		limit, err := MaxWeightsBytes(cfg)
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		if limit-weightsSlack < 8*elems {
			t.Errorf("%s: bound %d leaves %d bytes for tensors, less than its %d elements at 8 bytes", e.Name(), limit, limit-weightsSlack, elems)
		}
		checked++
	}
	if checked < 5 {
		t.Errorf("checked %d fixtures", checked)
	}
	const gpt2File = 548_105_171 // openai-community/gpt2 model.safetensors
	if limit, err := MaxWeightsBytes(gpt2.DefaultConfig()); err != nil || limit < 2*gpt2File {
		t.Errorf("gpt2: bound %d (%v), want at least %d (its F32 file at F64)", limit, err, 2*gpt2File)
	}
	for _, cfg := range []Config{nil, &struct{ Config }{}} {
		if _, err := MaxWeightsBytes(cfg); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%T: err %v, want ErrUnsupported", cfg, err)
		}
	}
	// n_positions enters GPT-2's allowance squared: capped at the parameters' own.
	long := gpt2.DefaultConfig()
	long.NEmbd, long.NHead, long.NPositions = 64, 4, 32768
	fp, err := EstimateFootprint(long)
	if err != nil {
		t.Fatal(err)
	}
	if limit, err := MaxWeightsBytes(long); err != nil || limit > 16*fp.Params+weightsSlack {
		t.Errorf("gpt2 with n_positions 32768: bound %d (%v) for %d parameters, want at most 16 bytes each and the slack (%d)",
			limit, err, fp.Params, 16*fp.Params+weightsSlack)
	}
}
