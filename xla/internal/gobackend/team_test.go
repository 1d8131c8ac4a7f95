package gobackend

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestReceive checks the polling hand-off: a value already sent, one sent while the receiver
// polls, one sent after it has stopped polling and blocked, and a closed channel.
func TestReceive(t *testing.T) {
	ch := make(chan int, 1)
	ch <- 1
	if v, ok := receive(ch); v != 1 || !ok {
		t.Fatalf("ready value: got %d, %v", v, ok)
	}
	for _, delay := range []time.Duration{spinFor / 10, 5 * spinFor} {
		var wg sync.WaitGroup
		wg.Go(func() {
			time.Sleep(delay)
			ch <- 2
		})
		start := time.Now()
		v, ok := receive(ch)
		wg.Wait()
		if v != 2 || !ok {
			t.Fatalf("value sent after %v: got %d, %v", delay, v, ok)
		}
		if waited := time.Since(start); waited < delay {
			t.Fatalf("returned after %v, before the value was sent (%v)", waited, delay)
		}
	}
	close(ch)
	if v, ok := receive(ch); v != 0 || ok {
		t.Fatalf("closed channel: got %d, %v", v, ok)
	}
}

// countParts records which parts ran and how many ran at once.
type countParts struct {
	ran          [4]atomic.Int32
	active, most atomic.Int32
}

func (c *countParts) part(p int) {
	c.ran[p].Add(1)
	n := c.active.Add(1)
	for {
		m := c.most.Load()
		if n <= m || c.most.CompareAndSwap(m, n) {
			break
		}
	}
	time.Sleep(2 * time.Millisecond) // long enough for the parts to overlap
	c.active.Add(-1)
}

// TestTeamRunner checks that a GEMM pool's parts run on the team each exactly once, at the same
// time, call after call (the helpers poll between calls and block after spinFor; both are
// covered by the pause).
func TestTeamRunner(t *testing.T) {
	tm := newTeam(3)
	defer tm.stop()
	r := &teamRunner{tm: tm}
	for call := range 6 {
		if call == 3 {
			time.Sleep(3 * spinFor)
		}
		var c countParts
		r.Run(3, c.part)
		for p := range 3 {
			if got := c.ran[p].Load(); got != 1 {
				t.Fatalf("call %d: part %d ran %d times", call, p, got)
			}
		}
		if c.ran[3].Load() != 0 {
			t.Fatalf("call %d: part 3 ran", call)
		}
		if c.most.Load() != 3 {
			t.Fatalf("call %d: at most %d parts ran at once, want 3", call, c.most.Load())
		}
	}
}
