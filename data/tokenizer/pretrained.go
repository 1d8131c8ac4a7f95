package tokenizer

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

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
	if isLocalName(nameOrPath) {
		return FromFile(nameOrPath)
	}
	repo, c, err := opts.repo(nameOrPath)
	if err != nil {
		return nil, err
	}
	path, err := c.Download(ctx, repo, "tokenizer.json")
	if err != nil {
		return nil, fmt.Errorf("tokenizer %s: %w (gotpu reads the fast tokenizer's tokenizer.json)", nameOrPath, err)
	}
	return FromFile(path)
}

// hubExtras are the files fetched beside a Hub tokenizer's tokenizer.json when the repo has them
// (FilesFromPretrained), so that a saved model carries the tokenizer as AutoTokenizer loaded it.
var hubExtras = []string{"tokenizer_config.json", "special_tokens_map.json", ChatTemplateFile}

// FilesFromPretrained reads the files of nameOrPath's tokenizer (ReadFiles), for saving beside a
// model as save_pretrained does (trainer.Options.Tokenizer): a local file or directory as
// FromPretrained finds it, or a Hub repo's tokenizer.json and, where the repo has them,
// tokenizer_config.json, special_tokens_map.json and chat_template.jinja, through the cache.
// The optional files' absence is not an error (hub.Client.DownloadOptional).
func FilesFromPretrained(ctx context.Context, nameOrPath string, opts HubOptions) (*Files, error) {
	if isLocalName(nameOrPath) {
		return ReadFiles(nameOrPath)
	}
	repo, c, err := opts.repo(nameOrPath)
	if err != nil {
		return nil, err
	}
	path, err := c.Download(ctx, repo, "tokenizer.json")
	if err != nil {
		return nil, fmt.Errorf("tokenizer %s: %w", nameOrPath, err)
	}
	for _, f := range hubExtras {
		if _, err := c.DownloadOptional(ctx, repo, f); err != nil {
			return nil, fmt.Errorf("tokenizer %s: %s: %w", nameOrPath, f, err)
		}
	}
	return ReadFiles(filepath.Dir(path))
}

// isLocalName says whether nameOrPath is read from the file system: an existing file or
// directory wins, even when its name is also a valid repo id, as in transformers.
func isLocalName(nameOrPath string) bool {
	_, err := os.Stat(nameOrPath)
	return err == nil || !hub.LooksLikeRepoID(nameOrPath)
}

// repo parses a Hub repo id (opts.Revision unless the id has "@rev") and returns the client to
// fetch it with: opts.Hub, or one configured from the environment.
func (opts HubOptions) repo(nameOrPath string) (hub.Repo, *hub.Client, error) {
	repo, err := hub.ParseRepo(nameOrPath, hub.ModelRepo)
	if err != nil {
		return hub.Repo{}, nil, &LoadError{File: nameOrPath, Err: err}
	}
	if repo.Revision == "" {
		repo.Revision = opts.Revision
	}
	if opts.Hub != nil {
		return repo, opts.Hub, nil
	}
	cfg, err := hub.ConfigFromEnv(os.Getenv)
	if err != nil {
		return hub.Repo{}, nil, err
	}
	c, err := hub.New(cfg)
	return repo, c, err
}
