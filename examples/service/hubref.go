package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gotpu/gotpu/data/chat"
	"github.com/gotpu/gotpu/data/tokenizer"
	"github.com/gotpu/gotpu/hub"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/peft"
)

// defaultHubTimeout bounds each Hub call a request waits for (config.json, tokenizer.json): a
// request must be answered in seconds, not hang on a slow Hub. The weights are fetched by the
// job, without this bound (the hub client's own idle timeout ends a stalled download).
const defaultHubTimeout = 30 * time.Second

// needsHubHint ends the refusal of a name that is no path the service can read but is spelled
// like a Hub repo id, on a service without a Hub client. It depends on the spelling alone, so it
// tells nothing about the host's files.
const needsHubHint = "a Hugging Face repo id (org/name) needs the service started with -hub"

// hubCacheLabel replaces the Hub cache's directory in messages: answers name none of the
// service's directories.
const hubCacheLabel = "$HF_HUB_CACHE"

// newHubClient is the -hub flag's client: configured from the environment as huggingface_hub
// reads it (HF_ENDPOINT, HF_HUB_CACHE, HF_HOME, HF_TOKEN, HF_HUB_OFFLINE, ...), without progress
// bars (a server has no terminal), logging to the service's logger.
func newHubClient(getenv func(string) string, log *slog.Logger) (*hub.Client, error) {
	cfg, err := hub.ConfigFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	cfg.Progress = nil
	cfg.Logger = log
	return hub.New(cfg)
}

// hubFetcher fetches the small files of the Hub repos that requests name (config.json,
// tokenizer.json) into the shared cache while the request waits, each call within timeout.
type hubFetcher struct {
	c       *hub.Client
	timeout time.Duration
}

// revision is the revision a request asks for, and the field it came from ("" when none did).
type revision struct{ value, field string }

// source is where a request's name of a model, config or tokenizer led.
type source struct {
	// path is the file or directory to read: a real path under the service's directories, or a
	// file in the Hub cache's snapshot of repo.
	path string
	// repo is set when the name was a Hub repo id: the repo at the commit path came from, so that
	// the rest of the model (weights, tokenizer) comes from that same commit even if the branch
	// moves meanwhile.
	repo *hub.Repo
}

// resolveName resolves a request field that names a model directory, a config or a tokenizer
// the way transformers' from_pretrained does: a path the service may read wins (even when it is
// also spelled like a repo id); otherwise a name spelled like a repo id ("org/name", optionally
// "@rev", else rev) is a Hub repo whose file (config.json, tokenizer.json) is fetched into the
// cache now. Anything else gets the one refusal of pathPolicy, so that an answer never tells
// which files exist.
//
// The Hub cache is not an allowed directory: a request naming a path in it is refused like any
// other. Only the snapshot fetched for this name is read, and only after checkSnapshotFile has
// seen that the file lies in that repo's part of the cache.
func resolveName(ctx context.Context, paths *pathPolicy, hf *hubFetcher, field, given string, rev revision, file string) (source, *fieldErr) {
	p, err := paths.resolve(given)
	if err == nil {
		return source{path: p}, nil
	}
	if !hub.LooksLikeRepoID(given) {
		return source{}, &fieldErr{field, fmt.Sprintf("%q: %v", given, err)}
	}
	if hf == nil {
		return source{}, &fieldErr{field, fmt.Sprintf("%q: %v; %s", given, err, needsHubHint)}
	}
	repo, err := hub.ParseRepo(given, hub.ModelRepo)
	if err != nil { // LooksLikeRepoID said it parses
		return source{}, &fieldErr{field, fmt.Sprintf("%q: %v", given, err)}
	}
	if repo.Revision == "" {
		repo.Revision = strings.TrimSpace(rev.value)
	} else {
		rev.field = "" // the id's own "@rev" wins, as in transformers
	}
	f, err := hf.fetch(ctx, repo, file)
	if err != nil {
		if errors.Is(err, hub.ErrRevisionNotFound) && rev.field != "" {
			field = rev.field
		}
		return source{}, &fieldErr{field, hf.describe(err, given, repo, file)}
	}
	return f, nil
}

// fetch downloads one file of repo (within the fetcher's timeout, and no larger than the service
// reads such a file: smallFileLimit) and returns it with the repo pinned at the commit it came
// from.
func (h *hubFetcher) fetch(ctx context.Context, repo hub.Repo, file string) (source, error) {
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	c, err := h.c.WithLimits(hub.Limits{File: smallFileLimit(file)})
	if err != nil {
		return source{}, err
	}
	p, err := c.Download(ctx, repo, file)
	if err != nil {
		return source{}, err
	}
	commit, err := checkSnapshotFile(h.c.CacheDir(), p, file)
	if err != nil {
		return source{}, err
	}
	pinned := hub.Repo{ID: repo.ID, Type: repo.Type, Revision: commit}
	return source{path: p, repo: &pinned}, nil
}

// smallFileLimit is the largest file of this name the service reads while a request waits: the
// readers' own limits, so that a file they would refuse is refused from the size the Hub
// announces, before it is downloaded (0: no limit).
func smallFileLimit(file string) int64 {
	switch file {
	case "config.json":
		return maxConfigBytes
	case "tokenizer.json":
		return tokenizer.MaxFileSize
	case "tokenizer_config.json":
		return chat.MaxConfigBytes
	case "chat_template.jinja":
		return chat.MaxTemplateBytes
	case peft.ConfigFile:
		return peft.MaxConfigBytes
	}
	return 0
}

// fetchOptional is fetch for a file the repo may lack (a model's tokenizer.json): "" and no
// error when the Hub (or the cache's record of it) says the file does not exist.
func (h *hubFetcher) fetchOptional(ctx context.Context, repo hub.Repo, file string) (string, error) {
	f, err := h.fetch(ctx, repo, file)
	if errors.Is(err, hub.ErrEntryNotFound) {
		return "", nil
	}
	return f.path, err
}

// checkSnapshotFile checks that p, a file the hub client returned for file, is
// <cache>/<repo folder>/snapshots/<commit>/<file> and that what it links to lies in that repo
// folder (its blobs/), and returns the commit. The client writes these itself; the check keeps a
// cache tampered with by something else from turning a repo id into a read of any file.
func checkSnapshotFile(cacheDir, p, file string) (string, error) {
	bad := func(why string) (string, error) {
		return "", fmt.Errorf("hub cache: %s: %s", strings.ReplaceAll(p, cacheDir, hubCacheLabel), why)
	}
	snap, ok := strings.CutSuffix(filepath.Clean(p), string(filepath.Separator)+filepath.FromSlash(file))
	if !ok {
		return bad("not the file " + file)
	}
	commit := filepath.Base(snap)
	repoDir := filepath.Dir(filepath.Dir(snap))
	if !hub.IsCommit(commit) || filepath.Base(filepath.Dir(snap)) != "snapshots" || filepath.Dir(repoDir) != filepath.Clean(cacheDir) {
		return bad("not in a snapshot of the cache")
	}
	realRepo, err := filepath.EvalSymlinks(repoDir)
	if err != nil {
		return bad(bareError(err).Error())
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return bad(bareError(err).Error())
	}
	if !within(real, []string{realRepo}) {
		return bad("links outside its repo's folder of the cache")
	}
	return commit, nil
}

// describe is the message for a failed fetch of file from repo (named given by the request):
// what went wrong and what to do, then the hub's own error with the cache's directory replaced.
// The token is never in it: the hub package keeps it out of every error.
func (h *hubFetcher) describe(err error, given string, repo hub.Repo, file string) string {
	var what string
	switch {
	case errors.Is(err, hub.ErrGated):
		what = "the Hub refused access to this gated repo: the service sent no token, or one not granted access " +
			"(set HF_TOKEN, or HF_TOKEN_PATH, in the service's environment to a token that has accepted the repo's conditions)"
	case errors.Is(err, hub.ErrRepoNotFound):
		what = "not a path this service can read, and no repo on the Hub (or a private one the service's token, HF_TOKEN, cannot see)"
	case errors.Is(err, hub.ErrRevisionNotFound):
		what = fmt.Sprintf("the repo has no revision %q", repo.Revision)
	case errors.Is(err, hub.ErrEntryNotFound):
		what = fmt.Sprintf("the repo has no %s", file)
	case errors.Is(err, hub.ErrNotCached):
		what = fmt.Sprintf("%s is not in the service's Hub cache, and the Hub was not asked (the service runs offline: HF_HUB_OFFLINE) or could not be reached", file)
	case errors.Is(err, context.DeadlineExceeded):
		what = fmt.Sprintf("the Hub did not deliver %s within %v", file, h.timeout)
	default:
		what = "fetching " + file + " from the Hub"
	}
	return fmt.Sprintf("%q: %s: %s", given, what, strings.ReplaceAll(err.Error(), h.c.CacheDir(), hubCacheLabel))
}

// modelTokenizer is the tokenizer of a model when the request names none, as
// AutoTokenizer.from_pretrained(model_name_or_path) finds it: for a local model directory the
// directory itself when it holds tokenizer.json (or .json.gz), for a Hub model the repo's
// tokenizer.json at the model's commit. "" when the model has none.
func modelTokenizer(ctx context.Context, hf *hubFetcher, dir string, repo *hub.Repo) (string, error) {
	if repo != nil {
		return hf.fetchOptional(ctx, *repo, "tokenizer.json")
	}
	for _, name := range []string{"tokenizer.json", "tokenizer.json.gz"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return dir, nil
		}
	}
	return "", nil
}

// fetchWeights brings the weights of a model whose config.json was fetched at validation into
// its snapshot directory (models.ResolvePretrained: model.safetensors, or the index and its
// shards, and generation_config.json) and returns that directory, which must be want.
// ResolvePretrained bounds the weights by what config.json implies (models.MaxWeightsBytes),
// checking each file's size from the Hub's metadata before it is downloaded, so a repo whose
// config implies a tiny model but whose weights are hundreds of megabytes is refused without
// fetching them: hub.ErrTooLarge, with an error naming the file and the limit, which the callers
// answer as the request's to change (400), like any failure that is not the Hub's.
func fetchWeights(ctx context.Context, hc *hub.Client, repo hub.Repo, want string) (string, error) {
	if hc == nil {
		return "", fmt.Errorf("model %s: the service has no Hub client", repo)
	}
	ref := repo.String()
	// ResolvePretrained takes an existing path first, relative to the process's working
	// directory; a directory spelled "org/name@<commit>" there must not stand in for the repo
	// this request was checked against.
	if _, err := os.Stat(ref); err == nil {
		return "", fmt.Errorf("model %s: a path of that name in the service's working directory shadows the repo id", ref)
	}
	dir, err := models.ResolvePretrained(ctx, ref, models.HubOptions{Hub: hc})
	if err != nil {
		return "", err
	}
	if filepath.Clean(dir) != filepath.Clean(want) {
		return "", fmt.Errorf("model %s: fetched into %s, but its config.json was checked in %s", ref, dir, want)
	}
	return dir, nil
}

// isUpstreamFailure tells a failure of the Hub or the network (answered 502: not the client's
// fault) from one of the request (a repo, revision or file that does not exist, a gated repo,
// weights gotpu does not read: 400).
func isUpstreamFailure(err error) bool {
	var ne net.Error
	return errors.Is(err, hub.ErrCorrupt) || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne)
}
