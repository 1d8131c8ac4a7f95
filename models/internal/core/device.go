package core

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/dtypes/bfloat16"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/x448/float16"

	"github.com/gotpu/gotpu/internal/safetensors"
)

// DTypeOf maps a safetensors float dtype to GoMLX's.
func DTypeOf(d safetensors.DType) (dtypes.DType, bool) {
	switch d {
	case safetensors.F32:
		return dtypes.Float32, true
	case safetensors.BF16:
		return dtypes.BFloat16, true
	case safetensors.F16:
		return dtypes.Float16, true
	case safetensors.F64:
		return dtypes.Float64, true
	}
	return dtypes.InvalidDType, false
}

// FileDTypeOf maps a GoMLX float dtype to the safetensors spelling.
func FileDTypeOf(d dtypes.DType) (safetensors.DType, bool) {
	switch d {
	case dtypes.Float32:
		return safetensors.F32, true
	case dtypes.BFloat16:
		return safetensors.BF16, true
	case dtypes.Float16:
		return safetensors.F16, true
	}
	return "", false
}

// ParseDTypeName reads the dtype names LoadOptions/SaveOptions and HF's torch_dtype use.
func ParseDTypeName(s string) (dtypes.DType, error) {
	switch s {
	case "float32", "fp32", "f32":
		return dtypes.Float32, nil
	case "bfloat16", "bf16":
		return dtypes.BFloat16, nil
	case "float16", "fp16", "f16", "half":
		return dtypes.Float16, nil
	}
	return dtypes.InvalidDType, fmt.Errorf("dtype %q is not one of float32, bfloat16, float16", s)
}

// TorchDTypeName is the torch_dtype spelling of a GoMLX dtype.
func TorchDTypeName(d dtypes.DType) string {
	switch d {
	case dtypes.BFloat16:
		return "bfloat16"
	case dtypes.Float16:
		return "float16"
	case dtypes.Float64:
		return "float64"
	}
	return "float32"
}

// CheckBackendDType fails when the backend cannot compute in dt (the pure-Go backend has no float16).
func CheckBackendDType(backend backends.Backend, dt dtypes.DType) error {
	if caps := backend.Capabilities(); caps.DTypes != nil && !caps.DTypes[dt] {
		return fmt.Errorf("the %s backend cannot compute in %s: load with DType \"float32\" (the default) or another dtype it supports",
			backend.Name(), TorchDTypeName(dt))
	}
	return nil
}

// DeviceTensor builds a tensor of dtype target on the backend's device 0 from raw little-endian file
// bytes of dtype src. When the backend shares host memory (the pure-Go backend) the values are
// decoded straight into the device buffer; otherwise one tensor-sized staging slice is used. Either
// way a checkpoint is never held twice in the Go heap: raw usually aliases the file's mmap.
func DeviceTensor(backend backends.Backend, target dtypes.DType, src safetensors.DType, raw []byte, dims []int) (*tensors.Tensor, error) {
	shape := shapes.Make(target, dims...)
	n := shape.Size()
	if len(raw) != n*src.Size() {
		return nil, fmt.Errorf("%d bytes of %s for shape %v", len(raw), src, dims)
	}
	var (
		buf  backends.Buffer
		flat any
		err  error
	)
	shared := backend.HasSharedBuffers()
	if shared {
		if buf, flat, err = backend.NewSharedBuffer(0, shape); err != nil {
			return nil, err
		}
	} else {
		switch target {
		case dtypes.Float32:
			flat = make([]float32, n)
		case dtypes.BFloat16:
			flat = make([]bfloat16.BFloat16, n)
		case dtypes.Float16:
			flat = make([]float16.Float16, n)
		default:
			return nil, fmt.Errorf("unsupported target dtype %s", target)
		}
	}
	if err := decodeInto(flat, src, raw); err != nil {
		if shared {
			_ = backend.BufferFinalize(buf)
		}
		return nil, err
	}
	if !shared {
		if buf, err = backend.BufferFromFlatData(0, flat, shape); err != nil {
			return nil, err
		}
	}
	return tensors.FromBuffer(backend, buf)
}

// decodeInto converts raw (dtype src) into flat ([]float32, []bfloat16.BFloat16 or []float16.Float16).
func decodeInto(flat any, src safetensors.DType, raw []byte) error {
	switch dst := flat.(type) {
	case []float32:
		return safetensors.DecodeFloat32(src, raw, dst)
	case []bfloat16.BFloat16:
		if src == safetensors.BF16 { // Bit-exact copy.
			for i := range dst {
				dst[i] = bfloat16.BFloat16(binary.LittleEndian.Uint16(raw[2*i:]))
			}
			return nil
		}
		tmp := make([]float32, len(dst))
		if err := safetensors.DecodeFloat32(src, raw, tmp); err != nil {
			return err
		}
		for i, v := range tmp {
			dst[i] = bfloat16.BFloat16(safetensors.Float32ToBF16Bits(v))
		}
		return nil
	case []float16.Float16:
		if src == safetensors.F16 {
			for i := range dst {
				dst[i] = float16.Float16(binary.LittleEndian.Uint16(raw[2*i:]))
			}
			return nil
		}
		tmp := make([]float32, len(dst))
		if err := safetensors.DecodeFloat32(src, raw, tmp); err != nil {
			return err
		}
		for i, v := range tmp {
			dst[i] = float16.Fromfloat32(v)
		}
		return nil
	}
	return fmt.Errorf("unsupported destination %T", flat)
}

// TensorBytes returns a tensor's values as little-endian bytes of dtype out (F32, BF16 or F16),
// converting with round-to-nearest-even when the tensor's dtype differs.
func TensorBytes(t *tensors.Tensor, out safetensors.DType) ([]byte, error) {
	var res []byte
	var err error
	cerr := t.ConstFlatData(func(flat any) {
		switch src := flat.(type) {
		case []float32:
			res, err = safetensors.EncodeFloat32(out, src)
		case []bfloat16.BFloat16:
			if out == safetensors.BF16 {
				res = make([]byte, 2*len(src))
				for i, v := range src {
					binary.LittleEndian.PutUint16(res[2*i:], uint16(v))
				}
				return
			}
			tmp := make([]float32, len(src))
			for i, v := range src {
				tmp[i] = math.Float32frombits(uint32(v) << 16)
			}
			res, err = safetensors.EncodeFloat32(out, tmp)
		case []float16.Float16:
			if out == safetensors.F16 {
				res = make([]byte, 2*len(src))
				for i, v := range src {
					binary.LittleEndian.PutUint16(res[2*i:], uint16(v))
				}
				return
			}
			tmp := make([]float32, len(src))
			for i, v := range src {
				tmp[i] = v.Float32()
			}
			res, err = safetensors.EncodeFloat32(out, tmp)
		default:
			err = fmt.Errorf("cannot save a %T tensor", flat)
		}
	})
	if cerr != nil {
		return nil, cerr
	}
	return res, err
}
