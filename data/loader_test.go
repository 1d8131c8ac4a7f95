package data

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// synthetic returns n examples whose tokens encode their index, of varying lengths.
func synthetic(n int) SliceDataset {
	ds := make(SliceDataset, n)
	for i := range ds {
		l := 3 + i%5
		ids := make([]int32, l)
		for j := range ids {
			ids[j] = int32(i*10 + j)
		}
		ds[i] = Example{InputIDs: ids, Label: int32(i % 3), HasLabel: true}
	}
	return ds
}

func testConfig(ds Dataset, replicas, perReplica, prefetch int) LoaderConfig {
	return LoaderConfig{
		Dataset:        ds,
		Collator:       CausalLMCollator{BlockSize: 8},
		Sampler:        Sampler{NumExamples: ds.Len(), GlobalBatch: perReplica * replicas, Seed: 42, Shuffle: true},
		NumReplicas:    replicas,
		PrefetchFactor: prefetch,
		NumWorkers:     2,
	}
}

func collect(t *testing.T, l *Loader, n int) [][]int {
	t.Helper()
	var out [][]int
	for range n {
		s, err := l.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var idx []int
		for _, b := range s.Shards {
			idx = append(idx, b.Indices...)
		}
		out = append(out, idx)
	}
	return out
}

// TestResumeExact: the state saved after batch k restores into a new loader that returns exactly
// the next 20 batches of an uninterrupted run, across an epoch boundary, with and without prefetch.
func TestResumeExact(t *testing.T) {
	ds := synthetic(37)
	for _, prefetch := range []int{0, 2} {
		cfg := testConfig(ds, 2, 2, prefetch)
		full, err := NewLoader(context.Background(), cfg, State{Seed: 42})
		if err != nil {
			t.Fatal(err)
		}
		want := collect(t, full, 27)
		full.Close()

		const k = 7
		first, err := NewLoader(context.Background(), cfg, State{Seed: 42})
		if err != nil {
			t.Fatal(err)
		}
		got := collect(t, first, k)
		saved := first.State()
		first.Close()
		resumed, err := NewLoader(context.Background(), cfg, saved)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, collect(t, resumed, 20)...)
		resumed.Close()
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("prefetch %d: resumed run differs:\n got %v\nwant %v", prefetch, got, want)
		}
		if want[0][0] == 0 && want[0][1] == 1 && want[0][2] == 2 {
			t.Errorf("order looks unshuffled: %v", want[0])
		}
	}
}

// TestShardsPartitionGlobalBatch: with 8 replicas the shards are disjoint and their union is the
// global batch, whether one host loads all replicas or several hosts load theirs.
func TestShardsPartitionGlobalBatch(t *testing.T) {
	ds := synthetic(100)
	cfg := testConfig(ds, 8, 3, 2)
	all, err := NewLoader(context.Background(), cfg, State{Seed: 42})
	if err != nil {
		t.Fatal(err)
	}
	defer all.Close()
	order := cfg.Sampler.Order(0)
	for b := range 4 {
		s, err := all.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Shards) != 8 {
			t.Fatalf("%d shards", len(s.Shards))
		}
		seen := map[int]bool{}
		var union []int
		for _, sh := range s.Shards {
			for _, i := range sh.Indices {
				if seen[i] {
					t.Fatalf("batch %d: example %d in two shards", b, i)
				}
				seen[i] = true
				union = append(union, i)
			}
		}
		if !reflect.DeepEqual(union, cfg.Sampler.Batch(order, b)) {
			t.Fatalf("batch %d: union of shards %v is not the global batch", b, union)
		}
	}
	// Two hosts of 4 replicas each see exactly the shards of the single-host run.
	for host := range 2 {
		hc := cfg
		hc.FirstReplica, hc.LocalReplicas = 4*host, 4
		l, err := NewLoader(context.Background(), hc, State{Seed: 42})
		if err != nil {
			t.Fatal(err)
		}
		s, err := l.Next(context.Background())
		l.Close()
		if err != nil {
			t.Fatal(err)
		}
		global := cfg.Sampler.Batch(order, 0)
		for i, sh := range s.Shards {
			if !reflect.DeepEqual(sh.Indices, Shard(global, 4*host+i, 8)) {
				t.Fatalf("host %d replica %d: %v", host, i, sh.Indices)
			}
		}
	}
}

type failingDataset struct {
	SliceDataset
	bad int
}

func (f failingDataset) Get(i int) (Example, error) {
	if i == f.bad {
		return Example{}, fmt.Errorf("bad example %d", i)
	}
	return f.SliceDataset.Get(i)
}

// TestErrorSurfacesOnNext: a failure while preparing a batch is returned by Next, not lost.
func TestErrorSurfacesOnNext(t *testing.T) {
	ds := failingDataset{synthetic(16), 5}
	for _, prefetch := range []int{0, 3} {
		cfg := testConfig(ds, 1, 4, prefetch)
		cfg.Sampler.Shuffle = false
		l, err := NewLoader(context.Background(), cfg, State{Seed: 42})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Next(context.Background()); err != nil {
			t.Fatalf("batch 0: %v", err)
		}
		_, err = l.Next(context.Background())
		if err == nil || !strings.Contains(err.Error(), "bad example 5") {
			t.Fatalf("prefetch %d: batch 1 err = %v", prefetch, err)
		}
		l.Close()
	}
}

// TestCloseStopsGoroutines: Close and context cancellation leave no goroutine behind.
func TestCloseStopsGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	ds := synthetic(64)
	for range 5 {
		ctx, cancel := context.WithCancel(context.Background())
		l, err := NewLoader(ctx, testConfig(ds, 2, 2, 4), State{Seed: 42})
		if err != nil {
			t.Fatal(err)
		}
		collect(t, l, 3)
		cancel()
		if _, err := l.Next(context.Background()); err == nil {
			// A batch prepared before the cancel may still be returned; the next must fail.
			for i := 0; i < 20; i++ {
				if _, err = l.Next(context.Background()); err != nil {
					break
				}
			}
		}
		l.Close()
		l.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines before, %d after:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}

func TestNextHonoursContext(t *testing.T) {
	slow := slowCollator{CausalLMCollator{BlockSize: 8}, 300 * time.Millisecond}
	cfg := testConfig(synthetic(8), 1, 2, 1)
	cfg.Collator = slow
	l, err := NewLoader(context.Background(), cfg, State{Seed: 42})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := l.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next = %v, want deadline exceeded", err)
	}
}

// slowCollator spends the given time per batch.
type slowCollator struct {
	CausalLMCollator
	d time.Duration
}

func (s slowCollator) Collate(ex []Example) (*Batch, error) {
	time.Sleep(s.d)
	return s.CausalLMCollator.Collate(ex)
}

func TestLoaderConfigValidate(t *testing.T) {
	ds := synthetic(10)
	base := testConfig(ds, 2, 2, 1)
	for _, tc := range []struct {
		mutate func(*LoaderConfig)
		field  string
	}{
		{func(c *LoaderConfig) { c.Dataset = nil }, "Dataset"},
		{func(c *LoaderConfig) { c.NumReplicas = 0 }, "NumReplicas"},
		{func(c *LoaderConfig) { c.Sampler.GlobalBatch = 3 }, "GlobalBatch"},
		{func(c *LoaderConfig) { c.FirstReplica = 2; c.LocalReplicas = 1 }, "FirstReplica"},
		{func(c *LoaderConfig) { c.PrefetchFactor = -1 }, "PrefetchFactor"},
		{func(c *LoaderConfig) { c.Sampler.NumExamples = 11 }, "NumExamples"},
	} {
		c := base
		tc.mutate(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("want error naming %s, got %v", tc.field, err)
		}
	}
	if _, err := NewLoader(context.Background(), base, State{Seed: 7}); err == nil {
		t.Error("restoring a state with another seed succeeded")
	}
}

func TestSamplerEvenBatches(t *testing.T) {
	s := Sampler{NumExamples: 10, GlobalBatch: 4, Seed: 1, Shuffle: true}
	if s.BatchesPerEpoch() != 3 {
		t.Fatalf("BatchesPerEpoch = %d", s.BatchesPerEpoch())
	}
	order := s.Order(0)
	last := s.Batch(order, 2)
	if !slices.Equal(last, []int{order[8], order[9], order[0], order[1]}) {
		t.Errorf("last batch %v does not wrap around %v", last, order)
	}
	if slices.Equal(s.Order(0), s.Order(1)) {
		t.Error("epochs 0 and 1 have the same order")
	}
	s.DropLast = true
	if s.BatchesPerEpoch() != 2 {
		t.Errorf("drop_last BatchesPerEpoch = %d", s.BatchesPerEpoch())
	}
}
