package main

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/gotpu/gotpu/checkpoint"
	"github.com/gotpu/gotpu/trainer"
)

// State is where a job is in its life.
type State string

const (
	StateQueued    State = "queued"    // waiting for a training slot (-max_running)
	StateRunning   State = "running"   // preparing data and model, or training
	StateCompleted State = "completed" // trained to max_steps; final model (or LoRA adapter) in output_dir
	StateCancelled State = "cancelled" // DELETE or shutdown: stopped after a step, checkpoint saved there
	StateFailed    State = "failed"    // an error; see Progress.Error
)

// allStates lists every state, for the jobs-by-state metric.
func allStates() []State {
	return []State{StateQueued, StateRunning, StateCompleted, StateCancelled, StateFailed}
}

// Done reports whether the state is final.
func (s State) Done() bool { return s == StateCompleted || s == StateCancelled || s == StateFailed }

// CheckpointRef names a committed checkpoint.
type CheckpointRef struct {
	Dir  string `json:"dir"`
	Step int    `json:"step"`
}

// Progress is what GET /jobs/{id} returns and each server-sent event carries. Pointer fields are
// null until known: loss, learning_rate, grad_norm and tokens_per_second come from the trainer's
// log entries (every logging_steps updates), eta_seconds from the time per update since the
// first one (which includes compilation and is left out).
type Progress struct {
	ID              string   `json:"id"`
	State           State    `json:"state"`
	Step            int      `json:"step"`
	MaxSteps        int      `json:"max_steps"`
	Epoch           *float64 `json:"epoch"`
	Loss            *float64 `json:"loss"`
	LearningRate    *float64 `json:"learning_rate"`
	GradNorm        *float64 `json:"grad_norm"`
	EvalLoss        *float64 `json:"eval_loss,omitempty"`
	TrainLoss       *float64 `json:"train_loss,omitempty"`
	TokensPerSecond *float64 `json:"tokens_per_second"`
	// HostSyncs and DeviceIdleFraction are the pipeline figures of the last log interval:
	// blocking device→host reads and the devices' idle share between executions.
	HostSyncs          *float64          `json:"host_syncs"`
	DeviceIdleFraction *float64          `json:"device_idle_fraction"`
	ETASeconds         *float64          `json:"eta_seconds"`
	LatestCheckpoint   *CheckpointRef    `json:"latest_checkpoint"`
	Saves              int               `json:"saves"`
	Error              string            `json:"error,omitempty"`
	OutputDir          string            `json:"output_dir"`
	CreatedAt          time.Time         `json:"created_at"`
	StartedAt          *time.Time        `json:"started_at,omitempty"`
	FinishedAt         *time.Time        `json:"finished_at,omitempty"`
	URLs               map[string]string `json:"urls"`
}

// Job is one training run. Its goroutine (Server.runJob) is the only writer of its progress;
// HTTP handlers read snapshots.
type Job struct {
	ID  string
	Dir string // output_dir: checkpoints, final model, job.json
	// spec is the checked request, with the tokenizer it borrowed from the server's cache. Once
	// the job's goroutine has started only that goroutine touches it, and it drops it when the
	// job ends (dropSpec): a finished job keeps its small progress record, not its request.
	spec *jobSpec

	// cancel stops the job's context: the trainer finishes its current update, saves a
	// checkpoint and returns. done is closed when the job's goroutine has returned.
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	p       Progress
	version uint64
	// changed is closed (and replaced) on every update, waking event-stream readers.
	changed chan struct{}
	// firstStep and firstStepAt are the first update this process saw end, for the ETA; only
	// the job's goroutine (through progressCallback) touches them.
	firstStep   int
	firstStepAt time.Time

	// tokPath is the tokenizer's file ("" without one): generation borrows it from the server's
	// tokenizer cache for the length of a request.
	tokPath string
	// baseDir is, for a job that trains a LoRA adapter, the base model directory its checkpoints
	// (adapter files only) attach to for generation; "" for a job that trains the whole model.
	baseDir string
}

func newJob(id, dir string, spec *jobSpec, now time.Time) *Job {
	j := &Job{ID: id, Dir: dir, spec: spec, done: make(chan struct{}), changed: make(chan struct{}), firstStep: -1,
		tokPath: spec.TokenizerPath}
	if spec.lora() {
		j.baseDir = spec.ModelDir
	}
	j.p = Progress{ID: id, State: StateQueued, OutputDir: dir, CreatedAt: now.UTC(), URLs: jobURLs(id)}
	return j
}

func jobURLs(id string) map[string]string {
	base := "/jobs/" + id
	return map[string]string{"self": base, "events": base + "/events", "generate": base + "/generate", "cancel": base}
}

// update applies f to the progress under the lock and wakes the event streams.
func (j *Job) update(f func(p *Progress)) {
	j.mu.Lock()
	defer j.mu.Unlock()
	f(&j.p)
	j.version++
	close(j.changed)
	j.changed = make(chan struct{})
}

// Snapshot returns the progress with the latest committed checkpoint read from disk (a save
// announced by the trainer is written in the background, so only the directory knows when it
// is committed), the version of the progress, and a channel closed at the next update.
func (j *Job) Snapshot() (Progress, uint64, <-chan struct{}) {
	j.mu.Lock()
	p, v, ch := j.p, j.version, j.changed
	j.mu.Unlock()
	p.URLs = jobURLs(j.ID)
	if e, err := checkpoint.Latest(j.Dir); err == nil {
		p.LatestCheckpoint = &CheckpointRef{Dir: e.Dir, Step: e.Step}
	}
	return p, v, ch
}

// dropSpec releases the job's tokenizer and forgets its request; the job's goroutine calls it
// once the job has ended and job.json has its last record.
func (j *Job) dropSpec() {
	if j.spec != nil {
		j.spec.release()
		j.spec = nil
	}
}

// State returns the job's current state.
func (j *Job) State() State {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.p.State
}

// finish records the end of the job from the error its run returned.
func (j *Job) finish(err error, stopped bool, now time.Time) State {
	st := StateCompleted
	switch {
	case err == nil:
	case stopped && errors.Is(err, context.Canceled):
		st = StateCancelled
	default:
		st = StateFailed
	}
	j.update(func(p *Progress) {
		p.State = st
		t := now.UTC()
		p.FinishedAt = &t
		p.ETASeconds = nil
		if st == StateFailed {
			p.Error = err.Error()
		}
	})
	return st
}

// progressCallback feeds the trainer's events into the job's progress.
type progressCallback struct {
	trainer.BaseCallback
	job *Job
	now func() time.Time
}

func (c *progressCallback) OnTrainBegin(_ context.Context, e *trainer.Event) error {
	c.job.update(func(p *Progress) {
		p.Step, p.MaxSteps = e.State.GlobalStep, e.State.MaxSteps
	})
	return nil
}

func (c *progressCallback) OnStepEnd(_ context.Context, e *trainer.Event) error {
	now := c.now()
	step := e.State.GlobalStep
	var eta *float64
	if c.job.firstStep < 0 {
		c.job.firstStep, c.job.firstStepAt = step, now
	} else if step > c.job.firstStep {
		per := now.Sub(c.job.firstStepAt).Seconds() / float64(step-c.job.firstStep)
		v := per * float64(max(e.State.MaxSteps-step, 0))
		eta = &v
	}
	c.job.update(func(p *Progress) {
		p.Step, p.MaxSteps, p.Epoch = step, e.State.MaxSteps, copyFloat(e.State.Epoch)
		if eta != nil {
			p.ETASeconds = eta
		}
	})
	return nil
}

func (c *progressCallback) OnLog(_ context.Context, e *trainer.Event) error {
	c.job.update(func(p *Progress) {
		for key, dst := range map[string]**float64{
			"loss": &p.Loss, "learning_rate": &p.LearningRate, "grad_norm": &p.GradNorm,
			"tokens_per_second": &p.TokensPerSecond, "eval_loss": &p.EvalLoss, "train_loss": &p.TrainLoss,
			"host_syncs": &p.HostSyncs, "device_idle_fraction": &p.DeviceIdleFraction,
		} {
			if v, ok := e.Logs.Float(key); ok {
				*dst = &v
			}
		}
	})
	return nil
}

func (c *progressCallback) OnSave(context.Context, *trainer.Event) error {
	c.job.update(func(p *Progress) { p.Saves++ })
	return nil
}

func copyFloat(p *float64) *float64 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
