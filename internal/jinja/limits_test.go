package jinja

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
)

// renderLimited parses and renders src under lim and returns how long it took, how many bytes
// the render allocated and the error.
func renderLimited(t *testing.T, src string, lim Limits) (time.Duration, uint64, error) {
	t.Helper()
	tm, err := Parse(src, transformersOptions)
	if err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	_, err = tm.Render(context.Background(), nil, lim)
	d := time.Since(start)
	runtime.ReadMemStats(&after)
	return d, after.TotalAlloc - before.TotalAlloc, err
}

// TestLimits: each limit stops the template it is for, quickly, with a *LimitError naming it,
// and the memory the render allocated stays below the limit plus slack (MemStats.TotalAlloc
// counts every allocation of the process during the render).
func TestLimits(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		name, src, limit string
		slow             bool // skipped under the race detector
		lim              Limits
		maxAlloc         uint64
	}{
		{"nested loops with output", "{% set r = range(100000) %}{% for i in r %}{% for j in r %}{% for k in r %}xxxxxxxxxxxxxxxx{% endfor %}{% endfor %}{% endfor %}",
			"MaxOutputBytes", false, Limits{MaxOutputBytes: 8 * mib}, 40 * mib},
		{"string doubling", "{% set ns = namespace(s='ab') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}",
			"MaxBytes", false, Limits{MaxBytes: 16 * mib}, 40 * mib},
		{"string doubling with +", "{% set ns = namespace(s='ab') %}{% for i in range(100) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
			"MaxBytes", false, Limits{MaxBytes: 16 * mib}, 40 * mib},
		{"list doubling", "{% set ns = namespace(l=[1]) %}{% for i in range(100) %}{% set ns.l = ns.l + ns.l %}{% endfor %}",
			"MaxBytes", false, Limits{MaxBytes: 16 * mib}, 40 * mib},
		{"huge repeat", "{{ 'x' * 10**12 }}", "MaxBytes", false, Limits{}, 1 * mib},
		{"huge list repeat", "{{ [1, 2] * 10**12 }}", "MaxBytes", false, Limits{}, 1 * mib},
		{"repeat overflow", "{{ 'xx' * 9223372036854775807 }}", "MaxBytes", false, Limits{}, 1 * mib},
		{"join of repeats", "{% set ns = namespace(l=['x' * 1000]) %}{% for i in range(30) %}{% set ns.l = ns.l + ns.l %}{% endfor %}{{ ns.l|join }}",
			"MaxBytes", false, Limits{MaxBytes: 16 * mib}, 40 * mib},
		{"replace growth", "{% set ns = namespace(s='ab') %}{% for i in range(60) %}{% set ns.s = ns.s|replace('a', 'aa') %}{% endfor %}",
			"MaxBytes", false, Limits{MaxBytes: 16 * mib}, 40 * mib},
		{"format growth", "{% set ns = namespace(s='ab') %}{% for i in range(60) %}{% set ns.s = '%s%s'|format(ns.s, ns.s) %}{% endfor %}",
			"MaxBytes", false, Limits{MaxBytes: 16 * mib}, 40 * mib},
		{"center", "{{ 'x'|center(10**12) }}", "MaxBytes", false, Limits{}, 1 * mib},
		{"recursive macro", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "MaxDepth", false, Limits{}, 16 * mib},
		{"recursive caller", "{% macro f() %}{{ caller() }}{% endmacro %}{% macro g() %}{% call f() %}{{ g() }}{% endcall %}{% endmacro %}{{ g() }}", "MaxDepth", false, Limits{}, 16 * mib},
		{"recursive loop", "{% for x in [1] recursive %}{{ loop([x]) }}{% endfor %}", "MaxDepth", false, Limits{}, 16 * mib},
		{"loops without output", "{% set r = range(100000) %}{% for i in r %}{% for j in r %}{% endfor %}{% endfor %}", "MaxSteps", false, Limits{MaxSteps: 2_000_000}, 8 * mib},
		{"default steps", "{% set r = range(100000) %}{% for i in r %}{% for j in r %}{% endfor %}{% endfor %}", "MaxSteps", true, Limits{}, 64 * mib},
		{"default output", "{% set r = range(100000) %}{% for i in r %}{% for j in r %}{{ 'x' * 1000 }}{% endfor %}{% endfor %}", "MaxOutputBytes", false, Limits{}, 300 * mib},
	} {
		if c.slow && raceEnabled {
			continue
		}
		d, alloc, err := renderLimited(t, c.src, c.lim)
		var le *LimitError
		if !errors.As(err, &le) || le.Limit != c.limit {
			t.Errorf("%s: %v, want the %s limit", c.name, err, c.limit)
			continue
		}
		t.Logf("%s: %v after %v, %.1f MiB allocated", c.name, err, d.Round(time.Millisecond), float64(alloc)/mib)
		if alloc > c.maxAlloc {
			t.Errorf("%s: allocated %d bytes, want at most %d", c.name, alloc, c.maxAlloc)
		}
		if limit := 10 * time.Second; d > limit && !raceEnabled {
			t.Errorf("%s: stopped after %v", c.name, d)
		}
	}
}

// TestContextCancel: a cancelled context stops a long render with its error.
func TestContextCancel(t *testing.T) {
	tm, err := Parse("{% set r = range(100000) %}{% for i in r %}{% for j in r %}{% endfor %}{% endfor %}", transformersOptions)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = tm.Render(ctx, nil, Limits{MaxSteps: -1})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
		t.Errorf("cancelled render: %v after %v", err, time.Since(start))
	}
}

// TestParseDepth: deeply nested sources fail to parse with a SyntaxError, without exhausting
// the stack, and nesting within the limit parses.
func TestParseDepth(t *testing.T) {
	n := 100000
	for name, src := range map[string]string{
		"parens":     "{{ " + strings.Repeat("(", n) + "1" + strings.Repeat(")", n) + " }}",
		"lists":      "{{ " + strings.Repeat("[", n) + strings.Repeat("]", n) + " }}",
		"dicts":      "{{ " + strings.Repeat("{'a': ", n) + "1" + strings.Repeat("}", n) + " }}",
		"not":        "{{ " + strings.Repeat("not ", n) + "1 }}",
		"minus":      "{{ " + strings.Repeat("-", n) + "1 }}",
		"plus chain": "{{ 1" + strings.Repeat(" + 1", n) + " }}",
		"pow chain":  "{{ 1" + strings.Repeat(" ** 1", n) + " }}",
		"and chain":  "{{ 1" + strings.Repeat(" and 1", n) + " }}",
		"filters":    "{{ 'a'" + strings.Repeat("|upper", n) + " }}",
		"attrs":      "{{ a" + strings.Repeat(".b", n) + " }}",
		"calls":      "{{ a" + strings.Repeat("()", n) + " }}",
		"if blocks":  strings.Repeat("{% if true %}", n) + strings.Repeat("{% endif %}", n),
		"for blocks": strings.Repeat("{% for x in y %}", n) + strings.Repeat("{% endfor %}", n),
		"cond expr":  "{{ 1" + strings.Repeat(" if 1 else 1", n) + " }}",
	} {
		_, err := Parse(src, transformersOptions)
		var se *SyntaxError
		if !errors.As(err, &se) || !strings.Contains(se.Msg, "nested too deeply") {
			t.Errorf("%s: %v", name, err)
		}
	}
	ok := "{{ " + strings.Repeat("(", 50) + "1" + strings.Repeat(")", 50) + " }}" + strings.Repeat("{% if true %}", 50) + "x" + strings.Repeat("{% endif %}", 50)
	tm, err := Parse(ok, transformersOptions)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := tm.Render(context.Background(), nil, Limits{}); err != nil || r.Text != "1x" {
		t.Errorf("nesting within the limit: %q %v", r.Text, err)
	}
}

// TestValueDepth: values nested deeper than Python's recursion limit fail to print instead of
// exhausting the stack.
func TestValueDepth(t *testing.T) {
	tm, err := Parse("{% set ns = namespace(l=[]) %}{% for i in range(5000) %}{% set ns.l = [ns.l] %}{% endfor %}{{ ns.l }}", transformersOptions)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tm.Render(context.Background(), nil, Limits{})
	var e *Error
	if !errors.As(err, &e) || e.Type != "RecursionError" {
		t.Errorf("deep value: %v", err)
	}
}

// TestFuncError: an error of a Go callable stops the render and comes back unchanged.
func TestFuncError(t *testing.T) {
	sentinel := errors.New("boom")
	tm, err := Parse("a{{ f() }}b", transformersOptions)
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]Value{"f": Func("f", func(*Call) (Value, error) { return Value{}, sentinel })}
	if _, err := tm.Render(context.Background(), vars, Limits{}); err != sentinel {
		t.Errorf("got %v, want the callable's error unchanged", err)
	}
}

// TestSyntaxErrorLine: parse errors carry the line of the offending token.
func TestSyntaxErrorLine(t *testing.T) {
	for src, line := range map[string]int{
		"a\nb\n{{ 1 + }}\n": 3,
		"line one\n{% for m in x %}\n{% if y %}\n{% endfor %}": 4,
		"{% if x %}\n\n":                                 2,
		"\n\n{{ x|nosuchfilter }}":                       3,
		"{{ 'a\nb' }}\n{{ ) }}":                          3,
		"{# a\nb #}\n{% raw %}\n{% endraw %}\n{% foo %}": 5,
	} {
		_, err := Parse(src, ParseOptions{TrimBlocks: true, LStripBlocks: true, Name: "t.jinja"})
		var se *SyntaxError
		if !errors.As(err, &se) || se.Line != line || !strings.HasPrefix(err.Error(), "t.jinja: line ") {
			t.Errorf("%q: %v, want line %d", src, err, line)
		}
	}
}
