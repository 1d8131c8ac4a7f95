package jinja

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// Issue 38, finding 2: values that grow as a DAG. [x, x] repeated n times is n list literals of
// two items, a few hundred steps and bytes, but a tree of 2^n leaves: every walk of the value
// (printing, ==, <, sort, in, hashing, tojson) must charge its work and check the context, or a
// tiny template keeps a render busy for hours past its deadline.

// doubling builds {% set name %} as a value of 2^levels leaves, doubling with the expression
// pair (x names the value so far), in a loop carried by a namespace.
func doubling(name, init, pair string, levels int) string {
	return "{% set ns = namespace(v=" + init + ") %}{% for i in range(" + itoa(levels) + ") %}{% set x = ns.v %}{% set ns.v = " + pair +
		" %}{% endfor %}{% set " + name + " = ns.v %}"
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

// walkWait bounds how long a test waits for a render that must stop quickly: it exists only so
// that a regression (a walk that ignores its limits and context, and would run for hours) fails
// instead of hanging the test binary; it is not a speed assertion.
const walkWait = time.Minute

// renderBounded renders src on a goroutine and waits at most walkWait for it. A render that is
// still running then is reported as a failure; its goroutine is left to the process (it cannot
// be stopped: that is the bug).
func renderBounded(t *testing.T, ctx context.Context, src string, vars map[string]Value, lim Limits) (Result, error) {
	t.Helper()
	tm, err := Parse(src, transformersOptions)
	if err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	type out struct {
		res Result
		err error
	}
	done := make(chan out, 1)
	start := time.Now()
	go func() {
		res, err := tm.Render(ctx, vars, lim)
		done <- out{res, err}
	}()
	select {
	case o := <-done:
		t.Logf("%v after %v", o.err, time.Since(start).Round(time.Millisecond))
		return o.res, o.err
	case <-time.After(walkWait):
		t.Fatalf("render still running after %v (the walk ignores its limits and its context)", walkWait)
	}
	return Result{}, nil
}

// dagCases are walks of a value of 2^40 leaves. x and y are built apart, so that they are
// equal without being the same object (Python compares identical items without walking them,
// and so does the engine: x == x is cheap in both).
var dagCases = []struct{ name, src string }{
	{"print list", "{{ x }}"},
	{"print tuple", doubling("t", "1", "(x, x)", 40) + "{{ t }}"},
	{"print dict", doubling("d", "{}", "{'a': x, 'b': x}", 40) + "{{ d }}"},
	{"print namespace", doubling("n", "1", "namespace(a=x, b=x)", 40) + "{{ n }}"},
	{"string filter", "{{ x|string|length }}"},
	{"concat", "{{ (x ~ '')|length }}"},
	{"join", "{{ [x, x]|join }}"},
	{"tojson", "{{ x|tojson|length }}"},
	{"percent format", "{{ ('%s' % [x])|length }}"},
	{"str.format", "{{ '{}'.format(x)|length }}"},
	{"str.format !r", "{{ '{!r}'.format(x)|length }}"},
	{"equal", "{{ x == y }}"},
	{"not equal", "{{ x != y }}"},
	{"less", "{{ x < y }}"},
	{"greater equal test", "{{ x is ge(y) }}"},
	{"in list", "{{ x in [y] }}"},
	{"list.index", "{{ [y].index(x) }}"},
	{"list.count", "{{ [y, y].count(x) }}"},
	{"sort", "{{ [x, y]|sort|length }}"},
	{"max", "{{ [x, y]|max|length }}"},
	{"unique", doubling("t", "1", "(x, x)", 40) + doubling("u", "1", "(x, x)", 40) + "{{ [t, u]|unique|list|length }}"},
	{"groupby", "{{ [[x], [y]]|groupby(0)|list|length }}"},
	{"select equalto", "{{ [x, y]|select('equalto', y)|list|length }}"},
	{"loop.changed", "{% for v in [x, y] %}{{ loop.changed(v) }}{% endfor %}"},
	{"dict key", doubling("t", "1", "(x, x)", 40) + "{{ {t: 1}|length }}"},
	{"dict lookup", doubling("t", "1", "(x, x)", 40) + "{{ {1: 2}[t] is defined }}"},
	{"tuple in dict", doubling("t", "1", "(x, x)", 40) + "{{ t in {1: 2} }}"},
	{"tuple keys equal", doubling("t", "1", "(x, x)", 40) + doubling("u", "1", "(x, x)", 40) +
		"{% set d = {t: 1} %}{{ d[u] }}"},
	{"tuple keys collide", doubling("t", "1", "(x, x)", 40) + doubling("u", "1", "(x, x)", 40) +
		"{{ {t: 1, u: 2}|length }}"},
	{"dictsort", "{{ {'a': x, 'b': y}|dictsort(by='value')|length }}"},
}

// TestDAGWalksStop: each walk of a value of 2^40 leaves stops with a *LimitError (MaxSteps of a
// million here, so that the test is quick; the first two cases under the default limits).
func TestDAGWalksStop(t *testing.T) {
	prefix := doubling("x", "[1]", "[x, x]", 40) + doubling("y", "[1]", "[x, x]", 40)
	for i, c := range dagCases {
		t.Run(c.name, func(t *testing.T) {
			lim := Limits{MaxSteps: 1_000_000}
			if i < 2 {
				lim = Limits{}
			}
			_, err := renderBounded(t, context.Background(), prefix+c.src, nil, lim)
			var le *LimitError
			if !errors.As(err, &le) {
				t.Fatalf("got %v, want a *LimitError", err)
			}
		})
	}
}

// TestDAGWalksDeadline: with no step or byte limit, the walks that allocate nothing stop at
// the context's deadline with its error.
func TestDAGWalksDeadline(t *testing.T) {
	prefix := doubling("x", "[1]", "[x, x]", 40) + doubling("y", "[1]", "[x, x]", 40)
	for _, c := range dagCases {
		switch c.name {
		case "equal", "not equal", "less", "greater equal test", "in list", "list.count", "sort", "max", "unique",
			"groupby", "select equalto", "loop.changed", "dict key", "dict lookup", "tuple in dict", "tuple keys equal", "tuple keys collide",
			"dictsort":
		default:
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			_, err := renderBounded(t, ctx, prefix+c.src, nil, Limits{MaxSteps: -1, MaxBytes: 64 << 20})
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("got %v, want the context's deadline", err)
			}
		})
	}
}

// TestDAGCancel: a render walking a DAG stops with context.Canceled when its context is
// cancelled from outside while it walks.
func TestDAGCancel(t *testing.T) {
	src := doubling("x", "[1]", "[x, x]", 40) + doubling("y", "[1]", "[x, x]", 40) + "{{ x == y }}"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(20*time.Millisecond, cancel)
	_, err := renderBounded(t, ctx, src, nil, Limits{MaxSteps: -1})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

// TestDAGSmall: the same walks on small DAGs give Python's answers (checked with Jinja2 3.1.6):
// identical items compare without a walk, equal distinct ones by value.
func TestDAGSmall(t *testing.T) {
	prefix := doubling("x", "[1]", "[x, x]", 3) + doubling("y", "[1]", "[x, x]", 3) + doubling("t", "1", "(x, x)", 2)
	for src, want := range map[string]string{
		"{{ x }}":                                                  "[[[[1], [1]], [[1], [1]]], [[[1], [1]], [[1], [1]]]]",
		"{{ x == y }}|{{ x == x }}|{{ x < y }}":                    "True|True|False",
		"{{ x in [y] }}|{{ [y, x].index(x) }}":                     "True|0",
		"{{ [t, ((1, 1), (1, 1))]|unique|list|length }}":           "1",
		"{{ {t: 1}[((1, 1), (1, 1))] }}":                           "1",
		"{{ {t: 1, (1, 2): 2, ((1, 1), (1, 1.0)): 3} }}":           "{((1, 1), (1, 1)): 3, (1, 2): 2}",
		"{{ t|tojson }}":                                           "[[1, 1], [1, 1]]",
		"{{ [x, y]|sort == [y, x] }}":                              "True",
		"{{ (1, 2) in {(1, 2): 0} }}|{{ (1, [2]) in [(1, [2])] }}": "True|True",
	} {
		res, err := renderBounded(t, context.Background(), prefix+src, nil, Limits{})
		if err != nil || res.Text != want {
			t.Errorf("%s: %q %v, want %q", src, res.Text, err, want)
		}
	}
	// An unhashable item makes the tuple unhashable, as in Python, whose message names the item.
	for _, src := range []string{"{{ {(1, [2]): 0} }}", "{{ [[1]]|unique|list }}"} {
		_, err := renderBounded(t, context.Background(), src, nil, Limits{})
		var e *Error
		if !errors.As(err, &e) || e.PythonMessage() != "TypeError: unhashable type: 'list'" {
			t.Errorf("%s: %v", src, err)
		}
	}
}

// TestDAGErrorMessage: an error message that shows a value (Python's repr of it) stays short
// when the value is a DAG: the repr is cut, not walked to the end.
func TestDAGErrorMessage(t *testing.T) {
	prefix := doubling("x", "[1]", "[x, x]", 40)
	for _, c := range []struct{ src, typ, msg string }{
		{"{{ {}[x].a }}", "UndefinedError", "dict object has no element [[[[[["},
		{"{{ [1].index(x) }}", "ValueError", " is not in list"},
		{"{{ [1]|select(x) }}", "TemplateRuntimeError", "No test named [[[["},
	} {
		_, err := renderBounded(t, context.Background(), prefix+c.src, nil, Limits{})
		var e *Error
		if !errors.As(err, &e) || e.Type != c.typ || !strings.Contains(e.Msg, c.msg) || len(e.Msg) > 2*maxReprInMessage {
			t.Errorf("%s: %.200v (%d bytes)", c.src, err, len(err.Error()))
		}
	}
}

// TestEmptyRepeat: repeating an empty list or string a huge number of times is empty at once
// (the old loop appended nothing 10^18 times, deaf to the deadline).
func TestEmptyRepeat(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := renderBounded(t, ctx, "{{ ([] * 10**18)|length }}|{{ (() * 10**18)|length }}|{{ ('' * 10**18)|length }}", nil, Limits{})
	if err != nil || res.Text != "0|0|0" {
		t.Fatalf("%q %v", res.Text, err)
	}
}
