//go:build unix

package checkpoint

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// hostLock is the host-wide election of a directory's writer: an exclusive flock(2) on a file in
// a host-local directory. The kernel releases it when the holder exits, however it exits, so a
// SIGKILLed writer never blocks the next one.
type hostLock struct {
	f    *os.File
	path string
}

func acquireHostLock(path string) (*hostLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: writer lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := ""
		if b, rerr := os.ReadFile(path); rerr == nil && len(strings.TrimSpace(string(b))) > 0 {
			holder = " by pid " + strings.TrimSpace(string(b))
		}
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w (lock %s held%s)", ErrWriterHeld, path, holder)
		}
		return nil, fmt.Errorf("checkpoint: writer lock %s: %w", path, err)
	}
	// The pid is only for the message above; the lock itself is the flock.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &hostLock{f: f, path: path}, nil
}

// release drops the lock. The file stays: removing it would let a third process lock a new
// inode while a second still waits on the old one.
func (l *hostLock) release() error {
	if l == nil {
		return nil
	}
	err := syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	return err
}
