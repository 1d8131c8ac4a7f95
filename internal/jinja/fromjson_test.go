package jinja

import (
	"math"
	"strings"
	"testing"
)

// TestFromJSONNumbers: JSON numbers decode as Python's json.loads makes them, and an integer
// beyond int64 (a big int in Python) is an error rather than a float that would render
// differently (found by testdata/chat/hidden: 1180591620717411303424 in tool-call arguments
// printed as 1.1805916207174113e+21).
func TestFromJSONNumbers(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string // Python's str() of the value, or "error"
	}{
		{"9223372036854775807", "9223372036854775807"},
		{"-9223372036854775808", "-9223372036854775808"},
		{"-0", "0"},
		{"1.0", "1.0"},
		{"-0.0", "-0.0"},
		{"1E5", "100000.0"},
		{"1e400", "inf"},
		{"-1e400", "-inf"},
		{"1e-400", "0.0"},
		{"9223372036854775808", "error"},
		{"-9223372036854775809", "error"},
		{"1180591620717411303424", "error"},
		{`{"a": [1, 99999999999999999999]}`, "error"},
	} {
		v, err := FromJSON([]byte(c.in))
		if c.want == "error" {
			if err == nil || !strings.Contains(err.Error(), "does not fit in 64 bits") {
				t.Errorf("%s: want an error, got %v, %v", c.in, v, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if got := v.String(); got != c.want {
			t.Errorf("%s: %q, want %q", c.in, got, c.want)
		}
	}
	if v, _ := FromJSON([]byte("1e400")); v.Kind() != KindFloat || !math.IsInf(v.f(), 1) {
		t.Errorf("1e400: %v, want +inf", v)
	}
}
