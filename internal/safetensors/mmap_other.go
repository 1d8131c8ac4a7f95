//go:build !unix

package safetensors

import (
	"errors"
	"os"
)

// mapFile is unavailable here; File falls back to positioned reads, one tensor at a time.
func mapFile(*os.File, int64) ([]byte, func([]byte) error, error) {
	return nil, nil, errors.New("mmap not supported on this platform")
}
