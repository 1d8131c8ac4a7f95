package table

import "github.com/apache/arrow-go/v18/arrow/memory"

// allocError is the panic value of a cappedAllocator refusing an allocation; recoverAt turns it
// into an ErrTooLarge error naming the file. batch: refused for the sake of a batch of rows,
// which fewer rows might pass: its budget spent (size is then what it would have held), or a
// buffer beyond limit while it had several rows.
type allocError struct {
	size, limit int
	batch       bool
}

// cappedAllocator refuses any single buffer larger than limit. arrow-go sizes many buffers from
// lengths the file claims (page sizes, decompressed lengths, offsets); a corrupt file could
// otherwise ask for terabytes. Refusing by panic is the only way through arrow-go's allocator
// interface; the panic never leaves this package (recoverAt).
//
// While a budget is set (startBatch), it also refuses an allocation that would take the bytes
// allocated since then past the budget: a Parquet batch's decoded size is known only as it is
// decoded, and a few bytes of a page can decode to gigabytes (dictionary indices, run-length
// levels, DELTA_BYTE_ARRAY prefixes). Growth is charged (a reallocation charges what it adds);
// frees are not credited, which arrow-go's pooled and released buffers would make unreliable.
// A scan uses its allocator from one goroutine at a time.
type cappedAllocator struct {
	mem     memory.Allocator
	limit   int
	budget  int64 // 0: none
	charged int64 // since startBatch
	rows    int64 // of the batch being read
}

func newCappedAllocator(limit int) *cappedAllocator {
	return &cappedAllocator{mem: memory.NewGoAllocator(), limit: limit}
}

// startBatch sets the budget of the allocations to come for a batch of rows rows (0: none) and
// clears the charge.
func (a *cappedAllocator) startBatch(budget, rows int64) {
	a.budget, a.charged, a.rows = budget, 0, rows
}

// check charges grow bytes for a buffer of size bytes, before anything is allocated.
func (a *cappedAllocator) check(size, grow int) {
	if size < 0 || size > a.limit {
		panic(allocError{size: size, limit: a.limit, batch: size >= 0 && a.budget > 0 && a.rows > 1})
	}
	if a.budget > 0 {
		if a.charged+int64(grow) > a.budget {
			panic(allocError{size: int(min(a.charged+int64(grow), int64(^uint(0)>>1))), limit: int(a.budget), batch: true})
		}
		a.charged += int64(grow)
	}
}

func (a *cappedAllocator) Allocate(size int) []byte {
	a.check(size, size)
	return a.mem.Allocate(size)
}

func (a *cappedAllocator) Reallocate(size int, b []byte) []byte {
	a.check(size, max(size-cap(b), 0))
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
