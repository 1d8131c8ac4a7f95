package table

import (
	"errors"
	"fmt"
)

// Sentinel errors, for errors.Is; every error returned also names the file and, where it applies,
// the row and column.
var (
	// ErrNoColumn: the column is not in the file (the message lists those that are).
	ErrNoColumn = errors.New("no such column")
	// ErrType: the column (or one cell of a CSV/JSON column) has another type than the scan reads.
	ErrType = errors.New("wrong type")
	// ErrRange: an integer outside int32.
	ErrRange = errors.New("integer outside int32")
	// ErrTooLarge: a cell, record, or a size the file claims is beyond the limits.
	ErrTooLarge = errors.New("too large")
	// ErrCorrupt: the file is not valid data of its format.
	ErrCorrupt = errors.New("corrupt or unreadable")
	// ErrSplit: a save_to_disk DatasetDict split that is not there (the message lists the splits).
	ErrSplit = errors.New("no such split")
)

// userPanic carries a panic raised by the caller's callback through recoverAt untouched: only
// panics of the readers (arrow-go on corrupt input) become errors.
type userPanic struct{ v any }

// recoverAt turns a panic of a reader into an error naming the file; a panic of the caller's
// callback goes on (as a userPanic, for recoverEdge). It must be deferred directly.
func recoverAt(file string, err *error) {
	r := recover()
	if r == nil {
		return
	}
	if up, ok := r.(userPanic); ok {
		panic(up)
	}
	panicToErr(file, r, err)
}

// recoverEdge is recoverAt at the package's edge (the exported methods): there a callback's panic
// resumes with its own value.
func recoverEdge(file string, err *error) {
	r := recover()
	if r == nil {
		return
	}
	if up, ok := r.(userPanic); ok {
		panic(up.v)
	}
	panicToErr(file, r, err)
}

func panicToErr(file string, r any, err *error) {
	if ae, ok := r.(allocError); ok && ae.batch {
		*err = fmt.Errorf("table: %s: a batch of rows decodes to more than the %d bytes allowed: %w", file, ae.limit, ErrTooLarge)
		return
	}
	if ae, ok := r.(allocError); ok {
		*err = fmt.Errorf("table: %s: the file claims a %d-byte buffer, more than the %d bytes allowed: %w", file, ae.size, ae.limit, ErrTooLarge)
		return
	}
	*err = fmt.Errorf("table: %s: reading failed (%v): %w", file, r, ErrCorrupt)
}

// guardFn3 and guardFn2 wrap the caller's callbacks so that their panics pass through recoverAt.
func guardFn3(fn func(int64, string, bool) error) func(int64, string, bool) error {
	return func(row int64, s string, valid bool) (err error) {
		defer rethrow()
		return fn(row, s, valid)
	}
}

func guardFn2(fn func(int64, [][]int32) error) func(int64, [][]int32) error {
	return func(row int64, lists [][]int32) (err error) {
		defer rethrow()
		return fn(row, lists)
	}
}

func rethrow() {
	if r := recover(); r != nil {
		panic(userPanic{r})
	}
}

// rowErr names the file, row and column of a cell error.
func rowErr(file string, row int64, column string, err error) error {
	return fmt.Errorf("table: %s: row %d, column %q: %w", file, row, column, err)
}
