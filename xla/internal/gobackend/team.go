package gobackend

import (
	"runtime"
	"sync"
	"time"
)

// task is a native operation split into parts (fusions, reductions): part(p) computes share p.
type task interface{ part(p int) }

// team runs the parts of a worker's native operations (products too, through teamRunner): part 0
// on the calling goroutine, the others on helper goroutines that live as long as the worker, and
// that poll for their next part for a while before they block (receive). Reusing them (instead of starting
// goroutines, with their closures and channels, for each operation) keeps a training step free of
// per-operation garbage, which would otherwise grow the resident set between collections. The
// worker owns the team: stop ends the helpers.
type team struct {
	work []chan job // one per helper
	done chan error
	once sync.Once
}

type job struct {
	t task
	p int
}

// newTeam starts helpers-1 helper goroutines.
func newTeam(helpers int) *team {
	tm := &team{done: make(chan error, max(helpers-1, 0))}
	for range helpers - 1 {
		ch := make(chan job, 1)
		tm.work = append(tm.work, ch)
		go func() {
			for {
				j, ok := receive(ch)
				if !ok {
					return
				}
				tm.done <- catch(func() { j.t.part(j.p) })
			}
		}()
	}
	return tm
}

// run computes parts 0..n-1 of t (n at most the team's size) and returns the first panic of any
// part as an error, after every part finished.
func (tm *team) run(n int, t task) error {
	n = min(n, len(tm.work)+1)
	for p := 1; p < n; p++ {
		tm.work[p-1] <- job{t: t, p: p}
	}
	err := catch(func() { t.part(0) })
	for p := 1; p < n; p++ {
		if e, _ := receive(tm.done); e != nil && err == nil {
			err = e
		}
	}
	return err
}

// spinFor is how long a goroutine waiting for a hand-off (a helper for its next part, the
// caller for a helper's result) polls before it blocks. Parts follow each other within
// microseconds in a step, and a blocked goroutine takes 50–100 µs to be woken on another core
// (the OS wakes its thread), during which the other core waits: about 900 hand-offs a step
// of GPT-2 124M. Polling yields the processor (runtime.Gosched) each time, so a goroutine
// with real work is never kept off it for long, and it stops after spinFor, so an idle
// backend does not burn a core.
const spinFor = time.Millisecond

// receive takes the next value from ch, polling it for up to spinFor before blocking. ok is
// false once ch is closed and drained.
func receive[T any](ch chan T) (v T, ok bool) {
	var start time.Time
	for i := 0; ; i++ {
		select {
		case v, ok = <-ch:
			return v, ok
		default:
		}
		if i%16 == 0 {
			if i == 0 {
				start = time.Now()
			} else if time.Since(start) > spinFor {
				break
			}
		}
		runtime.Gosched()
	}
	v, ok = <-ch
	return v, ok
}

// stop ends the helper goroutines; the team must not be used after.
func (tm *team) stop() {
	tm.once.Do(func() {
		for _, ch := range tm.work {
			close(ch)
		}
	})
}

// teamRunner runs a GEMM pool's workers (gemm.Runner) on the team, so that products, like
// fusions and reductions, hand their second part to a helper that is already running. f is the
// pool's part function while a call runs.
type teamRunner struct {
	tm *team
	f  func(w int)
}

func (r *teamRunner) Run(n int, part func(w int)) {
	r.f = part
	_ = r.tm.run(n, r) // part recovers its own panics
	r.f = nil
	// The pool and the team are built with the same thread count, so run took every part;
	// were there more, they must still run.
	for p := len(r.tm.work) + 1; p < n; p++ {
		part(p)
	}
}

func (r *teamRunner) part(p int) { r.f(p) }
