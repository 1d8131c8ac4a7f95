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
	return selectTargets(layerSpace{arch: base.Architecture(), modelType: modelType(base), layers: base.LinearLayers(), params: base.Params,
		one: "linear layer", many: "linear layers"}, cfg)
}

// layerSpace is what target selection looks at: a built model's linear layers (Targets), or a
// config's weight matrices (MaxElements), and the parameters that name its other modules.
type layerSpace struct {
	arch, modelType string
	layers          []models.LinearLayer
	params          func() []models.Param // called only to explain an error
	one, many       string                // what errors call the layers
}

// selectTargets is Targets on space.
func selectTargets(space layerSpace, cfg LoraConfig) ([]models.LinearLayer, error) {
	layers := space.layers
	names := make([]string, len(layers))
	for i, l := range layers {
		names[i] = l.Module
	}
	// The expressions come from adapter_config.json, a file anyone may publish: they are compiled
	// as Validate compiles them, and a bad one is an error, never a panic.
	allLinear := cfg.TargetsAllLinear()
	var tre, xre *regexp.Regexp
	var err error
	if cfg.TargetModulesRegex != "" && !allLinear {
		if tre, err = compileFullmatch("target_modules", cfg.TargetModulesRegex); err != nil {
			return nil, err
		}
	}
	if cfg.ExcludeModulesRegex != "" {
		if xre, err = compileFullmatch("exclude_modules", cfg.ExcludeModulesRegex); err != nil {
			return nil, err
		}
	}
	list := cfg.TargetModules
	if err := allLinearInList(list); err != nil {
		return nil, err
	}
	if !allLinear && tre == nil && len(list) == 0 {
		mt := space.modelType
		def, ok := DefaultTargets[mt]
		if !ok {
			return nil, fmt.Errorf("LoraConfig.target_modules: not set, and PEFT has no default for model_type %q: name the modules", mt)
		}
		list = def
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
			if matchesAny(space.params(), t) {
				return nil, fmt.Errorf("LoraConfig.target_modules: %q is not a linear layer of %s; LoRA adapts linear layers only (%s)", t, space.arch, suffixSummary(names))
			}
			if !hitByExclusion(layers, t, excluded) {
				return nil, fmt.Errorf("LoraConfig.target_modules: %q matches no module of %s (its %s end in %s)", t, space.arch, space.many, suffixSummary(names))
			}
		}
	}
	if len(out) == 0 {
		what := fmt.Sprintf("%q", cfg.TargetModules)
		if cfg.TargetModulesRegex != "" {
			what = shortExpr(cfg.TargetModulesRegex)
		}
		return nil, fmt.Errorf("LoraConfig.target_modules: %s selects no %s of %s (its %s end in %s)", what, space.one, space.arch, space.many, suffixSummary(names))
	}
	return out, nil
}

// SavedTargets is target_modules as PEFT writes it after matching: the architecture's default
// when none was given, "all-linear" expanded to the module names, or to their shortest
// distinguishing suffixes when there are 20 or more; a list as given. For a regular expression
// it is nil: the expression itself is saved.
func SavedTargets(base models.Adaptable, cfg LoraConfig, targets []models.LinearLayer) []string {
	if len(cfg.TargetModules) == 0 && cfg.TargetModulesRegex == "" {
		// PEFT saves the architecture's default it used.
		return slices.Clone(DefaultTargets[modelType(base)])
	}
	if !cfg.TargetsAllLinear() {
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
func matchesAny(params []models.Param, t string) bool {
	for _, p := range params {
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
