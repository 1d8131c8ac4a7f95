package gobackend

import (
	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// Spare buffers. A native operation's output has the same shape in every execution, and the
// buffers an execution frees are, shape for shape, what the next one allocates. Freed into
// simplego's pool (a sync.Pool per dtype and size) they are found again only by a goroutine on
// the processor that put them there — sync.Pool keeps one item per processor that other
// processors never look at — so an execution that moved allocates anew, and the resident set
// grows by that garbage until the next collection. The executable therefore keeps freed buffers
// of its native outputs' shapes itself, at most as many per shape as it has native outputs of
// that shape outside the arena (arena.go), and no more than the last execution took
// (trimSpares); other buffers go back to simplego. Finalize hands the kept ones back too.

// maxSpareRank bounds the shapes kept (higher ranks go back to simplego's pool).
const maxSpareRank = 6

type spareKey struct {
	dtype dtypes.DType
	rank  int
	dims  [maxSpareRank]int
}

func keyOf(s shapes.Shape) (spareKey, bool) {
	if s.Rank() > maxSpareRank {
		return spareKey{}, false
	}
	k := spareKey{dtype: s.DType, rank: s.Rank()}
	copy(k.dims[:], s.Dimensions)
	return k, true
}

// planSpares records, for each native output shape, how many buffers of it to keep.
func (e *Executable) planSpares() {
	e.spareCap = map[spareKey]int{}
	for _, st := range e.steps {
		if st.nat == nil || st.nat.out < 0 {
			continue
		}
		if e.local[st.nat.out] && e.replicas == 1 {
			continue // held in the arena; only replicas sharing values put such values in buffers
		}
		if k, ok := keyOf(e.valueShapes[st.nat.out]); ok {
			e.spareCap[k]++
		}
		if f := st.nat.fus; f != nil {
			for _, o := range f.extra {
				if k, ok := keyOf(e.valueShapes[o.value]); ok {
					e.spareCap[k]++
				}
			}
		}
	}
	e.spare = map[spareKey][]backends.Buffer{}
	e.spareTakes = map[spareKey]int{}
}

// trimSpares ends an execution: of each shape it keeps no more buffers than the execution took,
// so that buffers freed every execution that none takes (a donated input updated by a fallback
// segment rather than in place, say) go back to simplego instead of accumulating up to the cap.
func (e *Executable) trimSpares() {
	e.spareMu.Lock()
	defer e.spareMu.Unlock()
	for k, list := range e.spare {
		keep := min(len(list), e.spareTakes[k])
		for _, buf := range list[keep:] {
			_ = e.backend.sg.BufferFinalize(buf)
		}
		clear(list[keep:])
		e.spare[k] = list[:keep]
	}
	clear(e.spareTakes)
}

// newBuffer returns a buffer of shape s and its flat data, a kept one if there is one.
func (e *Executable) newBuffer(s shapes.Shape) (backends.Buffer, any, error) {
	if k, ok := keyOf(s); ok {
		e.spareMu.Lock()
		e.spareTakes[k]++
		if list := e.spare[k]; len(list) > 0 {
			buf := list[len(list)-1]
			e.spare[k] = list[:len(list)-1]
			e.spareMu.Unlock()
			flat, err := e.backend.sg.BufferData(buf)
			return buf, flat, err
		}
		e.spareMu.Unlock()
	}
	return e.backend.sg.NewSharedBuffer(0, s)
}

// recycle frees an intermediate buffer: kept for the next execution if it has a native
// output's shape and fewer than that many are kept, else into simplego's pool.
func (e *Executable) recycle(buf backends.Buffer) error {
	if isLocal(buf) {
		return nil // its place in the arena is planned
	}
	s, err := e.backend.sg.BufferShape(buf)
	if err != nil {
		return err
	}
	if k, ok := keyOf(s); ok {
		e.spareMu.Lock()
		if len(e.spare[k]) < e.spareCap[k] {
			e.spare[k] = append(e.spare[k], buf)
			e.spareMu.Unlock()
			return nil
		}
		e.spareMu.Unlock()
	}
	return e.backend.sg.BufferFinalize(buf)
}

// dropSpares hands the kept buffers back to simplego's pool.
func (e *Executable) dropSpares() {
	e.spareMu.Lock()
	defer e.spareMu.Unlock()
	for _, list := range e.spare {
		for _, buf := range list {
			_ = e.backend.sg.BufferFinalize(buf)
		}
	}
	e.spare = map[spareKey][]backends.Buffer{}
}
