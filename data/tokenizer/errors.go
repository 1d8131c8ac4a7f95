package tokenizer

import (
	"errors"
	"fmt"
)

// LoadError reports a tokenizer.json that cannot be used. Field is the JSON
// path of the offending value (e.g. `model.merges[12]`), empty when the
// problem is the file as a whole (unreadable, not JSON).
type LoadError struct {
	File  string
	Field string
	Err   error
}

func (e *LoadError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s: %v", e.File, e.Err)
	}
	return fmt.Sprintf("%s: %s: %v", e.File, e.Field, e.Err)
}

func (e *LoadError) Unwrap() error { return e.Err }

// ErrUnsupported is wrapped by load errors for valid tokenizer.json features
// this package does not implement (for example BPE dropout or the
// Precompiled normalizer), so callers can tell them from corrupt files with
// errors.Is.
var ErrUnsupported = errors.New("not supported")

// ErrInvalidUTF8 is returned when text to encode is not valid UTF-8 (the
// reference implementation only accepts valid Unicode strings).
var ErrInvalidUTF8 = errors.New("input is not valid UTF-8")

// fieldError is a problem at a JSON path, before the file name is known.
type fieldError struct {
	path string
	err  error
}

func (e *fieldError) Error() string { return e.path + ": " + e.err.Error() }
func (e *fieldError) Unwrap() error { return e.err }

func errAt(path, format string, a ...any) error {
	return &fieldError{path: path, err: fmt.Errorf(format, a...)}
}

func wrapAt(path string, err error) error {
	var fe *fieldError
	if errors.As(err, &fe) {
		return err
	}
	return &fieldError{path: path, err: err}
}
