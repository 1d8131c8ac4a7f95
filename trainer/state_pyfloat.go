package trainer

import (
	"math"
	"strconv"
	"strings"
)

// PyFloatRepr formats f exactly as Python's repr(float) does (and therefore as json.dumps writes
// floats, except for the non-finite values, which json writes as NaN, Infinity and -Infinity).
//
// Hugging Face writes trainer_state.json and training_args.json with Python's json module, so a
// byte-identical file needs Python's float formatting, which differs from Go's 'g' format:
// Python writes 1e-05 (two-digit exponent), 0.0001 (not 1e-04), 100.0 (always a fractional part
// in fixed notation) and 7.124293413922406e+16 (scientific from 1e16 on).
//
// The digits are the shortest that round-trip (Python's dtoa mode 0, like Go's precision -1);
// the layout follows CPython's format_float_short for the 'r' format code: scientific notation
// when the decimal exponent decpt (value = 0.DIGITS × 10^decpt) is <= -4 or > 16.
func PyFloatRepr(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	return string(appendPyFloatRepr(nil, f))
}

// appendPyFloatRepr appends PyFloatRepr(f) for finite f.
func appendPyFloatRepr(dst []byte, f float64) []byte {
	// 'e' with precision -1 yields the shortest round-tripping digits: "-d.ddde±XX".
	var buf [32]byte
	e := strconv.AppendFloat(buf[:0], f, 'e', -1, 64)
	neg := false
	if e[0] == '-' {
		neg = true
		e = e[1:]
	}
	mant, expPart, _ := strings.Cut(string(e), "e")
	digits := strings.Replace(mant, ".", "", 1)
	exp, _ := strconv.Atoi(expPart) // cannot fail: strconv wrote it
	decpt := exp + 1
	if neg {
		dst = append(dst, '-')
	}
	if decpt <= -4 || decpt > 16 {
		dst = append(dst, digits[0])
		if len(digits) > 1 {
			dst = append(dst, '.')
			dst = append(dst, digits[1:]...)
		}
		dst = append(dst, 'e')
		if exp < 0 {
			dst = append(dst, '-')
			exp = -exp
		} else {
			dst = append(dst, '+')
		}
		if exp < 10 {
			dst = append(dst, '0')
		}
		return strconv.AppendInt(dst, int64(exp), 10)
	}
	switch {
	case decpt <= 0:
		dst = append(dst, "0."...)
		for i := 0; i < -decpt; i++ {
			dst = append(dst, '0')
		}
		dst = append(dst, digits...)
	case decpt < len(digits):
		dst = append(dst, digits[:decpt]...)
		dst = append(dst, '.')
		dst = append(dst, digits[decpt:]...)
	default:
		dst = append(dst, digits...)
		for i := len(digits); i < decpt; i++ {
			dst = append(dst, '0')
		}
		dst = append(dst, ".0"...)
	}
	return dst
}

// maxPyRoundDigits is where PyRound stops rounding: a float64 has at most 1074 fractional
// decimal digits, and CPython returns x unchanged for ndigits beyond its own limit (323 on IEEE
// doubles), so rounding to more digits is the identity.
const maxPyRoundDigits = 323

// PyRound returns Python's round(x, ndigits) for ndigits >= 0: x rounded to ndigits decimal
// places, ties to even, decided on the exact binary value of x (so round(2.675, 2) is 2.67
// because the double nearest 2.675 is 2.67499999…). NaN and ±Inf are returned unchanged, as is
// the sign of a result that rounds to zero (round(-0.00004, 4) is -0.0).
//
// Hugging Face's Trainer (transformers 4.x) logs `loss` as round(tr_loss / steps, 4); transformers
// 5.x logs the unrounded mean. Negative ndigits (rounding to tens, hundreds…) are not supported
// and return x unchanged.
func PyRound(x float64, ndigits int) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) || ndigits < 0 || ndigits > maxPyRoundDigits {
		return x
	}
	// strconv's fixed-precision formatting is exact: it rounds the exact binary value of x,
	// and breaks exact decimal ties to even, which is what CPython's dtoa mode 3 does.
	s := strconv.FormatFloat(x, 'f', ndigits, 64)
	r, err := strconv.ParseFloat(s, 64)
	if err != nil { // unreachable: FormatFloat output always parses
		return x
	}
	if r == 0 && math.Signbit(x) {
		return math.Copysign(0, -1)
	}
	return r
}
