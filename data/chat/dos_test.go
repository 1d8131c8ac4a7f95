package chat

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gotpu/gotpu/internal/jinja"
)

// Issue 38, finding 2 at this package's level: a template that doubles a value
// ({% set x = [x, x] %} forty times: a few hundred steps, 2^40 leaves) and then walks it must
// stop at the render's limits or at its context's end, with an error naming the template.

// doublingTemplate builds x and y, equal values of 2^40 leaves, apart; then does use.
func doublingTemplate(use string) string {
	d := func(name string) string {
		return "{% set ns = namespace(v=[1]) %}{% for i in range(40) %}{% set x = ns.v %}{% set ns.v = [x, x] %}{% endfor %}{% set " + name + " = ns.v %}"
	}
	return d("x") + d("y") + use
}

// dosWait bounds how long a test waits for a render that must stop within about a second: it
// exists only so that a regression (a walk deaf to its limits and context, which would run for
// hours) fails instead of hanging the test binary; it is not a speed assertion.
const dosWait = time.Minute

// renderWithin renders on a goroutine and fails the test if the render is still running after
// dosWait (its goroutine is then left to the process: a render that cannot be stopped is the bug).
func renderWithin(t *testing.T, ctx context.Context, tm *Template, opts RenderOptions) (Rendered, error) {
	t.Helper()
	type out struct {
		r   Rendered
		err error
	}
	done := make(chan out, 1)
	start := time.Now()
	go func() {
		r, err := tm.Render(ctx, msgs(`{"role": "user", "content": "hi"}`), opts)
		done <- out{r, err}
	}()
	select {
	case o := <-done:
		t.Logf("%.300v after %v", o.err, time.Since(start).Round(time.Millisecond))
		return o.r, o.err
	case <-time.After(dosWait):
		t.Fatalf("render still running after %v", dosWait)
	}
	return Rendered{}, nil
}

// TestRenderDoublingLimits: printing, comparing or raising with a doubled value stops at the
// render's limits, the error naming the template.
func TestRenderDoublingLimits(t *testing.T) {
	for _, use := range []string{"{{ x }}", "{{ raise_exception(x) }}"} {
		tm := mustParse(t, doublingTemplate(use))
		_, err := renderWithin(t, t.Context(), tm, RenderOptions{})
		var le *jinja.LimitError
		if !errors.As(err, &le) || !strings.Contains(err.Error(), "chat template test.jinja") {
			t.Errorf("%s: %v, want a *jinja.LimitError naming the template", use, err)
		}
	}
}

// TestRenderContext: the render stops at its context's deadline, or when its context is
// cancelled, with the context's error (wrapped, naming the template). The comparison below
// takes about a second to reach MaxSteps.
func TestRenderContext(t *testing.T) {
	tm := mustParse(t, doublingTemplate("{{ x == y }}"))
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	_, err := renderWithin(t, ctx, tm, RenderOptions{})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "chat template test.jinja") {
		t.Errorf("deadline: %v", err)
	}
	ctx, cancel = context.WithCancel(t.Context())
	time.AfterFunc(20*time.Millisecond, cancel)
	if _, err := renderWithin(t, ctx, tm, RenderOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancel: %v", err)
	}
}

// TestStrftimeCharged: strftime_now's text, up to 4.5 times its format ("%A" is Wednesday), is
// charged before it is made: a 46 MB format stops at MaxBytes (256 MiB) having allocated
// about the format, where the old code made the 207 MB text first.
func TestStrftimeCharged(t *testing.T) {
	tm := mustParse(t, "{{ strftime_now('%A' * 23000000)|length }}")
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := tm.Render(t.Context(), msgs(`{"role": "user", "content": "hi"}`), RenderOptions{Now: fixedNow})
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("%v, %d MiB allocated", err, alloc>>20)
	var le *jinja.LimitError
	if !errors.As(err, &le) || le.Limit != "MaxBytes" {
		t.Fatalf("got %v, want the MaxBytes limit", err)
	}
	if alloc > 100<<20 {
		t.Errorf("allocated %d MiB for a 46 MB format", alloc>>20)
	}
	// An ordinary format is not refused.
	tm = mustParse(t, "{{ strftime_now('%A %d %B %Y') }}")
	if r, err := tm.Render(t.Context(), nil, RenderOptions{Now: fixedNow}); err != nil || r.Text == "" {
		t.Errorf("ordinary format: %q %v", r.Text, err)
	}
}
