package table

import "github.com/apache/arrow-go/v18/arrow/memory"

// allocError is the panic value of a cappedAllocator refusing an allocation; recoverAt turns it
// into an ErrTooLarge error naming the file.
type allocError struct{ size, limit int }

// cappedAllocator refuses any single buffer larger than limit. arrow-go sizes many buffers from
// lengths the file claims (page sizes, decompressed lengths, offsets); a corrupt file could
// otherwise ask for terabytes. Refusing by panic is the only way through arrow-go's allocator
// interface; the panic never leaves this package (recoverAt).
type cappedAllocator struct {
	mem   memory.Allocator
	limit int
}

func newCappedAllocator(limit int) *cappedAllocator {
	return &cappedAllocator{mem: memory.NewGoAllocator(), limit: limit}
}

func (a *cappedAllocator) check(size int) {
	if size < 0 || size > a.limit {
		panic(allocError{size: size, limit: a.limit})
	}
}

func (a *cappedAllocator) Allocate(size int) []byte {
	a.check(size)
	return a.mem.Allocate(size)
}

func (a *cappedAllocator) Reallocate(size int, b []byte) []byte {
	a.check(size)
	return a.mem.Reallocate(size, b)
}

func (a *cappedAllocator) Free(b []byte) { a.mem.Free(b) }

// allocLimit is the largest single buffer a table may need: a few cells of MaxCellBytes (a
// batch aims at batchBytes, a page holds a few cells), or the whole file (an uncompressed Arrow
// buffer is at most the file), and room for pages and batches of small cells.
func allocLimit(opts Options, fileSize int64) int {
	limit := max(4*int64(opts.MaxCellBytes), fileSize) + 32<<20
	return int(min(limit, int64(^uint(0)>>1)))
}
