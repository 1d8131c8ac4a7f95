package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/gotpu/gotpu/hub"
	"github.com/gotpu/gotpu/internal/cli"
	"github.com/gotpu/gotpu/models"
)

// stringList is a repeatable flag (--include A --include B); a comma-free value per use, since
// glob patterns may hold commas inside brackets.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, " ") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// runDownload implements `gotpu download`, Hugging Face's `hf download`: files of a Hub repo into
// the shared Hugging Face cache (the same files Python's huggingface_hub and transformers then
// find there, and the other way round). Like hf download it prints the local path on stdout:
// the file's, when exactly one file is named, else the snapshot folder's.
func runDownload(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("download")
	repoType := fs.String("repo_type", "model", "model, dataset or space")
	revision := fs.String("revision", "", "branch, tag or commit (default main)")
	var include, exclude stringList
	fs.Var(&include, "include", "glob of the files to download (repeatable; * matches / too, as in hf download)")
	fs.Var(&exclude, "exclude", "glob of the files not to download (repeatable)")
	cacheDir := fs.String("cache_dir", "", "the Hugging Face cache (default $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub)")
	token := fs.String("token", "", "Hub token (default $HF_TOKEN, else the token file)")
	quiet := fs.Bool("quiet", false, "no progress bars; print only the path")
	maxWorkers := fs.Int("max_workers", 8, "files downloaded at once")
	synopsis := "REPO_ID [FILENAME...] [--repo-type model|dataset|space] [--revision R] [--include GLOB]... [--exclude GLOB]... [--cache-dir DIR]"
	// hf download takes flags after the repo id: parse, take the positional argument, parse on.
	var positional []string
	for {
		if err := parse(fs, args, stderr, synopsis); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(positional) == 0 {
		return cli.UsageError("a repo id is required (org/name)")
	}
	rt := hub.RepoType(*repoType)
	if rt != hub.ModelRepo && rt != hub.DatasetRepo && rt != hub.SpaceRepo {
		return cli.UsageError("--repo-type: %q is not model, dataset or space", *repoType)
	}
	if *maxWorkers < 1 {
		return cli.UsageError("--max-workers: %d is not positive", *maxWorkers)
	}
	repo, err := hub.ParseRepo(positional[0], rt)
	if err != nil {
		return cli.UsageError("%v", err)
	}
	if *revision != "" {
		if strings.Contains(positional[0], "@") {
			return cli.UsageError("--revision %s and %s name the revision twice", *revision, positional[0])
		}
		repo.Revision = *revision
	}
	progress := stderr
	if *quiet {
		progress = nil
	}
	c, err := newHubClient(hubFlags{cacheDir: *cacheDir, token: *token}, progress)
	if err != nil {
		return err
	}
	files := positional[1:]
	if len(files) > 0 && (len(include) > 0 || len(exclude) > 0) {
		return cli.UsageError("--include/--exclude apply to a whole-repo download; name files or give globs, not both")
	}
	// A model repo's listing also records which optional files it lacks (.no_exist markers), so
	// that offline loads know "none" from "not downloaded" without asking the Hub.
	var mark []string
	if rt == hub.ModelRepo {
		mark = probedFiles()
	}
	var path string
	switch len(files) {
	case 0:
		path, err = c.Snapshot(ctx, repo, hub.SnapshotOptions{Include: include, Exclude: exclude, MaxWorkers: *maxWorkers, MarkMissing: mark})
	case 1:
		path, err = c.Download(ctx, repo, files[0])
	default:
		path, err = c.Snapshot(ctx, repo, hub.SnapshotOptions{Include: files, MaxWorkers: *maxWorkers, MarkMissing: mark})
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, path)
	return nil
}

// probedFiles are the files of a model repo that gotpu's loaders (and transformers') look for
// and go on without: generation_config.json, the two spellings of the weights, the tokenizer's
// and chat template's extras. `gotpu download` marks those a repo lacks as missing.
func probedFiles() []string {
	return []string{
		"generation_config.json",
		"model.safetensors", "model.safetensors.index.json",
		"pytorch_model.bin", "pytorch_model.bin.index.json",
		"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
		"chat_template.jinja", "chat_template.json",
	}
}

// hubFlags are the Hub settings a command line may give over the environment: HF's cache_dir and
// token arguments.
type hubFlags struct {
	cacheDir string
	token    string
}

// newHubClient configures a Hub client from the environment as huggingface_hub reads it, with the
// command line's cache directory and token over it; progress bars go to progress (nil: none;
// drawn only on a terminal).
func newHubClient(f hubFlags, progress io.Writer) (*hub.Client, error) {
	cfg, err := hub.ConfigFromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	if f.cacheDir != "" {
		cfg.CacheDir = f.cacheDir
	}
	if f.token != "" {
		cfg.Token = f.token
	}
	if progress != nil && os.Getenv("HF_HUB_DISABLE_PROGRESS_BARS") == "" {
		cfg.Progress = progress
	}
	return hub.New(cfg)
}

var _ flag.Value = (*stringList)(nil)

// resolveModelFlag turns a --model value into a local model directory: an existing directory as
// it is, a Hub repo id through the shared cache (models.ResolvePretrained), with progress bars on
// stderr.
func resolveModelFlag(ctx context.Context, nameOrPath, revision string, stderr io.Writer) (string, error) {
	if isLocal(nameOrPath) {
		return nameOrPath, nil
	}
	c, err := newHubClient(hubFlags{}, stderr)
	if err != nil {
		return "", err
	}
	return models.ResolvePretrained(ctx, nameOrPath, models.HubOptions{Hub: c, Revision: revision})
}
