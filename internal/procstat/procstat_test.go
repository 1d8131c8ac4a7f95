package procstat_test

import (
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gotpu/gotpu/internal/procstat"
)

// needProc skips where this process has no Linux /proc, after checking that the readers then
// report nothing rather than failing.
func needProc(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/proc/self/status"); err != nil {
		if procstat.PeakRSS() != 0 || procstat.CurrentRSS() != 0 {
			t.Errorf("without /proc: PeakRSS %d, CurrentRSS %d, want 0", procstat.PeakRSS(), procstat.CurrentRSS())
		}
		if _, ok := procstat.OwnCPUSeconds(); ok {
			t.Error("without /proc: OwnCPUSeconds ok")
		}
		if _, ok := procstat.MachineBusySeconds(); ok {
			t.Error("without /proc: MachineBusySeconds ok")
		}
		if o := procstat.StartCPUMonitor().Others(); o != 0 {
			t.Errorf("without /proc: Others %g, want 0", o)
		}
		t.Skipf("no /proc (%s): %v", runtime.GOOS, err)
	}
}

// sink keeps the busy loop's result live.
var sink uint64

// spin burns CPU in this goroutine until this process's CPU time has advanced by want seconds;
// it fails the test if that has not happened after a minute of spinning.
func spin(t *testing.T, want float64) {
	t.Helper()
	start, ok := procstat.OwnCPUSeconds()
	if !ok {
		t.Fatal("OwnCPUSeconds: not ok with /proc present")
	}
	give := time.Now().Add(time.Minute)
	x := uint64(1)
	for {
		for range 1 << 20 {
			x = x*6364136223846793005 + 1442695040888963407
		}
		now, ok := procstat.OwnCPUSeconds()
		if !ok {
			t.Fatal("OwnCPUSeconds: not ok on a second reading")
		}
		if now-start >= want {
			break
		}
		if time.Now().After(give) {
			t.Fatalf("own CPU time went from %g s to %g s over a minute of busy work", start, now)
		}
	}
	sink += x
}

func TestRSS(t *testing.T) {
	needProc(t)
	cur, peak := procstat.CurrentRSS(), procstat.PeakRSS()
	if cur == 0 || peak < cur {
		t.Fatalf("CurrentRSS %d, PeakRSS %d: want peak ≥ current > 0", cur, peak)
	}
	if err := procstat.ResetPeakRSS(); err != nil {
		// Some kernels and sandboxes refuse clear_refs; the peak is then the process's lifetime's.
		t.Skipf("ResetPeakRSS: %v", err)
	}
	before := procstat.PeakRSS()
	const size = 64 << 20
	buf := make([]byte, size)
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = 1 // touch every page: untouched pages are not resident
	}
	// The current resident set first: it may grow between the two readings, the peak not fall.
	cur = procstat.CurrentRSS()
	after := procstat.PeakRSS()
	runtime.KeepAlive(buf)
	// The allocation is fresh memory (the reset returned the free heap to the OS), so the peak
	// rises by about its size; half leaves room for pages the runtime had kept.
	if after < before+size/2 {
		t.Errorf("PeakRSS %d MiB after touching 64 MiB, %d MiB before: want a rise of ≥ 32 MiB", after>>20, before>>20)
	}
	if cur == 0 || after < cur {
		t.Errorf("CurrentRSS %d, PeakRSS %d: want peak ≥ current > 0", cur, after)
	}
}

func TestCPU(t *testing.T) {
	needProc(t)
	busy0, ok := procstat.MachineBusySeconds()
	if !ok || busy0 <= 0 {
		t.Fatalf("MachineBusySeconds %g, %v", busy0, ok)
	}
	mon := procstat.StartCPUMonitor()
	spin(t, 0.3) // OwnCPUSeconds increases with busy work, or spin fails
	busy1, ok := procstat.MachineBusySeconds()
	if !ok || busy1 < busy0 {
		t.Errorf("MachineBusySeconds went from %g to %g (%v) over busy work", busy0, busy1, ok)
	}
	others := mon.Others()
	// At most 1, or the machine's CPUs over those this process may use; 0.05 is /proc's tick
	// resolution over the ≥ 0.3 s measured.
	limit := 1.0
	if raw, err := os.ReadFile("/proc/stat"); err == nil {
		cpus := 0
		for _, line := range strings.Split(string(raw), "\n") {
			if strings.HasPrefix(line, "cpu") && len(line) > 3 && line[3] >= '0' && line[3] <= '9' {
				cpus++
			}
		}
		limit = max(limit, float64(cpus)/float64(runtime.NumCPU()))
	}
	if others < 0 || others > limit+0.05 {
		t.Errorf("Others %g: want a share in [0, %g]", others, limit)
	}
	t.Logf("others used %.1f%% of %d CPUs", 100*others, runtime.NumCPU())
}

func TestLiveHeap(t *testing.T) {
	const size = 32 << 20
	before := procstat.LiveHeap()
	buf := make([]byte, size)
	after := procstat.LiveHeap()
	runtime.KeepAlive(buf)
	// Less 1 MiB: other objects live before may have been freed since.
	if after < before+size-1<<20 {
		t.Errorf("LiveHeap %d with %d bytes more live, %d before", after, size, before)
	}
}
