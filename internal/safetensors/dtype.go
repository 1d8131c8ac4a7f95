package safetensors

import "fmt"

// DType is a safetensors element type, spelled as in the file ("F32", "BF16", ...).
type DType string

// The element types this package understands. The Rust library's newer sub-byte types (F4, F6_*,
// F8_E8M0) and complex types are not accepted: no Hugging Face model gotpu loads uses them, and a
// reader that guesses their layout is worse than one that says it does not know them.
const (
	BOOL    DType = "BOOL"
	U8      DType = "U8"
	I8      DType = "I8"
	F8E5M2  DType = "F8_E5M2"
	F8E4M3  DType = "F8_E4M3"
	I16     DType = "I16"
	U16     DType = "U16"
	F16     DType = "F16"
	BF16    DType = "BF16"
	I32     DType = "I32"
	U32     DType = "U32"
	F32     DType = "F32"
	F64     DType = "F64"
	I64     DType = "I64"
	U64     DType = "U64"
	unknown DType = ""
)

// dtypeOrder lists the dtypes in the order of the Rust library's Dtype enum (increasing alignment).
// The writer sorts tensors by descending position in this list, as the Rust serializer does.
var dtypeOrder = [...]DType{BOOL, U8, I8, F8E5M2, F8E4M3, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64}

// Size returns the size in bytes of one element, or 0 for a dtype this package does not know.
func (d DType) Size() int {
	switch d {
	case BOOL, U8, I8, F8E5M2, F8E4M3:
		return 1
	case I16, U16, F16, BF16:
		return 2
	case I32, U32, F32:
		return 4
	case F64, I64, U64:
		return 8
	}
	return 0
}

// Known tells whether the dtype is one this package reads and writes.
func (d DType) Known() bool { return d.Size() > 0 }

// order is the dtype's position in the Rust enum, used for the writer's sort.
func (d DType) order() int {
	for i, x := range dtypeOrder {
		if x == d {
			return i
		}
	}
	return -1
}

// ParseDType returns the DType spelled s, or an error wrapping ErrUnknownDType.
func ParseDType(s string) (DType, error) {
	d := DType(s)
	if !d.Known() {
		return unknown, fmt.Errorf("%w %q", ErrUnknownDType, s)
	}
	return d, nil
}
