package data

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sync/errgroup"
)

// storeExample is example i of a generated dataset: lengths 1..300, every combination of the
// optional arrays, negative values (IgnoreIndex labels) and sequence labels.
func storeExample(i int) Example {
	n := 1 + (i*37)%300
	ex := Example{InputIDs: make([]int32, n)}
	for j := range ex.InputIDs {
		ex.InputIDs[j] = int32(i*7919+j*31) % 50257
	}
	if i%4 == 1 || i%4 == 3 {
		ex.AttentionMask = make([]int32, n)
		for j := range ex.AttentionMask {
			ex.AttentionMask[j] = int32((i + j) % 2)
		}
	}
	if i%4 == 2 || i%4 == 3 {
		ex.TokenTypeIDs = make([]int32, n)
		ex.Labels = make([]int32, n)
		for j := range n {
			ex.TokenTypeIDs[j] = int32(j * 2 / n)
			ex.Labels[j] = ex.InputIDs[j]
			if j%3 == 0 {
				ex.Labels[j] = IgnoreIndex
			}
		}
	}
	if i%5 == 0 {
		ex.Label, ex.HasLabel = int32(i%7)-3, true
	}
	return ex
}

func buildStore(t testing.TB, opts StoreOptions, n int, gen func(int) Example) *TokenStore {
	t.Helper()
	b, err := NewTokenStoreBuilder(opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := b.Add(gen(i)); err != nil {
			b.Abort()
			t.Fatal(err)
		}
	}
	s, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// dirEntries lists dir's names (the store's file must never be left there).
func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// TestTokenStoreRoundTrip: every example comes back as it was added (the optional arrays absent
// where they were), Len and Tokens count them, and the file is gone from Dir: at once on Linux
// (unlinked at creation), after Close everywhere.
func TestTokenStoreRoundTrip(t *testing.T) {
	dir := t.TempDir()
	const n = 3000
	s := buildStore(t, StoreOptions{Dir: dir, Source: "gen"}, n, storeExample)
	var tokens int64
	for i := range n {
		want := storeExample(i)
		tokens += int64(len(want.InputIDs))
		got, err := s.Get(i)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("row %d: got %+v\nwant %+v", i, got, want)
		}
	}
	if s.Len() != n || s.Tokens() != tokens {
		t.Fatalf("Len %d Tokens %d, want %d and %d", s.Len(), s.Tokens(), n, tokens)
	}
	if runtime.GOOS == "linux" {
		if names := dirEntries(t, dir); len(names) != 0 {
			t.Errorf("the open store left %v in Dir: it should be unlinked at creation", names)
		}
	}
	for _, i := range []int{-1, n} {
		if _, err := s.Get(i); err == nil || !strings.Contains(err.Error(), "gen: row") {
			t.Errorf("Get(%d) = %v, want an out-of-range error naming the source", i, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if names := dirEntries(t, dir); len(names) != 0 {
		t.Errorf("Close left %v in Dir", names)
	}
	if _, err := s.Get(0); err == nil {
		t.Error("Get after Close succeeded")
	}
}

// TestTokenStoreRefuses: bad examples are errors naming the source, the row and the field, found
// before anything is stored; the builder stays usable; empty stores and bad options are refused.
func TestTokenStoreRefuses(t *testing.T) {
	dir := t.TempDir()
	b, err := NewTokenStoreBuilder(StoreOptions{Dir: dir, MaxSeqLength: 16, Source: "train.parquet"})
	if err != nil {
		t.Fatal(err)
	}
	ids := func(n int) []int32 { return make([]int32, n) }
	for range 3 {
		if err := b.Add(Example{InputIDs: ids(16)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		ex   Example
		want string
	}{
		{Example{InputIDs: ids(17)}, "train.parquet: row 3: input_ids: 17 tokens, more than max_seq_length 16"},
		{Example{}, "train.parquet: row 3: input_ids: empty"},
		{Example{InputIDs: ids(4), AttentionMask: ids(3)}, "row 3: attention_mask: 3 values, input_ids has 4"},
		{Example{InputIDs: ids(4), Labels: ids(5)}, "row 3: labels: 5 values"},
		{Example{InputIDs: ids(4), TokenTypeIDs: ids(1)}, "row 3: token_type_ids: 1 values"},
		{Example{InputIDs: ids(2), AttentionMask: []int32{1, 2}}, "row 3: attention_mask[1]: 2 is not 0 or 1"},
	} {
		err := b.Add(tc.ex)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Add = %v, want %q", err, tc.want)
		}
	}
	if err := b.Add(Example{InputIDs: ids(17)}); !errors.Is(err, ErrSequenceTooLong) {
		t.Errorf("too long: %v does not wrap ErrSequenceTooLong", err)
	}
	if err := b.Add(Example{InputIDs: []int32{5, 6}}); err != nil {
		t.Fatal(err)
	}
	s, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if ex, err := s.Get(3); s.Len() != 4 || err != nil || !reflect.DeepEqual(ex.InputIDs, []int32{5, 6}) {
		t.Errorf("after refusals: Len %d, row 3 = %v, %v", s.Len(), ex.InputIDs, err)
	}
	if err := b.Add(Example{InputIDs: ids(1)}); err == nil {
		t.Error("Add after Finish succeeded")
	}

	empty, err := NewTokenStoreBuilder(StoreOptions{Dir: dir, Source: "empty.csv"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := empty.Finish(); err == nil || !strings.Contains(err.Error(), "empty.csv: no examples") {
		t.Errorf("empty Finish = %v", err)
	}
	aborted, err := NewTokenStoreBuilder(StoreOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := aborted.Add(Example{InputIDs: ids(3)}); err != nil {
		t.Fatal(err)
	}
	aborted.Abort()
	aborted.Abort()
	if _, err := aborted.Finish(); err == nil {
		t.Error("Finish after Abort succeeded")
	}
	s.Close()
	if names := dirEntries(t, dir); len(names) != 0 {
		t.Errorf("files left in Dir: %v", names)
	}
	for _, tc := range []struct {
		opts StoreOptions
		want string
	}{
		{StoreOptions{MaxSeqLength: -1}, "MaxSeqLength"},
		{StoreOptions{Dir: dir + "/missing"}, "Dir"},
	} {
		if _, err := NewTokenStoreBuilder(tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("options %+v: %v, want an error naming %s", tc.opts, err, tc.want)
		}
	}
}

// TestTokenStoreCorrupt: a truncated or altered file is an error naming the source and the row,
// never a panic or a wrong example.
func TestTokenStoreCorrupt(t *testing.T) {
	s := buildStore(t, StoreOptions{Dir: t.TempDir(), Source: "train.parquet"}, 100, storeExample)
	defer s.Close()
	// Alter one payload byte of row 10 and the token count of row 20.
	if _, err := s.f.WriteAt([]byte{0xff}, s.offsets[10]+recordHeaderLen+1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.f.WriteAt([]byte{0x7f}, s.offsets[20]+3); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(10); err == nil || !strings.Contains(err.Error(), "train.parquet: row 10") || !strings.Contains(err.Error(), "corrupt") {
		t.Errorf("altered payload: %v", err)
	}
	if _, err := s.Get(20); err == nil || !strings.Contains(err.Error(), "train.parquet: row 20") {
		t.Errorf("altered length: %v", err)
	}
	// Cut the file in the middle of row 50.
	if err := s.f.Truncate(s.offsets[50] + 5); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(49); err != nil {
		t.Errorf("row 49, before the cut: %v", err)
	}
	for _, i := range []int{50, 99} {
		_, err := s.Get(i)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("train.parquet: row %d", i)) || !strings.Contains(err.Error(), "truncated") {
			t.Errorf("row %d after truncation: %v", i, err)
		}
	}
}

// batchesOf returns n batches of a loader over ds (2 replicas of 3, prefetching) from start,
// and the state after them.
func batchesOf(t *testing.T, ds Dataset, block int, start State, n int) ([][]*Batch, State) {
	t.Helper()
	cfg := testConfig(ds, 2, 3, 2)
	cfg.Collator = CausalLMCollator{BlockSize: block}
	l, err := NewLoader(context.Background(), cfg, start)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var out [][]*Batch
	for range n {
		s, err := l.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s.Shards)
	}
	return out, l.State()
}

// TestTokenStoreLoader: a loader over a TokenStore returns the batches a loader over the same
// examples in memory does, and a run resumed from its State continues exactly, across epochs.
func TestTokenStoreLoader(t *testing.T) {
	mem := synthetic(157)
	s := buildStore(t, StoreOptions{Dir: t.TempDir()}, mem.Len(), func(i int) Example { return mem[i] })
	defer s.Close()
	const total, k = 70, 23 // 27 batches an epoch: the runs cross two epoch boundaries
	want, _ := batchesOf(t, mem, 8, State{Seed: 42}, total)
	got, _ := batchesOf(t, s, 8, State{Seed: 42}, total)
	if !reflect.DeepEqual(got, want) {
		t.Fatal("a loader over the store returns other batches than over the same examples in memory")
	}
	first, saved := batchesOf(t, s, 8, State{Seed: 42}, k)
	rest, _ := batchesOf(t, s, 8, saved, total-k)
	if !reflect.DeepEqual(append(first, rest...), want) {
		t.Fatalf("resumed at %+v: the continuation differs", saved)
	}
}

// TestTokenStoreConcurrentGet: Get from many goroutines at once (run under -race) returns every
// example intact.
func TestTokenStoreConcurrentGet(t *testing.T) {
	const n = 2000
	s := buildStore(t, StoreOptions{Dir: t.TempDir()}, n, storeExample)
	defer s.Close()
	var g errgroup.Group
	for w := range 8 {
		g.Go(func() error {
			for k := range n {
				i := (k*(2*w+1) + w*97) % n
				ex, err := s.Get(i)
				if err != nil {
					return err
				}
				if !reflect.DeepEqual(ex, storeExample(i)) {
					return fmt.Errorf("goroutine %d: row %d differs", w, i)
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}

// TestTokenStoreHeapBounded: the heap a store holds grows by its offsets (8 bytes an example),
// not by its tokens: 10k and 100k examples of 256 tokens (10 MB and 100 MB of ids) differ by
// well under a megabyte or two of heap.
func TestTokenStoreHeapBounded(t *testing.T) {
	const seq = 256
	ex := Example{InputIDs: make([]int32, seq)}
	gen := func(i int) Example {
		for j := range ex.InputIDs {
			ex.InputIDs[j] = int32(i + j)
		}
		return ex // Add copies: one buffer serves every row
	}
	heapInUse := func() int64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return int64(m.HeapInuse)
	}
	growth := map[int]int64{}
	for _, n := range []int{10_000, 100_000} {
		before := heapInUse()
		s := buildStore(t, StoreOptions{Dir: t.TempDir()}, n, gen)
		growth[n] = heapInUse() - before
		if got, err := s.Get(n - 1); err != nil || got.InputIDs[seq-1] != int32(n-1+seq-1) {
			t.Fatalf("last row: %v %v", got.InputIDs[seq-1:], err)
		}
		s.Close()
	}
	extra := 90_000
	tokenBytes := int64(extra * seq * 4)
	diff := growth[100_000] - growth[10_000]
	t.Logf("heap held by the store: %d B for 10k examples, %d B for 100k; +%d B for %d more examples (%.1f B each) carrying +%d B of tokens",
		growth[10_000], growth[100_000], diff, extra, float64(diff)/float64(extra), tokenBytes)
	// Offsets are 8 bytes an example; append's spare capacity may double that.
	if limit := int64(extra)*8*2 + 256<<10; diff > limit {
		t.Errorf("heap grew %d B for %d more examples: more than the offsets' %d (tokens: %d B)", diff, extra, limit, tokenBytes)
	}
}

// FuzzTokenStoreRecord: decodeRecord never panics or over-allocates on any bytes, and a record
// it accepts is canonical: encoding the example gives the same bytes back.
func FuzzTokenStoreRecord(f *testing.F) {
	for i := range 8 {
		f.Add(encodeRecord(nil, storeExample(i)))
	}
	rec := encodeRecord(nil, storeExample(3))
	f.Add(rec[:len(rec)-4])
	f.Add(rec[:recordHeaderLen])
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, rec []byte) {
		ex, err := decodeRecord(rec)
		if err != nil {
			return
		}
		if again := encodeRecord(nil, ex); string(again) != string(rec) {
			t.Fatalf("accepted %x, which encodes back as %x", rec, again)
		}
	})
}
