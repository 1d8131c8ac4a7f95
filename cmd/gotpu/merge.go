package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"

	"github.com/gotpu/gotpu/hub"
	"github.com/gotpu/gotpu/internal/atomicfile"
	"github.com/gotpu/gotpu/internal/cli"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/peft"
)

// tokenizerFiles are the files of a model directory that transformers' AutoTokenizer reads
// (fast and slow tokenizers, chat templates) plus gotpu's compressed tokenizer.json: merge copies
// those the base has, so that the merged directory is a complete model like the base.
var tokenizerFiles = []string{
	"tokenizer.json", "tokenizer.json.gz", "tokenizer_config.json", "special_tokens_map.json",
	"added_tokens.json", "vocab.json", "merges.txt", "vocab.txt", "tokenizer.model", "spiece.model",
	"sentencepiece.bpe.model", "chat_template.jinja", "chat_template.json",
}

// weightFiles are the weight files of a model directory that Save writes (one file, or shards and
// their index), the ones a new save replaces: the rule of models' own Save (removeStaleWeights).
var weightFiles = regexp.MustCompile(`^model(-\d{5}-of-\d{5})?\.safetensors(\.index\.json)?$`)

// runMerge implements `gotpu merge`: PEFT's merge_and_unload followed by save_pretrained. It
// loads --model (float32 unless --dtype says otherwise, as score and generate do), attaches the
// LoRA adapter --adapter (a directory or Hub repo id), folds it into the base weights
// (peft.Merge: W += transpose(B·A, fan_in_fan_out) · scaling) and writes --output as a plain
// Hugging Face model directory: config.json, model.safetensors (or shards above
// --max_shard_size), generation_config.json when the base has one, and the base's tokenizer
// files, so that the result loads, scores and generates like any model.
//
// Output (stdout): the output directory, on one line.
//
// The directory is built next to --output under a temporary name and only then moved into
// place, so an error (a refused adapter, a failed write, a signal) leaves --output as it was. An
// existing --output is overwritten as save_pretrained overwrites: the new files replace the old
// ones of the same name, older weight files the save did not write are removed, other files stay.
func runMerge(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("merge")
	var dev deviceFlags
	dev.registerNoCache(fs) // merging runs on the host: nothing compiles
	model := fs.String("model", "", "base model: Hugging Face model directory or Hub repo id")
	adapter := fs.String("adapter", "", "PEFT LoRA adapter directory (adapter_config.json + adapter_model.safetensors) or Hub repo id")
	output := fs.String("output", "", "directory to write the merged model to")
	dtype := fs.String("dtype", "", `dtype of the base's variables, and of the merged weights written: float32 (default), bfloat16, float16, or "auto" (as stored)`)
	maxShard := fs.String("max_shard_size", "", `split the weights into shards above this size (HF's max_shard_size: "5GB", "500MB", or bytes; default 5GB)`)
	revision := fs.String("revision", "", "branch, tag or commit of a Hub repo id given as --model (default main)")
	adapterRevision := fs.String("adapter_revision", "", "branch, tag or commit of a Hub repo id given as --adapter (default main)")
	if err := parse(fs, args, stderr, "--model DIR --adapter DIR --output DIR [--dtype D] [--max_shard_size S] [--device D]"); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.UsageError("unexpected arguments %q", fs.Args())
	}
	for _, f := range []struct{ name, value string }{{"model", *model}, {"adapter", *adapter}, {"output", *output}} {
		if f.value == "" {
			return cli.UsageError("--%s is required", f.name)
		}
	}
	switch *dtype {
	case "", "float32", "bfloat16", "float16", "auto":
	default:
		return cli.UsageError("--dtype %q: want float32, bfloat16, float16 or auto", *dtype)
	}
	var shardSize int64
	if *maxShard != "" {
		n, err := models.ParseSize(*maxShard)
		if err != nil || n <= 0 {
			return cli.UsageError("--max_shard_size %q: want a positive size such as 5GB, 500MB or a byte count", *maxShard)
		}
		shardSize = n
	}
	out := filepath.Clean(*output)
	if st, err := os.Stat(out); err == nil && !st.IsDir() {
		return cli.UsageError("--output %s is a file, not a directory", out)
	}
	baseDir, err := resolveModelFlag(ctx, *model, *revision, stderr)
	if err != nil {
		return err
	}
	adapterDir, err := resolveAdapterFlag(ctx, *adapter, *adapterRevision, baseDir, stderr)
	if err != nil {
		return err
	}
	for _, in := range []struct{ flag, dir string }{{"--model", baseDir}, {"--adapter", adapterDir}} {
		if sameDir(out, in.dir) {
			return cli.UsageError("--output %s is the %s directory: write the merged model elsewhere", out, in.flag)
		}
	}
	// The adapter's config is checked before the base is loaded, which can take minutes for a
	// large model: a wrong peft_type or r fails at once (peft.Load reads it again, the same way).
	cfgPath := filepath.Join(adapterDir, peft.ConfigFile)
	if _, err := os.Stat(cfgPath); err != nil {
		return fmt.Errorf("%s: no %s: not a PEFT adapter directory", adapterDir, peft.ConfigFile)
	}
	if _, err := peft.ReadConfig(cfgPath); err != nil {
		return err
	}

	rt, adapted, err := openAdapted(ctx, &dev, baseDir, *dtype, adapterDir)
	if err != nil {
		return err
	}
	defer rt.Close()
	merged, err := peft.Merge(ctx, adapted)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	tokDir := baseDir
	if !isLocal(*model) {
		// A Hub base was resolved to its weights and configs only; its tokenizer files come from
		// the same commit.
		if tokDir, err = hubTokenizerFiles(ctx, *model, baseDir, stderr); err != nil {
			fmt.Fprintf(stderr, "gotpu merge: warning: %s: tokenizer files not copied: %v\n", *model, err)
			tokDir = ""
		}
	}
	if err := writeMerged(ctx, merged, tokDir, out, models.SaveOptions{MaxShardSize: shardSize}); err != nil {
		return err
	}
	_, err = fmt.Fprintln(stdout, out)
	return err
}

// writeMerged saves m and the tokenizer files of tokDir ("" for none) into a staging directory
// next to out, then moves them into out. Nothing of out changes unless every file was written.
func writeMerged(ctx context.Context, m models.Model, tokDir, out string, opts models.SaveOptions) (err error) {
	parent := filepath.Dir(out)
	if err := atomicfile.MkdirAll(parent); err != nil {
		return fmt.Errorf("--output: %w", err)
	}
	stage, err := stagingDir(parent, filepath.Base(out))
	if err != nil {
		return fmt.Errorf("--output: %w", err)
	}
	published := false
	defer func() {
		if !published {
			os.RemoveAll(stage)
		}
	}()
	if err := m.Save(stage, opts); err != nil {
		return fmt.Errorf("writing the merged model: %w", err)
	}
	if tokDir != "" {
		for _, name := range tokenizerFiles {
			src := filepath.Join(tokDir, name)
			if !fileExists(src) {
				continue
			}
			if err := copyFile(src, filepath.Join(stage, name)); err != nil {
				return err
			}
		}
	}
	// A signal while the files were written stops here, before out is touched.
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := publish(stage, out); err != nil {
		return err
	}
	published = true
	return nil
}

// stagingDir creates a fresh hidden directory in parent for building out's content.
func stagingDir(parent, base string) (string, error) {
	for i := range 100 {
		dir := filepath.Join(parent, fmt.Sprintf(".%s.merge-%d-%d", base, os.Getpid(), i))
		err := atomicfile.Mkdir(dir)
		if err == nil {
			return dir, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return "", err
		}
	}
	return "", fmt.Errorf("creating a staging directory for %s in %s: too many collisions", base, parent)
}

// publish moves the staged directory to out: a rename when out does not exist or is empty;
// otherwise each file is renamed over its namesake in out (save_pretrained's overwrite) and the
// weight files of an earlier save that this one did not write are removed, so that out never
// holds both a single weights file and shards.
func publish(stage, out string) error {
	entries, err := os.ReadDir(out)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return atomicfile.Rename(stage, out)
	case err != nil:
		return fmt.Errorf("--output: %w", err)
	case len(entries) == 0:
		if err := os.Remove(out); err != nil {
			return fmt.Errorf("--output: %w", err)
		}
		return atomicfile.Rename(stage, out)
	}
	staged, err := os.ReadDir(stage)
	if err != nil {
		return err
	}
	var written []string
	for _, e := range staged {
		if err := os.Rename(filepath.Join(stage, e.Name()), filepath.Join(out, e.Name())); err != nil {
			return fmt.Errorf("--output: %w", err)
		}
		written = append(written, e.Name())
	}
	for _, e := range entries {
		if n := e.Name(); !e.IsDir() && weightFiles.MatchString(n) && !slices.Contains(written, n) {
			if err := os.Remove(filepath.Join(out, n)); err != nil {
				return fmt.Errorf("--output: removing the earlier %s: %w", n, err)
			}
		}
	}
	if err := atomicfile.SyncDir(out); err != nil {
		return err
	}
	return os.Remove(stage)
}

// copyFile copies src to dst with atomicfile's policy (the mode and durability of the weights).
func copyFile(src, dst string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	return atomicfile.WriteFile(dst, func(w io.Writer) error {
		_, err := io.Copy(w, f)
		return err
	})
}

// sameDir reports whether a and b name the same existing directory.
func sameDir(a, b string) bool {
	sa, err := os.Stat(a)
	if err != nil {
		return false
	}
	sb, err := os.Stat(b)
	return err == nil && os.SameFile(sa, sb)
}

// hubTokenizerFiles fetches the tokenizer files of the Hub model repo nameOrPath, at the commit
// its weights came from (dir is the cache's snapshots/<commit>), into the cache, and returns the
// snapshot directory that holds them.
func hubTokenizerFiles(ctx context.Context, nameOrPath, dir string, stderr io.Writer) (string, error) {
	repo, err := hub.ParseRepo(nameOrPath, hub.ModelRepo)
	if err != nil {
		return "", err
	}
	if commit := filepath.Base(dir); hub.IsCommit(commit) {
		repo.Revision = commit
	}
	c, err := newHubClient(hubFlags{}, stderr)
	if err != nil {
		return "", err
	}
	return c.Snapshot(ctx, repo, hub.SnapshotOptions{Include: tokenizerFiles})
}
