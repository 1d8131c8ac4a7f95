package gobackend

import "sync"

// task is a native operation split into parts (fusions, reductions): part(p) computes share p.
type task interface{ part(p int) }

// team runs the parts of a worker's native operations: part 0 on the calling goroutine, the
// others on helper goroutines that live as long as the worker. Reusing them (instead of starting
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
		ch := make(chan job)
		tm.work = append(tm.work, ch)
		go func() {
			for j := range ch {
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
		if e := <-tm.done; e != nil && err == nil {
			err = e
		}
	}
	return err
}

// stop ends the helper goroutines; the team must not be used after.
func (tm *team) stop() {
	tm.once.Do(func() {
		for _, ch := range tm.work {
			close(ch)
		}
	})
}
