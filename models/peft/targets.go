package peft

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/gotpu/gotpu/models"
)

// DefaultTargets are PEFT's target modules when a config names none
// (TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING, peft/utils/constants.py), by model_type.
var DefaultTargets = map[string][]string{
	"gpt2":        {"c_attn"},
	"llama":       {"q_proj", "v_proj"},
	"mistral":     {"q_proj", "v_proj"},
	"qwen2":       {"q_proj", "v_proj"},
	"qwen3":       {"q_proj", "v_proj"},
	"gemma3_text": {"q_proj", "v_proj"},
	"bert":        {"query", "value"},
}

// minimalTargetsAbove is the number of expanded "all-linear" names from which PEFT saves the
// shortest distinguishing suffixes instead of the full names (MIN_TARGET_MODULES_FOR_OPTIMIZATION).
const minimalTargetsAbove = 20

// classifierHeads are the heads PEFT leaves out of "all-linear" for sequence classification
// (SEQ_CLS_HEAD_NAMES).
var classifierHeads = []string{"classifier", "score"}

// matches is PEFT's check_target_module_exists for a list: an entry must equal the name or a
// dot-separated suffix of it.
func matches(name string, list []string) bool {
	for _, t := range list {
		if name == t || strings.HasSuffix(name, "."+t) {
			return true
		}
	}
	return false
}

// Targets resolves cfg's target_modules (and exclude_modules) to base's linear layers, in
// state-dict order. Entries that match no linear layer are errors naming them: a typo must not
// silently train fewer layers than asked.
func Targets(base models.Adaptable, cfg LoraConfig) ([]models.LinearLayer, error) {
	layers := base.LinearLayers()
	names := make([]string, len(layers))
	for i, l := range layers {
		names[i] = l.Module
	}
	var tre, xre *regexp.Regexp
	if cfg.TargetModulesRegex != "" {
		tre = regexp.MustCompile(`^(?:` + cfg.TargetModulesRegex + `)$`)
	}
	if cfg.ExcludeModulesRegex != "" {
		xre = regexp.MustCompile(`^(?:` + cfg.ExcludeModulesRegex + `)$`)
	}
	list := cfg.TargetModules
	allLinear := len(list) == 1 && strings.EqualFold(list[0], AllLinear)
	if tre == nil && len(list) == 0 {
		mt := modelType(base)
		def, ok := DefaultTargets[mt]
		if !ok {
			return nil, fmt.Errorf("LoraConfig.target_modules: not set, and PEFT has no default for model_type %q: name the modules", mt)
		}
		list = def
	}
	if !allLinear {
		for _, t := range list {
			if strings.EqualFold(t, AllLinear) {
				return nil, fmt.Errorf("LoraConfig.target_modules: %q must be the only entry", AllLinear)
			}
		}
	}
	excluded := func(name string) bool {
		if xre != nil {
			return xre.MatchString(name)
		}
		return matches(name, cfg.ExcludeModules)
	}
	var out []models.LinearLayer
	used := map[string]bool{}
	for _, l := range layers {
		if excluded(l.Module) {
			continue
		}
		switch {
		case allLinear:
			if isClassifierHead(l.Module, cfg.TaskType) {
				continue
			}
		case tre != nil:
			if !tre.MatchString(l.Module) {
				continue
			}
		default:
			hit := false
			for _, t := range list {
				if l.Module == t || strings.HasSuffix(l.Module, "."+t) {
					used[t], hit = true, true
				}
			}
			if !hit {
				continue
			}
		}
		out = append(out, l)
	}
	if !allLinear && tre == nil {
		for _, t := range list {
			if used[t] {
				continue
			}
			if matchesAny(base, t) {
				return nil, fmt.Errorf("LoraConfig.target_modules: %q is not a linear layer of %s; LoRA adapts linear layers only (%s)", t, base.Architecture(), suffixSummary(names))
			}
			if !hitByExclusion(layers, t, excluded) {
				return nil, fmt.Errorf("LoraConfig.target_modules: %q matches no module of %s (its linear layers end in %s)", t, base.Architecture(), suffixSummary(names))
			}
		}
	}
	if len(out) == 0 {
		what := fmt.Sprintf("%q", cfg.TargetModules)
		if tre != nil {
			what = fmt.Sprintf("%q", cfg.TargetModulesRegex)
		}
		return nil, fmt.Errorf("LoraConfig.target_modules: %s selects no linear layer of %s (its linear layers end in %s)", what, base.Architecture(), suffixSummary(names))
	}
	return out, nil
}

// SavedTargets is target_modules as PEFT writes it after matching: the architecture's default
// when none was given, "all-linear" expanded to the module names, or to their shortest
// distinguishing suffixes when there are 20 or more; other values as given.
func SavedTargets(base models.Adaptable, cfg LoraConfig, targets []models.LinearLayer) []string {
	if len(cfg.TargetModules) == 0 && cfg.TargetModulesRegex == "" {
		// PEFT saves the architecture's default it used.
		return slices.Clone(DefaultTargets[modelType(base)])
	}
	if !(len(cfg.TargetModules) == 1 && strings.EqualFold(cfg.TargetModules[0], AllLinear)) {
		return cfg.TargetModules
	}
	names := make([]string, len(targets))
	for i, t := range targets {
		names[i] = t.Module
	}
	if len(names) < minimalTargetsAbove {
		return names
	}
	chosen := map[string]bool{}
	others := otherModules(base, names)
	for _, n := range names {
		parts := strings.Split(n, ".")
		for k := len(parts) - 1; k >= 0; k-- {
			suf := strings.Join(parts[k:], ".")
			clash := false
			for _, o := range others {
				if o == suf || strings.HasSuffix(o, "."+suf) {
					clash = true
					break
				}
			}
			if !clash {
				chosen[suf] = true
				break
			}
		}
	}
	out := make([]string, 0, len(chosen))
	for s := range chosen {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// otherModules are the modules holding parameters that are not among names: what a saved suffix
// must not match.
func otherModules(base models.Adaptable, names []string) []string {
	in := map[string]bool{}
	for _, n := range names {
		in[n] = true
	}
	var out []string
	seen := map[string]bool{}
	for _, p := range base.Params() {
		i := strings.LastIndexByte(p.Name, '.')
		if i < 0 {
			continue
		}
		mod := p.Name[:i]
		if !in[mod] && !seen[mod] {
			seen[mod] = true
			out = append(out, mod)
		}
	}
	return out
}

func isClassifierHead(module, task string) bool {
	return task == "SEQ_CLS" && slices.Contains(classifierHeads, module)
}

// matchesAny reports whether t names (a suffix of) any module holding parameters.
func matchesAny(base models.Adaptable, t string) bool {
	for _, p := range base.Params() {
		i := strings.LastIndexByte(p.Name, '.')
		if i < 0 {
			continue
		}
		mod := p.Name[:i]
		if mod == t || strings.HasSuffix(mod, "."+t) {
			return true
		}
	}
	return false
}

func hitByExclusion(layers []models.LinearLayer, t string, excluded func(string) bool) bool {
	for _, l := range layers {
		if (l.Module == t || strings.HasSuffix(l.Module, "."+t)) && excluded(l.Module) {
			return true
		}
	}
	return false
}

// suffixSummary lists the distinct last components of the linear layers' names.
func suffixSummary(names []string) string {
	var sufs []string
	for _, n := range names {
		s := n[strings.LastIndexByte(n, '.')+1:]
		if !slices.Contains(sufs, s) {
			sufs = append(sufs, s)
		}
	}
	return strings.Join(sufs, ", ")
}

func modelType(m models.Model) string {
	if c, ok := m.Config().(interface{ ModelType() string }); ok {
		return c.ModelType()
	}
	return ""
}
