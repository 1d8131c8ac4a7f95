package gobackend

import (
	"cmp"

	"github.com/gomlx/gomlx/backends"
	"reflect"
	"slices"
	"unsafe"
)

// The arena. Native results that only native operations read never leave the executable, so
// their memory need not be simplego buffers: they live at fixed offsets in one block per value
// table, laid out at compile time by replaying the steps' allocations and frees (planLocal). A
// block reused across shapes this way holds about the most that is live at once, where buffers
// kept per shape (spare.go) hold the sum over shapes of each one's most — twice as much for a
// transformer's training step, whose activations, attention scores and gradients peak at
// different times. It also costs nothing per execution: the views into the block are made once
// per table.
//
// Each replica of an SPMD execution has its own table, so its own block. The values its replicas
// share (spmd.go) are computed once by replica 0 and read by the others, possibly after replica 0
// moved on, so they are simplego buffers wherever they were planned (inArena): their places in
// the block stay unused, which the plan allows since a place is never given to two live values.

// arenaAlign is the alignment of every value in the arena (a cache line: operations that split
// rows between workers then never share one).
const arenaAlign = 64

// localBuf is the buffer of a value held in the arena: a view of its bytes typed as simplego's
// flat slices are.
type localBuf struct {
	flat any
}

// planLocal marks the values whose buffers live in the arena and assigns their offsets:
// results of native operations (not collectives or random bits) that are not outputs and that no
// fallback segment, collective or generator reads.
func (e *Executable) planLocal() {
	local := make([]bool, e.numValues)
	for _, st := range e.steps {
		if nat := st.nat; nat != nil && nat.ar == nil && nat.rng == nil && nat.out >= 0 && !e.isOutput[nat.out] &&
			arenaType(e.valueShapes[nat.out].DType.GoType()) {
			local[nat.out] = true
		}
	}
	for _, st := range e.steps {
		switch {
		case st.seg != nil:
			for _, v := range st.seg.inputs {
				local[v] = false
			}
		case st.nat.ar != nil || st.nat.rng != nil:
			for _, v := range st.nat.reads {
				local[v] = false
			}
		}
	}
	e.local = local

	// Replay the execution: a result is allocated before its step (whose operands are still
	// live) and values are freed after their last reader. A reshape or identity of an arena
	// value shares its place, and so does a fusion writing over an operand (localInPlace, as the
	// execution decides it); a place is freed when the last value sharing it is (root: the value
	// that took it, by value; live: how many values share it, by root).
	e.localOff = make([]int64, e.numValues)
	root := make([]int, e.numValues)
	e.localRoot = root
	live := make([]int, e.numValues)
	var sp spans
	for i, st := range e.steps {
		if nat := st.nat; nat != nil && nat.out >= 0 && local[nat.out] {
			r := nat.out
			if nat.cp != nil && nat.cp.alias && local[nat.reads[0]] {
				r = root[nat.reads[0]]
			} else if u := e.localInPlace(i, nat, root, live); u >= 0 {
				r = root[u]
			} else {
				e.localOff[r] = sp.alloc(e.localSize(r))
			}
			root[nat.out], e.localOff[nat.out] = r, e.localOff[r]
			live[r]++
		}
		for _, v := range st.release {
			if !local[v] {
				continue
			}
			r := root[v]
			if live[r]--; live[r] == 0 {
				sp.release(e.localOff[r], e.localSize(r))
			}
		}
	}
	e.arenaSize = sp.high
}

// arenaType reports whether values of Go element type t can live in the arena: types without
// pointers, which a view of raw bytes can hold.
func arenaType(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint8, reflect.Uint16,
		reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

// localSize is the room value v takes in the arena.
func (e *Executable) localSize(v int) int64 {
	n := int64(e.valueShapes[v].Memory())
	return max(arenaAlign, (n+arenaAlign-1)/arenaAlign*arenaAlign)
}

// localInPlace returns the arena value fusion step i writes its result over, or -1: an operand
// held in the arena with the rules of inPlace (exec.go), whose ownership conditions always hold
// for an intermediate, and the only live value in its place (a reshape of it sharing the place
// may be read after this step, or by this step at other indices).
func (e *Executable) localInPlace(i int, nat *nativeOp, root, live []int) int {
	f := nat.fus
	if f == nil {
		return -1
	}
	want := e.valueShapes[f.out]
	for _, l := range f.leaves {
		v := l.value
		if l.kind != leafDirect || v < 0 || !e.local[v] || e.lastUse[v] != i || !e.valueShapes[v].Equal(want) || live[root[v]] != 1 {
			continue
		}
		if f.overwritable(v) {
			return v
		}
	}
	return -1
}

// arenaViews returns the arena's block and the views of its values, made for a new table.
func (e *Executable) arenaViews() []localBuf {
	if e.arenaSize == 0 {
		return nil
	}
	block := make([]uint64, e.arenaSize/8)
	base := unsafe.Pointer(unsafe.SliceData(block))
	views := make([]localBuf, e.numValues)
	for v, ok := range e.local {
		if !ok {
			continue
		}
		s := e.valueShapes[v]
		p := unsafe.Add(base, e.localOff[v])
		views[v].flat = reflect.SliceAt(s.DType.GoType(), p, s.Size()).Interface()
	}
	return views
}

// spans is a best-fit allocator of offsets: the free spans (holes) below top, sorted and coalesced, and
// the highest top reached.
type spans struct {
	holes     []span
	top, high int64
}

type span struct{ off, n int64 }

// alloc returns the offset of n bytes: the smallest free span that holds them, else the top.
// (No free span ends at the top: release lowers the top instead.)
func (s *spans) alloc(n int64) int64 {
	best := -1
	for i, f := range s.holes {
		if f.n >= n && (best < 0 || f.n < s.holes[best].n) {
			best = i
		}
	}
	if best >= 0 {
		f := &s.holes[best]
		off := f.off
		f.off, f.n = f.off+n, f.n-n
		if f.n == 0 {
			s.holes = slices.Delete(s.holes, best, best+1)
		}
		return off
	}
	off := s.top
	s.top += n
	s.high = max(s.high, s.top)
	return off
}

// release returns [off, off+n), merging it with its free neighbours; a span reaching the top lowers it.
func (s *spans) release(off, n int64) {
	i, _ := slices.BinarySearchFunc(s.holes, off, func(f span, off int64) int { return cmp.Compare(f.off, off) })
	s.holes = slices.Insert(s.holes, i, span{off, n})
	if i+1 < len(s.holes) && s.holes[i].off+s.holes[i].n == s.holes[i+1].off {
		s.holes[i].n += s.holes[i+1].n
		s.holes = slices.Delete(s.holes, i+1, i+2)
	}
	if i > 0 && s.holes[i-1].off+s.holes[i-1].n == s.holes[i].off {
		s.holes[i-1].n += s.holes[i].n
		s.holes = slices.Delete(s.holes, i, i+1)
		i--
	}
	if s.holes[i].off+s.holes[i].n == s.top {
		s.top = s.holes[i].off
		s.holes = s.holes[:i]
	}
}

// inArena reports whether value v is held in the arena in an execution sharing sh (nil: none).
func (e *Executable) inArena(v int, sh *shared) bool {
	return e.local[v] && (sh == nil || !sh.value[v])
}

// isLocal reports whether buf is a value's place in the arena.
func isLocal(buf backends.Buffer) bool {
	_, ok := buf.(*localBuf)
	return ok
}

// bufferData returns a buffer's flat data: the arena view or simplego's slice.
func bufferData(sg backends.Backend, buf backends.Buffer) (any, error) {
	if l, ok := buf.(*localBuf); ok {
		return l.flat, nil
	}
	return sg.BufferData(buf)
}
