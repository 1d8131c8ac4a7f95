package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
)

// WriterConfig configures a Writer.
type WriterConfig struct {
	// OutputDir holds the checkpoint-<N> directories.
	OutputDir string
	// SaveTotalLimit is HF's save_total_limit (<= 0: keep all).
	SaveTotalLimit int
	// Sync makes Save write before returning (no background write).
	Sync bool
	// Logger receives what the writer does; nil means slog.Default().
	Logger *slog.Logger
}

// Writer is the single writer of a host's checkpoints. Create exactly one per host (the
// process of local rank 0); replicas hand it their snapshots and never write. It owns one
// goroutine that commits snapshots in order; at most one save is pending at a time.
type Writer struct {
	cfg  WriterConfig
	log  *slog.Logger
	jobs chan Snapshot
	// slot holds a token while a save is pending: Save takes it, the goroutine returns it.
	slot chan struct{}
	done chan struct{}

	mu        sync.Mutex
	err       error // first error not yet reported to a caller
	committed []Entry
	closed    bool
}

// NewWriter removes the leftovers of crashed saves in cfg.OutputDir (see Cleanup) and starts the
// writer's goroutine; Close stops it.
func NewWriter(cfg WriterConfig) (*Writer, error) {
	if cfg.OutputDir == "" {
		return nil, errors.New("checkpoint.WriterConfig.OutputDir: empty")
	}
	w := &Writer{cfg: cfg, log: cfg.Logger, jobs: make(chan Snapshot), slot: make(chan struct{}, 1), done: make(chan struct{})}
	if w.log == nil {
		w.log = slog.Default()
	}
	did, err := Cleanup(cfg.OutputDir)
	for _, d := range did {
		w.log.Warn("checkpoint: leftover of an interrupted save", "action", d)
	}
	if err != nil {
		return nil, err
	}
	go w.loop()
	return w, nil
}

func (w *Writer) loop() {
	defer close(w.done)
	for snap := range w.jobs {
		w.write(snap)
		<-w.slot
	}
}

func (w *Writer) write(snap Snapshot) {
	dir, err := Commit(w.cfg.OutputDir, snap)
	if err == nil {
		w.log.Info("checkpoint committed", "dir", dir, "step", snap.Step)
		var removed []string
		removed, err = Prune(w.cfg.OutputDir, w.cfg.SaveTotalLimit, snap.Keep...)
		for _, r := range removed {
			w.log.Info("checkpoint deleted (save_total_limit)", "dir", r)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.log.Error("checkpoint save failed", "step", snap.Step, "err", err)
		w.err = errors.Join(w.err, fmt.Errorf("checkpoint of step %d: %w", snap.Step, err))
		return
	}
	w.committed = append(w.committed, Entry{Dir: dir, Step: snap.Step})
}

// Save hands a host-staged snapshot to the writer and returns once it is queued (after the save
// before it, if still pending, has finished). It returns the error of an earlier save not yet
// reported, in which case snap is not saved. The snapshot's bytes must not be modified afterwards.
func (w *Writer) Save(ctx context.Context, snap Snapshot) error {
	select {
	case w.slot <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := w.takeErr(); err != nil {
		<-w.slot
		return err
	}
	w.mu.Lock()
	closed := w.closed
	w.mu.Unlock()
	if closed {
		<-w.slot
		return errors.New("checkpoint: Save on a closed Writer")
	}
	w.jobs <- snap
	if w.cfg.Sync {
		return w.Wait()
	}
	return nil
}

// Wait blocks until no save is pending and returns the errors of saves not yet reported.
func (w *Writer) Wait() error {
	w.slot <- struct{}{}
	<-w.slot
	return w.takeErr()
}

// Committed returns the checkpoints this writer committed so far.
func (w *Writer) Committed() []Entry {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Entry(nil), w.committed...)
}

func (w *Writer) takeErr() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	err := w.err
	w.err = nil
	return err
}

// Close waits for the pending save, stops the goroutine and returns unreported errors. Calling
// it again returns nil.
func (w *Writer) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	w.mu.Unlock()
	w.slot <- struct{}{} // no save pending, and none can start
	close(w.jobs)
	<-w.done
	<-w.slot
	return w.takeErr()
}
