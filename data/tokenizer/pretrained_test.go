package tokenizer

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gotpu/gotpu/hub"
	"github.com/gotpu/gotpu/hub/hubtest"
)

// TestFromPretrainedHub: a repo id's tokenizer.json comes through the cache (gzip-free, as the
// Hub stores it) and encodes as the local file does; offline it loads from the cache with no
// request; an uncached repo offline is ErrNotCached naming the file.
func TestFromPretrainedHub(t *testing.T) {
	local := filepath.Join("..", "..", "testdata", "tokenizers", "bert-base-uncased", "tokenizer.json.gz")
	want, err := FromFile(local)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := gunzipFile(local)
	if err != nil {
		t.Fatal(err)
	}
	s := hubtest.New(t)
	s.AddRepo("model", "org/bert", map[string][]byte{"tokenizer.json": raw}, hubtest.RepoOptions{})
	cache := filepath.Join(t.TempDir(), "hub")
	c, err := hub.New(hub.Config{Endpoint: s.URL(), CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	got, err := FromPretrained(ctx, "org/bert", HubOptions{Hub: c})
	if err != nil {
		t.Fatal(err)
	}
	text := "Hello, Hugging Face Hub! naïve café"
	a, err := want.Encode(text, true)
	if err != nil {
		t.Fatal(err)
	}
	b, err := got.Encode(text, true)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.IDs, b.IDs) {
		t.Fatalf("ids from the hub %v, locally %v", b.IDs, a.IDs)
	}
	s.ResetRequests()
	off, err := hub.New(hub.Config{Endpoint: s.URL(), CacheDir: cache, Offline: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := FromPretrained(ctx, "org/bert", HubOptions{Hub: off}); err != nil {
		t.Fatal(err)
	}
	if _, err := FromPretrained(ctx, "org/other", HubOptions{Hub: off}); !errors.Is(err, hub.ErrNotCached) {
		t.Errorf("uncached offline: %v, want ErrNotCached", err)
	}
	if n := s.RequestCount(); n != 0 {
		t.Errorf("offline loads made %d requests", n)
	}
}

func gunzipFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return gunzip(path, b)
}
