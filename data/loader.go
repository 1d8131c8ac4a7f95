package data

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
)

// State is a loader's position: the next global batch it will return. Saved with a checkpoint, it
// lets a resumed run see exactly the batches an uninterrupted one would have.
type State struct {
	Epoch int    `json:"epoch"`
	Batch int    `json:"batch"` // index of the next global batch within the epoch
	Seed  uint64 `json:"seed"`  // the sampler seed, checked on restore
}

// Step is what the loader returns for one global batch: this host's replicas' shards.
type Step struct {
	Epoch, Batch int
	// Shards[i] is the batch of this host's i-th replica.
	Shards []*Batch
	// Device is whatever LoaderConfig.Transfer produced (device-resident tensors), or nil.
	Device any
}

// LoaderConfig configures a Loader. Replicas are numbered globally; a host computes replicas
// [FirstReplica, FirstReplica+LocalReplicas).
type LoaderConfig struct {
	Dataset  Dataset
	Collator Collator
	Sampler  Sampler // GlobalBatch = per-replica batch × NumReplicas

	NumReplicas   int // total replicas across hosts
	FirstReplica  int // this host's first replica
	LocalReplicas int // this host's replicas (0 = NumReplicas: single host)

	// PrefetchFactor is how many batches are prepared ahead of the training step (HF's
	// dataloader_prefetch_factor). 0 prepares each batch inside Next: no overlap.
	PrefetchFactor int
	// NumWorkers is how many batches are prepared concurrently (HF's dataloader_num_workers);
	// 0 means one.
	NumWorkers int
	// Transfer, if set, moves a prepared step to the devices and sets Step.Device. With
	// prefetch it runs on the loader's device stage, one goroutine that takes the workers'
	// batches in order, so the transfer of batch n+1 overlaps step n (torch_xla's MpDeviceLoader);
	// without, inside Next.
	Transfer func(ctx context.Context, s *Step) error
	// DevicePrefetch is how many transferred batches may wait on the devices for Next (torch_xla's
	// device_prefetch_size); it bounds the device memory the pipeline holds, apart from the host
	// batches PrefetchFactor bounds. 0 means 1. Used only with Transfer and prefetch.
	DevicePrefetch int
	// Release, if set, frees what Transfer made for a step that was prepared but never returned
	// by Next (Close drops the prefetched steps).
	Release func(s *Step)
	// Budget, if set, rejects batches whose shape was not declared.
	Budget *ShapeBudget
}

// Validate names the first bad field.
func (c *LoaderConfig) Validate() error {
	switch {
	case c.Dataset == nil:
		return errors.New("data.LoaderConfig.Dataset: nil")
	case c.Collator == nil:
		return errors.New("data.LoaderConfig.Collator: nil")
	case c.NumReplicas <= 0:
		return fmt.Errorf("data.LoaderConfig.NumReplicas: %d is not positive", c.NumReplicas)
	case c.Sampler.GlobalBatch%c.NumReplicas != 0:
		return fmt.Errorf("data.LoaderConfig.Sampler.GlobalBatch: %d is not a multiple of NumReplicas %d",
			c.Sampler.GlobalBatch, c.NumReplicas)
	case c.LocalReplicas < 0 || c.FirstReplica < 0 || c.FirstReplica+c.localReplicas() > c.NumReplicas:
		return fmt.Errorf("data.LoaderConfig.FirstReplica/LocalReplicas: [%d,+%d) outside the %d replicas",
			c.FirstReplica, c.LocalReplicas, c.NumReplicas)
	case c.PrefetchFactor < 0:
		return fmt.Errorf("data.LoaderConfig.PrefetchFactor: %d is negative", c.PrefetchFactor)
	case c.NumWorkers < 0:
		return fmt.Errorf("data.LoaderConfig.NumWorkers: %d is negative", c.NumWorkers)
	case c.DevicePrefetch < 0:
		return fmt.Errorf("data.LoaderConfig.DevicePrefetch: %d is negative", c.DevicePrefetch)
	case c.Sampler.NumExamples != c.Dataset.Len():
		return fmt.Errorf("data.LoaderConfig.Sampler.NumExamples: %d, but the dataset has %d", c.Sampler.NumExamples, c.Dataset.Len())
	}
	return c.Sampler.Validate()
}

func (c *LoaderConfig) localReplicas() int {
	if c.LocalReplicas == 0 {
		return c.NumReplicas
	}
	return c.LocalReplicas
}

// Stats are the loader's measurements.
type Stats struct {
	Batches          int     `json:"batches"`
	InputWaitSeconds float64 `json:"input_wait_seconds"` // time Next blocked waiting for a batch
	HostSeconds      float64 `json:"host_seconds"`       // time spent reading, collating, transferring
}

// Loader yields global batches forever (epoch after epoch), preparing up to PrefetchFactor of them
// ahead of the consumer on background goroutines.
//
// Next must be called from one goroutine. The loader owns its goroutines: Close (or cancelling the
// context given to NewLoader) stops them all and waits for them. An error in preparing a batch is
// returned by the Next that would have returned it, never lost.
type Loader struct {
	cfg LoaderConfig

	// next is the position of the next batch Next returns.
	next State

	cancel  context.CancelFunc
	futures chan *future // in order; capacity bounds prefetch
	// ready is the device stage's output (with Transfer): futures whose steps are on the
	// devices, in order; its capacity and the one step the stage holds make DevicePrefetch.
	ready chan *future
	// held is the step the device stage has transferred and not yet handed on (for Close).
	held  *future
	group errgroup.Group

	mu    sync.Mutex
	stats Stats

	orders epochOrders

	closeOnce sync.Once
}

// epochOrders keeps the example orders of the last two epochs a worker asked for, shared
// read-only by the workers: an order is a permutation of the whole dataset, and computing it for
// every batch cost O(examples) per batch (13 ms a batch at 786k examples, capping the loader at
// ~75 batches/s). Two, because workers preparing ahead may straddle an epoch boundary.
type epochOrders struct {
	mu     sync.Mutex
	epochs [2]int
	orders [2][]int
	next   int // the slot to replace
}

// get returns epoch's order, computing it at most once while it stays among the last two.
func (o *epochOrders) get(s Sampler, epoch int) []int {
	o.mu.Lock()
	defer o.mu.Unlock()
	for i := range o.orders {
		if o.orders[i] != nil && o.epochs[i] == epoch {
			return o.orders[i]
		}
	}
	order := s.Order(epoch)
	o.epochs[o.next], o.orders[o.next] = epoch, order
	o.next = 1 - o.next
	return order
}

type future struct {
	done chan struct{}
	step *Step
	err  error
	host bool // prepared by a worker, not transferred yet
}

// NewLoader starts a loader at the given position (the zero State, with the sampler's seed, to
// start from the beginning).
func NewLoader(ctx context.Context, cfg LoaderConfig, start State) (*Loader, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if start.Seed != cfg.Sampler.Seed {
		return nil, fmt.Errorf("data: restoring a loader state saved with seed %d into a sampler with seed %d",
			start.Seed, cfg.Sampler.Seed)
	}
	if start.Batch < 0 || start.Epoch < 0 || start.Batch > cfg.Sampler.BatchesPerEpoch() {
		return nil, fmt.Errorf("data: loader state %+v is outside an epoch of %d batches", start, cfg.Sampler.BatchesPerEpoch())
	}
	l := &Loader{cfg: cfg, next: start}
	if cfg.PrefetchFactor == 0 {
		l.cancel = func() {}
		return l, nil
	}
	ctx, l.cancel = context.WithCancel(ctx)
	workers := max(cfg.NumWorkers, 1)
	l.futures = make(chan *future, cfg.PrefetchFactor*workers)
	jobs := make(chan func())
	for range workers {
		l.group.Go(func() error {
			for job := range jobs {
				job()
			}
			return nil
		})
	}
	l.group.Go(func() error { // dispatcher: hands batches to workers in order, publishing their futures in order
		defer close(jobs)
		defer close(l.futures)
		pos := start
		for {
			f := &future{done: make(chan struct{}), host: true}
			p := pos
			select {
			case l.futures <- f: // blocks while PrefetchFactor batches are waiting: bounded memory
			case <-ctx.Done():
				return nil
			}
			select {
			case jobs <- func() { f.step, f.err = l.prepare(ctx, p); close(f.done) }:
			case <-ctx.Done():
				f.err = ctx.Err()
				close(f.done)
				return nil
			}
			pos = l.advance(pos)
		}
	})
	if cfg.Transfer != nil {
		l.ready = make(chan *future, max(cfg.DevicePrefetch, 1)-1)
		l.group.Go(func() error { l.deviceStage(ctx); return nil })
	}
	return l, nil
}

// deviceStage takes the workers' batches in order and transfers each to the devices, handing it
// to Next through ready. It blocks while DevicePrefetch transferred batches wait, so it runs at
// most that far ahead of the consumer on the devices.
func (l *Loader) deviceStage(ctx context.Context) {
	defer close(l.ready)
	for f := range l.futures {
		select {
		case <-f.done:
		case <-ctx.Done():
			l.drop(f)
			return
		}
		out := f
		if f.err == nil {
			out = &future{done: make(chan struct{}), step: f.step}
			start := time.Now()
			if err := l.cfg.Transfer(ctx, f.step); err != nil {
				if l.cfg.Release != nil {
					l.cfg.Release(f.step)
				}
				out.step, out.err = nil, fmt.Errorf("epoch %d batch %d: transfer: %w", f.step.Epoch, f.step.Batch, err)
			}
			l.mu.Lock()
			l.stats.HostSeconds += time.Since(start).Seconds()
			l.mu.Unlock()
			close(out.done)
		}
		l.mu.Lock()
		l.held = out
		l.mu.Unlock()
		select {
		case l.ready <- out:
			l.mu.Lock()
			l.held = nil
			l.mu.Unlock()
		case <-ctx.Done():
			return // Close releases held
		}
	}
}

// drop waits for a future the device stage will not hand on and releases nothing: host steps
// own no device memory.
func (l *Loader) drop(f *future) { <-f.done }

// advance returns the position after pos.
func (l *Loader) advance(pos State) State {
	pos.Batch++
	if pos.Batch >= l.cfg.Sampler.BatchesPerEpoch() {
		pos.Epoch, pos.Batch = pos.Epoch+1, 0
	}
	return pos
}

// prepare reads, collates and transfers one global batch's local shards.
func (l *Loader) prepare(ctx context.Context, pos State) (*Step, error) {
	start := time.Now()
	defer func() {
		l.mu.Lock()
		l.stats.HostSeconds += time.Since(start).Seconds()
		l.mu.Unlock()
	}()
	order := l.orders.get(l.cfg.Sampler, pos.Epoch) // shared, read-only

	global := l.cfg.Sampler.Batch(order, pos.Batch)
	step := &Step{Epoch: pos.Epoch, Batch: pos.Batch}
	for r := l.cfg.FirstReplica; r < l.cfg.FirstReplica+l.cfg.localReplicas(); r++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		idx := Shard(global, r, l.cfg.NumReplicas)
		examples := make([]Example, len(idx))
		for i, j := range idx {
			ex, err := l.cfg.Dataset.Get(j)
			if err != nil {
				return nil, err
			}
			examples[i] = ex
		}
		b, err := l.cfg.Collator.Collate(examples)
		if err != nil {
			return nil, fmt.Errorf("epoch %d batch %d replica %d: %w", pos.Epoch, pos.Batch, r, err)
		}
		if l.cfg.Budget != nil {
			if err := l.cfg.Budget.Check(b.Size, b.SeqLen); err != nil {
				return nil, err
			}
		}
		b.Indices = idx
		step.Shards = append(step.Shards, b)
	}
	if l.cfg.Transfer != nil && l.futures == nil { // no prefetch: transfer here, inside Next
		if err := l.cfg.Transfer(ctx, step); err != nil {
			if l.cfg.Release != nil {
				l.cfg.Release(step)
			}
			return nil, fmt.Errorf("epoch %d batch %d: transfer: %w", pos.Epoch, pos.Batch, err)
		}
	}
	return step, nil
}

// Next returns the next global batch. The time it blocks is counted in Stats.InputWaitSeconds.
// After an error the loader is unusable; Close it.
func (l *Loader) Next(ctx context.Context) (*Step, error) {
	start := time.Now()
	var step *Step
	var err error
	if l.futures == nil {
		step, err = l.prepare(ctx, l.next)
	} else {
		src := l.futures
		if l.ready != nil {
			src = l.ready
		}
		select {
		case f, ok := <-src:
			if !ok {
				return nil, errors.New("data: loader is closed")
			}
			select {
			case <-f.done:
				step, err = f.step, f.err
			case <-ctx.Done():
				err = ctx.Err()
			}
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	l.mu.Lock()
	l.stats.InputWaitSeconds += time.Since(start).Seconds()
	if err == nil {
		l.stats.Batches++
	}
	l.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("data: loader: %w", err)
	}
	l.next = l.advance(l.next)
	return step, nil
}

// State is the position of the next batch Next will return (what a checkpoint saves).
func (l *Loader) State() State { return l.next }

// Stats returns the loader's measurements so far.
func (l *Loader) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stats
}

// Close stops and waits for every goroutine of the loader. It is idempotent.
func (l *Loader) Close() error {
	l.closeOnce.Do(func() {
		l.cancel()
		var dropped []*future
		if l.ready != nil {
			for f := range l.ready { // the device stage's transferred steps
				dropped = append(dropped, f)
			}
		}
		if l.futures != nil {
			for f := range l.futures { // drain so the dispatcher is never blocked on a send
				dropped = append(dropped, f)
			}
		}
		_ = l.group.Wait() // goroutines report errors through futures, never here
		if l.held != nil {
			dropped = append(dropped, l.held)
		}
		if l.cfg.Release != nil {
			for _, f := range dropped {
				<-f.done // every published future is completed (or failed) once the workers stop
				if f.step != nil && f.err == nil && !f.host {
					l.cfg.Release(f.step)
				}
			}
		}
	})
	return nil
}
