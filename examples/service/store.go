package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/gotpu/gotpu/internal/atomicfile"
)

// jobFile is the name of a job's record in its output_dir.
const jobFile = "job.json"

// jobRecord is job.json: the request as posted and the last progress, rewritten at each state
// change, so that a restarted service lists its earlier jobs and serves generation from their
// checkpoints.
type jobRecord struct {
	ID            string          `json:"id"`
	Request       json.RawMessage `json:"request"`
	TokenizerPath string          `json:"tokenizer_path,omitempty"`
	// BaseModelPath is a LoRA job's base model directory, which its adapter checkpoints need.
	BaseModelPath string   `json:"base_model_path,omitempty"`
	Progress      Progress `json:"progress"`
}

// saveJob writes job.json atomically (temporary file, then rename).
func saveJob(j *Job) error {
	j.mu.Lock()
	rec := jobRecord{ID: j.ID, Progress: j.p, TokenizerPath: j.tokPath, BaseModelPath: j.baseDir}
	j.mu.Unlock()
	if j.spec != nil {
		rec.Request = j.spec.Body
	}
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(j.Dir, jobFile)
	// Written like every other file gotpu keeps: temp file, fsync, rename, fsync of the
	// directory, modes from the umask (internal/atomicfile).
	if err := atomicfile.WriteFileBytes(path, append(b, '\n')); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// loadJobs reads the job.json files under dir. A job recorded as queued or running was cut
// short by a crash (a graceful shutdown records "cancelled"): it is listed as failed, and its
// committed checkpoints stay usable.
func loadJobs(dir string, now time.Time) ([]*Job, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("service: reading %s: %w", dir, err)
	}
	var out []*Job
	for _, de := range des {
		if !de.IsDir() {
			continue
		}
		path := filepath.Join(dir, de.Name(), jobFile)
		b, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			continue // a directory left by a request that failed validation mid-way
		}
		if err != nil {
			return nil, fmt.Errorf("service: %w", err)
		}
		var rec jobRecord
		if err := json.Unmarshal(b, &rec); err != nil {
			return nil, fmt.Errorf("service: %s: %w", path, err)
		}
		if rec.ID != de.Name() {
			return nil, fmt.Errorf("service: %s: field \"id\" is %q, want the directory name %q", path, rec.ID, de.Name())
		}
		j := &Job{ID: rec.ID, Dir: filepath.Join(dir, de.Name()), p: rec.Progress, tokPath: rec.TokenizerPath, baseDir: rec.BaseModelPath,
			done: make(chan struct{}), changed: make(chan struct{}), firstStep: -1, cancel: func() {}}
		close(j.done)
		if !j.p.State.Done() {
			j.p.Error = fmt.Sprintf("interrupted: the service stopped while the job was %s", j.p.State)
			j.p.State = StateFailed
			t := now.UTC()
			j.p.FinishedAt = &t
			j.p.ETASeconds = nil
		}
		out = append(out, j)
	}
	slices.SortFunc(out, func(a, b *Job) int { return a.p.CreatedAt.Compare(b.p.CreatedAt) })
	return out, nil
}
