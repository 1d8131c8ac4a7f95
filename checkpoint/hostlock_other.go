//go:build !unix

package checkpoint

import (
	"fmt"
	"runtime"
)

// hostLock needs flock(2); gotpu's writer election is not implemented on this system.
type hostLock struct{}

func acquireHostLock(path string) (*hostLock, error) {
	return nil, fmt.Errorf("checkpoint: electing the writer of a host needs flock(2), which %s lacks; set WriterConfig.NoElection to run without it", runtime.GOOS)
}

func (l *hostLock) release() error { return nil }
