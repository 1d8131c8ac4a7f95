package peft

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/gotpu/gotpu/models/internal/core"
)

// File names of a PEFT adapter directory (peft/utils/constants.py).
const (
	ConfigFile  = "adapter_config.json"
	WeightsFile = "adapter_model.safetensors"
	// PickleWeightsFile is the torch.save form, refused (it needs Python's unpickler).
	PickleWeightsFile = "adapter_model.bin"
)

// PeftVersion is written as adapter_config.json's peft_version for a new adapter: the PEFT release
// whose LoRA semantics gotpu follows (read at peft commit 5d602fd, 0.20.1.dev0). A loaded adapter
// keeps the version it was written with.
const PeftVersion = "0.20.0"

// AllLinear is target_modules' shorthand for every linear layer but the output head. PEFT
// (tuners_utils.py, _maybe_include_all_linear_layers) expands it only when target_modules is a
// string equal to it in any case (str.lower()); in a list it is the name of a module.
const AllLinear = "all-linear"

// Limits on an adapter's config, far above published adapters: they bound what a config can make
// gotpu allocate before any tensor is read.
const (
	MaxRank          = 1 << 16
	MaxConfigBytes   = 1 << 20
	MaxTargetEntries = 4096
	// MaxRegexBytes and MaxRegexProgram bound a target_modules or exclude_modules expression: its
	// length, and the size of its compiled program in RE2 instructions (a counted repetition
	// multiplies it: 360 bytes of "(?:.?){1000}" compile to 60,000 and took 30 ms per module name
	// to match). PEFT's are tens to a few hundred of each.
	MaxRegexBytes   = 1 << 14
	MaxRegexProgram = 1 << 12
)

// LoraConfig is PEFT's LoraConfig with its field names (adapter_config.json keys) and defaults
// (DefaultLoraConfig). The fields modelled are the ones gotpu implements; a config that sets any
// other field to a non-default value is refused by Validate rather than silently ignored. Fields
// read from a file that gotpu does not model are kept (Extra) and written back unchanged.
type LoraConfig struct {
	PeftType string // peft_type: must be "LORA"
	// TaskType is task_type: "CAUSAL_LM", "SEQ_CLS", ... (recorded; PEFT's SEQ_CLS also trains the
	// classifier head through modules_to_save, which is refused).
	TaskType            string
	BaseModelNameOrPath string  // base_model_name_or_path
	InferenceMode       bool    // inference_mode (always written true, as save_pretrained does)
	R                   int     // r: the rank
	LoraAlpha           float64 // lora_alpha
	LoraDropout         float64 // lora_dropout: on the branch's input, in training only
	// TargetModules is a target_modules list: a module matches an entry equal to its name or to a
	// dot-separated suffix of it. TargetModulesRegex is a target_modules string: "all-linear" in
	// any case (AllLinear: every linear layer but the output head), else an expression a module
	// matches if it matches its whole name (Python's re.fullmatch). Both empty: the
	// architecture's default targets. A list holding "all-linear" is refused (Validate): PEFT
	// reads it as a module's name, matches nothing and fails, and gotpu must not silently read it
	// otherwise.
	TargetModules      []string
	TargetModulesRegex string
	// ExcludeModules / ExcludeModulesRegex: exclude_modules, matched the same way.
	ExcludeModules      []string
	ExcludeModulesRegex string
	// FanInFanOut is fan_in_fan_out: the base weight is stored [in, out] (GPT-2's Conv1D). It is
	// set from the targeted layers' kind, as PEFT forces it (with a warning).
	FanInFanOut bool
	Bias        string // bias: only "none"
	UseRSLoRA   bool   // use_rslora: scaling lora_alpha / sqrt(r) instead of lora_alpha / r
	// InitLoraWeights is init_lora_weights: true (A Kaiming-uniform, B zero: the adapter starts as
	// a no-op), false (both Kaiming-uniform) or "gaussian" (A ~ N(0, 1/r), B zero).
	InitLoraWeights any
	// Fields refused when set (Validate): modules_to_save, use_dora, lora_bias,
	// layers_to_transform, rank_pattern, alpha_pattern.
	ModulesToSave     []string
	UseDoRA           bool
	LoraBias          bool
	LayersToTransform any
	RankPattern       map[string]any
	AlphaPattern      map[string]any
	// PeftVersionWritten is the peft_version read ("" for a new adapter: PeftVersion is written).
	PeftVersionWritten string
	// RevisionOfBase is revision: the base model's revision, when recorded.
	RevisionOfBase *string
	// Extra are keys read that gotpu does not model, written back as read.
	Extra map[string]json.RawMessage
}

// DefaultLoraConfig is LoraConfig() in PEFT: r 8, lora_alpha 8, dropout 0, no targets (the
// architecture's default), bias "none", B initialised to zero.
func DefaultLoraConfig() LoraConfig {
	return LoraConfig{PeftType: "LORA", TaskType: "CAUSAL_LM", R: 8, LoraAlpha: 8, Bias: "none", InitLoraWeights: true}
}

// Scaling is the factor of the adapter's branch: lora_alpha / r, or lora_alpha / sqrt(r) with
// use_rslora (PEFT's tuners/lora/layer.py update_layer).
func (c LoraConfig) Scaling() float64 {
	if c.UseRSLoRA {
		return c.LoraAlpha / math.Sqrt(float64(c.R))
	}
	return c.LoraAlpha / float64(c.R)
}

// TargetsAllLinear reports whether target_modules is PEFT's "all-linear" shorthand: the string
// form, compared case-insensitively as PEFT does (Unicode case folding, which for this word's
// letters is what Python's str.lower() comparison accepts).
func (c LoraConfig) TargetsAllLinear() bool {
	return strings.EqualFold(c.TargetModulesRegex, AllLinear)
}

// CommandLineTargets is target_modules from the module names a --lora_target_modules flag (or a
// job's lora_target_modules) lists: a single "all-linear" is the string form PEFT expands, as
// TRL's ModelConfig.__post_init__ hands a one-element list to PEFT as its element; any other
// names are a list. TRL unwraps every one-element list, so a lone name such as "c_attn" reaches
// PEFT as a regular expression that matches no module's full name and PEFT fails; gotpu keeps a
// lone name a list, the matching its user meant, rather than reproduce that failure.
func CommandLineTargets(names []string) (list []string, str string) {
	if len(names) == 1 && strings.EqualFold(names[0], AllLinear) {
		return nil, names[0]
	}
	return names, ""
}

// allLinearInList refuses "all-linear" as a list entry of target_modules, where PEFT reads it as
// a module's name: PEFT then finds no module ("Target modules {'all-linear'} not found in the
// base model") where a reader taking it for the shorthand would adapt every linear layer.
func allLinearInList(list []string) error {
	for _, t := range list {
		if strings.EqualFold(t, AllLinear) {
			return fmt.Errorf("LoraConfig.target_modules: %q as a list entry names a module called %q (PEFT expands the "+
				"shorthand only from a string, and fails on a list: no module has that name); write "+
				"\"target_modules\": %q for every linear layer", list, t, AllLinear)
		}
	}
	return nil
}

// Validate checks the config's values, naming the field in error.
func (c LoraConfig) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("LoraConfig.%s: %s", field, fmt.Sprintf(format, args...))
	}
	switch {
	case c.PeftType != "LORA":
		return bad("peft_type", "%q is not supported (only LORA adapters)", c.PeftType)
	case c.R <= 0:
		return bad("r", "%d must be positive", c.R)
	case c.R > MaxRank:
		return bad("r", "%d is above gotpu's limit %d", c.R, MaxRank)
	case math.IsNaN(c.LoraAlpha) || math.IsInf(c.LoraAlpha, 0):
		return bad("lora_alpha", "%v is not finite", c.LoraAlpha)
	case !(c.LoraDropout >= 0 && c.LoraDropout < 1):
		return bad("lora_dropout", "%v is not in [0, 1)", c.LoraDropout)
	case c.Bias != "none":
		return bad("bias", "%q is not supported (only \"none\": every bias stays frozen)", c.Bias)
	case c.UseDoRA:
		return bad("use_dora", "DoRA is not supported")
	case c.LoraBias:
		return bad("lora_bias", "a bias on lora_B is not supported")
	case len(c.ModulesToSave) > 0:
		return bad("modules_to_save", "%q: training whole modules beside the adapter is not supported", c.ModulesToSave)
	case c.LayersToTransform != nil:
		return bad("layers_to_transform", "is not supported")
	case len(c.RankPattern) > 0:
		return bad("rank_pattern", "per-module ranks are not supported")
	case len(c.AlphaPattern) > 0:
		return bad("alpha_pattern", "per-module alphas are not supported")
	case len(c.TargetModules) > MaxTargetEntries:
		return bad("target_modules", "%d entries, above the limit %d", len(c.TargetModules), MaxTargetEntries)
	}
	switch v := c.InitLoraWeights.(type) {
	case bool:
	case string:
		if v != "gaussian" {
			return bad("init_lora_weights", "%q is not supported (true, false or \"gaussian\")", v)
		}
	default:
		return bad("init_lora_weights", "%v is not supported (true, false or \"gaussian\")", v)
	}
	if c.TargetModulesRegex != "" && !c.TargetsAllLinear() {
		if _, err := compileFullmatch("target_modules", c.TargetModulesRegex); err != nil {
			return err
		}
	}
	if err := allLinearInList(c.TargetModules); err != nil {
		return err
	}
	if c.ExcludeModulesRegex != "" {
		if _, err := compileFullmatch("exclude_modules", c.ExcludeModulesRegex); err != nil {
			return err
		}
	}
	for _, t := range c.TargetModules {
		if t == "" {
			return bad("target_modules", "an entry is empty")
		}
	}
	return nil
}

// knownDefaults are the adapter_config.json keys PEFT writes for a LoRA config that gotpu does not
// model, with PEFT's defaults (peft 5d602fd: PeftConfigMixin, PeftConfig and LoraConfig fields,
// less runtime_config). A value other than the default is refused where it changes the adapter's
// math (refusedIfSet), and kept otherwise.
var knownDefaults = map[string]string{
	"alora_invocation_tokens": "null",
	"arrow_config":            "null",
	"auto_mapping":            "null",
	"corda_config":            "null",
	"ensure_weight_tying":     "false",
	"eva_config":              "null",
	"kasa_config":             "null",
	"layer_replication":       "null",
	"layers_pattern":          "null",
	"loftq_config":            "{}",
	"lora_ga_config":          "null",
	"megatron_config":         "null",
	"megatron_core":           `"megatron.core"`,
	"monteclora_config":       "null",
	"qalora_group_size":       "16",
	"revision":                "null",
	"target_parameters":       "null",
	"trainable_token_indices": "null",
	"use_bdlora":              "null",
	"use_qalora":              "false",
	"velora_config":           "null",
}

// refusedIfSet are unmodelled keys whose non-default value changes what the adapter computes or
// trains; anything else (bookkeeping such as revision or auto_mapping) is kept as is.
var refusedIfSet = map[string]string{
	"alora_invocation_tokens": "activated LoRA",
	"arrow_config":            "Arrow routing",
	"kasa_config":             "KaSA",
	"layer_replication":       "layer replication",
	"target_parameters":       "LoRA on parameters (not modules)",
	"trainable_token_indices": "trainable tokens",
	"use_bdlora":              "block-diagonal LoRA",
	"use_qalora":              "QA-LoRA",
	"velora_config":           "VeLoRA",
	"monteclora_config":       "MonteCLoRA",
}

// ParseConfig reads adapter_config.json. Missing keys take PEFT's defaults (older PEFT versions
// write fewer keys); unknown keys are kept and written back. Errors name the file and key.
func ParseConfig(data []byte, path string) (LoraConfig, error) {
	if len(data) > MaxConfigBytes {
		return LoraConfig{}, fmt.Errorf("%s: %d bytes, above the %d-byte limit for an adapter config", path, len(data), MaxConfigBytes)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return LoraConfig{}, fmt.Errorf("%s: %w", path, err)
	}
	if raw == nil {
		return LoraConfig{}, fmt.Errorf("%s: not a JSON object", path)
	}
	c := DefaultLoraConfig()
	c.PeftType = ""
	c.TaskType = ""
	c.Extra = map[string]json.RawMessage{}
	field := func(key string, dst any) error {
		v, ok := raw[key]
		if !ok {
			return nil
		}
		delete(raw, key)
		if string(v) == "null" {
			return nil
		}
		if err := json.Unmarshal(v, dst); err != nil {
			return fmt.Errorf("%s: %s: %s", path, key, strings.TrimPrefix(err.Error(), "json: "))
		}
		return nil
	}
	var alpha float64
	alphaSet := false
	var targets, exclude any
	var peftType, taskType, base, bias, version *string
	var rev *string
	for _, f := range []struct {
		key string
		dst any
	}{
		{"peft_type", &peftType}, {"task_type", &taskType}, {"base_model_name_or_path", &base},
		{"inference_mode", &c.InferenceMode}, {"r", &c.R}, {"lora_dropout", &c.LoraDropout},
		{"target_modules", &targets}, {"exclude_modules", &exclude}, {"fan_in_fan_out", &c.FanInFanOut},
		{"bias", &bias}, {"use_rslora", &c.UseRSLoRA}, {"init_lora_weights", &c.InitLoraWeights},
		{"modules_to_save", &c.ModulesToSave}, {"use_dora", &c.UseDoRA}, {"lora_bias", &c.LoraBias},
		{"layers_to_transform", &c.LayersToTransform}, {"rank_pattern", &c.RankPattern},
		{"alpha_pattern", &c.AlphaPattern}, {"peft_version", &version}, {"revision", &rev},
	} {
		if err := field(f.key, f.dst); err != nil {
			return LoraConfig{}, err
		}
	}
	if v, ok := raw["lora_alpha"]; ok {
		delete(raw, "lora_alpha")
		if err := json.Unmarshal(v, &alpha); err != nil {
			return LoraConfig{}, fmt.Errorf("%s: lora_alpha: %s", path, strings.TrimPrefix(err.Error(), "json: "))
		}
		alphaSet = true
	}
	if alphaSet {
		c.LoraAlpha = alpha
	}
	if peftType != nil {
		c.PeftType = *peftType
	}
	if c.PeftType == "" {
		return LoraConfig{}, fmt.Errorf("%s: peft_type: missing (want \"LORA\")", path)
	}
	if taskType != nil {
		c.TaskType = *taskType
	}
	if base != nil {
		c.BaseModelNameOrPath = *base
	}
	if bias != nil {
		c.Bias = *bias
	}
	if version != nil {
		c.PeftVersionWritten = *version
	}
	c.RevisionOfBase = rev
	var err error
	if c.TargetModules, c.TargetModulesRegex, err = listOrRegex(targets); err != nil {
		return LoraConfig{}, fmt.Errorf("%s: target_modules: %w", path, err)
	}
	if c.ExcludeModules, c.ExcludeModulesRegex, err = listOrRegex(exclude); err != nil {
		return LoraConfig{}, fmt.Errorf("%s: exclude_modules: %w", path, err)
	}
	if b, ok := c.InitLoraWeights.(float64); ok { // JSON numbers are not PEFT values either
		return LoraConfig{}, fmt.Errorf("%s: init_lora_weights: %v is not true, false or \"gaussian\"", path, b)
	}
	for key, v := range raw {
		if what, ok := refusedIfSet[key]; ok {
			if def := knownDefaults[key]; !jsonEqual(v, []byte(def)) {
				return LoraConfig{}, fmt.Errorf("%s: %s: %s is not supported (%s)", path, key, string(v), what)
			}
		}
		c.Extra[key] = v
	}
	if err := c.Validate(); err != nil {
		return LoraConfig{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// ReadConfig reads an adapter_config.json file.
func ReadConfig(path string) (LoraConfig, error) {
	f, err := os.Open(path)
	if err != nil {
		return LoraConfig{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return LoraConfig{}, err
	}
	if st.Size() > MaxConfigBytes {
		return LoraConfig{}, fmt.Errorf("%s: %d bytes, above the %d-byte limit for an adapter config", path, st.Size(), MaxConfigBytes)
	}
	data := make([]byte, st.Size())
	if _, err := f.ReadAt(data, 0); err != nil && st.Size() > 0 {
		return LoraConfig{}, fmt.Errorf("%s: %w", path, err)
	}
	return ParseConfig(data, path)
}

func listOrRegex(v any) ([]string, string, error) {
	switch t := v.(type) {
	case nil:
		return nil, "", nil
	case string:
		return nil, t, nil
	case []any:
		out := make([]string, 0, len(t))
		for _, e := range t {
			s, ok := e.(string)
			if !ok {
				return nil, "", fmt.Errorf("entry %v is not a string", e)
			}
			out = append(out, s)
		}
		return out, "", nil
	}
	return nil, "", fmt.Errorf("%v is neither a list of names nor a regular expression", v)
}

// listOrRegexJSON is a target_modules-like value as PEFT writes it: the expression string, a
// sorted set of names, or null.
func listOrRegexJSON(list []string, re string) any {
	switch {
	case re != "":
		return re
	case list != nil:
		t := slices.Clone(list)
		sort.Strings(t)
		return slices.Compact(t)
	}
	return nil
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// JSON writes adapter_config.json as PEFT's save_pretrained does: every key PEFT writes for a
// LoRA config, sorted, two-space indent, no trailing newline, inference_mode true, target_modules
// as a sorted list (PEFT writes a set's list; readers treat it as a set) or the regex string.
func (c LoraConfig) JSON() ([]byte, error) {
	out := map[string]any{}
	for k, v := range knownDefaults {
		out[k] = json.RawMessage(v)
	}
	for k, v := range c.Extra {
		out[k] = v
	}
	if c.RevisionOfBase != nil {
		out["revision"] = *c.RevisionOfBase
	}
	targets := listOrRegexJSON(c.TargetModules, c.TargetModulesRegex)
	exclude := listOrRegexJSON(c.ExcludeModules, c.ExcludeModulesRegex)
	version := c.PeftVersionWritten
	if version == "" {
		version = PeftVersion
	}
	var base any
	if c.BaseModelNameOrPath != "" {
		base = c.BaseModelNameOrPath
	}
	var task any
	if c.TaskType != "" {
		task = c.TaskType
	}
	var toSave any
	if c.ModulesToSave != nil {
		toSave = c.ModulesToSave
	}
	rp, ap := c.RankPattern, c.AlphaPattern
	if rp == nil {
		rp = map[string]any{}
	}
	if ap == nil {
		ap = map[string]any{}
	}
	for k, v := range map[string]any{
		"peft_type": c.PeftType, "task_type": task, "base_model_name_or_path": base,
		"inference_mode": true, "r": c.R, "lora_alpha": jsonNumber(c.LoraAlpha), "lora_dropout": json.RawMessage(core.FormatPyFloat(c.LoraDropout)),
		"target_modules": targets, "exclude_modules": exclude, "fan_in_fan_out": c.FanInFanOut,
		"bias": c.Bias, "use_rslora": c.UseRSLoRA, "init_lora_weights": c.InitLoraWeights,
		"modules_to_save": toSave, "use_dora": c.UseDoRA, "lora_bias": c.LoraBias,
		"layers_to_transform": c.LayersToTransform, "rank_pattern": rp, "alpha_pattern": ap,
		"peft_version": version,
	} {
		out[k] = v
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil { // map keys are sorted, as json.dumps(sort_keys=True)
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// jsonNumber writes an integral lora_alpha as an integer, as Python's json writes the int PEFT
// users pass (lora_alpha: int = 8), and anything else as a float.
func jsonNumber(f float64) any {
	if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return int64(f)
	}
	return json.RawMessage(core.FormatPyFloat(f))
}
