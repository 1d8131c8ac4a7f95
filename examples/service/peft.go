package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gotpu/gotpu/hub"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/peft"
	"github.com/gotpu/gotpu/trainer"
)

// resolvePeft checks the PEFT fields of a job request, which mirror TRL's ModelConfig as the
// rest of the body mirrors the trainer's arguments: use_peft with lora_r, lora_alpha,
// lora_dropout, lora_target_modules, lora_modules_to_save, lora_task_type, use_rslora and
// use_dora (trainer.ModelDataArguments.PeftConfig), or adapter_name_or_path, an adapter to
// continue training, whose adapter_config.json then decides (a lora_* field that disagrees with
// it is refused, AdapterConflicts). The adapter's path obeys the path policy of every other path
// (and, with -hub, may be a Hub repo id, as model_name_or_path may). Either needs
// model_name_or_path: the adapter trains on a pretrained base, kept frozen.
func (s *jobSpec) resolvePeft(ctx context.Context, re *requestError, md *trainer.ModelDataArguments, env specEnv) {
	cfg, use, err := md.PeftConfig()
	if err != nil {
		field, msg := peftFieldError(err)
		re.add(field, "%s", msg)
		return
	}
	given := str(md.AdapterNameOrPath)
	if !use && given == "" {
		return
	}
	field := "use_peft"
	var adapterDir string
	var adapterRepo *hub.Repo
	if given != "" {
		field = "adapter_name_or_path"
		src, ferr := resolveName(ctx, env.paths, env.hub, field, given, revision{}, peft.ConfigFile)
		if ferr != nil {
			re.add(ferr.field, "%s", ferr.msg)
			return
		}
		adapterDir, adapterRepo = src.path, src.repo
		if src.repo != nil {
			adapterDir = filepath.Dir(src.path)
		}
	}
	if str(md.ModelNameOrPath) == "" {
		re.add(field, "needs model_name_or_path: a LoRA adapter trains on a pretrained base model, which a job trained from scratch (config_name, model_type) does not have")
		return
	}
	if s.ModelDir == "" {
		return // model_name_or_path was refused already
	}
	if given != "" {
		ad, msg := checkAdapterDir(adapterDir, given, adapterRepo == nil)
		if msg != "" {
			re.add(field, "%s", msg)
			return
		}
		if err := md.AdapterConflicts(ad, given); err != nil {
			f, msg := peftFieldError(err)
			re.add(f, "%s", msg)
			return
		}
		s.AdapterDir, s.AdapterRepo = adapterDir, adapterRepo
		cfg = ad
	} else {
		if msg := checkTargets(s.modelCfg, cfg); msg != "" {
			re.add("lora_target_modules", "%s", msg)
			return
		}
		// adapter_config.json's base_model_name_or_path is the base as the request named it (PEFT
		// writes the name the base was loaded by), never one of the service's directories.
		cfg.BaseModelNameOrPath = str(md.ModelNameOrPath)
		s.Peft = &cfg
	}
	// The adapter's elements, bounded from the two configs (peft.MaxElements): the budget counts
	// gradients and optimizer state for these only (a LoRA job's are a few MB where full
	// fine-tuning would need gigabytes); the trainer checks again with the adapter's exact size.
	// A config that selects no weight matrix of the model is refused here, before the job runs.
	n, err := peft.MaxElements(s.modelCfg, cfg)
	if err != nil {
		if given != "" {
			re.add(field, "%q: %v", given, err)
		} else {
			re.add(field, "%v", err)
		}
		return
	}
	s.trainable = n
}

// peftFieldError splits the trainer's PEFT errors ("--lora_r: 0 must be positive", "--lora_r 8:
// the adapter in ... has 4") into the request field and the message naming it.
func peftFieldError(err error) (field, msg string) {
	// The trainer's messages spell fields as command-line flags; a request names them bare.
	msg = strings.ReplaceAll(strings.TrimPrefix(err.Error(), "--"), " --", " ")
	if i := strings.IndexAny(msg, ": "); i > 0 {
		field = msg[:i]
	}
	if field == "" {
		field = "use_peft"
	}
	if !strings.HasPrefix(msg, field) {
		msg = field + ": " + msg
	}
	return field, strings.TrimPrefix(strings.TrimSpace(strings.TrimPrefix(msg, field)), ": ")
}

// checkAdapterDir reads the adapter_config.json of dir, an adapter the request named given, and,
// for a local adapter, checks that its weights are there in the form gotpu reads: problems come
// back as a message naming the adapter as the request did ("" when there are none), so that a
// job or a generation request fails here rather than after its model has loaded. A Hub adapter's
// weights are fetched later (fetchAdapterWeights), which checks them.
func checkAdapterDir(dir, given string, local bool) (peft.LoraConfig, string) {
	if st, err := os.Stat(dir); err == nil && !st.IsDir() {
		return peft.LoraConfig{}, fmt.Sprintf("%q is a file; an adapter is a directory holding %s and %s", given, peft.ConfigFile, peft.WeightsFile)
	}
	cfgPath := filepath.Join(dir, peft.ConfigFile)
	if _, err := os.Stat(cfgPath); err != nil {
		return peft.LoraConfig{}, fmt.Sprintf("%q has no %s: not a PEFT adapter directory", given, peft.ConfigFile)
	}
	cfg, err := peft.ReadConfig(cfgPath)
	if err != nil {
		return peft.LoraConfig{}, fmt.Sprintf("%q: %s", given, relabel(bareError(err), dir, given))
	}
	if local {
		if _, err := os.Stat(filepath.Join(dir, peft.WeightsFile)); err != nil {
			if _, perr := os.Stat(filepath.Join(dir, peft.PickleWeightsFile)); perr == nil {
				return cfg, fmt.Sprintf("%q has only %s, a pickle gotpu does not read: save the adapter with safe_serialization=True", given, peft.PickleWeightsFile)
			}
			return cfg, fmt.Sprintf("%q has no %s", given, peft.WeightsFile)
		}
	}
	return cfg, ""
}

// checkTargets refuses, before a job is accepted, a lora_target_modules list entry that names
// no weight matrix of the model (a typo), from the config's parameter table alone: an entry
// matches a module equal to it or ending in "."+entry, PEFT's list rule. peft.New checks the
// targets again, exactly, when the job builds the model (an entry matching only an embedding,
// say, is refused there).
func checkTargets(cfg models.Config, lc peft.LoraConfig) string {
	if len(lc.TargetModules) == 0 { // the default, "all-linear" (a string) or an expression
		return ""
	}
	params, err := models.ParamShapes(cfg)
	if err != nil {
		return "" // an unsupported or absurd config is the model field's to refuse
	}
	for _, t := range lc.TargetModules {
		found := false
		for _, p := range params {
			module, ok := strings.CutSuffix(p.Name, ".weight")
			if ok && len(p.Shape) == 2 && (module == t || strings.HasSuffix(module, "."+t)) {
				found = true
				break
			}
		}
		if !found {
			return fmt.Sprintf("%q matches no layer of %s", t, cfg.Architecture())
		}
	}
	return ""
}

// fetchAdapterWeights brings the adapter_model.safetensors of a Hub adapter whose
// adapter_config.json was fetched at validation into its snapshot directory, want, from the same
// commit. The download is bounded by what that config implies on base, the model the adapter
// attaches to (peft.MaxWeightsBytes), checked against the size the Hub announces before any byte
// is written: weights over it are an error wrapping hub.ErrTooLarge naming the repo, the file and
// the limit, which the callers answer as the request's to change (400, or a failed job).
func fetchAdapterWeights(ctx context.Context, hc *hub.Client, repo hub.Repo, want string, base models.Config) error {
	if hc == nil {
		return fmt.Errorf("adapter %s: the service has no Hub client", repo)
	}
	lc, err := peft.ReadConfig(filepath.Join(want, peft.ConfigFile))
	if err != nil {
		return fmt.Errorf("adapter %s: %w", repo, err)
	}
	limit, err := peft.MaxWeightsBytes(base, lc)
	if err != nil {
		return fmt.Errorf("adapter %s: %s: %w", repo, peft.ConfigFile, err)
	}
	weights, err := hc.WithLimits(hub.Limits{File: limit})
	if err != nil {
		return err
	}
	p, err := weights.Download(ctx, repo, peft.WeightsFile)
	if errors.Is(err, hub.ErrEntryNotFound) {
		if ok, _ := hc.FileExists(ctx, repo, peft.PickleWeightsFile); ok {
			return fmt.Errorf("adapter %s has only %s, a pickle gotpu does not read: save it with safe_serialization=True", repo, peft.PickleWeightsFile)
		}
	}
	if err != nil {
		return peft.WeightsError(repo.String(), base, limit, err)
	}
	if _, err := checkSnapshotFile(hc.CacheDir(), p, peft.WeightsFile); err != nil {
		return err
	}
	if filepath.Dir(p) != filepath.Clean(want) {
		return fmt.Errorf("adapter %s: fetched into %s, but its %s was checked in %s", repo, filepath.Dir(p), peft.ConfigFile, want)
	}
	return nil
}
