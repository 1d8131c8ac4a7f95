package trainer

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

// This file holds Hugging Face's fsdp and fsdp_config arguments: how they are read (JSON
// argument files, --fsdp and --fsdp_config flags, fsdp_config files), checked and written, and
// the sharding plan they ask for (FSDPPlan).
//
// HF's behaviour (transformers' TrainingArguments._process_fsdp_args, run in __post_init__):
//   - fsdp: False/None/"" → []; True → ["full_shard"]; a string is split on whitespace into
//     FSDPOption values; a list is kept as given. HF refuses "offload" alone and full_shard with
//     shard_grad_op.
//   - fsdp_config: None → {}; a string starting with "{" is a JSON object (from the command line:
//     string values are converted by _convert_str_dict); any other string is the path of a JSON
//     file, read then; a leading "fsdp_" is stripped from every key (the stripped key moves to the
//     end of the dict, as pop-and-set does in Python); min_num_params, xla, xla_fsdp_v2 and
//     xla_fsdp_grad_ckpt are filled in when missing (0, false, false, false); a string
//     transformer_layer_cls_to_wrap becomes a one-element list; min_num_params > 0 together with
//     transformer_layer_cls_to_wrap is an error when fsdp is on (a warning otherwise).
//   - to_dict()/to_json_string() write fsdp as the list and fsdp_config as that dict (a path is
//     not kept: the file's content is).
//
// gotpu implements full_shard and hybrid_shard as one XLA SPMD program over a data × fsdp device
// mesh (FSDPPlan). auto_wrap is accepted with them: FSDP's wrapping decides which parameters are
// gathered together in torch; in one compiled program the compiler schedules the gathers, so the
// wrap granularity does not change what is computed. min_num_params keeps tensors with fewer
// elements replicated (internal/shard: memory, not numbers); transformer_layer_cls_to_wrap is
// checked by the trainer against the model's layer class.

// FSDP options (HF's trainer_utils.FSDPOption values).
const (
	FSDPFullShard        = "full_shard"
	FSDPShardGradOp      = "shard_grad_op"
	FSDPNoShard          = "no_shard"
	FSDPHybridShard      = "hybrid_shard"
	FSDPHybridShardZero2 = "hybrid_shard_zero2"
	FSDPOffload          = "offload"
	FSDPAutoWrap         = "auto_wrap"
)

// fsdpSupported are the fsdp options gotpu implements; fsdpUnsupported are HF's others, each with
// what to do instead.
var (
	fsdpSupported   = []string{FSDPFullShard, FSDPHybridShard, FSDPAutoWrap}
	fsdpUnsupported = map[string]string{
		FSDPShardGradOp:      "ZeRO-2: use full_shard (the same numbers, less memory)",
		FSDPHybridShardZero2: "use hybrid_shard",
		FSDPNoShard:          "plain data parallelism: leave fsdp empty",
		FSDPOffload:          "gotpu keeps parameters and optimizer state in device memory",
	}
)

// maxFSDPConfigFile bounds an fsdp_config file (HF's are a few hundred bytes).
const maxFSDPConfigFile = 1 << 20

// FSDPConfig is HF's fsdp_config dict as TrainingArguments.__post_init__ leaves it: keys without
// the "fsdp_" prefix, defaults filled in. It is written back (ToJSON) as that dict.
//
// Keys gotpu reads:
//   - min_num_params (default 0): FSDP's size-based auto-wrap threshold; in gotpu, tensors with
//     fewer elements stay replicated on every device (FSDPPlan, internal/shard).
//   - transformer_layer_cls_to_wrap (a string or a list): the layer classes FSDP wraps; the
//     trainer checks that the model has one of them. HF: mutually exclusive with min_num_params > 0.
//   - xla, xla_fsdp_v2 (default false): HF's torch_xla switches. gotpu runs one SPMD program, which
//     is what xla_fsdp_v2 selects; xla true with xla_fsdp_v2 false (torch_xla's FSDPv1 wrapper) is
//     refused. Without xla, HF ignores xla_fsdp_v2 and runs torch FSDP, which shards the same way.
//   - xla_fsdp_grad_ckpt (default false): with xla (and fsdp on), gradient checkpointing of every
//     decoder layer, as HF wraps each auto-wrapped layer in torch_xla's checkpoint_module: the
//     same recomputation as gradient_checkpointing (GradientCheckpointingOn). Refused without xla,
//     where HF ignores it.
//   - xla_fsdp_settings: torch_xla FSDPv1 wrapper settings; only {} is accepted.
//   - gotpu_mesh_shape: gotpu's own key (not HF's): [data, fsdp], the device mesh of hybrid_shard
//     (see FSDPPlan); with full_shard it must be [1, number of devices].
//
// torch FSDP's other keys are accepted (in Other) with values that do not change what one XLA
// program computes: backward_prefetch, forward_prefetch, limit_all_gathers, reshard_after_forward
// (when collectives are issued: the XLA compiler schedules them in one program), use_orig_params
// (gotpu's parameters are always the model's own tensors), sync_module_states,
// cpu_ram_efficient_loading (one process loads the weights once and places them on every device),
// version/fsdp_version 1 or 2 (torch's FSDP1/FSDP2 implementations of the same sharding).
// activation_checkpointing and offload_params are accepted only when false. Any other key is
// refused by name (Accelerate's own keys, such as sharding_strategy, with what to use instead).
//
// A config given without fsdp is kept and written, and does nothing (HF warns); values gotpu
// cannot honour are refused even then, since gotpu has no warning to give instead. A path is
// opened relative to the working directory, as HF opens it.
type FSDPConfig struct {
	MinNumParams              int64    // min_num_params
	TransformerLayerClsToWrap []string // transformer_layer_cls_to_wrap; nil when not given
	XLA                       bool     // xla
	XLAFSDPv2                 bool     // xla_fsdp_v2
	XLAFSDPGradCkpt           bool     // xla_fsdp_grad_ckpt
	// MeshShape is gotpu_mesh_shape (gotpu's key): [data, fsdp]; nil when not given.
	MeshShape []int
	// Other holds the remaining keys as given (prefix stripped), in order: torch FSDP settings
	// checked by Validate.
	Other []JSONMember
	// Source is the file the config was read from, for messages; "" when it was given inline.
	// It is not written.
	Source string

	// order is the key order of HF's post-init dict when it differs from canonicalOrder; nil
	// otherwise.
	order []string
}

// Keys of fsdp_config that FSDPConfig holds in typed fields.
const (
	fsdpKeyMinNumParams = "min_num_params"
	fsdpKeyLayerCls     = "transformer_layer_cls_to_wrap"
	fsdpKeyXLA          = "xla"
	fsdpKeyXLAv2        = "xla_fsdp_v2"
	fsdpKeyGradCkpt     = "xla_fsdp_grad_ckpt"
	fsdpKeyMeshShape    = "gotpu_mesh_shape"
)

// fsdpOtherKey is a torch FSDP key gotpu accepts with some values.
type fsdpOtherKey struct {
	ok   func(JSONValue) bool
	want string // the accepted values, for messages
	// unsupported: a value outside ok is one gotpu does not implement (ErrUnsupportedArgument),
	// with this advice; "" means it is not a valid value at all (ErrInvalidArgument).
	unsupported string
}

var fsdpOtherKeys = map[string]fsdpOtherKey{
	"backward_prefetch": {ok: isStringOrNullFold("backward_pre", "backward_post", "no_prefetch"),
		want: "backward_pre, backward_post or no_prefetch"},
	"forward_prefetch":          {ok: isStrToBool, want: "true or false"},
	"limit_all_gathers":         {ok: isStrToBool, want: "true or false"},
	"use_orig_params":           {ok: isStrToBool, want: "true or false"},
	"sync_module_states":        {ok: isStrToBool, want: "true or false"},
	"cpu_ram_efficient_loading": {ok: isStrToBool, want: "true or false"},
	"reshard_after_forward": {ok: func(v JSONValue) bool {
		return isStrToBool(v) || isStringOrNullFold("full_shard", "shard_grad_op", "no_shard", "hybrid_shard", "hybrid_shard_zero2")(v)
	}, want: "true, false or a sharding strategy"},
	"version": {ok: func(v JSONValue) bool {
		if v.IsNull() {
			return true
		}
		if s, ok := v.Str(); ok {
			return s == "1" || s == "2"
		}
		i, ok := v.Int()
		return ok && (i == 1 || i == 2)
	}, want: "1 or 2"},
	"activation_checkpointing": {ok: isFalseOrNull, want: "false",
		unsupported: "gotpu takes activation checkpointing from gradient_checkpointing only; set gradient_checkpointing true instead (the same recomputation of every decoder layer)"},
	"offload_params": {ok: isFalseOrNull, want: "false",
		unsupported: "it keeps parameters and optimizer state in device memory; remove it"},
	"xla_fsdp_settings": {ok: func(v JSONValue) bool { return v.IsNull() || (v.Kind() == JSONObject && len(v.Object()) == 0) },
		want: "{}", unsupported: "these are torch_xla FSDPv1 wrapper settings, and gotpu shards one SPMD program (FSDPv2), which takes none"},
}

// fsdpAccelerateKeys are keys of an Accelerate FSDP config (accelerate config yaml, whose keys
// carry the fsdp_ prefix) that HF's Trainer does not read from fsdp_config.
var fsdpAccelerateKeys = map[string]string{
	"sharding_strategy":             "set the strategy with fsdp (--fsdp full_shard or hybrid_shard)",
	"auto_wrap_policy":              "set fsdp auto_wrap with min_num_params or transformer_layer_cls_to_wrap",
	"transformer_cls_names_to_wrap": "use transformer_layer_cls_to_wrap",
	"state_dict_type":               "gotpu writes whole tensors to model.safetensors; remove it",
	"cpu_offload":                   "gotpu keeps parameters in device memory; remove it",
}

func isStringOrNullFold(allowed ...string) func(JSONValue) bool {
	return func(v JSONValue) bool {
		if v.IsNull() {
			return true
		}
		s, ok := v.Str()
		return ok && slices.Contains(allowed, strings.ToLower(s))
	}
}

// isStrToBool: a bool, null, or a string HF's str_to_bool reads (it converts str(value)).
func isStrToBool(v JSONValue) bool {
	if v.IsNull() || v.Kind() == JSONBool {
		return true
	}
	s, ok := v.Str()
	if !ok {
		return false
	}
	switch strings.ToLower(s) {
	case "y", "yes", "t", "true", "on", "1", "n", "no", "f", "false", "off", "0":
		return true
	}
	return false
}

// canonicalOrder is the key order ToJSON uses for keys order does not place: the given keys, then
// the defaults HF appends (HF's order for a config given as {} or with only these keys).
func (c *FSDPConfig) canonicalOrder() []string {
	var keys []string
	if c.TransformerLayerClsToWrap != nil {
		keys = append(keys, fsdpKeyLayerCls)
	}
	for _, m := range c.Other {
		keys = append(keys, m.Key)
	}
	if c.MeshShape != nil {
		keys = append(keys, fsdpKeyMeshShape)
	}
	return append(keys, fsdpKeyMinNumParams, fsdpKeyXLA, fsdpKeyXLAv2, fsdpKeyGradCkpt)
}

// value returns the JSON value of key, and whether the config has it.
func (c *FSDPConfig) value(key string) (JSONValue, bool) {
	switch key {
	case fsdpKeyMinNumParams:
		return JSONIntValue(c.MinNumParams), true
	case fsdpKeyLayerCls:
		if c.TransformerLayerClsToWrap == nil {
			return JSONValue{}, false
		}
		items := make([]JSONValue, len(c.TransformerLayerClsToWrap))
		for i, s := range c.TransformerLayerClsToWrap {
			items[i] = JSONStringValue(s)
		}
		return JSONArrayValue(items...), true
	case fsdpKeyXLA:
		return JSONBoolValue(c.XLA), true
	case fsdpKeyXLAv2:
		return JSONBoolValue(c.XLAFSDPv2), true
	case fsdpKeyGradCkpt:
		return JSONBoolValue(c.XLAFSDPGradCkpt), true
	case fsdpKeyMeshShape:
		if c.MeshShape == nil {
			return JSONValue{}, false
		}
		items := make([]JSONValue, len(c.MeshShape))
		for i, n := range c.MeshShape {
			items[i] = JSONIntValue(int64(n))
		}
		return JSONArrayValue(items...), true
	}
	for _, m := range c.Other {
		if m.Key == key {
			return m.Value, true
		}
	}
	return JSONValue{}, false
}

// toJSON returns the dict HF's to_dict writes: the keys in HF's post-init order.
func (c *FSDPConfig) toJSON() JSONValue {
	var members []JSONMember
	seen := map[string]bool{}
	add := func(key string) {
		if seen[key] {
			return
		}
		if v, ok := c.value(key); ok {
			seen[key] = true
			members = append(members, JSONMember{Key: key, Value: v})
		}
	}
	for _, k := range c.order {
		add(k)
	}
	for _, k := range c.canonicalOrder() {
		add(k)
	}
	return JSONObjectValue(members...)
}

// Clone returns a copy sharing no storage with c.
func (c FSDPConfig) Clone() FSDPConfig {
	c.TransformerLayerClsToWrap = slices.Clone(c.TransformerLayerClsToWrap)
	c.MeshShape = slices.Clone(c.MeshShape)
	c.Other = slices.Clone(c.Other) // JSONValues are immutable
	c.order = slices.Clone(c.order)
	return c
}

// IsDefault reports whether the config is HF's default (fsdp_config None or {}).
func (c *FSDPConfig) IsDefault() bool {
	return c.MinNumParams == 0 && c.TransformerLayerClsToWrap == nil && !c.XLA && !c.XLAFSDPv2 &&
		!c.XLAFSDPGradCkpt && c.MeshShape == nil && len(c.Other) == 0
}

// LoadFSDPConfig reads an fsdp_config JSON file (at most 1 MiB) as HF's TrainingArguments does.
// Errors name the file. The values are checked by TrainingArguments.Validate.
func LoadFSDPConfig(path string) (FSDPConfig, error) {
	data, err := readFSDPConfigFile(path)
	if err != nil {
		return FSDPConfig{}, err
	}
	return ParseFSDPConfig(data, path)
}

func readFSDPConfigFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("fsdp_config: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("fsdp_config: %w", err)
	}
	if !st.Mode().IsRegular() { // a FIFO or device would block or never end
		return nil, fmt.Errorf("fsdp_config: %s is not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxFSDPConfigFile+1))
	if err != nil {
		return nil, fmt.Errorf("fsdp_config: reading %s: %w", path, err)
	}
	if len(data) > maxFSDPConfigFile {
		return nil, fmt.Errorf("fsdp_config: %s is larger than 1 MiB; an FSDP config is a small JSON object", path)
	}
	return data, nil
}

// ParseFSDPConfig decodes the JSON object of an fsdp_config file as HF's post-init leaves it
// (see FSDPConfig). source names the file in errors ("" for an inline object).
func ParseFSDPConfig(data []byte, source string) (FSDPConfig, error) {
	v, err := parsePyJSON(data)
	if err != nil {
		return FSDPConfig{}, fmt.Errorf("fsdp_config: %s: %w", orInline(source), err)
	}
	c, msg := fsdpConfigFromJSON(v, source)
	if msg != "" {
		return FSDPConfig{}, errors.New(msg)
	}
	return c, nil
}

func orInline(source string) string {
	if source == "" {
		return "inline object"
	}
	return source
}

// fsdpConfigFromJSON converts a decoded fsdp_config object; msg says what is wrong (naming the
// source and key). Only the JSON types of the typed keys are checked here; values are checked by
// Validate.
func fsdpConfigFromJSON(v JSONValue, source string) (c FSDPConfig, msg string) {
	c.Source = source
	where := ""
	if source != "" {
		where = source + ": "
	}
	if v.Kind() != JSONObject {
		return FSDPConfig{}, fmt.Sprintf("%s%s is a %s, want an object", where, jsonPreview(v), v.Kind())
	}
	// HF's prefix stripping: pop each fsdp_ key (listed before the loop) and set it without the
	// prefix, which puts it last unless the stripped key exists already.
	members := slices.Clone(v.Object())
	for _, k := range keysOf(v.Object()) {
		if !strings.HasPrefix(k, "fsdp_") {
			continue
		}
		i := slices.IndexFunc(members, func(m JSONMember) bool { return m.Key == k })
		val := members[i].Value
		members = slices.Delete(members, i, i+1)
		members = setMember(members, k[len("fsdp_"):], val)
	}
	var problems []string
	bad := func(key string, val JSONValue, want string) {
		problems = append(problems, fmt.Sprintf("%s%s: %s is a %s, want %s", where, key, jsonPreview(val), val.Kind(), want))
	}
	boolKey := func(key string, val JSONValue, dst *bool) {
		if val.IsNull() {
			return
		}
		if b, ok := val.Bool(); ok {
			*dst = b
		} else {
			bad(key, val, "true or false")
		}
	}
	order := make([]string, 0, len(members)+4)
	for _, m := range members {
		key, val := m.Key, m.Value
		switch key {
		case fsdpKeyMinNumParams:
			if !val.IsNull() {
				if i, ok := val.Int(); ok && val.Kind() != JSONBool {
					c.MinNumParams = i
				} else {
					bad(key, val, "an integer")
				}
			}
		case fsdpKeyLayerCls:
			if val.IsNull() {
				continue // HF's None: not given
			}
			if s, ok := val.Str(); ok {
				c.TransformerLayerClsToWrap = []string{s}
				break
			}
			if val.Kind() != JSONArray {
				bad(key, val, "a class name or a list of them")
				break
			}
			names := make([]string, 0, len(val.Array()))
			for _, item := range val.Array() {
				s, ok := item.Str()
				if !ok {
					bad(key, val, "a class name or a list of them")
					break
				}
				names = append(names, s)
			}
			c.TransformerLayerClsToWrap = names
		case fsdpKeyXLA:
			boolKey(key, val, &c.XLA)
		case fsdpKeyXLAv2:
			boolKey(key, val, &c.XLAFSDPv2)
		case fsdpKeyGradCkpt:
			boolKey(key, val, &c.XLAFSDPGradCkpt)
		case fsdpKeyMeshShape:
			if val.IsNull() {
				continue
			}
			shape, ok := meshShapeFromJSON(val)
			if !ok {
				bad(key, val, "[data, fsdp], a list of two integers (gotpu's key)")
				break
			}
			c.MeshShape = shape
		default:
			c.Other = append(c.Other, JSONMember{Key: key, Value: val})
		}
		order = append(order, key)
	}
	if len(problems) > 0 {
		return FSDPConfig{}, "fsdp_config: " + strings.Join(problems, "; ")
	}
	// HF fills in the defaults it reads, appending those not given.
	for _, k := range []string{fsdpKeyMinNumParams, fsdpKeyXLA, fsdpKeyXLAv2, fsdpKeyGradCkpt} {
		if !slices.Contains(order, k) {
			order = append(order, k)
		}
	}
	if !slices.Equal(order, c.canonicalOrder()) {
		c.order = order
	}
	return c, ""
}

func keysOf(members []JSONMember) []string {
	keys := make([]string, len(members))
	for i, m := range members {
		keys[i] = m.Key
	}
	return keys
}

func meshShapeFromJSON(v JSONValue) ([]int, bool) {
	if v.Kind() != JSONArray {
		return nil, false
	}
	shape := make([]int, 0, len(v.Array()))
	for _, item := range v.Array() {
		i, ok := item.Int()
		if !ok || item.Kind() != JSONInt || i != int64(int(i)) {
			return nil, false
		}
		shape = append(shape, int(i))
	}
	return shape, true
}

// fsdpConfigFromArg decodes fsdp_config as HF's post-init takes it: null (→ {}), an object, a
// string holding a JSON object (the command-line form; string values converted as
// _convert_str_dict does), or the path of a JSON file.
func fsdpConfigFromArg(v JSONValue) (FSDPConfig, string) {
	if v.IsNull() {
		return FSDPConfig{}, ""
	}
	s, isStr := v.Str()
	if !isStr {
		return fsdpConfigFromJSON(v, "")
	}
	if strings.HasPrefix(s, "{") {
		inner, err := parsePyJSON([]byte(s))
		if err != nil || inner.Kind() != JSONObject {
			return FSDPConfig{}, fmt.Sprintf("%s is not a JSON object (a string starting with { is read as one)", jsonPreview(v))
		}
		return fsdpConfigFromJSON(convertStrJSON(inner), "")
	}
	if s == "" { // HF would try to open ""; every other default form means {}, so this does too
		return FSDPConfig{}, ""
	}
	data, err := readFSDPConfigFile(s)
	if err != nil {
		return FSDPConfig{}, strings.TrimPrefix(err.Error(), "fsdp_config: ")
	}
	pv, err := parsePyJSON(data)
	if err != nil {
		return FSDPConfig{}, fmt.Sprintf("%s: %v", s, err)
	}
	return fsdpConfigFromJSON(pv, s)
}

// convertStrJSON mirrors HF's _convert_str_dict on an object, keeping the key order: string
// values "true"/"false" (any case) become bools, digit strings ints and d.d strings floats;
// nested objects are converted too (lists are not).
func convertStrJSON(v JSONValue) JSONValue {
	if v.Kind() != JSONObject {
		return v
	}
	out := make([]JSONMember, len(v.Object()))
	for i, m := range v.Object() {
		val := m.Value
		switch val.Kind() {
		case JSONObject:
			val = convertStrJSON(val)
		case JSONString:
			x, _ := val.Str()
			switch {
			case strings.EqualFold(x, "true") || strings.EqualFold(x, "false"):
				val = JSONBoolValue(strings.EqualFold(x, "true"))
			case isASCIIDigits(x):
				if n, err := strconv.ParseInt(x, 10, 64); err == nil {
					val = JSONIntValue(n)
				}
			case strings.Count(x, ".") == 1 && isASCIIDigits(strings.Replace(x, ".", "", 1)):
				if f, err := strconv.ParseFloat(x, 64); err == nil {
					val = JSONFloatValue(f)
				}
			}
		}
		out[i] = JSONMember{Key: m.Key, Value: val}
	}
	return JSONObjectValue(out...)
}

// fsdpOptionsFromJSON decodes fsdp as HF's post-init does: false, null or "" → []; true →
// ["full_shard"]; a string split on whitespace; a list of strings as it is. The options are
// checked by Validate.
func fsdpOptionsFromJSON(v JSONValue) ([]string, string) {
	switch v.Kind() {
	case JSONNull:
		return []string{}, ""
	case JSONBool:
		if b, _ := v.Bool(); b {
			return []string{FSDPFullShard}, ""
		}
		return []string{}, ""
	case JSONString:
		s, _ := v.Str()
		return strings.Fields(s), ""
	case JSONArray:
		out := make([]string, 0, len(v.Array()))
		for _, item := range v.Array() {
			s, ok := item.Str()
			if !ok {
				return nil, fmt.Sprintf("%s is a list holding a %s, want FSDP options (%s)", jsonPreview(v), item.Kind(), fsdpOptionList())
			}
			out = append(out, s)
		}
		return out, ""
	}
	return nil, fmt.Sprintf("%s is a %s, want a string or list of FSDP options (%s)", jsonPreview(v), v.Kind(), fsdpOptionList())
}

func fsdpOptionList() string {
	return "full_shard, shard_grad_op, hybrid_shard, hybrid_shard_zero2, offload, auto_wrap, no_shard"
}

func (a *TrainingArguments) fsdpHas(option string) bool { return slices.Contains(a.FSDP, option) }

// fsdpEnabled reports whether fsdp asks for sharding (full_shard or hybrid_shard).
func (a *TrainingArguments) fsdpEnabled() bool {
	return a.fsdpHas(FSDPFullShard) || a.fsdpHas(FSDPHybridShard)
}

// validateFSDP checks fsdp and fsdp_config (called by Validate).
func (a *TrainingArguments) validateFSDP(l *errorList) {
	for _, o := range a.FSDP {
		switch {
		case slices.Contains(fsdpSupported, o):
		case fsdpUnsupported[o] != "":
			l.add("TrainingArguments", "fsdp", ErrUnsupportedArgument, "%q is not implemented by gotpu (supported: %s); %s",
				o, strings.Join(fsdpSupported, ", "), fsdpUnsupported[o])
		default:
			l.invalid("fsdp", "%q is not an FSDP option (%s)", o, fsdpOptionList())
		}
	}
	if a.fsdpHas(FSDPFullShard) && a.fsdpHas(FSDPHybridShard) {
		l.invalid("fsdp", `"full_shard" and "hybrid_shard" are both given; choose one`)
	}
	if a.fsdpHas(FSDPAutoWrap) && !a.fsdpEnabled() && !slices.ContainsFunc(a.FSDP, func(o string) bool { return fsdpUnsupported[o] != "" }) {
		l.invalid("fsdp", `"auto_wrap" alone leaves the sharding strategy to Accelerate's default; give it with full_shard or hybrid_shard (--fsdp "full_shard auto_wrap")`)
	}
	c := &a.FSDPConfig
	where := ""
	if c.Source != "" {
		where = c.Source + ": "
	}
	bad := func(kind error, key, format string, args ...any) {
		l.add("TrainingArguments", "fsdp_config", kind, "%s%s: %s", where, key, fmt.Sprintf(format, args...))
	}
	if c.MinNumParams < 0 {
		bad(ErrInvalidArgument, fsdpKeyMinNumParams, "%d is negative", c.MinNumParams)
	}
	if c.TransformerLayerClsToWrap != nil {
		if len(c.TransformerLayerClsToWrap) == 0 || slices.Contains(c.TransformerLayerClsToWrap, "") {
			bad(ErrInvalidArgument, fsdpKeyLayerCls, "%q holds no class name; name the model's layer class (LlamaDecoderLayer, GPT2Block…) or remove it",
				c.TransformerLayerClsToWrap)
		}
		if c.MinNumParams > 0 && len(a.FSDP) > 0 { // HF's ValueError; without fsdp HF only warns
			bad(ErrInvalidArgument, fsdpKeyLayerCls, "min_num_params %d and transformer_layer_cls_to_wrap are mutually exclusive (HF); give one",
				c.MinNumParams)
		}
	}
	if c.XLA && !c.XLAFSDPv2 {
		bad(ErrUnsupportedArgument, fsdpKeyXLA, "true with xla_fsdp_v2 false selects torch_xla's FSDPv1 wrapper, which gotpu does not implement; gotpu shards one SPMD program as FSDPv2 does: set xla_fsdp_v2 true (or xla false)")
	}
	if c.XLAFSDPGradCkpt && !c.XLA {
		// HF warns that it "is useful only when --xla is set to true" and ignores it; gotpu has no
		// warning to give instead.
		bad(ErrInvalidArgument, fsdpKeyGradCkpt, "true has no effect without xla: true (HF ignores it then); set xla and xla_fsdp_v2 true, or use gradient_checkpointing")
	}
	if c.MeshShape != nil {
		switch {
		case len(c.MeshShape) != 2:
			bad(ErrInvalidArgument, fsdpKeyMeshShape, "%s has %d entries, want [data, fsdp]", fmtShape(c.MeshShape), len(c.MeshShape))
		case c.MeshShape[0] < 1 || c.MeshShape[1] < 1:
			bad(ErrInvalidArgument, fsdpKeyMeshShape, "%s: data and fsdp must each be at least 1", fmtShape(c.MeshShape))
		case a.fsdpHas(FSDPFullShard) && c.MeshShape[0] != 1:
			bad(ErrInvalidArgument, fsdpKeyMeshShape, "%s with full_shard: full_shard puts every device on the fsdp axis, so the shape is [1, number of devices]; use hybrid_shard for %d data groups",
				fmtShape(c.MeshShape), c.MeshShape[0])
		}
	}
	syncStates, cpuRAM := true, false
	for _, m := range c.Other {
		k, ok := fsdpOtherKeys[m.Key]
		switch {
		case !ok:
			msg := fmt.Sprintf("not an fsdp_config key gotpu knows (HF's: %s; gotpu's: %s)", strings.Join(fsdpHFKeys(), ", "), fsdpKeyMeshShape)
			if advice, acc := fsdpAccelerateKeys[m.Key]; acc {
				msg = "an Accelerate FSDP config key, which HF's Trainer does not read from fsdp_config; " + advice
			} else if s := suggestFSDPKey(m.Key); s != "" {
				msg += fmt.Sprintf("; did you mean %s?", s)
			}
			bad(ErrUnknownArgument, m.Key, "%s", msg)
		case k.ok(m.Value):
		case k.unsupported != "":
			bad(ErrUnsupportedArgument, m.Key, "%s is not implemented by gotpu; %s", jsonPreview(m.Value), k.unsupported)
		default:
			bad(ErrInvalidArgument, m.Key, "%s is not %s", jsonPreview(m.Value), k.want)
		}
		if ok && k.ok(m.Value) && !m.Value.IsNull() {
			switch m.Key {
			case "sync_module_states":
				syncStates = strToBool(m.Value)
			case "cpu_ram_efficient_loading":
				cpuRAM = strToBool(m.Value)
			}
		}
	}
	if a.fsdpEnabled() && cpuRAM && !syncStates { // HF's ValueError
		bad(ErrInvalidArgument, "sync_module_states", "must be true when cpu_ram_efficient_loading is true (HF)")
	}
}

// fmtShape writes a mesh shape as JSON does ([2, 4]).
func fmtShape(shape []int) string {
	parts := make([]string, len(shape))
	for i, n := range shape {
		parts[i] = strconv.Itoa(n)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// strToBool reads a value isStrToBool accepted.
func strToBool(v JSONValue) bool {
	if b, ok := v.Bool(); ok {
		return b
	}
	s, _ := v.Str()
	switch strings.ToLower(s) {
	case "y", "yes", "t", "true", "on", "1":
		return true
	}
	return false
}

// fsdpHFKeys lists HF's fsdp_config keys, sorted.
func fsdpHFKeys() []string {
	keys := []string{fsdpKeyMinNumParams, fsdpKeyLayerCls, fsdpKeyXLA, fsdpKeyXLAv2, fsdpKeyGradCkpt}
	for k := range fsdpOtherKeys {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func suggestFSDPKey(key string) string {
	norm := strings.ToLower(strings.ReplaceAll(key, "-", "_"))
	best, bestDist := "", 3
	for _, k := range append(fsdpHFKeys(), fsdpKeyMeshShape) {
		if d := editDistance(norm, k, bestDist); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

// FSDPPlan is the sharding a run asked for (TrainingArguments.FSDPPlan).
type FSDPPlan struct {
	Enabled      bool  // fsdp has full_shard or hybrid_shard
	Hybrid       bool  // hybrid_shard
	Data, FSDP   int   // mesh shape: Data × FSDP == numDevices
	MinNumParams int64 // min_num_params (recorded; 0 when not Enabled)
	// LayerClasses is transformer_layer_cls_to_wrap (recorded; validated by the trainer against
	// the model); nil when not given or not Enabled.
	LayerClasses []string
}

// FSDPPlan returns the device mesh and wrap settings fsdp and fsdp_config ask for on numDevices
// devices spread over numHosts hosts (processes), after checking fsdp and fsdp_config as
// Validate does. Errors are *ArgumentsError naming the field.
//
//   - fsdp off: Enabled false, Data = numDevices, FSDP = 1 (data parallelism).
//   - full_shard: Data = 1, FSDP = numDevices: parameters, gradients and optimizer state are
//     sharded over every device. gotpu_mesh_shape, if given, must be [1, numDevices].
//   - hybrid_shard: a Data × FSDP mesh; each data group of FSDP devices holds one sharded copy,
//     and the groups replicate it (gradients are reduced across them). The shape is fsdp_config's
//     gotpu_mesh_shape [data, fsdp] (gotpu's key, not HF's), whose product must be numDevices.
//     Without it, the shape is torch's HYBRID_SHARD default: shard within a host, replicate across
//     hosts, i.e. Data = numHosts and FSDP = numDevices / numHosts. gotpu runs one process per
//     host and, today, one host per run (pass numHosts 1), so the default is Data = 1: the same
//     mesh as full_shard until gotpu_mesh_shape says otherwise.
func (a *TrainingArguments) FSDPPlan(numDevices, numHosts int) (FSDPPlan, error) {
	var l errorList
	a.validateFSDP(&l)
	if numDevices < 1 {
		l.invalid("num_devices", "%d devices; FSDP needs at least 1", numDevices)
	}
	if numHosts < 1 {
		l.invalid("num_devices", "%d hosts; want at least 1", numHosts)
	}
	if err := l.err("", ""); err != nil {
		return FSDPPlan{}, err
	}
	if !a.fsdpEnabled() {
		return FSDPPlan{Data: numDevices, FSDP: 1}, nil
	}
	c := &a.FSDPConfig
	p := FSDPPlan{Enabled: true, Hybrid: a.fsdpHas(FSDPHybridShard), MinNumParams: c.MinNumParams,
		LayerClasses: slices.Clone(c.TransformerLayerClsToWrap)}
	where := ""
	if c.Source != "" {
		where = c.Source + ": "
	}
	switch {
	case c.MeshShape != nil: // validateFSDP checked its length and signs
		p.Data, p.FSDP = c.MeshShape[0], c.MeshShape[1]
		if p.Data*p.FSDP != numDevices {
			want := fmt.Sprintf("[data, fsdp] with data × fsdp = %d", numDevices)
			if !p.Hybrid {
				want = fmt.Sprintf("[1, %d] for full_shard", numDevices)
			}
			l.invalid("fsdp_config", "%sgotpu_mesh_shape: %s is %d devices, but the run has %d; want %s",
				where, fmtShape(c.MeshShape), p.Data*p.FSDP, numDevices, want)
		}
	case !p.Hybrid:
		p.Data, p.FSDP = 1, numDevices
	default:
		if numDevices%numHosts != 0 {
			l.invalid("fsdp", "hybrid_shard shards within a host by default, but %d devices do not split evenly over %d hosts; give fsdp_config gotpu_mesh_shape [data, fsdp]",
				numDevices, numHosts)
		}
		p.Data, p.FSDP = numHosts, numDevices/numHosts
	}
	if err := l.err("", ""); err != nil {
		return FSDPPlan{}, err
	}
	return p, nil
}

// GradientCheckpointingOn says whether the training step recomputes every decoder layer in its
// backward pass: gradient_checkpointing, or fsdp_config's xla_fsdp_grad_ckpt under XLA FSDP (HF
// wraps each auto-wrapped layer, a decoder layer by default, in torch_xla's checkpoint_module).
func (a *TrainingArguments) GradientCheckpointingOn() bool {
	return a.GradientCheckpointing || (a.fsdpEnabled() && a.FSDPConfig.XLA && a.FSDPConfig.XLAFSDPGradCkpt)
}
