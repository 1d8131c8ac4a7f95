package data

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeDevice stands in for a device's memory: Transfer "puts" a step there and Release frees it;
// it records how many transferred steps the consumer has not taken yet.
type fakeDevice struct {
	mu                          sync.Mutex
	onDevice, maxAhead, taken   int
	transferred, released       int
	failAt                      int // batch index whose transfer fails (-1: none)
	transferBatches, stepsTaken []int
}

func (d *fakeDevice) transfer(_ context.Context, s *Step) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s.Batch == d.failAt {
		return errors.New("device out of memory")
	}
	d.transferred++
	d.onDevice++
	d.maxAhead = max(d.maxAhead, d.onDevice)
	d.transferBatches = append(d.transferBatches, s.Batch)
	s.Device = s.Batch
	return nil
}

func (d *fakeDevice) release(*Step) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.released++
	d.onDevice--
}

func (d *fakeDevice) take(s *Step) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.taken++
	d.onDevice--
	d.stepsTaken = append(d.stepsTaken, s.Device.(int))
}

// TestDeviceStage: with a Transfer, batches reach Next transferred, in order; at most
// DevicePrefetch of them wait on the device (plus none in the workers: host batches are not
// transferred there); Close releases every transferred batch Next did not return.
func TestDeviceStage(t *testing.T) {
	for _, prefetch := range []int{1, 2, 3} {
		dev := &fakeDevice{failAt: -1}
		cfg := testConfig(synthetic(40), 2, 2, 4)
		cfg.Collator = slowCollator{CausalLMCollator{BlockSize: 8}, time.Millisecond}
		cfg.Transfer, cfg.Release, cfg.DevicePrefetch = dev.transfer, dev.release, prefetch
		l, err := NewLoader(context.Background(), cfg, State{Seed: 42})
		if err != nil {
			t.Fatal(err)
		}
		for range 7 {
			s, err := l.Next(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(5 * time.Millisecond) // the step: the stage fills up meanwhile
			dev.take(s)
		}
		l.Close()
		dev.mu.Lock()
		if !slices.Equal(dev.stepsTaken, []int{0, 1, 2, 3, 4, 5, 6}) {
			t.Errorf("device prefetch %d: Next returned batches %v", prefetch, dev.stepsTaken)
		}
		if dev.maxAhead > prefetch+1 { // + the one the consumer holds
			t.Errorf("device prefetch %d: %d batches on the device at once", prefetch, dev.maxAhead)
		}
		if dev.onDevice != 0 || dev.transferred != dev.taken+dev.released {
			t.Errorf("device prefetch %d: %d transferred, %d taken, %d released: %d left on the device",
				prefetch, dev.transferred, dev.taken, dev.released, dev.onDevice)
		}
		t.Logf("device prefetch %d: at most %d on the device, %d released at Close", prefetch, dev.maxAhead, dev.released)
		dev.mu.Unlock()
	}
}

// TestDeviceStageError: a failed transfer is the error of the Next that would have returned
// that batch, naming it; the batches before it arrive.
func TestDeviceStageError(t *testing.T) {
	dev := &fakeDevice{failAt: 2}
	cfg := testConfig(synthetic(40), 1, 2, 2)
	cfg.Transfer, cfg.Release = dev.transfer, dev.release
	l, err := NewLoader(context.Background(), cfg, State{Seed: 42})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := range 2 {
		s, err := l.Next(context.Background())
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		dev.take(s)
	}
	_, err = l.Next(context.Background())
	if err == nil || !strings.Contains(err.Error(), "batch 2: transfer: device out of memory") {
		t.Fatalf("Next = %v, want the transfer error of batch 2", err)
	}
}
