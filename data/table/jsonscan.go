package table

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxJSONDepth bounds how deep arrays and objects nest in one JSON record, its own braces
// included. Nothing here recurses on nesting (records are walked and typed in one iterative
// pass), so the bound is not for this package's sake: it turns a pathological record into a
// clear error naming the limit. Python's json, which datasets falls back on, stops near the same
// depth (its recursion limit); encoding/json stops at 10,000.
const MaxJSONDepth = 1000

var (
	errJSONSyntax = errors.New("invalid JSON")
	errJSONDepth  = fmt.Errorf("arrays and objects nested deeper than %d levels, the most a JSON record may have: %w", MaxJSONDepth, ErrTooLarge)
	errNotObject  = fmt.Errorf("not a JSON object: %w", ErrCorrupt)
)

// walkObject calls fn with each top-level key of the JSON object obj (raw, quotes included) and
// its value, in order, without allocating: the values stay slices of obj. An object of more than
// maxKeys keys is refused at key maxKeys+1 (errFields), nesting deeper than MaxJSONDepth where it
// is met (errJSONDepth). The walk checks structure only as far as it needs to find the keys and
// values: a JSON line is also validated (validJSON); an array's objects are by its decoder.
func walkObject(obj []byte, maxKeys int, fn func(key, val []byte) error) error {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return errNotObject
	}
	i = skipSpace(obj, i+1)
	if i < len(obj) && obj[i] == '}' {
		i++
	} else {
		for n := 1; ; n++ {
			if n > maxKeys {
				return errFields
			}
			if i >= len(obj) || obj[i] != '"' {
				return errJSONSyntax
			}
			end, err := skipString(obj, i)
			if err != nil {
				return err
			}
			key := obj[i:end]
			if i = skipSpace(obj, end); i >= len(obj) || obj[i] != ':' {
				return errJSONSyntax
			}
			i = skipSpace(obj, i+1)
			if end, err = skipValue(obj, i, 1); err != nil {
				return err
			}
			if err := fn(key, obj[i:end]); err != nil {
				return err
			}
			if i = skipSpace(obj, end); i >= len(obj) {
				return errJSONSyntax
			}
			if obj[i] == '}' {
				i++
				break
			}
			if obj[i] != ',' {
				return errJSONSyntax
			}
			i = skipSpace(obj, i+1)
		}
	}
	if skipSpace(obj, i) != len(obj) {
		return errJSONSyntax
	}
	return nil
}

// skipString returns the end of the JSON string starting at b[i] ('"'): a quote ends it unless
// an odd run of backslashes precedes it.
func skipString(b []byte, i int) (int, error) {
	for j := i + 1; ; {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return 0, errJSONSyntax
		}
		j += k
		slashes := 0
		for p := j - 1; p > i && b[p] == '\\'; p-- {
			slashes++
		}
		if slashes%2 == 0 {
			return j + 1, nil
		}
		j++
	}
}

// skipValue returns the end of the JSON value starting at b[i], which sits depth levels deep. It
// counts brackets instead of recursing, so nesting costs no stack; past MaxJSONDepth it stops.
func skipValue(b []byte, i, depth int) (int, error) {
	level := 0
	for {
		i = skipSpace(b, i)
		if i >= len(b) {
			return 0, errJSONSyntax
		}
		switch c := b[i]; {
		case c == '[' || c == '{':
			if level++; depth+level > MaxJSONDepth {
				return 0, errJSONDepth
			}
			i++
			continue
		case c == ']' || c == '}':
			if level == 0 {
				return 0, errJSONSyntax
			}
			level--
			i++
		case c == ',' || c == ':':
			if level == 0 {
				return 0, errJSONSyntax
			}
			i++
			continue
		case c == '"':
			var err error
			if i, err = skipString(b, i); err != nil {
				return 0, err
			}
		default:
			j := scalarEnd(b, i)
			if j == i {
				return 0, errJSONSyntax
			}
			i = j
		}
		if level == 0 {
			return i, nil
		}
	}
}

// scalarEnd returns the end of the number or literal (true, false, null) at b[i].
func scalarEnd(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ',', ':', ']', '}', '[', '{', '"', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}

// validJSON validates a JSON line, with encoding/json's message for the first error. The walk
// found its keys and values, but accepts some malformed input (a number "1x", a missing comma
// inside a value) that the loaders refuse.
func validJSON(obj []byte) error {
	if json.Valid(obj) {
		return nil
	}
	var v struct{} // decodes nothing: Unmarshal checks the whole input first and says where it fails
	if err := json.Unmarshal(obj, &v); err != nil {
		return fmt.Errorf("%w (%w)", err, ErrCorrupt)
	}
	return fmt.Errorf("%w (%w)", errJSONSyntax, ErrCorrupt)
}

// keyIs reports whether the raw JSON string key spells name. A key without escapes and in valid
// UTF-8 is compared as it is; any other is decoded as encoding/json decodes it (invalid UTF-8
// becomes U+FFFD), as the column names of the first row were.
func keyIs(key []byte, name string) bool {
	inner := key[1 : len(key)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner) == name
	}
	s, err := keyText(key)
	return err == nil && s == name
}

// keyText decodes a raw JSON string key.
func keyText(key []byte) (string, error) {
	inner := key[1 : len(key)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner), nil
	}
	var s string
	if err := json.Unmarshal(key, &s); err != nil {
		return "", fmt.Errorf("key %s: %w (%w)", clip(string(key)), err, ErrCorrupt)
	}
	return s, nil
}

// jsonType names the type pyarrow would give a JSON value: an array is "list<T>", T the type of
// its first element that is not null ("null" if none). An array's type is decided by its first
// such element, and that element is an array or a scalar, so the type is found walking down the
// first elements once: never re-reading a level, however deep the arrays nest.
func jsonType(v []byte) string {
	lists := 0
	i := skipSpace(v, 0)
	base := "null"
	for i < len(v) && v[i] == '[' {
		lists++
		i = skipSpace(v, i+1)
		for i < len(v) && v[i] == 'n' { // null elements do not decide the type
			i = skipSpace(v, scalarEnd(v, i))
			if i < len(v) && v[i] == ',' {
				i = skipSpace(v, i+1)
			}
		}
	}
	if i < len(v) {
		base = scalarType(v[i:scalarEnd(v, i)], v[i])
	}
	if lists == 0 {
		return base
	}
	return strings.Repeat("list<", lists) + base + strings.Repeat(">", lists)
}

// scalarType names the type of the value starting with c (tok: a number's or literal's bytes).
func scalarType(tok []byte, c byte) string {
	switch c {
	case '"':
		return "string"
	case 't', 'f':
		return "bool"
	case 'n', ']':
		return "null"
	case '{':
		return "struct"
	}
	if bytes.ContainsAny(tok, ".eE") {
		return "double"
	}
	return "int64"
}
