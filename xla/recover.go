package xla

import (
	"fmt"
	"runtime/debug"
)

// PanicError is the error gotpu returns for a panic raised inside GoMLX (graph building reports
// shape errors by panicking). Stack holds the stack where it was recovered.
type PanicError struct {
	Op    string // the gotpu operation that was running
	Value any    // the value passed to panic
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("%s: %v", e.Op, e.Value) }

// Unwrap exposes the panic value when it was an error.
func (e *PanicError) Unwrap() error {
	if err, ok := e.Value.(error); ok {
		return err
	}
	return nil
}

// Recover converts a panic into an error stored in *errp. Use it deferred at gotpu's API edge:
//
//	func F() (err error) { defer xla.Recover(&err, "pkg.F"); ... }
//
// It leaves *errp alone when there was no panic.
func Recover(errp *error, op string) {
	if v := recover(); v != nil {
		*errp = &PanicError{Op: op, Value: v, Stack: debug.Stack()}
	}
}

// Call runs fn and returns its error, or the panic it raised as a *PanicError.
func Call(op string, fn func() error) (err error) {
	defer Recover(&err, op)
	return fn()
}
