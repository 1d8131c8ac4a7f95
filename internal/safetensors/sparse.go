package safetensors

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
)

// WriteSparseFile writes a safetensors file at path whose header lists tensors (their Data,
// Load and Stream are ignored) and whose data is a hole: the file has its full size but takes
// no disk. Tests use it for self-consistent checkpoints larger than memory. It returns the data
// bytes the header accounts for; an error from the final truncation means the file system
// cannot hold such a file (callers skip).
func WriteSparseFile(path string, tensors []Tensor) (dataBytes int64, err error) {
	// Load marks each tensor's data as coming from elsewhere (the hole), so the header is
	// validated for names, dtypes and shapes but not against data the file never holds.
	hole := func() ([]byte, error) { return nil, errors.New("safetensors: a sparse file's data is a hole") }
	specs := make([]Tensor, len(tensors))
	for i, t := range tensors {
		specs[i] = Tensor{Name: t.Name, DType: t.DType, Shape: t.Shape, Load: hole}
		dataBytes += t.Size()
	}
	header, err := EncodeHeader(specs, nil)
	if err != nil {
		return 0, err
	}
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	if err := binary.Write(f, binary.LittleEndian, uint64(len(header))); err != nil {
		return 0, err
	}
	if _, err := f.Write(header); err != nil {
		return 0, err
	}
	if err := f.Truncate(8 + int64(len(header)) + dataBytes); err != nil {
		return 0, fmt.Errorf("safetensors: %s: no sparse file of %d bytes here: %w", path, dataBytes, err)
	}
	return dataBytes, nil
}
