package table

import (
	"errors"
	"fmt"
)

// CheckJSONRecord checks, in one pass that allocates nothing, the bounds a JSON object (one line
// of a JSON-lines file, one element of a JSON array) must keep before a reader outside this
// package decodes it with encoding/json: at most maxKeys keys of its own (0:
// DefaultMaxRecordFields) and arrays and objects nested at most MaxJSONDepth levels. Decoding
// into a map holds a map entry and a copy of the key for each key, and encoding/json goes 10,000
// levels deep: a 54 MB line of 5M keys took 660 MB that way. The error wraps ErrTooLarge and names
// the limit; the caller adds the file and row. Malformed JSON, or a record that is not an object,
// is not this check's to report: it returns nil and the caller's decoder says what is wrong.
func CheckJSONRecord(obj []byte, maxKeys int) error {
	if maxKeys <= 0 {
		maxKeys = DefaultMaxRecordFields
	}
	err := walkObject(obj, maxKeys, func(key, val []byte) error { return nil })
	switch {
	case errors.Is(err, errFields):
		return fmt.Errorf("an object of more than %d keys (table.DefaultMaxRecordFields, the most a record may have): %w", maxKeys, ErrTooLarge)
	case errors.Is(err, errJSONDepth):
		return err
	}
	return nil
}
