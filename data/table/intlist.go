package table

import (
	"errors"
	"fmt"
	"math"
)

var errNotIntList = errors.New("not a JSON array of integers")

// parseIntList parses a JSON array of integers ("[1, 2, 3]", as datasets.to_csv writes a list
// cell and as JSON lines hold one) into dst[:0], without the allocations of encoding/json: token
// lists are the bulk of a tokenized dataset. A value outside int32 is ErrRange; anything but
// integers (floats, strings, nulls, nesting) is an error; more than maxLen values is ErrTooLarge.
// The result is never nil (an empty list is not a null).
func parseIntList[T string | []byte](b T, dst []int32, maxLen int) ([]int32, error) {
	if dst == nil {
		dst = make([]int32, 0, 16)
	}
	dst = dst[:0]
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return nil, errNotIntList
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		if skipSpace(b, i+1) != len(b) {
			return nil, fmt.Errorf("%w: bytes after the closing ]", errNotIntList)
		}
		return dst, nil
	}
	for {
		if len(dst) >= maxLen {
			return nil, fmt.Errorf("more than %d values: %w", maxLen, ErrTooLarge)
		}
		start := i
		neg := i < len(b) && b[i] == '-'
		if neg {
			i++
		}
		digits := i
		var v uint64
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			if v <= math.MaxInt32+1 { // past this it only grows: keep it from wrapping
				v = v*10 + uint64(b[i]-'0')
			}
			i++
		}
		if i == digits {
			return nil, fmt.Errorf("%w: value %d is not an integer", errNotIntList, len(dst))
		}
		if b[digits] == '0' && i-digits > 1 {
			return nil, fmt.Errorf("%w: value %d has a leading zero", errNotIntList, len(dst))
		}
		if i < len(b) && (b[i] == '.' || b[i] == 'e' || b[i] == 'E') {
			return nil, fmt.Errorf("%w: value %d is not an integer", errNotIntList, len(dst))
		}
		if (!neg && v > math.MaxInt32) || (neg && v > math.MaxInt32+1) {
			return nil, fmt.Errorf("value %d is %s: %w", len(dst), clip(string(b[start:i])), ErrRange)
		}
		if neg {
			dst = append(dst, int32(-int64(v)))
		} else {
			dst = append(dst, int32(v))
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return nil, fmt.Errorf("%w: no closing ]", errNotIntList)
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case ']':
			if skipSpace(b, i+1) != len(b) {
				return nil, fmt.Errorf("%w: bytes after the closing ]", errNotIntList)
			}
			return dst, nil
		default:
			return nil, fmt.Errorf("%w: %q after value %d", errNotIntList, b[i], len(dst)-1)
		}
	}
}

// skipSpace skips JSON whitespace from i.
func skipSpace[T string | []byte](b T, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}
