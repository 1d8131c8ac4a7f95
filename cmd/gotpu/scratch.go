package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gotpu/gotpu/hub"
	"github.com/gotpu/gotpu/internal/cli"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/xla"
)

// Training from scratch, as run_clm.py does it: the config comes from --config_name (a
// config.json, a directory holding one, or a Hub repo id), else --model_name_or_path's, else
// CONFIG_MAPPING[--model_type]() with --config_overrides applied; without --model_name_or_path
// the model is AutoModelForCausalLM.from_config(config): HF's _init_weights distributions drawn
// from --seed (set_seed runs before the model is built), and the tokenizer must be named with
// --tokenizer_name.

// maxConfigDownload bounds a --config_name fetched from the Hub: what the config reader takes.
const maxConfigDownload = 16 << 20

// errNoTokenizer is run_clm.py's refusal of a run with neither --tokenizer_name nor
// --model_name_or_path, with what to do in gotpu.
const errNoTokenizer = "--tokenizer_name: required to train from scratch on text: you are instantiating a new tokenizer from scratch, " +
	"which run_clm.py does not support (train one with another script, save it, and load it from here with --tokenizer_name " +
	"— a tokenizer.json, its directory or a Hub repo id), or give pre-tokenized JSON lines ({\"input_ids\": [...]})"

// scratchModel builds the model of a run without --model_name_or_path. handled is false when
// --model_name_or_path is given: that model is loaded by loadModel, after the checks here
// (config_overrides and config_name beside it, a directory with a config but no weights).
func (r *runArgs) scratchModel(ctx context.Context, rt *xla.Runtime) (m models.Model, handled bool, err error) {
	modelPath := strings.TrimSpace(stringOr(r.md.ModelNameOrPath, ""))
	configName := strings.TrimSpace(stringOr(r.md.ConfigName, ""))
	modelType := strings.TrimSpace(stringOr(r.md.ModelType, ""))
	overrides := strings.TrimSpace(stringOr(r.md.ConfigOverrides, ""))
	if overrides != "" && (configName != "" || modelPath != "") {
		// ModelArguments.__post_init__'s rule.
		return nil, true, cli.UsageError("--config_overrides can't be used in combination with --config_name or --model_name_or_path " +
			"(run_clm.py's rule): it overrides the defaults of --model_type, to train a new model from scratch")
	}
	if modelPath != "" {
		return nil, false, r.checkPretrainedSource(modelPath, configName, modelType)
	}
	if configName == "" && modelType == "" {
		return nil, true, cli.UsageError("--model_name_or_path: required (a Hugging Face model directory or Hub repo id), " +
			"or --config_name / --model_type (with --config_overrides) to train a new model from scratch")
	}
	if cmd := r.command(); cmd != "train" {
		return nil, true, cli.UsageError("--config_name / --model_type describe a new, randomly initialised model, which only `gotpu train` builds; "+
			"`gotpu %s` needs --model_name_or_path (a trained model directory or Hub repo id)", cmd)
	}
	if (r.md.UsePeft != nil && *r.md.UsePeft) || stringOr(r.md.AdapterNameOrPath, "") != "" {
		return nil, true, cli.UsageError("--use_peft / --adapter_name_or_path: a LoRA adapter trains on frozen pretrained weights, " +
			"and a model from scratch (--config_name / --model_type) has none: drop them to train the whole model, or give --model_name_or_path")
	}
	if err := r.checkScratchTokenizer(); err != nil {
		return nil, true, err
	}
	cfg, err := r.scratchConfig(ctx, configName, modelType, overrides)
	if err != nil {
		return nil, true, err
	}
	dtype := stringOr(r.md.TorchDtype, "")
	if dtype == "auto" { // from_config has no checkpoint whose dtype "auto" could keep: the default, float32
		dtype = ""
	}
	m, err = models.New(ctx, rt, cfg, models.NewOptions{Seed: uint64(r.train.Seed), DType: dtype})
	if err != nil {
		return nil, true, fmt.Errorf("building the model from scratch: %w", err)
	}
	var n int64
	for _, p := range m.Params() { // a tied lm_head is not a parameter of its own, as in HF's count
		n += int64(p.NumElements())
	}
	slog.Info(fmt.Sprintf("Training new model from scratch - Total size=%.2fM params", float64(n)/(1<<20)),
		"model_type", cfg.ModelType(), "architecture", cfg.Architecture(), "seed", r.train.Seed)
	return m, true, nil
}

// command is the gotpu subcommand the arguments were parsed for ("train", "eval").
func (r *runArgs) command() string {
	if r.fs == nil {
		return ""
	}
	return strings.TrimPrefix(r.fs.Name(), "gotpu ")
}

// scratchConfig is run_clm.py's config for a model from scratch: --config_name's, else
// --model_type's class defaults with --config_overrides. Only the causal LMs gotpu builds are
// accepted (AutoModelForCausalLM.from_config).
func (r *runArgs) scratchConfig(ctx context.Context, configName, modelType, overrides string) (models.Config, error) {
	if configName == "" {
		slog.Warn("You are instantiating a new config instance from scratch.", "model_type", modelType)
		if overrides != "" {
			slog.Info("Overriding config: " + overrides)
		}
		cfg, err := models.ScratchConfig(modelType, overrides)
		if err != nil {
			return nil, cli.UsageError("--%v", err) // ScratchError names model_type or config_overrides
		}
		return cfg, nil
	}
	path, err := r.configFile(ctx, configName)
	if err != nil {
		return nil, err
	}
	cfg, err := models.ParseConfig(path)
	if err != nil {
		return nil, fmt.Errorf("--config_name %s: %w", configName, err)
	}
	if mt := cfg.ModelType(); !slices.Contains(models.ScratchTypes(), mt) {
		return nil, cli.UsageError("--config_name %s: model_type %q: training from scratch builds a causal LM (AutoModelForCausalLM.from_config), "+
			"and gotpu builds %s", configName, mt, strings.Join(models.ScratchTypes(), ", "))
	}
	if modelType != "" && modelType != cfg.ModelType() {
		// run_clm.py reads --model_type only when there is no config to read.
		slog.Warn("--model_type is not used: the config comes from --config_name", "model_type", modelType,
			"config_model_type", cfg.ModelType())
	}
	return cfg, nil
}

// configFile finds --config_name's config.json: the file itself, a directory holding one, or a
// Hub repo id whose config.json is fetched (at --model_revision, as run_clm.py passes it).
func (r *runArgs) configFile(ctx context.Context, name string) (string, error) {
	if st, err := os.Stat(name); err == nil {
		if !st.IsDir() {
			return name, nil
		}
		path := filepath.Join(name, "config.json")
		if _, err := os.Stat(path); err != nil {
			return "", cli.UsageError("--config_name %s: a directory without config.json: name a config.json file, a directory holding one, or a Hub repo id", name)
		}
		return path, nil
	}
	c, err := r.hub()
	if err != nil {
		return "", err
	}
	repo, c, err := models.HubRepo(name, models.HubOptions{Hub: c, Revision: stringOr(r.md.ModelRevision, "")})
	if err != nil {
		return "", fmt.Errorf("--config_name: %w", err)
	}
	limited, err := c.WithLimits(hub.Limits{File: maxConfigDownload})
	if err != nil {
		return "", err
	}
	path, err := limited.Download(ctx, repo, "config.json")
	if err != nil {
		return "", fmt.Errorf("--config_name %s: %w", name, err)
	}
	return path, nil
}

// checkScratchTokenizer refuses, as run_clm.py does, a model from scratch without
// --tokenizer_name — unless the training data is already tokenized, which needs none.
func (r *runArgs) checkScratchTokenizer() error {
	if stringOr(r.md.TokenizerName, "") != "" {
		return nil
	}
	if f := stringOr(r.md.TrainFile, ""); f != "" && stringOr(r.md.TextColumnName, "") == "" {
		if pre, err := isPretokenized(f); err == nil && pre {
			return nil
		}
	}
	return cli.UsageError("%s", errNoTokenizer)
}

// checkPretrainedSource checks the arguments beside --model_name_or_path: --config_name would
// load the weights into another config, which gotpu does not do; a local directory with a
// config.json but no weights is what --config_name takes, and from_pretrained fails on it.
func (r *runArgs) checkPretrainedSource(modelPath, configName, modelType string) error {
	if configName != "" {
		return cli.UsageError("--config_name %s with --model_name_or_path %s: gotpu loads a pretrained model with its own config.json "+
			"and does not load its weights into another config; drop --config_name, or drop --model_name_or_path to train a new model "+
			"from scratch with that config", configName, modelPath)
	}
	if modelType != "" {
		// run_clm.py reads --model_type only when there is no config to read.
		slog.Warn("--model_type is not used: the config comes from --model_name_or_path", "model_type", modelType)
	}
	st, err := os.Stat(modelPath)
	if err != nil || !st.IsDir() {
		return nil // a Hub repo id, or an error models.Load reports
	}
	if _, err := os.Stat(filepath.Join(modelPath, "config.json")); err != nil {
		return nil
	}
	for _, w := range []string{"model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json"} {
		if _, err := os.Stat(filepath.Join(modelPath, w)); err == nil {
			return nil
		}
	}
	return cli.UsageError("--model_name_or_path %s: has config.json but no weights (no model.safetensors or model.safetensors.index.json), "+
		"so there is no pretrained model to load (from_pretrained fails the same way); to train a new model from scratch with this config, "+
		"give it as --config_name %s instead (with --tokenizer_name)", modelPath, modelPath)
}
