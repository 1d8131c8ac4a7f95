package safetensors

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/x448/float16"
)

// DecodeFloat32 converts little-endian elements of dtype d (F32, F64, BF16 or F16) into dst, which
// must hold exactly len(raw)/d.Size() values. BF16 and F16 widen exactly; F64 rounds to nearest.
func DecodeFloat32(d DType, raw []byte, dst []float32) error {
	if d.Size() == 0 || len(raw) != len(dst)*d.Size() {
		return fmt.Errorf("DecodeFloat32: %d bytes of %s for %d values", len(raw), d, len(dst))
	}
	switch d {
	case F32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
	case BF16:
		for i := range dst {
			dst[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(raw[2*i:])) << 16)
		}
	case F16:
		for i := range dst {
			dst[i] = float16.Frombits(binary.LittleEndian.Uint16(raw[2*i:])).Float32()
		}
	case F64:
		for i := range dst {
			dst[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(raw[8*i:])))
		}
	default:
		return fmt.Errorf("DecodeFloat32: %s is not a floating-point dtype", d)
	}
	return nil
}

// EncodeFloat32 converts src to little-endian elements of dtype d (F32, BF16 or F16), rounding to
// nearest even as PyTorch's .to(torch.bfloat16) / .to(torch.float16) do.
func EncodeFloat32(d DType, src []float32) ([]byte, error) {
	out := make([]byte, len(src)*d.Size())
	switch d {
	case F32:
		for i, v := range src {
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
		}
	case BF16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(out[2*i:], Float32ToBF16Bits(v))
		}
	case F16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(out[2*i:], float16.Fromfloat32(v).Bits())
		}
	default:
		return nil, fmt.Errorf("EncodeFloat32: cannot encode to %s", d)
	}
	return out, nil
}

// Float32ToBF16Bits rounds a float32 to bfloat16 (nearest, ties to even), keeping NaN a quiet NaN.
func Float32ToBF16Bits(v float32) uint16 {
	b := math.Float32bits(v)
	if v != v { // NaN: truncating could turn a NaN with only low mantissa bits into infinity.
		return uint16(b>>16) | 0x0040
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// ReadFloat32File reads every tensor of a safetensors file, widened or rounded to float32
// (DecodeFloat32's dtypes), with its shape: for tools and tests that compare weights.
func ReadFloat32File(path string) (values map[string][]float32, shapes map[string][]int, err error) {
	f, err := Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	values, shapes = map[string][]float32{}, map[string][]int{}
	for _, name := range f.Names() {
		info, _ := f.Info(name)
		raw, err := f.Bytes(name)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %s: %w", path, name, err)
		}
		v := make([]float32, info.NumElements())
		if err := DecodeFloat32(info.DType, raw, v); err != nil {
			return nil, nil, fmt.Errorf("%s: %s: %w", path, name, err)
		}
		values[name], shapes[name] = v, info.Shape
	}
	return values, shapes, nil
}
