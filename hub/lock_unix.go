//go:build unix

package hub

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gotpu/gotpu/internal/atomicfile"
)

// lockPollInterval is how often a blocked lock is retried; flock(2) cannot wait on a context.
const lockPollInterval = 50 * time.Millisecond

// lockFile takes an exclusive flock(2) on path (created if missing), waiting until it is free
// or ctx is done. flock locks belong to the open file, so two goroutines of one process exclude
// each other as two processes do, and the kernel drops the lock of a killed process. The lock
// file is left in place, as huggingface_hub leaves its own: removing it would let a third
// process lock a new file while a second still holds the old one.
func lockFile(ctx context.Context, path string) (unlock func(), err error) {
	if err := atomicfile.MkdirAll(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("hub: lock: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, atomicfile.FileMode)
	if err != nil {
		return nil, fmt.Errorf("hub: lock: %w", err)
	}
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() {
				// Closing the file releases the lock too; unlock first to say so plainly.
				_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
				f.Close()
			}, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, fmt.Errorf("hub: lock %s: %w", path, err)
		}
		t := time.NewTimer(lockPollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			f.Close()
			return nil, fmt.Errorf("hub: waiting for lock %s: %w", path, ctx.Err())
		case <-t.C:
		}
	}
}
