//go:build unix

package safetensors

import (
	"os"
	"syscall"
)

// mapFile maps the whole file read-only. Mapping lets tensor bytes go from the page cache straight
// into device buffers without a second copy in the Go heap.
func mapFile(f *os.File, size int64) ([]byte, func([]byte) error, error) {
	if size <= 0 || int64(int(size)) != size {
		return nil, nil, syscall.EINVAL
	}
	m, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return m, syscall.Munmap, nil
}
