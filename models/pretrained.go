package models

import (
	stdctx "context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gotpu/gotpu/hub"
	"github.com/gotpu/gotpu/models/internal/core"
)

// ResolvePretrained returns the local directory that holds nameOrPath, as transformers'
// from_pretrained finds it: an existing directory wins (even when its name is also a valid repo
// id); otherwise nameOrPath is a Hub repo id ("org/name", optionally "@revision", which overrides
// opts.Revision) whose config.json, generation_config.json (when the repo has one) and
// safetensors weights — model.safetensors, or model.safetensors.index.json and every shard it
// lists — are taken from the shared Hugging Face cache, downloading what is missing. The result
// is the cache's snapshots/<commit> directory, which Load reads like any model directory.
//
// A repo's files are sized by whoever published it, so each download is bounded before any byte
// of it is written (hub.Limits, checked against the size the Hub announces): config.json and
// generation_config.json by the most the config reader takes (16 MiB), the shard index by the
// most its reader takes, and the weights — the one file or all the shards together — by what
// config.json implies (MaxWeightsBytes). A file over its bound is an error naming the repo, the
// file and the limit that wraps hub.ErrTooLarge. config.json is therefore parsed before the
// weights are fetched: an architecture Load does not build, or a config it would refuse, is
// refused here, before the weights are downloaded only to be refused by Load.
//
// Optional and alternative files follow transformers: generation_config.json absent from the
// repo, or (offline) from the cache, is skipped (hub.Client.DownloadOptional); model.safetensors
// missing either way sends the lookup to the shard index. Offline weights that are in neither
// spelling are an error naming both that wraps hub.ErrNotCached.
//
// opts.Hub nil means a client configured from the environment (HF_ENDPOINT, HF_HUB_CACHE,
// HF_HOME, HF_TOKEN, HF_HUB_OFFLINE), as huggingface_hub reads it.
func ResolvePretrained(ctx stdctx.Context, nameOrPath string, opts HubOptions) (string, error) {
	if st, err := os.Stat(nameOrPath); err == nil {
		if !st.IsDir() {
			return "", fmt.Errorf("%s: a model is a directory holding config.json and model.safetensors, not a file", nameOrPath)
		}
		return nameOrPath, nil
	}
	repo, c, err := HubRepo(nameOrPath, opts)
	if err != nil {
		return "", err
	}
	configs, err := c.WithLimits(hub.Limits{File: core.MaxConfigSize})
	if err != nil {
		return "", err
	}
	cfgPath, err := configs.Download(ctx, repo, core.ConfigFile)
	if err != nil {
		return "", fmt.Errorf("model %s: %w", nameOrPath, err)
	}
	dir := filepath.Dir(cfgPath)
	// From here on the files must come from the commit config.json came from, even if the
	// branch moves while the shards download.
	if commit := filepath.Base(dir); hub.IsCommit(commit) {
		repo.Revision = commit
	}
	cfg, err := ParseConfig(cfgPath)
	if err != nil {
		return "", fmt.Errorf("model %s: %w", nameOrPath, err)
	}
	limit, err := MaxWeightsBytes(cfg)
	if err != nil {
		return "", fmt.Errorf("model %s: %s: %w", nameOrPath, core.ConfigFile, err)
	}
	// generation_config.json is optional, as in transformers (GenerationConfig.from_pretrained's
	// OSError is caught): absent on the Hub, or not in the cache offline, means none.
	if _, err := configs.DownloadOptional(ctx, repo, core.GenerationFile); err != nil {
		return "", fmt.Errorf("model %s: %w", nameOrPath, err)
	}
	// One limited client for all the weight files: its Total counts every file it returns, so
	// the shards together stay within limit, each checked before its first byte is written.
	weights, err := c.WithLimits(hub.Limits{File: limit, Total: limit})
	if err != nil {
		return "", err
	}
	// model.safetensors, else the shard index, as transformers tries them: a file the Hub says
	// the repo lacks, or (offline) one the cache lacks, sends the lookup to the next name.
	_, singleErr := weights.Download(ctx, repo, core.WeightsFile)
	if singleErr == nil {
		return dir, nil
	}
	if !errors.Is(singleErr, hub.ErrEntryNotFound) && !errors.Is(singleErr, hub.ErrNotCached) {
		return "", weightsError(nameOrPath, core.WeightsFile, limit, singleErr)
	}
	index, err := c.WithLimits(hub.Limits{File: core.MaxIndexSize})
	if err != nil {
		return "", err
	}
	indexPath, err := index.Download(ctx, repo, core.WeightsIndex)
	if errors.Is(err, hub.ErrEntryNotFound) && errors.Is(singleErr, hub.ErrEntryNotFound) {
		return "", noSafetensors(ctx, c, repo)
	}
	if err != nil && (errors.Is(err, hub.ErrNotCached) || errors.Is(err, hub.ErrEntryNotFound)) {
		// At least one of the two was not cached: the weights may exist, just not here.
		return "", fmt.Errorf("model %s: neither %s nor %s is in the cache (download the repo online first: "+
			"gotpu download %s): %w", nameOrPath, core.WeightsFile, core.WeightsIndex, repo.ID, notCachedOf(singleErr, err))
	}
	if err != nil {
		return "", fmt.Errorf("model %s: %w", nameOrPath, err)
	}
	_, shards, err := core.ReadShardIndex(indexPath)
	if err != nil {
		return "", err
	}
	for _, s := range shards {
		if _, err := weights.Download(ctx, repo, s); err != nil {
			return "", weightsError(nameOrPath, "shard "+s+" listed by "+core.WeightsIndex, limit, err)
		}
	}
	return dir, nil
}

// notCachedOf picks, of the two lookups' errors, the one that says a file is not cached (the
// reason the weights were not found), so that it is the one errors.Is(hub.ErrNotCached) sees.
func notCachedOf(a, b error) error {
	if errors.Is(a, hub.ErrNotCached) {
		return a
	}
	return b
}

// weightsError is the error for a weight file (what) of model name that failed to download: one
// over the bound its config implies names the bound, so that the refusal says why.
func weightsError(name, what string, limit int64, err error) error {
	if errors.Is(err, hub.ErrTooLarge) {
		return fmt.Errorf("model %s: %s: the weights are larger than its config.json implies (at most %d bytes in all, "+
			"every parameter in float64): %w", name, what, limit, err)
	}
	return fmt.Errorf("model %s: %s: %w", name, what, err)
}

// HubRepo parses a model repo id ("org/name[@revision]"; opts.Revision when it names none) and
// returns it with opts.Hub, or a client configured from the environment when that is nil: what
// every from_pretrained-style lookup (models, adapters) starts from once nameOrPath is not a
// local directory.
func HubRepo(nameOrPath string, opts HubOptions) (hub.Repo, *hub.Client, error) {
	if !hub.LooksLikeRepoID(nameOrPath) {
		return hub.Repo{}, nil, fmt.Errorf("%s: no such directory, and not a Hugging Face repo id (org/name)", nameOrPath)
	}
	repo, err := hub.ParseRepo(nameOrPath, hub.ModelRepo)
	if err != nil {
		return hub.Repo{}, nil, err
	}
	if repo.Revision == "" {
		repo.Revision = opts.Revision
	}
	c := opts.Hub
	if c == nil {
		cfg, err := hub.ConfigFromEnv(os.Getenv)
		if err != nil {
			return hub.Repo{}, nil, err
		}
		if c, err = hub.New(cfg); err != nil {
			return hub.Repo{}, nil, err
		}
	}
	return repo, c, nil
}

// HubOptions say where ResolvePretrained (and Load, for a repo id) fetches from.
type HubOptions struct {
	// Hub is the client; nil: one configured from the environment.
	Hub *hub.Client
	// Revision is a branch, tag or commit ("" = "main"); an "@rev" in the id wins.
	Revision string
}

// noSafetensors is the error for a repo without safetensors weights, naming the pickle file it has
// instead when there is one.
func noSafetensors(ctx stdctx.Context, c *hub.Client, repo hub.Repo) error {
	for _, p := range []string{"pytorch_model.bin", "pytorch_model.bin.index.json"} {
		if ok, err := c.FileExists(ctx, repo, p); err == nil && ok {
			return fmt.Errorf("model %s: %w (%s): gotpu reads only safetensors (%s or %s), because loading a pickle can run "+
				"arbitrary code; use a revision with safetensors weights (the Hub's refs/pr/N from its conversion bot often has "+
				"them) or convert it once: model.save_pretrained(dir, safe_serialization=True)", repo.ID, core.ErrPickle, p,
				core.WeightsFile, core.WeightsIndex)
		}
	}
	return fmt.Errorf("model %s: the repo has neither %s nor %s: %w", repo.ID, core.WeightsFile, core.WeightsIndex, hub.ErrEntryNotFound)
}
