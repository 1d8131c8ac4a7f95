package trainer

import (
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// argField is one field of TrainingArguments or ModelDataArguments, as the json and hf struct
// tags describe it.
type argField struct {
	name     string // HF name (json tag)
	index    int    // struct field index
	nullable bool   // JSON null means the default
	steps    bool   // "int or ratio" float: written as an int when integral
}

// argStruct is the field table of one arguments struct, built once by reflection.
type argStruct struct {
	name   string
	fields []argField
	byName map[string]argField
}

func newArgStruct(name string, t reflect.Type) *argStruct {
	s := &argStruct{name: name, byName: map[string]argField{}}
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "" || tag == "-" {
			continue
		}
		f := argField{name: tag, index: i}
		for _, opt := range strings.Split(sf.Tag.Get("hf"), ",") {
			switch opt {
			case "nullable":
				f.nullable = true
			case "steps":
				f.steps = true
			}
		}
		s.fields = append(s.fields, f)
		s.byName[tag] = f
	}
	return s
}

var (
	trainingArgsMeta  = newArgStruct("TrainingArguments", reflect.TypeFor[TrainingArguments]())
	modelDataArgsMeta = newArgStruct("ModelDataArguments", reflect.TypeFor[ModelDataArguments]())
)

// modelDataAliases maps other spellings of model/data arguments to the field name.
//
// revision is `hf download`'s and from_pretrained's name for model_revision; dataset_train_split
// and dataset_test_split are TRL's ScriptArguments names for the splits.
var modelDataAliases = map[string]string{
	"dtype":               "torch_dtype",
	"revision":            "model_revision",
	"dataset_train_split": "train_split",
	"dataset_test_split":  "validation_split",
}

// LoadTrainingArguments reads an argument file: a TrainingArguments dump (to_json_string or
// to_dict) or the JSON a user passes to an HfArgumentParser script. See
// ParseTrainingArgumentsJSON.
func LoadTrainingArguments(path string) (*TrainingArguments, *ModelDataArguments, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("trainer: reading training arguments: %w", err)
	}
	return ParseTrainingArgumentsJSON(data, path)
}

// ParseTrainingArgumentsJSON decodes an argument file onto DefaultTrainingArguments. source
// names the file in errors.
//
// Keys are sorted into: TrainingArguments fields gotpu implements (decoded; the old name
// evaluation_strategy is mapped to eval_strategy), HF fields gotpu does not implement (accepted
// when they hold HF's default in any form HF writes, refused otherwise with what to do instead),
// model/data arguments of HF's example scripts (decoded into the ModelDataArguments), and keys
// that belong to neither (refused by name, with the config class they seem to come from).
// The result is also validated (Validate). All problems are reported together in one
// *ArgumentsError; a file that is not JSON, or whose top level is not an object, gives an error
// wrapping ErrJSONSyntax.
//
// Finalize is not applied, so that command-line flags can still override file values
// (MergeFlags) before HF's derived values are computed.
func ParseTrainingArgumentsJSON(data []byte, source string) (*TrainingArguments, *ModelDataArguments, error) {
	a := DefaultTrainingArguments()
	var md ModelDataArguments
	if err := a.ApplyJSON(data, source, &md); err != nil {
		return nil, nil, err
	}
	return &a, &md, nil
}

// ApplyJSON decodes an argument file onto a and md (see ParseTrainingArgumentsJSON); md may be
// nil to drop model/data arguments. On error, a and md may be partly updated.
func (a *TrainingArguments) ApplyJSON(data []byte, source string, md *ModelDataArguments) error {
	root, err := parsePyJSON(data)
	if err != nil {
		return fmt.Errorf("trainer: %s: %w", source, err)
	}
	if root.Kind() != JSONObject {
		return fmt.Errorf("trainer: %s: %w: top level is a %s, want an object of argument names",
			source, ErrJSONSyntax, root.Kind())
	}
	if md == nil {
		md = new(ModelDataArguments)
	}
	var errs errorList
	av := reflect.ValueOf(a).Elem()
	mv := reflect.ValueOf(md).Elem()
	var evalStrategy, evaluationStrategy *JSONValue
	origins := map[string]int{}
	for _, m := range root.Object() {
		key, v := m.Key, m.Value
		if f, ok := trainingArgsMeta.byName[key]; ok {
			if key == "eval_strategy" {
				evalStrategy = &v
			}
			if msg := decodeArg(av.Field(f.index), f, v); msg != "" {
				errs.invalid(key, "%s", msg)
			}
			continue
		}
		if hf, ok := hfFieldByName[key]; ok {
			switch hf.policy {
			case hfAlias:
				evaluationStrategy = &v
			case hfRefuse:
				if !hf.isDefault(v) {
					a.Unsupported = append(a.Unsupported, UnsupportedSetting{Name: key, Value: jsonPreview(v), Advice: hf.advice})
				}
			}
			continue
		}
		mdKey := key
		if alias, ok := modelDataAliases[key]; ok {
			mdKey = alias
		}
		if f, ok := modelDataArgsMeta.byName[mdKey]; ok {
			if msg := decodeArg(mv.Field(f.index), f, v); msg != "" {
				errs.add("ModelDataArguments", key, ErrInvalidArgument, "%s", msg)
			}
			continue
		}
		if fa, ok := foreignArguments[key]; ok {
			origins[fa.origin]++
			errs.add("TrainingArguments", key, ErrUnknownArgument,
				"not a TrainingArguments field; this looks like a %s key (%s, which gotpu does not implement)", fa.origin, fa.what)
			continue
		}
		errs.add("TrainingArguments", key, ErrUnknownArgument, "%s", unknownKeyMessage(key))
	}
	if evaluationStrategy != nil && !evaluationStrategy.IsNull() {
		// HF < 4.46: a non-None evaluation_strategy overrides eval_strategy. Dumps of 4.41–4.45
		// hold both, equal; a file where they differ is ambiguous, so it is refused.
		if evalStrategy != nil && !evalStrategy.IsNull() && !evalStrategy.Equal(*evaluationStrategy) {
			errs.invalid("evaluation_strategy", "%s disagrees with eval_strategy %s; keep only eval_strategy",
				jsonPreview(*evaluationStrategy), jsonPreview(*evalStrategy))
		} else if msg := decodeArg(av.Field(trainingArgsMeta.byName["eval_strategy"].index),
			trainingArgsMeta.byName["eval_strategy"], *evaluationStrategy); msg != "" {
			errs.invalid("evaluation_strategy", "%s", msg)
		}
	}
	// Fields that failed to decode kept their (valid) defaults, so validating now adds only
	// real problems, and one pass reports everything.
	if err := a.Validate(); err != nil {
		var ae *ArgumentsError
		if !errors.As(err, &ae) {
			return fmt.Errorf("trainer: %s: %w", source, err)
		}
		errs.fields = append(errs.fields, ae.Fields...)
	}
	// Report in the file's order; problems not tied to a key of the file go last.
	pos := make(map[string]int, len(root.Object()))
	for i, m := range root.Object() {
		pos[m.Key] = i
	}
	at := func(f *FieldError) int {
		if i, ok := pos[f.Field]; ok {
			return i
		}
		return len(pos)
	}
	sort.SliceStable(errs.fields, func(i, j int) bool { return at(errs.fields[i]) < at(errs.fields[j]) })
	return errs.err(source, originHint(origins))
}

// originHint summarizes where foreign keys seem to come from.
func originHint(origins map[string]int) string {
	if len(origins) == 0 {
		return ""
	}
	names := make([]string, 0, len(origins))
	for o := range origins {
		names = append(names, o)
	}
	sort.Slice(names, func(i, j int) bool {
		if origins[names[i]] != origins[names[j]] {
			return origins[names[i]] > origins[names[j]]
		}
		return names[i] < names[j]
	})
	return "this looks like a " + names[0] + " dump, not plain TrainingArguments"
}

// unknownKeyMessage explains an unknown key, suggesting the field it may be a misspelling of.
func unknownKeyMessage(key string) string {
	msg := "not a TrainingArguments field nor a model/data argument of HF's example scripts"
	if s := suggestField(key); s != "" {
		return msg + fmt.Sprintf("; did you mean %s?", s)
	}
	return msg + "; remove it"
}

// suggestField returns the known name closest to key (dashes for underscores, case, or an edit
// distance of at most 2), or "".
func suggestField(key string) string {
	norm := strings.ToLower(strings.ReplaceAll(key, "-", "_"))
	best, bestDist := "", 3
	consider := func(name string) {
		if name == norm {
			best, bestDist = name, -1
			return
		}
		if d := editDistance(norm, name, bestDist); d < bestDist {
			best, bestDist = name, d
		}
	}
	for _, f := range trainingArgsMeta.fields {
		consider(f.name)
	}
	for _, f := range modelDataArgsMeta.fields {
		consider(f.name)
	}
	for _, f := range hfTrainingArgumentFields {
		consider(f.name)
	}
	return best
}

// editDistance is the Levenshtein distance of a and b, or limit if it is at least limit.
func editDistance(a, b string, limit int) int {
	if d := len(a) - len(b); d >= limit || -d >= limit {
		return limit
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			rowMin = min(rowMin, cur[j])
		}
		if rowMin >= limit {
			return limit
		}
		prev, cur = cur, prev
	}
	return min(prev[len(b)], limit)
}

// jsonPreview renders v compactly for messages.
func jsonPreview(v JSONValue) string {
	s := string(appendPyJSON(nil, v, pyJSONStyle{indent: -1}, 0))
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}

// decodeArg stores v into dst (a field of an arguments struct) and returns "" or what is wrong.
func decodeArg(dst reflect.Value, f argField, v JSONValue) string {
	switch f.name {
	case "fsdp":
		opts, msg := fsdpOptionsFromJSON(v)
		if msg == "" {
			dst.Set(reflect.ValueOf(opts))
		}
		return msg
	case "fsdp_config":
		c, msg := fsdpConfigFromArg(v)
		if msg == "" {
			dst.Set(reflect.ValueOf(c))
		}
		return msg
	}
	if v.IsNull() && f.name == "max_length" {
		dst.Set(reflect.ValueOf(new(int))) // TRL's None: no truncation, which gotpu spells 0
		return ""
	}
	if v.IsNull() {
		switch dst.Kind() {
		case reflect.Pointer, reflect.Slice:
			if f.name == "report_to" {
				return "" // None means HF's default, which dst already holds
			}
			dst.SetZero()
			return ""
		}
		if f.nullable {
			return "" // keep the default
		}
		return fmt.Sprintf("null, want %s", wantOf(dst.Type(), f))
	}
	if f.name == "include_num_input_tokens_seen" {
		if b, ok := v.Bool(); ok { // 4.x bool form
			dst.SetString(map[bool]string{true: "all", false: "no"}[b])
			return ""
		}
	}
	if f.name == "lr_scheduler_kwargs" {
		kw, msg := kwargsFromJSON(v)
		if msg == "" {
			dst.Set(reflect.ValueOf(kw))
		}
		return msg
	}
	if dst.Kind() == reflect.Pointer {
		elem := reflect.New(dst.Type().Elem())
		if msg := decodeScalar(elem.Elem(), f, v); msg != "" {
			return msg
		}
		dst.Set(elem)
		return ""
	}
	return decodeScalar(dst, f, v)
}

func decodeScalar(dst reflect.Value, f argField, v JSONValue) string {
	bad := func() string {
		return fmt.Sprintf("%s is a %s, want %s", jsonPreview(v), v.Kind(), wantOf(dst.Type(), f))
	}
	switch dst.Kind() {
	case reflect.Bool:
		b, ok := v.Bool()
		if !ok {
			return bad()
		}
		dst.SetBool(b)
	case reflect.Int:
		i, ok := v.Int()
		if !ok || i != int64(int(i)) {
			return bad()
		}
		dst.SetInt(i)
	case reflect.Float64:
		x, ok := v.Float()
		if !ok {
			return bad()
		}
		dst.SetFloat(x)
	case reflect.String:
		s, ok := v.Str()
		if !ok {
			return bad()
		}
		dst.SetString(s)
	case reflect.Slice: // []string
		if s, ok := v.Str(); ok { // HF accepts a single string where it takes a list
			dst.Set(reflect.ValueOf([]string{s}))
			return ""
		}
		if v.Kind() != JSONArray {
			return bad()
		}
		out := make([]string, 0, len(v.Array()))
		for _, item := range v.Array() {
			s, ok := item.Str()
			if !ok {
				return bad()
			}
			out = append(out, s)
		}
		dst.Set(reflect.ValueOf(out))
	default:
		return bad()
	}
	return ""
}

func wantOf(t reflect.Type, f argField) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case f.name == "include_num_input_tokens_seen":
		return `"no", "all", "non_padding" or a bool`
	case t.Kind() == reflect.Bool:
		return "true or false"
	case t.Kind() == reflect.Int:
		return "an integer"
	case t.Kind() == reflect.Float64:
		return "a number"
	case t.Kind() == reflect.String:
		return "a string"
	case t.Kind() == reflect.Slice:
		return "a list of strings"
	case t.Kind() == reflect.Map:
		return "an object"
	}
	return t.String()
}

// kwargsFromJSON converts lr_scheduler_kwargs: an object, or (as HF's post-init accepts from
// the command line) a string holding a JSON object whose string values are converted like
// HF's _convert_str_dict.
func kwargsFromJSON(v JSONValue) (map[string]any, string) {
	if s, ok := v.Str(); ok {
		if !strings.HasPrefix(s, "{") {
			return nil, fmt.Sprintf("%s is a string, want an object (or a JSON object in a string)", jsonPreview(v))
		}
		inner, err := parsePyJSON([]byte(s))
		if err != nil || inner.Kind() != JSONObject {
			return nil, fmt.Sprintf("%s is not a JSON object", jsonPreview(v))
		}
		return convertStrDict(jsonToAny(inner).(map[string]any)), ""
	}
	if v.Kind() != JSONObject {
		return nil, fmt.Sprintf("%s is a %s, want an object", jsonPreview(v), v.Kind())
	}
	return jsonToAny(v).(map[string]any), ""
}

// convertStrDict mirrors HF's _convert_str_dict: in a dict that came from a command-line
// string, "true"/"false" become bools, digit strings ints, and d.d strings floats.
func convertStrDict(m map[string]any) map[string]any {
	for k, v := range m {
		switch x := v.(type) {
		case map[string]any:
			m[k] = convertStrDict(x)
		case string:
			switch {
			case strings.EqualFold(x, "true") || strings.EqualFold(x, "false"):
				m[k] = strings.EqualFold(x, "true")
			case isASCIIDigits(x):
				if i, err := strconv.ParseInt(x, 10, 64); err == nil {
					m[k] = i
				}
			case strings.Count(x, ".") == 1 && isASCIIDigits(strings.Replace(x, ".", "", 1)):
				if f, err := strconv.ParseFloat(x, 64); err == nil {
					m[k] = f
				}
			}
		}
	}
	return m
}

func isASCIIDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}

// jsonToAny converts to plain Go values: nil, bool, int64 (or float64 beyond int64), float64,
// string, []any, map[string]any.
func jsonToAny(v JSONValue) any {
	switch v.Kind() {
	case JSONBool:
		b, _ := v.Bool()
		return b
	case JSONInt:
		if i, ok := v.Int(); ok {
			return i
		}
		f, _ := v.Float()
		return f
	case JSONFloat:
		f, _ := v.Float()
		return f
	case JSONString:
		s, _ := v.Str()
		return s
	case JSONArray:
		out := make([]any, len(v.Array()))
		for i, item := range v.Array() {
			out[i] = jsonToAny(item)
		}
		return out
	case JSONObject:
		out := make(map[string]any, len(v.Object()))
		for _, m := range v.Object() {
			out[m.Key] = jsonToAny(m.Value)
		}
		return out
	}
	return nil
}

// anyToJSON converts plain Go values back; maps are written with sorted keys.
func anyToJSON(x any) JSONValue {
	switch v := x.(type) {
	case nil:
		return JSONNullValue()
	case bool:
		return JSONBoolValue(v)
	case int:
		return JSONIntValue(int64(v))
	case int64:
		return JSONIntValue(v)
	case float64:
		return JSONFloatValue(v)
	case string:
		return JSONStringValue(v)
	case []any:
		items := make([]JSONValue, len(v))
		for i, item := range v {
			items[i] = anyToJSON(item)
		}
		return JSONArrayValue(items...)
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		members := make([]JSONMember, len(keys))
		for i, k := range keys {
			members[i] = JSONMember{k, anyToJSON(v[k])}
		}
		return JSONObjectValue(members...)
	}
	return JSONStringValue(fmt.Sprint(x))
}

// ToJSON writes the arguments as HF's TrainingArguments.to_json_string() lays them out:
// json.dumps(to_dict(), indent=2), keys in declaration order (4.5x order; gotpu's extras last),
// Python float formatting, no trailing newline. This is what gotpu saves as training_args.json
// in a checkpoint (HF saves a pickled training_args.bin). Unsupported settings are not written.
func (a *TrainingArguments) ToJSON() []byte {
	av := reflect.ValueOf(a).Elem()
	members := make([]JSONMember, 0, len(trainingArgsMeta.fields))
	for _, f := range trainingArgsMeta.fields {
		members = append(members, JSONMember{f.name, encodeArg(av.Field(f.index), f)})
	}
	return appendPyJSON(nil, JSONValue{kind: JSONObject, obj: members}, pyJSONStyle{indent: 2}, 0)
}

func encodeArg(v reflect.Value, f argField) JSONValue {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return JSONNullValue()
		}
		return encodeArg(v.Elem(), f)
	case reflect.Bool:
		return JSONBoolValue(v.Bool())
	case reflect.Int:
		return JSONIntValue(v.Int())
	case reflect.Float64:
		x := v.Float()
		if f.steps && x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return JSONIntValue(int64(x))
		}
		return JSONFloatValue(x)
	case reflect.String:
		if f.nullable && v.String() == "" {
			return JSONNullValue()
		}
		return JSONStringValue(v.String())
	case reflect.Slice:
		if v.IsNil() {
			if f.name == "fsdp" { // HF's post-init makes every "off" form []
				return JSONArrayValue()
			}
			return JSONNullValue()
		}
		items := make([]JSONValue, v.Len())
		for i := range items {
			items[i] = JSONStringValue(v.Index(i).String())
		}
		return JSONArrayValue(items...)
	case reflect.Map:
		if v.IsNil() {
			return JSONObjectValue()
		}
		return anyToJSON(v.Interface())
	case reflect.Struct:
		if c, ok := v.Interface().(FSDPConfig); ok {
			return c.toJSON()
		}
	}
	return JSONNullValue()
}
