package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"

	"github.com/gotpu/gotpu/internal/safetensors"
)

// TensorInfo describes one tensor of a TensorSource.
type TensorInfo struct {
	// Name is the tensor's key in the file (an HF parameter name, "<state>/<name>", ...).
	Name string
	// DType is the safetensors dtype: "F32", "BF16", "I64", ...
	DType string
	// Shape is the whole tensor's shape, never a shard's.
	Shape []int
}

// TensorSource is tensors still on devices, possibly as per-device shards, staged to the host
// one tensor at a time while a file is written (SafetensorsFile). The runtime implements it.
type TensorSource interface {
	// Tensors lists the tensors, in any order (the file sorts them as the safetensors library
	// does). SafetensorsFile calls it once; the list must not change afterwards.
	Tensors() []TensorInfo
	// Stage copies tensor i (an index into Tensors()), whole — its shards gathered — as
	// row-major little-endian bytes into dst, which has exactly its byte size. dst is reused
	// for the next tensor once Stage returns: Stage must not keep it. An error fails the save.
	Stage(ctx context.Context, i int, dst []byte) error
}

// SafetensorsFile returns a checkpoint file named name holding src's tensors and metadata
// (nil: no "__metadata__" key) in the safetensors format: byte for byte what
// internal/safetensors.Write writes for the same tensors and metadata. The file is Live: a
// Writer's Save returns only once it is written (see the package documentation, Concurrency).
// Its WriteTo writes the header (computed from src.Tensors() alone), then stages each tensor
// with src.Stage into one buffer, sized to the largest tensor and reused (by the next files of
// the save too), and writes it to w; so beyond what w buffers, a save holds about the largest
// tensor of host memory, never the sum. Stage runs on the goroutine calling WriteTo (a
// Writer's), in file order, one call at a time, never after WriteTo returned; WriteTo may run
// again (each run stages again).
//
// The tensors are checked here, before anything is allocated or staged, with the rules of the
// strict reader: names (non-empty, valid UTF-8, unique, not "__metadata__"), dtypes, shapes
// (no negative dimension, no byte size or file size that overflows), the header's size and the
// tensor count; an invalid file is an error naming the file and the tensor.
func SafetensorsFile(name string, src TensorSource, metadata map[string]string) (File, error) {
	if err := ValidateName(name); err != nil {
		return File{}, fmt.Errorf("checkpoint: %w", err)
	}
	infos := slices.Clone(src.Tensors())
	if len(infos) > safetensors.MaxTensors {
		return File{}, fmt.Errorf("checkpoint: %s: %d tensors, over the reader's limit of %d", name, len(infos), safetensors.MaxTensors)
	}
	specs := make([]safetensors.Tensor, len(infos))
	sizes := make([]int, len(infos))
	var total int64
	largest := 0
	for i := range infos {
		infos[i].Shape = slices.Clone(infos[i].Shape)
		t := infos[i]
		// Stream marks the data as supplied later, so the header is checked without it.
		specs[i] = safetensors.Tensor{Name: t.Name, DType: safetensors.DType(t.DType), Shape: t.Shape,
			Stream: func(io.Writer) error { return errNotStaged }}
	}
	md := maps.Clone(metadata)
	header, err := safetensors.EncodeHeader(specs, md)
	if err != nil {
		return File{}, fmt.Errorf("checkpoint: %s: %w", name, err)
	}
	if len(header) > safetensors.MaxHeaderSize {
		return File{}, fmt.Errorf("checkpoint: %s: header of %d bytes, over the reader's limit of %d", name, len(header), safetensors.MaxHeaderSize)
	}
	// EncodeHeader checked each byte size; the sum and the staging buffer are checked here.
	for i, s := range specs {
		n := s.Size()
		if n > math.MaxInt || total > math.MaxInt64-n {
			return File{}, fmt.Errorf("checkpoint: %s: tensor %q: %d bytes overflow the file", name, s.Name, n)
		}
		total += n
		sizes[i] = int(n)
		largest = max(largest, int(n))
	}
	f := &stagedFile{infos: infos, sizes: sizes, largest: largest, src: src, md: md}
	return File{
		Name:     name,
		WriteTo:  func(w io.Writer) error { return f.write(context.Background(), w, &writeBuffers{}) },
		Live:     true,
		writeCtx: f.write,
	}, nil
}

var errNotStaged = errors.New("checkpoint: tensor not staged")

// stagedFile is the state of a SafetensorsFile, checked at construction.
type stagedFile struct {
	infos   []TensorInfo
	sizes   []int
	largest int
	src     TensorSource
	md      map[string]string
}

// write writes the file to w, staging the tensors one at a time into one buffer: bufs.stage, or
// a new one (kept there for the save's next file) if that is too small.
func (f *stagedFile) write(ctx context.Context, w io.Writer, bufs *writeBuffers) error {
	specs := make([]safetensors.Tensor, len(f.infos))
	for i, t := range f.infos {
		specs[i] = safetensors.Tensor{Name: t.Name, DType: safetensors.DType(t.DType), Shape: t.Shape,
			Stream: func(w io.Writer) error {
				if err := ctx.Err(); err != nil {
					return err
				}
				if cap(bufs.stage) < f.largest {
					bufs.stage = nil // the old one is garbage before the new one is made
					bufs.stage = make([]byte, f.largest)
				}
				dst := bufs.stage[:f.sizes[i]:f.sizes[i]]
				if err := f.src.Stage(ctx, i, dst); err != nil {
					return fmt.Errorf("staging: %w", err)
				}
				_, err := w.Write(dst)
				return err
			}}
	}
	return safetensors.Write(w, specs, f.md)
}
