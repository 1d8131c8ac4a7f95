package trainer

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gotpu/gotpu/data"
)

// watchedDataset is an in-memory dataset that records which examples were read and can fail one.
type watchedDataset struct {
	data.SliceDataset
	mu     sync.Mutex
	read   map[int]bool
	failAt int
}

func (d *watchedDataset) Get(i int) (data.Example, error) {
	d.mu.Lock()
	d.read[i] = true
	d.mu.Unlock()
	if i == d.failAt {
		return data.Example{}, errors.New("disk error")
	}
	return d.SliceDataset.Get(i)
}

func (d *watchedDataset) wasRead(i int) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.read[i]
}

func evalFixture(n, failAt int) (*Trainer, *watchedDataset) {
	ds := &watchedDataset{read: map[int]bool{}, failAt: failAt}
	for i := range n {
		ds.SliceDataset = append(ds.SliceDataset, data.Example{InputIDs: []int32{int32(i + 1), 7, 8}, Label: 1, HasLabel: true})
	}
	args := DefaultTrainingArguments()
	args.PerDeviceEvalBatchSize = 2
	return &Trainer{args: args, replicas: 2, collator: data.BucketCollator{Buckets: []int{4}}}, ds
}

// TestEvalBatchesPrefetched: evaluation batches come in dataset order, 4 examples (2 per device ×
// 2 replicas) at a time with a smaller last one, and batch n+1 is read and collated while fn
// still holds batch n (fn waits, with a deadline, until the next batch's first example is read).
func TestEvalBatchesPrefetched(t *testing.T) {
	tr, ds := evalFixture(10, -1)
	var firsts, sizes []int
	err := tr.forEachEvalBatch(context.Background(), ds, func(b *data.Batch, first int) error {
		firsts, sizes = append(firsts, first), append(sizes, b.Size)
		if next := first + 4; next < 10 {
			deadline := time.Now().Add(10 * time.Second)
			for !ds.wasRead(next) {
				if time.Now().After(deadline) {
					return errors.New("the next batch was not prepared while this one was evaluated")
				}
				time.Sleep(time.Millisecond)
			}
		}
		if int(b.InputIDs[0]) != first+1 {
			t.Errorf("batch at %d starts with example %d", first, b.InputIDs[0]-1)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{0, 4, 8}; !equalInts(firsts, want) || !equalInts(sizes, []int{4, 4, 2}) {
		t.Fatalf("batches at %v of sizes %v, want at %v of sizes 4, 4, 2", firsts, sizes, want)
	}
}

// TestEvalBatchesStop: a read error is returned; an error or a panic of fn
// stops the producer before forEachEvalBatch returns (or the panic goes on), and a cancelled
// context ends the loop.
func TestEvalBatchesStop(t *testing.T) {
	tr, ds := evalFixture(10, 6)
	err := tr.forEachEvalBatch(context.Background(), ds, func(*data.Batch, int) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "disk error") {
		t.Errorf("read error: %v", err)
	}

	tr, ds = evalFixture(40, -1)
	calls := 0
	err = tr.forEachEvalBatch(context.Background(), ds, func(*data.Batch, int) error {
		calls++
		return errors.New("device lost")
	})
	if err == nil || err.Error() != "device lost" || calls != 1 {
		t.Errorf("fn error: %v after %d calls", err, calls)
	}
	if ds.wasRead(39) {
		t.Error("the producer read the whole dataset after fn failed")
	}

	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("panic %v, want boom", r)
			}
		}()
		_ = tr.forEachEvalBatch(context.Background(), ds, func(*data.Batch, int) error { panic("boom") })
	}()

	ctx, cancel := context.WithCancel(context.Background())
	err = tr.forEachEvalBatch(ctx, ds, func(*data.Batch, int) error {
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}
