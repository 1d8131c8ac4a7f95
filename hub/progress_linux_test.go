//go:build linux

package hub

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gotpu/gotpu/hub/hubtest"
)

// openPTY opens a pseudo-terminal pair: the slave is a real terminal (a character device), as a
// user's stderr is.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	fd := int(m.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		t.Skipf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		m.Close()
		t.Skipf("ptsname: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Skipf("opening the pts: %v", err)
	}
	t.Cleanup(func() { s.Close(); m.Close() })
	return m, s
}

// TestProgressOnTerminal: on a terminal, a download draws tqdm's bar (file name, percentage,
// byte counts) and erases it when done.
func TestProgressOnTerminal(t *testing.T) {
	master, slave := openPTY(t)
	srv := hubtest.New(t)
	srv.AddRepo("model", "org/name", map[string][]byte{"model.bin": payload(3<<20, 16)}, hubtest.RepoOptions{})
	srv.SlowNext("model.bin", 600*time.Millisecond) // long enough for several redraws
	c, _ := newClient(t, srv, func(cfg *Config) { cfg.Progress = slave })
	var drawn bytes.Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		io.Copy(&drawn, master) // until the master is closed by the cleanup
	}()
	mustDownload(t, c, testRepo, "model.bin")
	time.Sleep(100 * time.Millisecond) // let the last redraw reach the master
	slave.Close()
	master.SetReadDeadline(time.Now().Add(time.Second))
	<-done
	out := drawn.String()
	if !strings.Contains(out, "model.bin") || !strings.Contains(out, "%|") || !strings.Contains(out, "\r") {
		t.Errorf("no progress bar drawn on the terminal; got %q", out)
	}
	if n := strings.Count(out, "model.bin]"); n < 2 {
		t.Errorf("the bar was drawn %d times over a 600 ms download: want it redrawn as bytes arrive; got %q", n, out)
	}
	if !strings.Contains(out, "/3.00M [") {
		t.Errorf("the bar does not count bytes as huggingface_hub's does (…/3.00M): %q", out)
	}
	t.Logf("%d bytes drawn; a redraw: %q", len(out), aRedraw(out))
}

// aRedraw is one of the bar's drawn lines (between carriage returns) that shows the file.
func aRedraw(s string) string {
	for _, l := range strings.Split(s, "\r") {
		if strings.Contains(l, "model.bin") && strings.Contains(l, "%|") {
			return l
		}
	}
	return ""
}
