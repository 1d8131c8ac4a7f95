package tokenizer

import (
	"context"
	"fmt"
	"os"

	"github.com/gotpu/gotpu/hub"
)

// HubOptions say where FromPretrained fetches a tokenizer named by a Hub repo id.
type HubOptions struct {
	// Hub is the client; nil: one configured from the environment (HF_ENDPOINT, HF_HUB_CACHE,
	// HF_HOME, HF_TOKEN, HF_HUB_OFFLINE), as huggingface_hub reads it.
	Hub *hub.Client
	// Revision is a branch, tag or commit ("" = "main"); an "@rev" in the id wins.
	Revision string
}

// FromPretrained loads the tokenizer of nameOrPath as AutoTokenizer.from_pretrained finds it: an
// existing file or directory wins (FromFile), even when its name is also a valid repo id;
// otherwise nameOrPath is a Hub repo id ("org/name", optionally "@revision") whose tokenizer.json
// is taken from the shared Hugging Face cache, downloading it when missing (never in offline
// mode, where a missing file is an error naming it).
func FromPretrained(ctx context.Context, nameOrPath string, opts HubOptions) (*Pipeline, error) {
	if _, err := os.Stat(nameOrPath); err == nil || !hub.LooksLikeRepoID(nameOrPath) {
		return FromFile(nameOrPath)
	}
	repo, err := hub.ParseRepo(nameOrPath, hub.ModelRepo)
	if err != nil {
		return nil, &LoadError{File: nameOrPath, Err: err}
	}
	if repo.Revision == "" {
		repo.Revision = opts.Revision
	}
	c := opts.Hub
	if c == nil {
		cfg, err := hub.ConfigFromEnv(os.Getenv)
		if err != nil {
			return nil, err
		}
		if c, err = hub.New(cfg); err != nil {
			return nil, err
		}
	}
	path, err := c.Download(ctx, repo, "tokenizer.json")
	if err != nil {
		return nil, fmt.Errorf("tokenizer %s: %w (gotpu reads the fast tokenizer's tokenizer.json)", nameOrPath, err)
	}
	return FromFile(path)
}
