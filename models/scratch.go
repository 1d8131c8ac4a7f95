package models

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/gotpu/gotpu/models/gemma3"
	"github.com/gotpu/gotpu/models/gpt2"
	"github.com/gotpu/gotpu/models/internal/core"
	"github.com/gotpu/gotpu/models/llama"
	"github.com/gotpu/gotpu/models/qwen3"
)

// ScratchError is ScratchConfig's error about one of its inputs: Field is "model_type" or
// "config_overrides" (run_clm.py's argument names), Msg says what is wrong with it. An unknown
// model_type wraps ErrUnsupported.
type ScratchError struct {
	Field, Msg string
	Err        error
}

func (e *ScratchError) Error() string { return e.Field + ": " + e.Msg }

func (e *ScratchError) Unwrap() error { return e.Err }

// ScratchTypes are the model_type values ScratchConfig builds: the causal LMs gotpu trains
// (run_clm.py's AutoModelForCausalLM.from_config). bert is not one: its causal class
// (BertLMHeadModel) is not implemented, and gemma3's multimodal config has a vision tower.
var scratchTypes = []string{gpt2.ModelType, llama.TypeLlama, llama.TypeMistral, llama.TypeQwen2, qwen3.ModelType, gemma3.TypeText}

// ScratchTypes lists the model_type values ScratchConfig accepts.
func ScratchTypes() []string { return append([]string(nil), scratchTypes...) }

// scratchLabel names the built config in parse errors (there is no file).
const scratchLabel = "the config of model_type with config_overrides"

// ScratchConfig is run_clm.py's CONFIG_MAPPING[model_type]() with --config_overrides
// ("n_embd=10,resid_pdrop=0.2") applied by PretrainedConfig.update_from_string's rules: each key
// must exist in the class defaults, and its value is converted to the type of the default (bool,
// int, float or string; lists, dicts and None cannot be overridden). The config is then parsed
// and checked as a config.json would be. Errors are *ScratchError.
func ScratchConfig(modelType, overrides string) (Config, error) {
	def, err := defaultConfig(modelType)
	if err != nil {
		return nil, err
	}
	raw, err := def.JSON()
	if err != nil {
		return nil, err
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, err
	}
	overridden := map[string]bool{}
	if strings.TrimSpace(overrides) != "" {
		if overridden, err = applyOverrides(obj, modelType, overrides); err != nil {
			return nil, err
		}
	}
	rederive(obj, modelType, overridden)
	out, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	rc, err := core.ParseRawConfig(scratchLabel, out)
	if err != nil {
		return nil, &ScratchError{Field: "config_overrides", Msg: err.Error(), Err: err}
	}
	cfg, err := parseTyped(scratchLabel, rc, modelType, "")
	if err != nil {
		return nil, &ScratchError{Field: "config_overrides", Msg: err.Error(), Err: err}
	}
	return cfg, nil
}

// defaultConfig is CONFIG_MAPPING[model_type](): the config class's defaults.
func defaultConfig(modelType string) (Config, error) {
	switch modelType {
	case gpt2.ModelType:
		return gpt2.DefaultConfig(), nil
	case llama.TypeLlama, llama.TypeMistral, llama.TypeQwen2:
		return llama.DefaultConfig(modelType), nil
	case qwen3.ModelType:
		return qwen3.DefaultConfig(), nil
	case gemma3.TypeText:
		return gemma3.DefaultConfig(), nil
	case "":
		return nil, &ScratchError{Field: "model_type", Msg: fmt.Sprintf("required to build a config from scratch (one of %s)", strings.Join(scratchTypes, ", ")),
			Err: ErrUnsupported}
	}
	return nil, &ScratchError{Field: "model_type",
		Msg: fmt.Sprintf("%q: gotpu builds %s from scratch (AutoModelForCausalLM.from_config)", modelType, strings.Join(scratchTypes, ", ")),
		Err: ErrUnsupported}
}

// applyOverrides applies update_from_string's "k=v,k2=v2" to obj, the default config's fields,
// and returns the keys it set.
func applyOverrides(obj map[string]json.RawMessage, modelType, overrides string) (map[string]bool, error) {
	overridden := map[string]bool{}
	for _, kv := range strings.Split(overrides, ",") {
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, &ScratchError{Field: "config_overrides", Msg: fmt.Sprintf("%q is not key=value", kv)}
		}
		old, ok := obj[k]
		if !ok {
			return nil, &ScratchError{Field: "config_overrides", Msg: fmt.Sprintf("key %s isn't in the original config dict of %s", k, modelType)}
		}
		nv, err := convertOverride(old, v)
		if err != nil {
			return nil, &ScratchError{Field: "config_overrides", Msg: fmt.Sprintf("%s=%s: %v", k, v, err), Err: err}
		}
		obj[k] = nv
		overridden[k] = true
	}
	return overridden, nil
}

// rederive drops the fields a config class derives from others in its constructor, unless they
// were overridden themselves, so that parsing derives them from the final values — as
// constructing the config with those values would. HF's update_from_string runs after the
// constructor and keeps them stale, which gives a broken or unintended model:
//   - layer_types (Qwen3, Gemma 3) follows num_hidden_layers; a stale list is indexed past its end
//     or only partly used;
//   - Llama's, Mistral's and Qwen2's head_dim is hidden_size/num_attention_heads (a stale 128
//     after "hidden_size=64,num_attention_heads=4" would make 4x-wide attention projections);
//   - Llama's and Qwen2's num_key_value_heads is num_attention_heads (a stale 32 with 4 heads
//     leaves no whole number of query heads per key/value head). Mistral's is a fixed default, 8.
//
// Qwen3's and Gemma 3's head_dim and num_key_value_heads are fixed class defaults and are kept.
func rederive(obj map[string]json.RawMessage, modelType string, overridden map[string]bool) {
	if overridden["num_hidden_layers"] && !overridden["layer_types"] {
		delete(obj, "layer_types")
	}
	switch modelType {
	case llama.TypeLlama, llama.TypeMistral, llama.TypeQwen2:
		if !overridden["head_dim"] {
			delete(obj, "head_dim")
		}
		if modelType != llama.TypeMistral && !overridden["num_key_value_heads"] {
			delete(obj, "num_key_value_heads")
		}
	}
}

// errOverrideType is update_from_string's refusal of a value that is not a scalar.
var errOverrideType = errors.New("only int, float, bool or string values of the config can be updated")

// convertOverride converts v to the JSON type of old, as update_from_string does.
func convertOverride(old json.RawMessage, v string) (json.RawMessage, error) {
	o := strings.TrimSpace(string(old))
	switch {
	case o == "true" || o == "false":
		switch strings.ToLower(v) {
		case "true", "1", "y", "yes":
			return json.RawMessage("true"), nil
		case "false", "0", "n", "no":
			return json.RawMessage("false"), nil
		}
		return nil, fmt.Errorf("can't derive true or false from %q", v)
	case strings.HasPrefix(o, `"`):
		return json.Marshal(v)
	case o == "null" || strings.HasPrefix(o, "[") || strings.HasPrefix(o, "{"):
		return nil, errOverrideType
	case strings.ContainsAny(o, ".eE"):
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return nil, fmt.Errorf("not a float")
		}
		return json.Marshal(f)
	default:
		i, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("not an int")
		}
		return json.Marshal(i)
	}
}
