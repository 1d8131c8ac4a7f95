package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gotpu/gotpu/xla"
)

// Config configures a Server.
type Config struct {
	// DataDir holds one directory per job (DataDir/jobs/<id>: the job's output_dir and job.json).
	DataDir string
	// InputRoots are the directories job requests may read models, tokenizers and data from
	// (DataDir is always allowed, so a job can resume from another job's checkpoint).
	InputRoots []string
	// BaseDir is what relative paths in requests are relative to ("" : the working directory).
	BaseDir string
	// MaxRunning is how many jobs train at once (0: 1); the others wait in state "queued".
	MaxRunning int
	// MaxGenerating is how many generation requests run at once (0: 1); each loads a model.
	MaxGenerating int
	// ShutdownGrace bounds how long shutdown waits for HTTP requests once every job has stopped
	// (0: 30 s). Jobs themselves are always waited for: each stops after its current update.
	ShutdownGrace time.Duration
	// Logger receives the service's and the trainers' logs (nil: slog.Default()).
	Logger *slog.Logger
}

// Server is the HTTP service: it owns the jobs, their goroutines and the metrics registry.
//
// All jobs share the one xla.Runtime the server is given. A Runtime is safe for concurrent use
// and an accelerator plugin is opened once per process (libtpu holds the TPU chips for the
// process that opened it), so one runtime per job is not an option on a TPU; concurrent
// training is bounded by Config.MaxRunning instead.
type Server struct {
	cfg   Config
	rt    *xla.Runtime
	log   *slog.Logger
	paths *pathPolicy
	reg   *prometheus.Registry
	met   serviceMetrics
	now   func() time.Time

	slots   chan struct{} // training slots (MaxRunning)
	genSlot chan struct{} // generation slots (MaxGenerating)

	// jobsCtx is the parent of every job's context; stopJobs cancels them all at shutdown.
	jobsCtx  context.Context
	stopJobs context.CancelFunc
	wg       sync.WaitGroup // one per job goroutine

	mu      sync.Mutex
	jobs    map[string]*Job
	order   []*Job
	closing bool
}

// NewServer prepares the data directory, reloads the jobs recorded there by an earlier run and
// builds the metrics registry. The caller keeps rt open until Serve has returned.
func NewServer(cfg Config, rt *xla.Runtime) (*Server, error) {
	if rt == nil {
		return nil, errors.New("service: nil runtime")
	}
	if cfg.DataDir == "" {
		return nil, errors.New("service: Config.DataDir is empty")
	}
	if cfg.MaxRunning <= 0 {
		cfg.MaxRunning = 1
	}
	if cfg.MaxGenerating <= 0 {
		cfg.MaxGenerating = 1
	}
	if cfg.ShutdownGrace <= 0 {
		cfg.ShutdownGrace = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.BaseDir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, err
		}
		cfg.BaseDir = wd
	}
	if err := os.MkdirAll(filepath.Join(cfg.DataDir, "jobs"), 0o755); err != nil {
		return nil, fmt.Errorf("service: -data_dir: %w", err)
	}
	paths, err := newPathPolicy(cfg.BaseDir, append(slices.Clone(cfg.InputRoots), cfg.DataDir))
	if err != nil {
		return nil, fmt.Errorf("service: -input_roots: %w", err)
	}
	s := &Server{
		cfg: cfg, rt: rt, log: cfg.Logger, paths: paths, now: time.Now,
		slots: make(chan struct{}, cfg.MaxRunning), genSlot: make(chan struct{}, cfg.MaxGenerating),
		jobs: map[string]*Job{},
	}
	s.jobsCtx, s.stopJobs = context.WithCancel(context.Background())
	restored, err := loadJobs(filepath.Join(cfg.DataDir, "jobs"), s.now())
	if err != nil {
		return nil, err
	}
	for _, j := range restored {
		s.jobs[j.ID] = j
		s.order = append(s.order, j)
	}
	if len(restored) > 0 {
		s.log.Info("restored jobs from an earlier run", "jobs", len(restored), "data_dir", cfg.DataDir)
	}
	s.reg, s.met = newRegistry(s)
	return s, nil
}

// Handler routes the service's endpoints.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /jobs", s.handleCreate)
	mux.HandleFunc("GET /jobs", s.handleList)
	mux.HandleFunc("GET /jobs/{id}", s.handleGet)
	mux.HandleFunc("DELETE /jobs/{id}", s.handleCancel)
	mux.HandleFunc("GET /jobs/{id}/events", s.handleEvents)
	mux.HandleFunc("GET /jobs/{id}/generate", s.handleGenerate)
	mux.Handle("GET /metrics", metricsHandler(s.reg, s.log))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "device": s.rt.Kind(), "num_devices": s.rt.NumDevices()})
	})
	return mux
}

// Serve serves on ln until ctx is done, then shuts down gracefully: no new connections or jobs,
// every job cancelled (each finishes its current update and commits a checkpoint), every job
// waited for, then the HTTP requests still in flight (event streams end with their jobs). It
// returns nil after a graceful shutdown.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	var serveErr error
	select {
	case serveErr = <-served:
		served = nil
	case <-ctx.Done():
	}
	s.log.Info("shutting down: cancelling jobs", "running", s.countRunning())
	s.mu.Lock()
	s.closing = true // no job is added (nor wg.Add called) from here on
	s.mu.Unlock()
	s.stopJobs()
	// Shutdown closes the listeners at once, then waits for the handlers; it runs while the
	// jobs stop, since their event streams only end with them.
	shut := make(chan error, 1)
	go func() { shut <- hs.Shutdown(context.Background()) }()
	s.wg.Wait()
	s.log.Info("all jobs stopped")
	var shutErr error
	select {
	case shutErr = <-shut:
	case <-time.After(s.cfg.ShutdownGrace):
		s.log.Warn("closing HTTP connections still open after the grace period", "grace", s.cfg.ShutdownGrace)
		shutErr = hs.Close()
		<-shut
	}
	if served != nil {
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			serveErr = err
		}
	}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	return shutErr
}

func (s *Server) countRunning() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, j := range s.order {
		if !j.State().Done() {
			n++
		}
	}
	return n
}

func (s *Server) job(w http.ResponseWriter, r *http.Request) (*Job, bool) {
	id := r.PathValue("id")
	s.mu.Lock()
	j, ok := s.jobs[id]
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no job %q", id), nil)
	}
	return j, ok
}

func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("reading the body: %v", err), nil)
		return
	}
	if s.isClosing() {
		writeError(w, http.StatusServiceUnavailable, "the service is shutting down", nil)
		return
	}
	id, err := newID()
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error(), nil)
		return
	}
	dir := filepath.Join(s.cfg.DataDir, "jobs", id)
	if err := os.Mkdir(dir, 0o755); err != nil {
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("creating the job directory: %v", err), nil)
		return
	}
	spec, err := parseSpec(body, specEnv{paths: s.paths, jobDir: dir, deviceKind: s.rt.Kind(), numDevices: s.rt.NumDevices()})
	if err != nil {
		os.RemoveAll(dir)
		var re *requestError
		if errors.As(err, &re) {
			writeError(w, http.StatusBadRequest, re.Error(), re.Fields)
			return
		}
		writeError(w, http.StatusInternalServerError, err.Error(), nil)
		return
	}
	j := newJob(id, dir, spec, s.now())
	if err := saveJob(j); err != nil {
		os.RemoveAll(dir)
		writeError(w, http.StatusInternalServerError, err.Error(), nil)
		return
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		os.RemoveAll(dir)
		writeError(w, http.StatusServiceUnavailable, "the service is shutting down", nil)
		return
	}
	ctx, cancel := context.WithCancel(s.jobsCtx)
	j.cancel = cancel
	s.jobs[id] = j
	s.order = append(s.order, j)
	s.wg.Add(1)
	s.mu.Unlock()
	go s.runJob(ctx, j)

	s.log.Info("job created", "job", id, "output_dir", dir, "max_steps", spec.Args.MaxSteps)
	p, _, _ := j.Snapshot()
	w.Header().Set("Location", p.URLs["self"])
	writeJSON(w, http.StatusCreated, p)
}

func (s *Server) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// runJob is a job's goroutine: it waits for a training slot, trains, and records the outcome.
// The server's WaitGroup owns it; ctx is cancelled by DELETE or shutdown.
func (s *Server) runJob(ctx context.Context, j *Job) {
	defer s.wg.Done()
	defer close(j.done)
	defer j.cancel()
	log := s.log.With("job", j.ID)
	var err error
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
		if err = ctx.Err(); err == nil {
			j.update(func(p *Progress) {
				p.State = StateRunning
				t := s.now().UTC()
				p.StartedAt = &t
			})
			if perr := saveJob(j); perr != nil {
				log.Warn("recording the job", "error", perr)
			}
			err = train(ctx, s.rt, j, log, s.now)
		}
	case <-ctx.Done():
		err = ctx.Err()
	}
	st := j.finish(err, ctx.Err() != nil, s.now())
	if perr := saveJob(j); perr != nil {
		log.Warn("recording the job", "error", perr)
	}
	p, _, _ := j.Snapshot()
	attrs := []any{"state", st, "step", p.Step}
	if p.LatestCheckpoint != nil {
		attrs = append(attrs, "checkpoint", p.LatestCheckpoint.Dir)
	}
	if st == StateFailed {
		log.Error("job failed", append(attrs, "error", err)...)
	} else {
		log.Info("job ended", attrs...)
	}
}

func (s *Server) handleList(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	jobs := slices.Clone(s.order)
	s.mu.Unlock()
	out := make([]Progress, 0, len(jobs))
	for _, j := range jobs {
		p, _, _ := j.Snapshot()
		out = append(out, p)
	}
	writeJSON(w, http.StatusOK, map[string]any{"jobs": out})
}

func (s *Server) handleGet(w http.ResponseWriter, r *http.Request) {
	if j, ok := s.job(w, r); ok {
		p, _, _ := j.Snapshot()
		writeJSON(w, http.StatusOK, p)
	}
}

// handleCancel cancels a job. By default it waits until the job has stopped (its checkpoint
// committed) and returns the final progress; with ?wait=false it returns 202 at once.
func (s *Server) handleCancel(w http.ResponseWriter, r *http.Request) {
	j, ok := s.job(w, r)
	if !ok {
		return
	}
	switch st := j.State(); st {
	case StateCompleted, StateFailed:
		writeError(w, http.StatusConflict, fmt.Sprintf("job %s already %s", j.ID, st), nil)
		return
	}
	j.cancel()
	if r.URL.Query().Get("wait") == "false" {
		p, _, _ := j.Snapshot()
		writeJSON(w, http.StatusAccepted, p)
		return
	}
	select {
	case <-j.done:
	case <-r.Context().Done():
		return // the client went away; the job still stops
	}
	p, _, _ := j.Snapshot()
	writeJSON(w, http.StatusOK, p)
}

func newID() (string, error) {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("job id: %w", err)
	}
	return hex.EncodeToString(b), nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // the client may be gone; nothing else to tell it
}

// errorBody is every error answer: a message, and per-field problems for a bad request.
type errorBody struct {
	Error  string       `json:"error"`
	Fields []fieldError `json:"fields,omitempty"`
}

func writeError(w http.ResponseWriter, status int, msg string, fields []fieldError) {
	writeJSON(w, status, errorBody{Error: msg, Fields: fields})
}
