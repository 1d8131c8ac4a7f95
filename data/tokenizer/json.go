package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// A small layer over encoding/json that keeps the JSON path of every value,
// so that load errors can say which field is wrong.

type jval struct {
	path string
	raw  json.RawMessage
}

type jobj struct {
	path string
	m    map[string]json.RawMessage
}

func childPath(parent, key string) string {
	ident := key != ""
	for i, r := range key {
		if !(r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (i > 0 && r >= '0' && r <= '9')) {
			ident = false
			break
		}
	}
	if !ident {
		return parent + "[" + strconv.Quote(key) + "]"
	}
	if parent == "" {
		return key
	}
	return parent + "." + key
}

func indexPath(parent string, i int) string { return fmt.Sprintf("%s[%d]", parent, i) }

func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(bytes.TrimSpace(raw)) == "null"
}

func (v jval) null() bool { return isNull(v.raw) }

func kind(raw json.RawMessage) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return "nothing"
	}
	switch t[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

func (v jval) object() (jobj, error) {
	t := bytes.TrimSpace(v.raw)
	if len(t) == 0 || t[0] != '{' {
		return jobj{}, errAt(v.path, "expected an object, got %s", kind(v.raw))
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(t, &m); err != nil {
		return jobj{}, errAt(v.path, "%v", err)
	}
	return jobj{path: v.path, m: m}, nil
}

func (v jval) array() ([]jval, error) {
	t := bytes.TrimSpace(v.raw)
	if len(t) == 0 || t[0] != '[' {
		return nil, errAt(v.path, "expected an array, got %s", kind(v.raw))
	}
	var items []json.RawMessage
	if err := json.Unmarshal(t, &items); err != nil {
		return nil, errAt(v.path, "%v", err)
	}
	out := make([]jval, len(items))
	for i, it := range items {
		out[i] = jval{path: indexPath(v.path, i), raw: it}
	}
	return out, nil
}

func (v jval) str() (string, error) {
	t := bytes.TrimSpace(v.raw)
	if len(t) == 0 || t[0] != '"' {
		return "", errAt(v.path, "expected a string, got %s", kind(v.raw))
	}
	var s string
	if err := json.Unmarshal(t, &s); err != nil {
		return "", errAt(v.path, "%v", err)
	}
	return s, nil
}

func (v jval) boolean() (bool, error) {
	switch string(bytes.TrimSpace(v.raw)) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, errAt(v.path, "expected a boolean, got %s", kind(v.raw))
}

// uint parses a non-negative integer no larger than max.
func (v jval) uint(max uint64) (uint64, error) {
	t := string(bytes.TrimSpace(v.raw))
	if kind(v.raw) != "a number" {
		return 0, errAt(v.path, "expected a non-negative integer, got %s", kind(v.raw))
	}
	return parseUint(v.path, t, max)
}

func parseUint(path, t string, max uint64) (uint64, error) {
	n, err := strconv.ParseUint(t, 10, 64)
	if err != nil || n > max {
		if strings.HasPrefix(t, "-") {
			return 0, errAt(path, "%s is negative", t)
		}
		if strings.ContainsAny(t, ".eE") {
			if f, ferr := strconv.ParseFloat(t, 64); ferr == nil && f == math.Trunc(f) && f >= 0 && f <= float64(max) {
				return uint64(f), nil
			}
			return 0, errAt(path, "%s is not an integer in [0, %d]", t, max)
		}
		return 0, errAt(path, "%s is out of range [0, %d]", t, max)
	}
	return n, nil
}

func (v jval) float() (float64, error) {
	t := string(bytes.TrimSpace(v.raw))
	if kind(v.raw) != "a number" {
		return 0, errAt(v.path, "expected a number, got %s", kind(v.raw))
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsInf(f, 0) {
		return 0, errAt(v.path, "%s is not a finite number", t)
	}
	return f, nil
}

func (o jobj) get(key string) jval {
	return jval{path: childPath(o.path, key), raw: o.m[key]}
}

// has reports whether key is present and not null.
func (o jobj) has(key string) bool { return !isNull(o.m[key]) }

func (o jobj) str(key, def string) (string, error) {
	if !o.has(key) {
		return def, nil
	}
	return o.get(key).str()
}

func (o jobj) reqStr(key string) (string, error) {
	if !o.has(key) {
		return "", errAt(childPath(o.path, key), "missing")
	}
	return o.get(key).str()
}

func (o jobj) optStr(key string) (*string, error) {
	if !o.has(key) {
		return nil, nil
	}
	s, err := o.get(key).str()
	return &s, err
}

func (o jobj) boolean(key string, def bool) (bool, error) {
	if !o.has(key) {
		return def, nil
	}
	return o.get(key).boolean()
}

func (o jobj) uint(key string, def, max uint64) (uint64, error) {
	if !o.has(key) {
		return def, nil
	}
	return o.get(key).uint(max)
}

// typeName reads the "type" tag of a component object.
func (o jobj) typeName() (string, error) {
	if _, ok := o.m["type"]; !ok {
		return "", errAt(childPath(o.path, "type"), "missing")
	}
	if !o.has("type") {
		return "", errAt(childPath(o.path, "type"), "is null")
	}
	return o.get("type").str()
}

// decodeNumberMap decodes a JSON object of numbers keeping them as text.
func decodeNumberMap(v jval) (map[string]json.Number, error) {
	t := bytes.TrimSpace(v.raw)
	if len(t) == 0 || t[0] != '{' {
		return nil, errAt(v.path, "expected an object, got %s", kind(v.raw))
	}
	dec := json.NewDecoder(bytes.NewReader(t))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, errAt(v.path, "%v", err)
	}
	out := make(map[string]json.Number, len(m))
	for k, x := range m {
		n, ok := x.(json.Number)
		if !ok {
			return nil, errAt(childPath(v.path, k), "expected a number, got %T", x)
		}
		out[k] = n
	}
	return out, nil
}

// syntaxError turns an encoding/json error on the whole file into a message
// with a line and column, and the path of the value being read.
func syntaxError(data []byte, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	off := int64(-1)
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
	case errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(err.Error(), "unexpected end of JSON input"):
		off = int64(len(data))
	}
	if off < 0 {
		return err
	}
	line, col := lineCol(data, int(off))
	path := pathAtOffset(data, off)
	if path != "" {
		return errAt(path, "invalid JSON at line %d, column %d: %v", line, col, err)
	}
	return fmt.Errorf("invalid JSON at line %d, column %d: %v", line, col, err)
}

func lineCol(data []byte, off int) (int, int) {
	if off > len(data) {
		off = len(data)
	}
	line := 1 + bytes.Count(data[:off], []byte{'\n'})
	col := off - bytes.LastIndexByte(data[:off], '\n')
	return line, col
}

// pathAtOffset returns the JSON path of the value being read at byte offset
// off, by replaying the tokens up to there.
func pathAtOffset(data []byte, off int64) string {
	type frame struct {
		array bool
		index int
		key   string
		// inObject: whether the next string token is a key
		wantKey bool
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var stack []frame
	render := func() string {
		p := ""
		for _, f := range stack {
			if f.array {
				p = indexPath(p, f.index)
			} else if f.key != "" {
				p = childPath(p, f.key)
			}
		}
		return p
	}
	for {
		before := dec.InputOffset()
		if before >= off {
			return render()
		}
		tok, err := dec.Token()
		if err != nil {
			return render()
		}
		if dec.InputOffset() > off {
			// The offending byte is inside this token.
			if len(stack) > 0 {
				top := &stack[len(stack)-1]
				switch {
				case top.array:
					top.index++
				case top.wantKey:
					// The problem is in a key: name the object holding it.
					top.key = ""
				}
			}
			return render()
		}
		var top *frame
		if len(stack) > 0 {
			top = &stack[len(stack)-1]
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				if top != nil {
					if top.array {
						top.index++
					} else {
						top.wantKey = true
					}
				}
				stack = append(stack, frame{array: t == '[', index: -1, wantKey: t == '{'})
			default:
				stack = stack[:len(stack)-1]
			}
		default:
			if top == nil {
				continue
			}
			if top.array {
				top.index++
			} else if top.wantKey {
				top.key, _ = t.(string)
				top.wantKey = false
			} else {
				top.wantKey = true
			}
		}
	}
}
