package trainer

import (
	"errors"
	"flag"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// argHelp is the usage text of each implemented field's flag.
var argHelp = map[string]string{
	"output_dir":                    "directory for checkpoints and the final model",
	"overwrite_output_dir":          "train from scratch into a non-empty output_dir (gotpu train refuses one without it or --resume_from_checkpoint); the previous run's checkpoint-N directories are removed first",
	"do_train":                      "run training (gotpu train always trains; false is refused: use gotpu eval)",
	"do_eval":                       "evaluate at the end of training (run_clm's eval_results.json with perplexity); set when eval_strategy is not no",
	"do_predict":                    "run prediction (refused: run_clm.py has none; use gotpu score)",
	"eval_strategy":                 "when to evaluate: no, steps or epoch",
	"per_device_train_batch_size":   "training examples per device per micro-step",
	"per_device_eval_batch_size":    "evaluation examples per device",
	"gradient_accumulation_steps":   "micro-steps accumulated per optimizer update",
	"eval_accumulation_steps":       "evaluation steps accumulated before moving outputs to the host",
	"eval_delay":                    "epochs or steps to wait before the first evaluation",
	"learning_rate":                 "peak learning rate",
	"weight_decay":                  "AdamW weight decay (not applied to biases and norm weights)",
	"adam_beta1":                    "AdamW beta1",
	"adam_beta2":                    "AdamW beta2",
	"adam_epsilon":                  "AdamW epsilon",
	"max_grad_norm":                 "clip the global gradient norm to this (0 disables)",
	"num_train_epochs":              "epochs to train (may be fractional)",
	"max_steps":                     "optimizer updates to run; overrides num_train_epochs when > 0",
	"lr_scheduler_type":             "learning-rate schedule: " + strings.Join(scheduleTypes, ", "),
	"lr_scheduler_kwargs":           `schedule keywords as a JSON object, e.g. '{"num_cycles": 2}'`,
	"warmup_ratio":                  "fraction of the run spent warming up (used when warmup_steps is 0)",
	"warmup_steps":                  "warmup updates, or a ratio of the run when in (0, 1)",
	"log_level":                     "passive, debug, info, warning, error or critical",
	"logging_dir":                   "TensorBoard directory (default output_dir/runs/<date>_<host>)",
	"logging_strategy":              "when to log: no, steps or epoch",
	"logging_first_step":            "also log after the first update",
	"logging_steps":                 "log every N updates (a ratio of max_steps when < 1)",
	"logging_nan_inf_filter":        "leave non-finite losses out of the logged average",
	"save_strategy":                 "when to save checkpoints: no, steps, epoch or best",
	"save_steps":                    "save every N updates (a ratio of max_steps when < 1)",
	"save_total_limit":              "keep at most N checkpoints (the best is always kept)",
	"save_safetensors":              "save weights as safetensors (the only format gotpu writes)",
	"save_only_model":               "save only the weights (such checkpoints cannot be resumed)",
	"seed":                          "random seed",
	"data_seed":                     "seed for data sampling (default: seed)",
	"bf16":                          "bfloat16 mixed precision",
	"dataloader_drop_last":          "drop the last incomplete batch",
	"eval_steps":                    "evaluate every N updates (default logging_steps; a ratio when < 1)",
	"dataloader_num_workers":        "data-loading workers (0: load in the training goroutine)",
	"dataloader_prefetch_factor":    "batches prefetched per worker",
	"run_name":                      "run name for loggers (default output_dir)",
	"disable_tqdm":                  "disable progress bars",
	"remove_unused_columns":         "drop dataset columns the model does not take",
	"label_names":                   "input keys holding labels (comma-separated or repeated)",
	"load_best_model_at_end":        "load the best checkpoint at the end of training",
	"metric_for_best_model":         "metric that picks the best checkpoint (default loss)",
	"greater_is_better":             "whether a larger metric_for_best_model is better",
	"ignore_data_skip":              "on resume, do not skip the batches already seen",
	"fsdp":                          `fully sharded data parallelism: "full_shard" or "hybrid_shard", optionally with "auto_wrap" (space-separated, e.g. --fsdp "full_shard auto_wrap")`,
	"fsdp_config":                   `FSDP settings: a JSON file (as HF takes it) or an inline JSON object; e.g. {"transformer_layer_cls_to_wrap": "LlamaDecoderLayer"} or gotpu's {"gotpu_mesh_shape": [2, 4]} for hybrid_shard`,
	"label_smoothing_factor":        "label smoothing epsilon",
	"optim":                         "optimizer: " + strings.Join(supportedOptimizers, ", "),
	"optim_args":                    "extra optimizer arguments (not used by gotpu's optimizers)",
	"adafactor":                     "use Adafactor (deprecated spelling of --optim adafactor)",
	"report_to":                     "integrations to report to: tensorboard, all or none (comma-separated or repeated)",
	"resume_from_checkpoint":        "checkpoint directory to resume from, or true for the latest in output_dir",
	"gradient_checkpointing":        "recompute each decoder layer's activations in the backward pass: less memory, about a third more compute, the same numbers",
	"full_determinism":              "make every operation deterministic (slower)",
	"include_tokens_per_second":     "report tokens per second per device",
	"include_num_input_tokens_seen": "track input tokens seen: no, all (also true) or non_padding",
	"neftune_noise_alpha":           "NEFTune embedding-noise alpha",
	"eval_on_start":                 "evaluate once before training",
	"average_tokens_across_devices": "normalize the loss by the token count of all devices",
	"max_consecutive_nonfinite":     "gotpu: consecutive non-finite updates skipped before failing",
	"num_devices":                   "gotpu: data-parallel replicas (0: all devices)",
	"device":                        "gotpu: auto, tpu, cuda, cpu or go",
	"peak_flops":                    "gotpu: peak FLOP/s per device, for MFU reporting (0: unknown)",
	"log_gotpu_metrics":             "gotpu: also print gotpu's counters (step_seconds, tokens_per_second, mfu, ...) in the console's log lines",
	"device_prefetch_size":          "gotpu: training batches put on the devices ahead of their step",
}

// RegisterFlags registers one flag per implemented field under its HF name
// (--learning_rate, --per_device_train_batch_size, --bf16…), with the current values as defaults,
// plus --evaluation_strategy as an alias of --eval_strategy. Flags write straight into a.
// Booleans are boolean flags; cli.Parse accepts HfArgumentParser's `--bf16 True` form. Lists
// (--report_to, --label_names) take comma-separated values or repeated flags.
//
// To layer flags over an argument file, register the flags on a separate
// DefaultTrainingArguments and call MergeFlags after parsing.
func (a *TrainingArguments) RegisterFlags(fs *flag.FlagSet) {
	registerStructFlags(fs, reflect.ValueOf(a).Elem(), trainingArgsMeta, func(name string) string { return argHelp[name] })
	fs.Var(fs.Lookup("eval_strategy").Value, "evaluation_strategy", "old name of --eval_strategy")
}

// RegisterFlags registers the model/data arguments under their HF names (--model_name_or_path,
// --block_size…), plus --dtype as an alias of --torch_dtype.
func (m *ModelDataArguments) RegisterFlags(fs *flag.FlagSet) {
	registerStructFlags(fs, reflect.ValueOf(m).Elem(), modelDataArgsMeta, modelDataUsage)
	fs.Var(fs.Lookup("torch_dtype").Value, "dtype", "alias of --torch_dtype")
	fs.Var(fs.Lookup("model_revision").Value, "revision", "alias of --model_revision")
	fs.Var(fs.Lookup("train_split").Value, "dataset_train_split", "alias of --train_split (TRL's name)")
	fs.Var(fs.Lookup("validation_split").Value, "dataset_test_split", "alias of --validation_split (TRL's name)")
}

// RegisterUnsupportedFlags registers a flag for every Hugging Face field gotpu does not
// implement (--fp16, --deepspeed, --push_to_hub, --local_rank…), so that an HF command line
// gets a precise refusal from Validate instead of "flag provided but not defined". Setting one
// to HF's default is accepted; setting an inert one (--local_rank, --hub_token…) is ignored.
func (a *TrainingArguments) RegisterUnsupportedFlags(fs *flag.FlagSet) {
	for i := range hfTrainingArgumentFields {
		hf := &hfTrainingArgumentFields[i]
		if hf.policy != hfRefuse && hf.policy != hfInert {
			continue
		}
		usage := "not supported by gotpu (HF default " + hf.def + "): " + hf.advice
		if hf.policy == hfInert {
			usage = "accepted and ignored: " + hf.advice
		}
		fs.Var(&unsupportedFlag{args: a, field: hf}, hf.name, usage)
	}
}

// MergeFlags copies into a every field whose flag was set on fs, taking the value from flagged,
// the arguments fs's flags were registered on (RegisterFlags, and optionally
// RegisterUnsupportedFlags). For an unsupported field, the command line's setting replaces the
// file's: `--args X.json --fp16 false` drops X.json's refused "fp16": true, as flags override
// the file.
func (a *TrainingArguments) MergeFlags(flagged *TrainingArguments, fs *flag.FlagSet) {
	a.Unsupported = slices.DeleteFunc(slices.Clone(a.Unsupported), func(u UnsupportedSetting) bool {
		return isFlagSet(fs, u.Name)
	})
	dst, src := reflect.ValueOf(a).Elem(), reflect.ValueOf(flagged).Elem()
	fs.Visit(func(f *flag.Flag) {
		name := f.Name
		if name == "evaluation_strategy" {
			name = "eval_strategy"
		}
		if af, ok := trainingArgsMeta.byName[name]; ok {
			dst.Field(af.index).Set(deepCopy(src.Field(af.index)))
		}
	})
	for _, u := range flagged.Unsupported {
		if fs.Lookup(u.Name) != nil {
			a.Unsupported = append(a.Unsupported, u)
		}
	}
}

// MergeFlags copies into m every model/data argument whose flag was set on fs (see
// TrainingArguments.MergeFlags).
func (m *ModelDataArguments) MergeFlags(flagged *ModelDataArguments, fs *flag.FlagSet) {
	dst, src := reflect.ValueOf(m).Elem(), reflect.ValueOf(flagged).Elem()
	fs.Visit(func(f *flag.Flag) {
		name := f.Name
		if alias, ok := modelDataAliases[name]; ok {
			name = alias
		}
		if af, ok := modelDataArgsMeta.byName[name]; ok {
			dst.Field(af.index).Set(deepCopy(src.Field(af.index)))
		}
	})
}

// isFlagSet reports whether the flag name was given on fs's command line.
func isFlagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// deepCopy copies pointers, slices and maps so merged structs share no storage.
func deepCopy(v reflect.Value) reflect.Value {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		p := reflect.New(v.Type().Elem())
		p.Elem().Set(v.Elem())
		return p
	case reflect.Slice:
		if v.IsNil() {
			return v
		}
		s := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		reflect.Copy(s, v)
		return s
	case reflect.Map:
		if v.IsNil() {
			return v
		}
		return reflect.ValueOf(anyToGo(jsonToAny(anyToJSON(v.Interface()))))
	case reflect.Struct:
		if c, ok := v.Interface().(FSDPConfig); ok {
			return reflect.ValueOf(c.Clone())
		}
	}
	return v
}

// anyToGo asserts the map type back after a JSON round trip.
func anyToGo(x any) map[string]any {
	m, _ := x.(map[string]any)
	return m
}

// registerStructFlags registers a flag per field of meta; help gives each its usage
// (TestEveryFlagHasHelp checks that none is missing, so the name is only a last resort).
func registerStructFlags(fs *flag.FlagSet, sv reflect.Value, meta *argStruct, help func(string) string) {
	for _, f := range meta.fields {
		field := sv.Field(f.index)
		usage := help(f.name)
		if usage == "" {
			usage = strings.ReplaceAll(f.name, "_", " ")
		}
		var v flag.Value
		switch p := field.Addr().Interface().(type) {
		case *bool:
			v = (*boolFlag)(p)
		case *int:
			v = (*intFlag)(p)
		case *float64:
			v = (*floatFlag)(p)
		case *string:
			v = (*stringFlag)(p)
			if f.name == "include_num_input_tokens_seen" {
				v = (*tokensSeenFlag)(p)
			}
		case *IntervalStrategy: // the enumerated fields (args_enums.go) parse as plain strings
			v = (*stringFlag)(p)
		case *SaveStrategy:
			v = (*stringFlag)(p)
		case *SchedulerType:
			v = (*stringFlag)(p)
		case *OptimizerName:
			v = (*stringFlag)(p)
		case **bool:
			v = &optFlag[bool]{p: p, parse: parseBool, isBool: true}
		case **int:
			v = &optFlag[int]{p: p, parse: parseInt}
		case **float64:
			v = &optFlag[float64]{p: p, parse: parseFloat}
		case **string:
			v = &optFlag[string]{p: p, parse: func(s string) (string, error) { return s, nil }}
		case *[]string:
			v = &listFlag{p: p}
			if f.name == "fsdp" {
				v = &fsdpFlag{p: p}
			}
		case *FSDPConfig:
			v = &fsdpConfigFlag{p: p}
		case *map[string]any:
			v = (*kwargsFlag)(p)
		default:
			panic(fmt.Sprintf("trainer: no flag type for %s (%T)", f.name, p))
		}
		fs.Var(v, f.name, usage)
	}
}

// Flag value types. Parsing follows Python's int(), float() and HfArgumentParser's
// string_to_bool rather than Go's strconv defaults (which read "010" as octal and reject "yes").

func parseBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "t", "yes", "y", "1":
		return true, nil
	case "false", "f", "no", "n", "0":
		return false, nil
	}
	return false, fmt.Errorf("%q is not a boolean (true/false, yes/no, 1/0)", s)
}

func parseInt(s string) (int, error) {
	i, err := strconv.ParseInt(strings.ReplaceAll(strings.TrimSpace(s), "_", ""), 10, strconv.IntSize)
	if err != nil {
		return 0, fmt.Errorf("%q is not an integer", s)
	}
	return int(i), nil
}

func parseFloat(s string) (float64, error) {
	t := strings.TrimSpace(s)
	if strings.Contains(strings.ToLower(t), "0x") { // Python's float() has no hex literals
		return 0, fmt.Errorf("%q is not a number", s)
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	return f, nil
}

type boolFlag bool

func (b *boolFlag) Set(s string) error {
	v, err := parseBool(s)
	*b = boolFlag(v)
	return err
}
func (b *boolFlag) String() string   { return strconv.FormatBool(bool(*b)) }
func (b *boolFlag) IsBoolFlag() bool { return true }

// FlagType names each flag's value in --help (cli.PrintGroups); booleans show none.
func (b *boolFlag) FlagType() string { return "" }

type intFlag int

func (i *intFlag) Set(s string) error {
	v, err := parseInt(s)
	*i = intFlag(v)
	return err
}
func (i *intFlag) String() string   { return strconv.Itoa(int(*i)) }
func (i *intFlag) FlagType() string { return "int" }

type floatFlag float64

func (f *floatFlag) Set(s string) error {
	v, err := parseFloat(s)
	*f = floatFlag(v)
	return err
}
func (f *floatFlag) String() string   { return fmtFloat(float64(*f)) }
func (f *floatFlag) FlagType() string { return "float" }

type stringFlag string

func (s *stringFlag) Set(v string) error { *s = stringFlag(v); return nil }
func (s *stringFlag) String() string     { return string(*s) }
func (s *stringFlag) FlagType() string   { return "string" }

// tokensSeenFlag takes 5.x's modes or 4.x's booleans (a bare --include_num_input_tokens_seen
// means "all"; give a mode as --include_num_input_tokens_seen=non_padding).
type tokensSeenFlag string

func (t *tokensSeenFlag) Set(s string) error {
	if b, err := parseBool(s); err == nil {
		*t = tokensSeenFlag(map[bool]string{true: "all", false: "no"}[b])
		return nil
	}
	*t = tokensSeenFlag(s)
	return nil
}
func (t *tokensSeenFlag) String() string   { return string(*t) }
func (t *tokensSeenFlag) IsBoolFlag() bool { return true }

// optFlag sets an optional (pointer) field; "None" and "null" set it back to nil.
type optFlag[T any] struct {
	p      **T
	parse  func(string) (T, error)
	isBool bool
}

func (o *optFlag[T]) Set(s string) error {
	if s == "None" || s == "null" {
		*o.p = nil
		return nil
	}
	v, err := o.parse(s)
	if err != nil {
		return err
	}
	*o.p = &v
	return nil
}

func (o *optFlag[T]) String() string {
	if o == nil || o.p == nil || *o.p == nil {
		return ""
	}
	return fmt.Sprint(**o.p)
}

func (o *optFlag[T]) IsBoolFlag() bool { return o.isBool }

func (o *optFlag[T]) FlagType() string {
	var zero T
	switch any(zero).(type) {
	case bool:
		return ""
	case float64:
		return "float"
	}
	return fmt.Sprintf("%T", zero)
}

// listFlag takes comma-separated values, repeatable; the first use replaces the default.
type listFlag struct {
	p   *[]string
	set bool
}

func (l *listFlag) Set(s string) error {
	if !l.set {
		*l.p = nil
		l.set = true
	}
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			*l.p = append(*l.p, part)
		}
	}
	return nil
}

func (l *listFlag) FlagType() string { return "list" }

func (l *listFlag) String() string {
	if l == nil || l.p == nil {
		return ""
	}
	return strings.Join(*l.p, ",")
}

// kwargsFlag parses a JSON object, converting string values as HF's _convert_str_dict does.
type kwargsFlag map[string]any

func (k *kwargsFlag) Set(s string) error {
	m, msg := kwargsFromJSON(JSONStringValue(strings.TrimSpace(s)))
	if msg != "" {
		return errors.New(msg)
	}
	*k = m
	return nil
}

func (k *kwargsFlag) FlagType() string { return "json" }

func (k *kwargsFlag) String() string {
	if k == nil || *k == nil {
		return ""
	}
	return string(appendPyJSON(nil, anyToJSON(map[string]any(*k)), pyJSONStyle{indent: -1}, 0))
}

// fsdpFlag takes HF's space-separated fsdp options (--fsdp "full_shard auto_wrap"); repeated
// flags add options, and the first use replaces the default.
type fsdpFlag struct {
	p   *[]string
	set bool
}

func (f *fsdpFlag) Set(s string) error {
	if !f.set {
		*f.p = []string{}
		f.set = true
	}
	*f.p = append(*f.p, strings.Fields(s)...)
	return nil
}

func (f *fsdpFlag) FlagType() string { return "options" }

func (f *fsdpFlag) String() string {
	if f == nil || f.p == nil {
		return ""
	}
	return strings.Join(*f.p, " ")
}

// fsdpConfigFlag takes the path of an fsdp_config JSON file, read at once (at most 1 MiB), or an
// inline JSON object (HF's command-line dict form, string values converted as HF does).
type fsdpConfigFlag struct {
	p     *FSDPConfig
	value string
}

func (f *fsdpConfigFlag) Set(s string) error {
	c, msg := fsdpConfigFromArg(JSONStringValue(strings.TrimSpace(s)))
	if msg != "" {
		return errors.New(msg)
	}
	*f.p, f.value = c, s
	return nil
}

func (f *fsdpConfigFlag) FlagType() string { return "file|json" }

func (f *fsdpConfigFlag) String() string {
	if f == nil {
		return ""
	}
	return f.value
}

// unsupportedFlag records an unimplemented HF argument given on the command line.
type unsupportedFlag struct {
	args  *TrainingArguments
	field *hfField
	value string
}

func (u *unsupportedFlag) Set(s string) error {
	u.value = s
	v := flagValueToJSON(s)
	if b, err := parseBool(s); err == nil && u.IsBoolFlag() {
		v = JSONBoolValue(b)
	}
	if u.field.policy == hfRefuse && !u.field.isDefault(v) {
		u.args.Unsupported = append(u.args.Unsupported, UnsupportedSetting{Name: u.field.name, Value: s, Advice: u.field.advice})
	}
	return nil
}

func (u *unsupportedFlag) String() string {
	if u == nil {
		return ""
	}
	return u.value
}

// IsBoolFlag makes HF's boolean switches (--fp16, --push_to_hub) work without a value.
func (u *unsupportedFlag) IsBoolFlag() bool {
	return u != nil && (u.field.def == "False" || u.field.def == "True")
}

// flagValueToJSON reads a command-line value as HfArgumentParser would type it, for comparing
// with HF's default: booleans, None, numbers, JSON objects/lists, else a string.
func flagValueToJSON(s string) JSONValue {
	if s == "None" || s == "null" {
		return JSONNullValue()
	}
	if b, err := parseBool(s); err == nil && !isASCIIDigits(s) {
		return JSONBoolValue(b)
	}
	if i, err := parseInt(s); err == nil {
		return JSONIntValue(int64(i))
	}
	if f, err := parseFloat(s); err == nil {
		return JSONFloatValue(f)
	}
	if strings.HasPrefix(s, "{") || strings.HasPrefix(s, "[") {
		if v, err := parsePyJSON([]byte(s)); err == nil {
			return v
		}
	}
	return JSONStringValue(s)
}
