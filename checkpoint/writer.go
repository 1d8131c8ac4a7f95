package checkpoint

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/gotpu/gotpu/internal/atomicfile"
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
	// LocalRank is the process's rank on its host (torch's LOCAL_RANK): only local rank 0
	// may write; replicas hand it their state and never write.
	LocalRank int
	// Hosts places the writer in a multi-host job (see Hosts); the zero value is one host.
	Hosts Hosts
	// LockDir is the host-local directory of the election lock (default os.TempDir()). It
	// must not be on a file system shared between hosts: each host elects its own writer.
	LockDir string
	// NoElection skips the election lock, for callers that guarantee a single writer by
	// other means (or systems without flock).
	NoElection bool
}

// Validate checks the configuration, naming the bad field.
func (c WriterConfig) Validate() error {
	switch {
	case c.OutputDir == "":
		return errors.New("checkpoint.WriterConfig.OutputDir: empty")
	case c.SaveTotalLimit < 0:
		return fmt.Errorf("checkpoint.WriterConfig.SaveTotalLimit: %d is negative", c.SaveTotalLimit)
	case c.LocalRank != 0:
		return fmt.Errorf("checkpoint.WriterConfig.LocalRank: %d; only the process of local rank 0 writes a host's checkpoints (replicas hand it their state)", c.LocalRank)
	}
	if err := c.Hosts.Validate(); err != nil {
		return fmt.Errorf("checkpoint.WriterConfig.%w", trimPkg(err))
	}
	return nil
}

// trimPkg drops the "checkpoint." prefix of a nested field error.
func trimPkg(err error) error {
	msg := strings.TrimPrefix(err.Error(), "checkpoint.")
	return errors.New(msg)
}

// lockPath is the host-local lock file electing the writer of outputDir.
func (c WriterConfig) lockPath() (string, error) {
	abs, err := filepath.Abs(c.OutputDir)
	if err != nil {
		return "", fmt.Errorf("checkpoint.WriterConfig.OutputDir: %w", err)
	}
	dir := c.LockDir
	if dir == "" {
		dir = os.TempDir()
	}
	sum := sha256.Sum256([]byte(filepath.Clean(abs)))
	return filepath.Join(dir, "gotpu-writer-"+hex.EncodeToString(sum[:8])+".lock"), nil
}

// Writer is the single writer of a host's checkpoints. Create exactly one per host (the
// process of local rank 0); replicas hand it their snapshots and never write. It owns one
// goroutine that commits snapshots in order; at most one save is pending at a time.
type Writer struct {
	cfg  WriterConfig
	log  *slog.Logger
	jobs chan job
	// slot holds a token while a save is pending: Save takes it, the goroutine returns it.
	slot chan struct{}
	done chan struct{}

	lock *hostLock

	mu        sync.Mutex
	err       error // first error not yet reported to a caller
	committed []Entry
	parts     []int // steps whose part a non-primary host delivered
	closed    bool
}

// NewWriter elects this process the writer of cfg.OutputDir on this host (an exclusive lock
// that the kernel drops when the process ends, so a second writer on the host fails with
// ErrWriterHeld instead of colliding), removes the leftovers of crashed saves (see Cleanup; on
// the primary host only, which owns the shared directory) and starts the writer's goroutine;
// Close stops it and releases the election.
func NewWriter(cfg WriterConfig) (_ *Writer, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	w := &Writer{cfg: cfg, log: cfg.Logger, jobs: make(chan job), slot: make(chan struct{}, 1), done: make(chan struct{})}
	if w.log == nil {
		w.log = slog.Default()
	}
	if !cfg.NoElection {
		if err := atomicfile.MkdirAll(cfg.OutputDir); err != nil {
			return nil, fmt.Errorf("checkpoint: %w", err)
		}
		path, err := cfg.lockPath()
		if err != nil {
			return nil, err
		}
		if w.lock, err = acquireHostLock(path); err != nil {
			return nil, fmt.Errorf("%w: %s", err, cfg.OutputDir)
		}
		defer func() {
			if err != nil {
				w.lock.release()
			}
		}()
	}
	if cfg.Hosts.Host == 0 {
		did, err := cleanup(cfg.OutputDir, cfg.Hosts.RunID)
		for _, d := range did {
			w.log.Warn("checkpoint: leftover of an interrupted save", "action", d)
		}
		if err != nil {
			return nil, err
		}
	}
	go w.loop()
	return w, nil
}

// job is one save: the snapshot, the Save's context (for staging its Live files) and the
// channel that tells Save the staging ended: nil once every Live file is written, or the error
// that ended the save before that.
type job struct {
	ctx    context.Context
	snap   Snapshot
	staged chan error // buffered (1); receives exactly one value
}

func (w *Writer) loop() {
	defer close(w.done)
	for j := range w.jobs {
		w.write(j)
		<-w.slot
	}
}

func (w *Writer) write(j job) {
	snap := j.snap
	signalled := false
	st := &stager{ctx: j.ctx, staged: func() { signalled = true; j.staged <- nil }}
	var dir string
	var err error
	defer func() {
		if !signalled {
			// The save ended before its Live files were written: Save learns it from here,
			// once the error is recorded.
			j.staged <- err
		}
	}()
	h := w.cfg.Hosts
	switch {
	case !h.Multi():
		dir, err = commit(w.cfg.OutputDir, snap, st)
	case h.Host == 0:
		dir, err = commitPrimaryStaged(context.Background(), w.cfg.OutputDir, h, snap, st)
	default:
		// A non-primary host's save ends when its part is durable; the primary commits.
		if err = writePart(w.cfg.OutputDir, h, snap, st); err == nil {
			w.log.Info("checkpoint part written", "host", h.Host, "step", snap.Step)
			w.mu.Lock()
			w.parts = append(w.parts, snap.Step)
			w.mu.Unlock()
			return
		}
	}
	if err == nil && h.Host == 0 {
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

// Save hands a snapshot to the writer and returns once it is queued (after the save before it,
// if still pending, has finished) and, if snap holds Live files, once they are staged: every
// Live file's WriteTo has run (on the writer's goroutine, with ctx), so the state they read may
// change as soon as Save returns, while the fsyncs, the other files, the manifest and the
// commit go on in the background. A failed staging fails the save and Save returns its error
// (nothing of the save is left, earlier checkpoints are untouched). Save returns the error of
// an earlier save not yet reported, in which case snap is not saved. The bytes of snap's other
// files must not be modified afterwards. ctx bounds the wait for the queue and is the staging's
// context; the background part of the save does not use it.
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
	j := job{ctx: ctx, snap: snap, staged: make(chan error, 1)}
	w.jobs <- j
	if w.cfg.Sync {
		return w.Wait()
	}
	if snap.live() {
		if err := <-j.staged; err != nil {
			// The save is over (or ending): report its error now rather than from the next
			// call, since the caller waited for it.
			return w.Wait()
		}
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

// Parts returns the steps whose part this writer delivered (a non-primary host's writer; the
// primary commits them, see Hosts).
func (w *Writer) Parts() []int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]int(nil), w.parts...)
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
	err := w.takeErr()
	if lerr := w.lock.release(); lerr != nil {
		err = errors.Join(err, fmt.Errorf("checkpoint: releasing the writer lock: %w", lerr))
	}
	return err
}
