package core

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// RawConfig is a config.json kept field by field as written, so that fields gotpu does not model
// are written back unchanged and fields it does model keep their original spelling (1e-05, 10000.0)
// when their value has not changed.
type RawConfig struct {
	// Path is the file the config came from ("" for one built in memory); errors name it.
	Path   string
	fields map[string]json.RawMessage
}

// NewRawConfig returns an empty config (for models built from scratch).
func NewRawConfig() *RawConfig { return &RawConfig{fields: map[string]json.RawMessage{}} }

// MaxConfigSize bounds config.json: 16 MiB. Real ones are a few KB (a BERT with 20k labels in
// id2label is about 1 MB); a larger file is refused by its size before it is read.
const MaxConfigSize = 16 << 20

// ReadRawConfig reads and parses path.
func ReadRawConfig(path string) (*RawConfig, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxConfigSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(b) > MaxConfigSize {
		return nil, fmt.Errorf("%s: larger than %d MiB, the most a config.json may hold", path, MaxConfigSize>>20)
	}
	return ParseRawConfig(path, b)
}

// ParseRawConfig parses config.json bytes; path is only used in errors.
func ParseRawConfig(path string, b []byte) (*RawConfig, error) {
	var fields map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&fields); err != nil {
		return nil, fmt.Errorf("%s: not a JSON object: %w", path, err)
	}
	if fields == nil {
		return nil, fmt.Errorf("%s: not a JSON object: null", path)
	}
	return &RawConfig{Path: path, fields: fields}, nil
}

// Has tells whether key is present (even as null).
func (r *RawConfig) Has(key string) bool { _, ok := r.fields[key]; return ok }

// IsNull tells whether key is absent or null.
func (r *RawConfig) IsNull(key string) bool {
	v, ok := r.fields[key]
	return !ok || string(bytes.TrimSpace(v)) == "null"
}

// Keys lists the fields present, sorted.
func (r *RawConfig) Keys() []string {
	keys := make([]string, 0, len(r.fields))
	for k := range r.fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Raw returns the field's JSON as written.
func (r *RawConfig) Raw(key string) (json.RawMessage, bool) { v, ok := r.fields[key]; return v, ok }

// Get decodes key into dst when present and not null, and reports whether it did. A type mismatch
// is an error naming the file and the field.
func (r *RawConfig) Get(key string, dst any) (bool, error) {
	if r.IsNull(key) {
		return false, nil
	}
	if err := json.Unmarshal(r.fields[key], dst); err != nil {
		return false, r.FieldError(key, fmt.Errorf("%s: %w", strings.TrimSpace(string(r.fields[key])), err))
	}
	return true, nil
}

// FieldError wraps err with the file and field name.
func (r *RawConfig) FieldError(key string, err error) error {
	where := r.Path
	if where == "" {
		where = "config"
	}
	return fmt.Errorf("%s: field %q: %w", where, key, err)
}

// Int, Float, Bool and String read a field into *dst, leaving the default when absent or null.
func (r *RawConfig) Int(key string, dst *int) error { _, err := r.Get(key, dst); return err }

func (r *RawConfig) Float(key string, dst *float64) error { _, err := r.Get(key, dst); return err }

func (r *RawConfig) Bool(key string, dst *bool) error { _, err := r.Get(key, dst); return err }

func (r *RawConfig) String(key string, dst *string) error { _, err := r.Get(key, dst); return err }

// OptInt reads a field that HF allows to be null: nil when absent or null.
func (r *RawConfig) OptInt(key string) (*int, error) {
	var v int
	ok, err := r.Get(key, &v)
	if !ok || err != nil {
		return nil, err
	}
	return &v, nil
}

// Field is one value a typed config writes into config.json.
type Field struct {
	Key   string
	Value any
	// Always writes the field even when the original file did not have it; otherwise it is written
	// only when present in the original or when Value differs from Default.
	Always  bool
	Default any
}

// Marshal writes config.json as HF's to_json_file does (sorted keys, two-space indent, final
// newline): the original fields, with the typed fields written over them. A typed field whose value
// equals what the file said keeps its original bytes.
func (r *RawConfig) Marshal(fields []Field) ([]byte, error) {
	out := make(map[string]json.RawMessage, len(r.fields)+len(fields))
	for k, v := range r.fields {
		out[k] = v
	}
	for _, f := range fields {
		orig, present := r.fields[f.Key]
		if !present && !f.Always && reflect.DeepEqual(f.Value, f.Default) {
			continue
		}
		enc, err := marshalPy(f.Value)
		if err != nil {
			return nil, fmt.Errorf("config field %q: %w", f.Key, err)
		}
		if present && jsonEqual(orig, enc) {
			continue // Same value: keep the original spelling.
		}
		out[f.Key] = enc
	}
	keys := make([]string, 0, len(out))
	for k := range out {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var buf bytes.Buffer
	buf.WriteString("{\n")
	for i, k := range keys {
		kb, _ := json.Marshal(k)
		buf.WriteString("  ")
		buf.Write(kb)
		buf.WriteString(": ")
		var ind bytes.Buffer
		if err := json.Indent(&ind, bytes.TrimSpace(out[k]), "  ", "  "); err != nil {
			return nil, fmt.Errorf("config field %q: %w", k, err)
		}
		buf.Write(ind.Bytes())
		if i < len(keys)-1 {
			buf.WriteByte(',')
		}
		buf.WriteByte('\n')
	}
	buf.WriteString("}\n")
	return buf.Bytes(), nil
}

// jsonEqual compares two JSON values semantically (numbers as float64).
func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// PyFloat marks a float that Python would write as a float (1e-05, 10000.0), not as Go writes it.
type PyFloat float64

// marshalPy encodes v as Python's json.dumps would for the types configs use.
func marshalPy(v any) (json.RawMessage, error) {
	switch x := v.(type) {
	case PyFloat:
		return json.RawMessage(formatPyFloat(float64(x))), nil
	case float64:
		return json.RawMessage(formatPyFloat(x)), nil
	case *PyFloat:
		if x == nil {
			return json.RawMessage("null"), nil
		}
		return json.RawMessage(formatPyFloat(float64(*x))), nil
	}
	b, err := json.Marshal(v)
	return json.RawMessage(b), err
}

// formatPyFloat reproduces Python's repr(float): shortest round-trip digits, scientific notation
// when the decimal exponent is < -4 or >= 16, and ".0" on integral values.
func formatPyFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	mant, expS, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expS)
	if exp < -4 || exp >= 16 {
		sign := "+"
		if exp < 0 {
			sign, exp = "-", -exp
		}
		return fmt.Sprintf("%se%s%02d", mant, sign, exp)
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return s
}

// Common holds the config fields every architecture shares: the raw file, and the weights dtype,
// which transformers 4 writes as torch_dtype and transformers 5 as dtype.
type Common struct {
	Raw      *RawConfig
	DTypeKey string // "torch_dtype" or "dtype"
	DType    string // "float32", "bfloat16", ... ("" when unknown)
}

// ReadCommon fills c from raw.
func (c *Common) ReadCommon(raw *RawConfig) error {
	c.Raw = raw
	c.DTypeKey = "torch_dtype"
	if raw.Has("dtype") && !raw.Has("torch_dtype") {
		c.DTypeKey = "dtype"
	}
	return raw.String(c.DTypeKey, &c.DType)
}

// SetDType records the dtype of saved weights.
func (c *Common) SetDType(name string) { c.DType = name }

// CommonFields are the shared fields to write.
func (c *Common) CommonFields(modelType, arch string) []Field {
	key := c.DTypeKey
	if key == "" {
		key = "torch_dtype"
	}
	f := []Field{
		{Key: "model_type", Value: modelType, Always: true},
		{Key: "architectures", Value: []string{arch}, Always: true},
	}
	if c.DType != "" {
		f = append(f, Field{Key: key, Value: c.DType, Always: true})
	}
	return f
}

// RawOrEmpty returns c.Raw, or an empty config for models built in memory.
func (c *Common) RawOrEmpty() *RawConfig {
	if c.Raw == nil {
		c.Raw = NewRawConfig()
	}
	return c.Raw
}

// TokenIDs reads a token-id field that HF allows to be an int, a list of ints, or null.
func (r *RawConfig) TokenIDs(key string) ([]int, error) {
	if r.IsNull(key) {
		return nil, nil
	}
	var one int
	if err := json.Unmarshal(r.fields[key], &one); err == nil {
		return []int{one}, nil
	}
	var many []int
	if err := json.Unmarshal(r.fields[key], &many); err != nil {
		return nil, r.FieldError(key, fmt.Errorf("want an integer or a list of integers: %w", err))
	}
	return many, nil
}

// TokenIDsValue is how a token-id list is written: a single int, a list, or null.
func TokenIDsValue(ids []int) any {
	switch len(ids) {
	case 0:
		return nil
	case 1:
		return ids[0]
	}
	return ids
}

// MarshalJSON writes the float as Python's json module does.
func (f PyFloat) MarshalJSON() ([]byte, error) { return []byte(formatPyFloat(float64(f))), nil }

// PyMap is a JSON object written with sorted keys and its PyFloat values the Python way
// (encoding/json sorts map keys too, but writes floats as Go does): nested config dicts such as
// rope_parameters.
type PyMap map[string]any

// MarshalJSON implements json.Marshaler.
func (m PyMap) MarshalJSON() ([]byte, error) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := []byte{'{'}
	for i, k := range keys {
		if i > 0 {
			out = append(out, ',')
		}
		kb, _ := json.Marshal(k)
		out = append(out, kb...)
		out = append(out, ':')
		var vb []byte
		var err error
		if f, ok := m[k].(PyFloat); ok {
			vb, err = f.MarshalJSON()
		} else {
			vb, err = json.Marshal(m[k])
		}
		if err != nil {
			return nil, err
		}
		out = append(out, vb...)
	}
	return append(out, '}'), nil
}

// FormatPyFloat is Python's repr(float), as json.dumps writes floats.
func FormatPyFloat(f float64) string { return formatPyFloat(f) }
