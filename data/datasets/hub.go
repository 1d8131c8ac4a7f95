package datasets

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/gotpu/gotpu/hub"
)

// ResolveHub resolves a dataset repository on the Hub as load_dataset("org/name", config) does:
// it lists the revision's files, reads README.md and .huggingface.yaml where the listing has them
// (downloaded through c's cache, pinned to the listed commit) and resolves. repo.Type must be
// hub.DatasetRepo (or empty, which means it here). The result's Commit is the listed commit.
// Offline (or with the Hub unreachable) the client lists only the files already cached, so the
// resolution covers those.
func ResolveHub(ctx context.Context, c *hub.Client, repo hub.Repo, config string) (*Resolved, error) {
	repo, err := datasetRepo(repo)
	if err != nil {
		return nil, err
	}
	commit, files, err := c.ListFiles(ctx, repo)
	if err != nil {
		return nil, fmt.Errorf("datasets: %s: %w", repo.ID, err)
	}
	pinned := repo
	pinned.Revision = commit
	readme, err := hubFile(ctx, c, pinned, files, "README.md")
	if err != nil {
		return nil, err
	}
	doc, err := readmeYAML(readme)
	if err != nil {
		return nil, fmt.Errorf("datasets: %s: %w", repo.ID, err)
	}
	if extra, err := hubFile(ctx, c, pinned, files, standaloneYAML); err != nil {
		return nil, err
	} else if extra != nil {
		o, err := parseStandalone(extra)
		if err != nil {
			return nil, fmt.Errorf("datasets: %s: %w", repo.ID, err)
		}
		doc = doc.merge(o)
	}
	r, err := resolve(files, doc, config)
	if err != nil {
		return nil, fmt.Errorf("%w (in dataset %s at commit %s)", err, repo.ID, commit)
	}
	r.Repo, r.Commit = repo.ID, commit
	return r, nil
}

// DownloadSplit downloads the split's files one after another, in order, through c's cache, all
// from r.Commit (so a push to the repo meanwhile cannot mix two versions), and returns their local
// paths in the same order.
func DownloadSplit(ctx context.Context, c *hub.Client, repo hub.Repo, r *Resolved, split string) ([]string, error) {
	repo, err := datasetRepo(repo)
	if err != nil {
		return nil, err
	}
	if r.Commit == "" {
		return nil, fmt.Errorf("datasets: %s: the resolved dataset has no commit (was it resolved from the Hub?)", repo.ID)
	}
	if r.Repo != repo.ID {
		return nil, fmt.Errorf("datasets: %s: the resolved dataset is %s", repo.ID, r.Repo)
	}
	files, err := r.Split(split)
	if err != nil {
		return nil, err
	}
	repo.Revision = r.Commit
	paths := make([]string, 0, len(files))
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("datasets: %s: %w", repo.ID, err)
		}
		p, err := c.Download(ctx, repo, f)
		if err != nil {
			return nil, fmt.Errorf("datasets: %s split %q: %w", repo.ID, split, err)
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// datasetRepo checks that repo is a dataset repository (an empty type is taken to mean one).
func datasetRepo(repo hub.Repo) (hub.Repo, error) {
	switch repo.Type {
	case "":
		repo.Type = hub.DatasetRepo
	case hub.DatasetRepo:
	default:
		return repo, fmt.Errorf("datasets: %s: a %s repository is not a dataset", repo.ID, repo.Type)
	}
	return repo, nil
}

// hubFile downloads a small metadata file if the listing has it (nil if not), refusing one larger
// than MaxReadmeBytes before downloading it: the size the Hub announces is checked first
// (hub.ErrTooLarge names the file and the limit), and the cached file is checked again before it
// is read.
func hubFile(ctx context.Context, c *hub.Client, repo hub.Repo, files []string, name string) ([]byte, error) {
	if !slices.Contains(files, name) {
		return nil, nil
	}
	limited, err := c.WithLimits(hub.Limits{File: MaxReadmeBytes})
	if err != nil {
		return nil, fmt.Errorf("datasets: %s: %w", repo.ID, err)
	}
	p, err := limited.Download(ctx, repo, name)
	if err != nil {
		return nil, fmt.Errorf("datasets: %s: %w", repo.ID, err)
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("datasets: %s: %w", repo.ID, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("datasets: %s: %w", repo.ID, err)
	}
	if st.Size() > MaxReadmeBytes {
		return nil, fmt.Errorf("datasets: %s: %s: %d bytes exceeds the %d-byte limit", repo.ID, name, st.Size(), MaxReadmeBytes)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxReadmeBytes+1))
	if err != nil {
		return nil, fmt.Errorf("datasets: %s: %s: %w", repo.ID, name, err)
	}
	if len(b) > MaxReadmeBytes {
		return nil, fmt.Errorf("datasets: %s: %s exceeds the %d-byte limit", repo.ID, name, MaxReadmeBytes)
	}
	return b, nil
}
