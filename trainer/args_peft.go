package trainer

import (
	"fmt"
	"strings"

	"github.com/gotpu/gotpu/models/peft"
)

// TRL's ModelConfig defaults for the LoRA fields (trl/trainer/model_config.py).
const (
	defaultLoraR       = 16
	defaultLoraAlpha   = 32
	defaultLoraDropout = 0.05
)

// PeftConfig is the LoRA config the PEFT fields ask for, as TRL's get_peft_config builds it
// (bias "none", task_type lora_task_type), and whether they ask for one (use_peft). Unset fields
// take TRL's defaults. lora_target_modules entries may be comma-separated ("q_proj,v_proj").
// An adapter_name_or_path is not read here: its own config wins (AdapterConflicts).
func (m ModelDataArguments) PeftConfig() (cfg peft.LoraConfig, use bool, err error) {
	use = m.UsePeft != nil && *m.UsePeft
	cfg = peft.DefaultLoraConfig()
	cfg.R, cfg.LoraAlpha, cfg.LoraDropout = defaultLoraR, defaultLoraAlpha, defaultLoraDropout
	if m.LoraR != nil {
		cfg.R = *m.LoraR
	}
	if m.LoraAlpha != nil {
		cfg.LoraAlpha = *m.LoraAlpha
	}
	if m.LoraDropout != nil {
		cfg.LoraDropout = *m.LoraDropout
	}
	var targets []string
	for _, t := range m.LoraTargetModules {
		for _, e := range strings.Split(t, ",") {
			if e = strings.TrimSpace(e); e != "" {
				targets = append(targets, e)
			}
		}
	}
	if len(m.LoraTargetModules) > 0 && len(targets) == 0 {
		return cfg, use, fmt.Errorf("--lora_target_modules: no module named")
	}
	// TRL hands a lone "all-linear" to PEFT as the string PEFT expands (peft.CommandLineTargets).
	cfg.TargetModules, cfg.TargetModulesRegex = peft.CommandLineTargets(targets)
	cfg.ModulesToSave = m.LoraModulesToSave
	if m.LoraTaskType != nil {
		cfg.TaskType = *m.LoraTaskType
	}
	if m.UseRSLoRA != nil {
		cfg.UseRSLoRA = *m.UseRSLoRA
	}
	if m.UseDoRA != nil {
		cfg.UseDoRA = *m.UseDoRA
	}
	if !use {
		if set := m.loraFlagsSet(); len(set) > 0 && m.AdapterNameOrPath == nil {
			return cfg, false, fmt.Errorf("--%s: set without --use_peft", set[0])
		}
		return cfg, false, nil
	}
	if err := cfg.Validate(); err != nil {
		return cfg, use, fmt.Errorf("--%s", strings.TrimPrefix(flagOf(err.Error()), "LoraConfig."))
	}
	return cfg, true, nil
}

// flagOf turns "LoraConfig.r: 0 must be positive" into "lora_r: 0 must be positive": the flag the
// user set.
func flagOf(msg string) string {
	field, rest, ok := strings.Cut(strings.TrimPrefix(msg, "LoraConfig."), ":")
	if !ok {
		return msg
	}
	names := map[string]string{"r": "lora_r", "lora_alpha": "lora_alpha", "lora_dropout": "lora_dropout",
		"target_modules": "lora_target_modules", "modules_to_save": "lora_modules_to_save", "use_dora": "use_dora"}
	if f, ok := names[field]; ok {
		field = f
	}
	return field + ":" + rest
}

// loraFlagsSet lists the LoRA fields that were given.
func (m ModelDataArguments) loraFlagsSet() []string {
	var set []string
	for _, f := range []struct {
		name string
		on   bool
	}{
		{"lora_r", m.LoraR != nil}, {"lora_alpha", m.LoraAlpha != nil}, {"lora_dropout", m.LoraDropout != nil},
		{"lora_target_modules", len(m.LoraTargetModules) > 0}, {"lora_modules_to_save", len(m.LoraModulesToSave) > 0},
		{"lora_task_type", m.LoraTaskType != nil}, {"use_rslora", m.UseRSLoRA != nil}, {"use_dora", m.UseDoRA != nil},
	} {
		if f.on {
			set = append(set, f.name)
		}
	}
	return set
}

// AdapterConflicts checks the LoRA fields given against a loaded adapter's config, which wins:
// a field set to another value than the adapter's is an error naming it, rather than a run that
// silently trains something else than asked.
func (m ModelDataArguments) AdapterConflicts(ad peft.LoraConfig, adapterDir string) error {
	bad := func(flag string, given, has any) error {
		return fmt.Errorf("--%s %v: the adapter in %s has %v (its adapter_config.json decides; drop the flag)", flag, given, adapterDir, has)
	}
	if m.LoraR != nil && *m.LoraR != ad.R {
		return bad("lora_r", *m.LoraR, ad.R)
	}
	if m.LoraAlpha != nil && *m.LoraAlpha != ad.LoraAlpha {
		return bad("lora_alpha", *m.LoraAlpha, ad.LoraAlpha)
	}
	if m.LoraDropout != nil && *m.LoraDropout != ad.LoraDropout {
		return bad("lora_dropout", *m.LoraDropout, ad.LoraDropout)
	}
	if m.UseRSLoRA != nil && *m.UseRSLoRA != ad.UseRSLoRA {
		return bad("use_rslora", *m.UseRSLoRA, ad.UseRSLoRA)
	}
	if len(m.LoraTargetModules) > 0 {
		cfg, _, err := m.PeftConfig()
		if err != nil {
			return err
		}
		sameString := cfg.TargetModulesRegex == ad.TargetModulesRegex || cfg.TargetsAllLinear() && ad.TargetsAllLinear()
		if !sameSet(cfg.TargetModules, ad.TargetModules) || !sameString {
			return bad("lora_target_modules", targetsFlag(cfg), targetsFlag(ad))
		}
	}
	return nil
}

func sameSet(a, b []string) bool {
	in := map[string]bool{}
	for _, x := range a {
		in[x] = true
	}
	for _, x := range b {
		if !in[x] {
			return false
		}
	}
	return len(in) == len(dedup(b))
}

func dedup(xs []string) map[string]bool {
	m := map[string]bool{}
	for _, x := range xs {
		m[x] = true
	}
	return m
}

// targetsFlag is a config's target_modules as --lora_target_modules spells it: the string form
// ("all-linear", an expression) or the names, comma-separated.
func targetsFlag(c peft.LoraConfig) string {
	if c.TargetModulesRegex != "" {
		return c.TargetModulesRegex
	}
	return strings.Join(c.TargetModules, ",")
}
