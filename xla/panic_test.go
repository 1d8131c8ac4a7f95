package xla

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/graph"
)

// maxInt8 builds a graph that SimpleGo accepts but whose execution panics (GoMLX v0.26.0's
// ReduceMax kernel mixes up int8 and int16 buffers). It stands for any op failure at run time.
func maxInt8(x *graph.Node) *graph.Node {
	return graph.ReduceAllMax(x)
}

// TestExecutionPanicIsError pins the GoMLX trap: with SimpleGo's default executor an op that panics
// runs on a worker goroutine and kills the process. gotpu's runtime executes ops on the caller's
// goroutine, so the panic is recovered and returned as an error.
func TestExecutionPanicIsError(t *testing.T) {
	rt := openTestRuntime(t, Config{Device: DeviceGo})
	prog, err := rt.Compile("max-int8", maxInt8)
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	_, err = prog.Run([]int8{1, 2, 3})
	if err == nil || !strings.Contains(err.Error(), "panic") || !strings.Contains(err.Error(), "max-int8") {
		t.Fatalf("Run = %v; want the kernel's panic as an error naming the program", err)
	}
	// The runtime is still usable afterwards.
	ok, err := rt.Compile("max-f32", maxInt8)
	if err != nil {
		t.Fatal(err)
	}
	defer ok.Close()
	if _, err := ok.Run([]float32{1, 2}); err != nil {
		t.Fatal(err)
	}
}

// TestStockExecutorPanicKillsProcess documents why: the same graph on SimpleGo's default
// configuration crashes its process (run as a child, so this test survives it).
func TestStockExecutorPanicKillsProcess(t *testing.T) {
	if os.Getenv("GOTPU_STOCK_PANIC_CHILD") == "1" {
		b, err := simplego.New("")
		if err != nil {
			t.Fatal(err)
		}
		e, err := graph.NewExec(b, maxInt8)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { recover() }() // even recovering here cannot catch a worker goroutine's panic
		_, err = e.Exec([]int8{1, 2, 3})
		// The worker's deferred bookkeeping can end Exec while the panic is still unwinding, so
		// give it time to bring the process down before declaring survival.
		time.Sleep(2 * time.Second)
		t.Logf("child: Exec returned %v", err)
		os.Exit(0) // survived: GoMLX fixed the trap
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestStockExecutorPanicKillsProcess$")
	cmd.Env = append(os.Environ(), "GOTPU_STOCK_PANIC_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Skipf("SimpleGo default executor no longer crashes on an op panic (GoMLX changed):\n%s", out)
	}
	if !strings.Contains(string(out), "interface conversion") {
		t.Fatalf("child failed for another reason: %v\n%s", err, out)
	}
}
