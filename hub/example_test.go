package hub_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gotpu/gotpu/hub"
	"github.com/gotpu/gotpu/hub/hubtest"
)

// Download a file into a Hugging Face cache; the link names the blob by its git blob sha1
// (what `git hash-object` prints for the content). Against the real Hub, build the Config with
// hub.ConfigFromEnv(os.Getenv) instead; here a fake Hub stands in.
func ExampleClient_Download() {
	srv := hubtest.NewServer()
	defer srv.Close()
	srv.AddRepo("model", "org/tiny", map[string][]byte{"config.json": []byte(`{"n_layer": 2}`)}, hubtest.RepoOptions{})

	cache, err := os.MkdirTemp("", "hub-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(cache)

	cfg := hub.DefaultConfig()
	cfg.Endpoint, cfg.CacheDir = srv.URL(), cache
	c, err := hub.New(cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	repo, err := hub.ParseRepo("org/tiny@main", hub.ModelRepo)
	if err != nil {
		fmt.Println(err)
		return
	}
	path, err := c.Download(context.Background(), repo, "config.json")
	if err != nil {
		fmt.Println(err)
		return
	}
	data, _ := os.ReadFile(path)
	rel, _ := filepath.Rel(cache, path)
	link, _ := os.Readlink(path)
	fmt.Println(filepath.Dir(filepath.Dir(rel)))
	fmt.Println(link)
	fmt.Println(string(data))
	// Output:
	// models--org--tiny/snapshots
	// ../../blobs/7c26e1c30f8fe6197500f34ec1601a04b0f4fad5
	// {"n_layer": 2}
}
