package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Soak bounds. A warm-up round of the mix, then the measured round; each ends after its
// duration or when the request budget (both rounds together, the warm-up's own requests
// included) is spent. With the teardowns the test takes ~35 s on 2 cores and makes ~350
// requests, under 500.
const (
	soakWarmup   = 18 * time.Second
	soakPhase    = 12 * time.Second
	soakRequests = 480
	// soakHeapSlack is the heap growth always allowed: at ~5 MiB of live heap, 10% is a single
	// pooled device buffer of the runtime. It is far below what a leak the test is after would
	// leave (a tokenizer is ~9 MB; a request body is kept per job).
	soakHeapSlack = 4 << 20
)

// TestSoak runs the service on loopback under a mix of job submissions (some refused by the
// queue cap), cancels, event-stream subscribers that never read, request bodies that trickle in,
// generation requests and plain reads. Once every job is cancelled and every client gone, the
// process must be back where it started: no more goroutines; RSS (/proc/self/statm) within 10%
// — the assertion the issue asks for, made without the race detector, whose shadow memory is
// never given back; the Go heap's live objects within 10% or soakHeapSlack, whichever is
// larger; and the service still answers, slow bodies having been closed by the server.
//
// The start is measured after a warm-up round of the same mix (and its teardown): the runtime
// keeps pools sized by what it has run (CPU workers with their scratch memory and helper
// goroutines, device-buffer pools per shape), which the first jobs and generations fill and
// later ones reuse. Measured round after round, RSS and heap climb for the first ~20 s of the
// mix and then stay level: a high-water mark, not growth; growth is what a further round adds.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("soak test: skipped with -short")
	}
	root, tmp := repoRoot(t), t.TempDir()
	tokens := filepath.Join(tmp, "tokens.jsonl")
	writeTokenJSONL(t, tokens, 16, 32, 1000)
	ts := startServer(t, openRuntime(t), Config{
		DataDir: filepath.Join(tmp, "data"), InputRoots: []string{root, tmp}, BaseDir: root,
		MaxRunning: 1, MaxQueued: 3, MaxGenerating: 1,
		ReadHeaderTimeout: time.Second, ReadTimeout: 2 * time.Second, IdleTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second,
	})
	sk := &soak{t: t, ts: ts, addr: strings.TrimPrefix(ts.url, "http://"),
		// The client drops a kept-alive connection after 1 s idle, before the server's 2 s
		// IdleTimeout closes it: reusing one the server is closing at that moment ends a
		// request that the transport does not retry (a POST or a DELETE) in EOF, which is the
		// client's race, not a wrong answer of the server.
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8, IdleConnTimeout: time.Second}},
		job: fmt.Sprintf(`{"model_name_or_path": "testdata/models/gpt2-tiny", "train_file": %q,
			"per_device_train_batch_size": 4, "max_steps": 1000000, "save_steps": 1000000, "logging_steps": 1}`, tokens)}
	defer sk.client.CloseIdleConnections()

	// A job trained to a checkpoint (DELETE commits it), for the generation requests.
	var warm Progress
	callJSON(t, "POST", ts.url+"/jobs", sk.job, http.StatusCreated, &warm)
	waitFor(t, ts.url+"/jobs/"+warm.ID, "step 2", func(p Progress) bool { return p.Step >= 2 })
	callJSON(t, "DELETE", ts.url+"/jobs/"+warm.ID, "", http.StatusOK, nil)
	sk.requests.Add(4)
	sk.genPath = "/jobs/" + warm.ID + "/generate?prompt_ids=1,2,3&max_new_tokens=4"
	http.DefaultClient.CloseIdleConnections()

	sk.round(soakWarmup)
	g0, rss0, heap0 := settle(t, ts.srv, -1)
	t.Logf("start: %d goroutines, RSS %.1f MiB, heap %.1f MiB", g0, mib(rss0), mib(heap0))
	sk.round(soakPhase)
	g1, rss1, heap1 := settle(t, ts.srv, g0)
	t.Logf("end: %d goroutines, RSS %.1f MiB (%+.1f%%), heap %.1f MiB (%+.1f%%); %d requests in all",
		g1, mib(rss1), pct(rss1, rss0), mib(heap1), pct(heap1, heap0), min(sk.requests.Load(), soakRequests))
	if g1 > g0 {
		var dump bytes.Buffer
		pprof.Lookup("goroutine").WriteTo(&dump, 1)
		t.Fatalf("%d goroutines after the soak, %d before:\n%s", g1, g0, dump.String())
	}
	if heap1 > heap0+max(heap0/10, soakHeapSlack) {
		t.Errorf("Go heap %.1f MiB after the soak, %.1f MiB before: more than 10%% (or %d MiB) growth", mib(heap1), mib(heap0), soakHeapSlack>>20)
	}
	if !raceEnabled && rss1 > rss0+rss0/10 {
		t.Errorf("RSS %.1f MiB after the soak, %.1f MiB before: more than 10%% growth", mib(rss1), mib(rss0))
	}
	// Still serving: reads, and a new job accepted (then cancelled).
	callJSON(t, "GET", ts.url+"/healthz", "", http.StatusOK, nil)
	var list struct{ Jobs []Progress }
	callJSON(t, "GET", ts.url+"/jobs", "", http.StatusOK, &list)
	for _, p := range list.Jobs {
		if !p.State.Done() {
			t.Fatalf("job %s still %s after the teardown", p.ID, p.State)
		}
	}
	var last Progress
	callJSON(t, "POST", ts.url+"/jobs", sk.job, http.StatusCreated, &last)
	callJSON(t, "DELETE", ts.url+"/jobs/"+last.ID, "", http.StatusOK, nil)
}

// soak is TestSoak's traffic.
type soak struct {
	t        *testing.T
	ts       *testServer
	addr     string
	client   *http.Client
	job      string // a POST /jobs body that trains until cancelled
	genPath  string
	requests atomic.Int64 // made so far, both rounds
}

// errBudget ends a soak worker: the request budget is spent.
var errBudget = errors.New("request budget spent")

// do makes one request and returns the status and body, or an error (the context's at the end
// of the round). No request is made past the budget.
func (sk *soak) do(ctx context.Context, method, path, body string) (int, []byte, error) {
	if sk.requests.Add(1) > soakRequests {
		return 0, nil, errBudget
	}
	req, err := http.NewRequestWithContext(ctx, method, sk.ts.url+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	resp, err := sk.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// round runs the mix for d (or until the budget is spent), then tears it down: slow bodies
// checked closed by the server, every job cancelled and waited for, every connection closed.
// Each worker is a goroutine of the round, ending with it; wg waits for them all.
func (sk *soak) round(d time.Duration) {
	t := sk.t
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		ids    []string   // jobs created
		held   []net.Conn // event streams never read, slow bodies: closed at the end
		stops  []func()   // the slow bodies' trickles
		slow   []net.Conn // slow bodies, which the server must close
		errs   []error    // unexpected answers
		counts = map[string]int{}
	)
	record := func(what string, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", what, err))
		}
		counts[what]++
	}
	worker := func(every time.Duration, f func(ctx context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(every)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				if err := f(ctx); errors.Is(err, errBudget) {
					return
				}
			}
		}()
	}
	ended := func(err error) bool { return errors.Is(err, errBudget) || ctx.Err() != nil }
	// check records a request's outcome: err, or a status not in ok.
	check := func(what string, code int, b []byte, err error, ok ...int) {
		if err == nil && !slices.Contains(ok, code) {
			err = fmt.Errorf("status %d: %s", code, b)
		}
		record(what, err)
	}
	pick := func() string {
		mu.Lock()
		defer mu.Unlock()
		if len(ids) == 0 {
			return "nope" // a 404, also fine
		}
		return ids[int(sk.requests.Load())%len(ids)]
	}
	worker(300*time.Millisecond, func(ctx context.Context) error {
		code, b, err := sk.do(ctx, "POST", "/jobs", sk.job)
		if ended(err) {
			return err
		}
		if err == nil && code == http.StatusCreated {
			var p Progress
			if err := json.Unmarshal(b, &p); err != nil {
				record("submit", err)
				return nil
			}
			mu.Lock()
			ids = append(ids, p.ID)
			mu.Unlock()
		}
		what := "submit"
		if code == http.StatusTooManyRequests {
			what = "submit refused (queue full)"
		}
		check(what, code, b, err, http.StatusCreated, http.StatusTooManyRequests)
		return nil
	})
	var cancels atomic.Int64
	worker(450*time.Millisecond, func(ctx context.Context) error {
		path := "/jobs/" + pick()
		if cancels.Add(1)%2 == 0 {
			path += "?wait=false"
		}
		code, b, err := sk.do(ctx, "DELETE", path, "")
		if ended(err) {
			return err
		}
		check("cancel", code, b, err, http.StatusOK, http.StatusAccepted, http.StatusConflict, http.StatusNotFound)
		return nil
	})
	worker(time.Second, func(ctx context.Context) error {
		if sk.requests.Add(1) > soakRequests {
			return errBudget
		}
		conn, err := net.Dial("tcp", sk.addr)
		if err == nil {
			_, err = io.WriteString(conn, "GET /jobs/"+pick()+"/events HTTP/1.1\r\nHost: soak\r\n\r\n")
			mu.Lock()
			held = append(held, conn)
			mu.Unlock()
		}
		record("event stream (never read)", err)
		return nil
	})
	worker(1500*time.Millisecond, func(ctx context.Context) error {
		if sk.requests.Add(1) > soakRequests {
			return errBudget
		}
		conn, stop, err := startSlowBody(sk.addr)
		if err == nil {
			mu.Lock()
			held, stops, slow = append(held, conn), append(stops, stop), append(slow, conn)
			mu.Unlock()
		}
		record("slow body", err)
		return nil
	})
	worker(500*time.Millisecond, func(ctx context.Context) error {
		code, b, err := sk.do(ctx, "GET", sk.genPath, "")
		if ended(err) {
			return err
		}
		check("generate", code, b, err, http.StatusOK)
		return nil
	})
	var reads atomic.Int64
	worker(400*time.Millisecond, func(ctx context.Context) error {
		path := "/jobs"
		if reads.Add(1)%2 == 0 {
			path = "/metrics"
		}
		code, b, err := sk.do(ctx, "GET", path, "")
		if ended(err) {
			return err
		}
		check("read", code, b, err, http.StatusOK)
		return nil
	})
	start := time.Now()
	wg.Wait()
	t.Logf("round of %v: %.1fs, %d requests so far: %v", d, time.Since(start).Seconds(), min(sk.requests.Load(), soakRequests), counts)
	if len(errs) > 0 {
		t.Fatalf("%d unexpected answers, first: %v", len(errs), errors.Join(errs[:min(len(errs), 5)]...))
	}

	// The server, not the client, ends slow bodies (ReadTimeout).
	for i, c := range slow {
		closedByServer(t, c, fmt.Sprintf("slow body %d", i))
	}
	// Every job the service has, not only those whose 201 the workers read: a POST cut short
	// by the end of the round may still have created one.
	var list struct{ Jobs []Progress }
	callJSON(t, "GET", sk.ts.url+"/jobs", "", http.StatusOK, &list)
	for _, p := range list.Jobs {
		if p.State.Done() {
			continue
		}
		if code, b := call(t, "DELETE", sk.ts.url+"/jobs/"+p.ID, ""); code != http.StatusOK && code != http.StatusConflict {
			t.Fatalf("DELETE %s: %d %s", p.ID, code, b)
		}
	}
	for _, stop := range stops {
		stop()
	}
	for _, c := range held {
		c.Close()
	}
	sk.client.CloseIdleConnections()
	http.DefaultClient.CloseIdleConnections()
}

// settle waits until the server has no request in flight and, when want >= 0, until at most
// want goroutines run (a connection's goroutines end a moment after it closes), for at most
// 10 s; then it collects garbage, returns freed memory to the OS and measures: goroutines, RSS
// (/proc/self/statm) and the Go heap's live objects. RSS is the least of three readings, each
// after debug.FreeOSMemory: on this machine a single reading after it still varied by up to
// 7 MiB of free heap pages not yet handed back (on a ~33 MiB process), both ways, run to run.
func settle(t *testing.T, s *Server, want int) (goroutines int, rss, heap uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.requestsInFlight() > 0 || (want >= 0 && runtime.NumGoroutine() > want) {
		if time.Now().After(deadline) {
			break // measured as it is; the caller's assertions report it
		}
		time.Sleep(50 * time.Millisecond)
	}
	if want < 0 {
		time.Sleep(500 * time.Millisecond) // let closing connections' goroutines end
	}
	// Device buffers go back to their pools (sync.Pools) from finalizers, which run after the
	// cycle that found them garbage; a pool's contents are dropped over the next two cycles.
	// Several cycles, with time for the finalizers between them, reach the steady state.
	for range 5 {
		runtime.GC()
		time.Sleep(20 * time.Millisecond)
	}
	goroutines = runtime.NumGoroutine()
	for i := range 3 {
		debug.FreeOSMemory()
		time.Sleep(100 * time.Millisecond)
		b, err := os.ReadFile("/proc/self/statm")
		if err != nil {
			t.Skipf("no /proc/self/statm: %v", err)
		}
		fields := strings.Fields(string(b))
		if len(fields) < 2 {
			t.Fatalf("/proc/self/statm: %q", b)
		}
		pages, err := strconv.ParseUint(fields[1], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		// Free heap pages the Go runtime has not handed back yet (/memory/classes/heap/free:
		// measured here at 0.05 to 6 MiB right after FreeOSMemory, as finalizers and pools
		// allocate and free meanwhile) are counted in RSS but held by no one: the memory the
		// service holds is RSS less those.
		free := []metrics.Sample{{Name: "/memory/classes/heap/free:bytes"}}
		metrics.Read(free)
		r := pages * uint64(os.Getpagesize())
		r -= min(r, free[0].Value.Uint64())
		if i == 0 || r < rss {
			rss = r
		}
	}
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	return goroutines, rss, sample[0].Value.Uint64()
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

func pct(now, before uint64) float64 { return 100 * (float64(now) - float64(before)) / float64(before) }
