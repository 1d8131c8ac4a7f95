package aslimit

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
)

// childEnv marks the test binary run as a child under a limit: it prints what it found.
const childEnv = "GOTPU_ASLIMIT_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		fmt.Printf("capped=%v set=%d limit=%d\n", ArenasCapped(), SoftLimit(), debug.SetMemoryLimit(-1))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// child runs this test binary as a child, under `ulimit -v kib` when kib > 0, with extra env.
func child(t *testing.T, kib int, env ...string) (capped bool, set, limit int64) {
	t.Helper()
	script := `exec "$0"`
	if kib > 0 {
		script = fmt.Sprintf(`ulimit -v %d && exec "$0"`, kib)
	}
	cmd := exec.Command("/bin/sh", "-c", script, os.Args[0])
	cmd.Env = append(os.Environ(), append([]string{childEnv + "=1"}, env...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if _, err := fmt.Sscanf(strings.TrimSpace(string(out)), "capped=%t set=%d limit=%d", &capped, &set, &limit); err != nil {
		t.Fatalf("child said %q: %v", out, err)
	}
	return capped, set, limit
}

// TestUnderAddressSpaceLimit: under `ulimit -v 4 GiB` the arenas are capped and the soft memory
// limit is three quarters of the address space left above what the runtime holds: below the
// limit, far above nothing. Without a limit, or with GOMEMLIMIT set, nothing changes.
func TestUnderAddressSpaceLimit(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("RLIMIT_AS and /proc/self/status: linux")
	}
	const kib = 4 << 20
	capped, set, limit := child(t, kib, "GOMEMLIMIT=")
	t.Logf("ulimit -v %d: arenas capped %v, soft limit %d MiB", kib, capped, set>>20)
	if wantCgo := cgoEnabled(); capped != wantCgo {
		t.Errorf("arenas capped = %v, want %v (cgo %v)", capped, wantCgo, wantCgo)
	}
	if set == 0 || set != limit || set >= kib<<10 || set < 256<<20 {
		t.Errorf("soft limit %d (set %d): want one between 256 MiB and the %d-byte address-space limit", limit, set, kib<<10)
	}

	capped, set, limit = child(t, 0, "GOMEMLIMIT=")
	if capped || set != 0 || limit != int64(^uint64(0)>>1) {
		t.Errorf("without a limit: capped %v, set %d, limit %d: want nothing changed", capped, set, limit)
	}
	_, set, limit = child(t, kib, "GOMEMLIMIT=300MiB")
	if set != 0 || limit != 300<<20 {
		t.Errorf("GOMEMLIMIT=300MiB under a limit: set %d, limit %d: want GOMEMLIMIT's %d kept", set, limit, 300<<20)
	}
}

// cgoEnabled reports whether this test binary was built with cgo (the arena cap needs it).
func cgoEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "CGO_ENABLED" {
			v, _ := strconv.ParseBool(s.Value)
			return v
		}
	}
	return false
}
