package table

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// depthAndKeys measures a valid JSON value as CheckJSONRecord bounds it: how deep arrays and
// objects nest (the outer braces count as 1) and how many keys the top object has.
func depthAndKeys(t *testing.T, b []byte) (depth, keys int) {
	t.Helper()
	level := 0
	inString, escape := false, false
	for _, c := range b {
		switch {
		case inString && escape:
			escape = false
		case inString && c == '\\':
			escape = true
		case inString && c == '"':
			inString = false
		case inString:
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			level++
			depth = max(depth, level)
		case c == ']' || c == '}':
			level--
		case c == ',' && level == 1 && b[0] == '{':
			keys++
		}
	}
	return depth, keys + 1
}

// TestCheckJSONRecord: the limits are met exactly at their bounds, and errors name them.
func TestCheckJSONRecord(t *testing.T) {
	ok := `{"text": "x", "nested": ` + strings.Repeat("[", MaxJSONDepth-1) + strings.Repeat("]", MaxJSONDepth-1) + "}"
	if err := CheckJSONRecord([]byte(ok), 0); err != nil {
		t.Errorf("%d levels: %v", MaxJSONDepth, err)
	}
	deep := `{"nested": ` + strings.Repeat("[", MaxJSONDepth) + strings.Repeat("]", MaxJSONDepth) + "}"
	if err := CheckJSONRecord([]byte(deep), 0); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "1000 levels") {
		t.Errorf("%d levels: %v, want ErrTooLarge naming 1000 levels", MaxJSONDepth+1, err)
	}
	if err := CheckJSONRecord([]byte(`{"a":1,"b":2,"c":3}`), 3); err != nil {
		t.Errorf("3 keys, limit 3: %v", err)
	}
	if err := CheckJSONRecord([]byte(`{"a":1,"b":2,"c":3,"d":{"e":1,"f":2,"g":3,"h":4}}`), 3); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "more than 3 keys") {
		t.Errorf("4 keys, limit 3: %v, want ErrTooLarge naming 3 keys", err)
	}
	for _, notMine := range []string{`[1,2]`, `{"a":}`, `"x"`, ``, `{"a":1} x`} {
		if err := CheckJSONRecord([]byte(notMine), 1); err != nil {
			t.Errorf("%q: %v, want nil: the decoder reports what is malformed", notMine, err)
		}
	}
}

// FuzzCheckJSONRecord: on valid JSON objects CheckJSONRecord refuses exactly those with more
// than 4 keys or nested deeper than MaxJSONDepth, and what it passes decodes.
func FuzzCheckJSONRecord(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a":[1,{"b":"c\"]"}],"d":null,"e":2,"f":3,"g":4}`, `{}`, `{"t":"x"}`,
		`{"a":` + strings.Repeat("[", MaxJSONDepth) + strings.Repeat("]", MaxJSONDepth) + `}`, `[1]`, `{"a":"\\"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		err := CheckJSONRecord(b, 4)
		if err != nil && !errors.Is(err, ErrTooLarge) {
			t.Fatalf("%q: %v, not ErrTooLarge", b, err)
		}
		if !json.Valid(b) {
			return
		}
		var obj map[string]json.RawMessage
		isObj := json.Unmarshal(b, &obj) == nil
		if !isObj {
			if err != nil && !strings.Contains(err.Error(), "levels") {
				t.Fatalf("%q is not an object: %v", b, err)
			}
			return
		}
		depth, keys := depthAndKeys(t, b)
		if len(obj) == 0 {
			keys = 0
		}
		tooLarge := depth > MaxJSONDepth || keys > 4
		if tooLarge != (err != nil) {
			t.Fatalf("%q: %d levels, %d keys: %v", b, depth, keys, err)
		}
	})
}
