//go:build !unix

package hub

import (
	"context"
	"errors"
	"fmt"
)

// lockFile is not implemented off Unix: downloads there fail rather than risk two writers.
func lockFile(ctx context.Context, path string) (func(), error) {
	return nil, fmt.Errorf("hub: lock %s: %w", path, errors.ErrUnsupported)
}
