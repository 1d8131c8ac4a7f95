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
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gotpu/gotpu/hub"
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

	// AuthToken, when set, is the bearer token every request must carry
	// ("Authorization: Bearer <token>"), except GET /healthz. Serve refuses a listener beyond
	// loopback without one.
	AuthToken string
	// MaxQueued is how many jobs may wait for a training slot (0: 8); beyond it POST /jobs
	// answers 429 with Retry-After.
	MaxQueued int

	// Slow or idle clients must not hold connections (and shutdown) for ever.
	//
	// Hub, when set, lets requests name Hugging Face Hub repo ids ("org/name", "@rev") where
	// they name a model, config or tokenizer (model_name_or_path, config_name, tokenizer_name,
	// GET /generate?model=), as transformers does: a path the service may read wins; otherwise
	// the repo's files are fetched into the client's cache. nil: repo ids are refused, with a
	// hint to start the service with -hub.
	Hub *hub.Client
	// HubTimeout bounds each Hub call a request waits for (0: 30 s): config.json and
	// tokenizer.json are fetched while POST /jobs checks the request; a job fetches its weights
	// when it starts, without it.
	HubTimeout time.Duration

	// ReadHeaderTimeout bounds reading a request's headers (0: 10 s), ReadTimeout the whole
	// request including its body (0: 60 s; a body is at most 1 MiB), and IdleTimeout how long a
	// kept-alive connection may wait for its next request (0: 120 s). WriteTimeout bounds writing
	// each answer from its first byte (0: 60 s), so a client that stops reading cannot hold a
	// handler; on an event stream it bounds each event instead, since the stream itself lasts as
	// long as its job.
	ReadHeaderTimeout, ReadTimeout, IdleTimeout, WriteTimeout time.Duration
}

// Defaults of Config's zero fields.
const (
	defaultMaxQueued         = 8
	defaultReadHeaderTimeout = 10 * time.Second
	defaultReadTimeout       = 60 * time.Second
	defaultIdleTimeout       = 120 * time.Second
	defaultWriteTimeout      = 60 * time.Second
	// retryAfterSeconds is the Retry-After of a 429: a guess at when a queued job will have
	// started, since jobs take minutes; clients back off rather than poll.
	retryAfterSeconds = 30
)

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
	auth  *authenticator  // nil: no token required
	toks  *tokenizerCache // tokenizers shared by the jobs and generation requests using them
	hub   *hubFetcher     // nil: no Hub client (Config.Hub)

	// trainJob is a job's work, run by runJob through trainRecovered: train, with the server's
	// runtime and Hub client. It is a field only so that a test can make a job panic (no input
	// is known to since peft's regular expressions were bounded); nothing else sets it.
	trainJob func(ctx context.Context, j *Job, log *slog.Logger) error

	// inFlight counts the HTTP handlers running now (event streams included).
	inFlight atomic.Int64

	slots   chan struct{} // training slots (MaxRunning)
	genSlot chan struct{} // generation slots (MaxGenerating)

	// jobsCtx is the parent of every job's context; stopJobs cancels them all at shutdown.
	jobsCtx  context.Context
	stopJobs context.CancelFunc
	wg       sync.WaitGroup // one per job goroutine

	mu      sync.Mutex
	jobs    map[string]*Job
	order   []*Job
	queued  int // jobs whose goroutine has not yet taken a training slot nor ended (MaxQueued)
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
	if cfg.MaxQueued <= 0 {
		cfg.MaxQueued = defaultMaxQueued
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{
		{&cfg.ReadHeaderTimeout, defaultReadHeaderTimeout}, {&cfg.ReadTimeout, defaultReadTimeout},
		{&cfg.IdleTimeout, defaultIdleTimeout}, {&cfg.WriteTimeout, defaultWriteTimeout},
		{&cfg.HubTimeout, defaultHubTimeout},
	} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	if cfg.AuthToken != "" {
		if err := checkToken(cfg.AuthToken); err != nil {
			return nil, fmt.Errorf("service: Config.AuthToken: %w", err)
		}
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
		auth: newAuthenticator(cfg.AuthToken), toks: newTokenizerCache(nil),
		slots: make(chan struct{}, cfg.MaxRunning), genSlot: make(chan struct{}, cfg.MaxGenerating),
		jobs: map[string]*Job{},
	}
	if cfg.Hub != nil {
		s.hub = &hubFetcher{c: cfg.Hub, timeout: cfg.HubTimeout}
	}
	s.trainJob = func(ctx context.Context, j *Job, log *slog.Logger) error {
		return train(ctx, s.rt, s.cfg.Hub, j, log, s.now)
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

// Handler routes the service's endpoints. Every endpoint but /healthz requires the token (when
// one is configured), and every answer but the event stream gets a write deadline.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	route := func(pattern string, h http.HandlerFunc) {
		mux.Handle(pattern, s.writeDeadline(s.requireToken(h)))
	}
	route("POST /jobs", s.handleCreate)
	route("GET /jobs", s.handleList)
	route("GET /jobs/{id}", s.handleGet)
	route("DELETE /jobs/{id}", s.handleCancel)
	route("GET /jobs/{id}/generate", s.handleGenerate)
	route("GET /generate", s.handleGenerateModel)
	// POST: the same parameters as a JSON body, so that a chat conversation need not be
	// URL-encoded (generateQuery).
	route("POST /jobs/{id}/generate", s.handleGenerate)
	route("POST /generate", s.handleGenerateModel)
	route("GET /metrics", metricsHandler(s.reg, s.log).ServeHTTP)
	// The event stream sets a deadline per event itself (sse.go).
	mux.Handle("GET /jobs/{id}/events", s.requireToken(http.HandlerFunc(s.handleEvents)))
	// /healthz is open: liveness probes and load balancers rarely carry secrets, and it tells
	// only that the service is up and on which device kind — nothing about jobs.
	mux.Handle("GET /healthz", s.writeDeadline(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "device": s.rt.Kind(), "num_devices": s.rt.NumDevices()})
	})))
	// A handler's panic is answered 500 and logged with its stack (panics.go).
	return s.countInFlight(s.recoverPanics(mux))
}

// Serve serves on ln until ctx is done, then shuts down gracefully: no new connections or jobs,
// every job cancelled (each finishes its current update and commits a checkpoint), every job
// waited for, then the HTTP requests still in flight (event streams end with their jobs). It
// returns nil after a graceful shutdown.
//
// Serve refuses a listener beyond loopback unless Config.AuthToken is set.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if s.auth == nil && !listenerIsLoopback(ln) {
		ln.Close()
		return fmt.Errorf("service: %s is beyond loopback and Config.AuthToken is empty: anyone who reaches it could start, cancel and read jobs", ln.Addr())
	}
	hs := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		ReadTimeout:       s.cfg.ReadTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		// No server-wide WriteTimeout: it would cut event streams, which last as long as their
		// job. Answers get per-handler deadlines instead (writeDeadline, and per event).
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
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
	// The cap is checked first, before the body is read or anything loaded, so that a full
	// queue costs nothing; it is checked again when the job is added (another POST may have
	// filled the last place meanwhile).
	if s.queueFull() {
		s.refuseQueueFull(w)
		return
	}
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
	spec, err := parseSpec(r.Context(), body, specEnv{paths: s.paths, jobDir: dir, deviceKind: s.rt.Kind(), numDevices: s.rt.NumDevices(), toks: s.toks, rt: s.rt, hub: s.hub})
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
	// Until the job's goroutine owns the spec, every way out releases its tokenizer.
	discard := func() {
		spec.release()
		os.RemoveAll(dir)
	}
	j := newJob(id, dir, spec, s.now())
	if err := saveJob(j); err != nil {
		discard()
		writeError(w, http.StatusInternalServerError, err.Error(), nil)
		return
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		discard()
		writeError(w, http.StatusServiceUnavailable, "the service is shutting down", nil)
		return
	}
	if s.queued >= s.cfg.MaxQueued {
		s.mu.Unlock()
		discard()
		s.refuseQueueFull(w)
		return
	}
	ctx, cancel := context.WithCancel(s.jobsCtx)
	j.cancel = cancel
	s.jobs[id] = j
	s.order = append(s.order, j)
	s.queued++
	s.wg.Add(1)
	s.mu.Unlock()
	go s.runJob(ctx, j)

	s.log.Info("job created", "job", id, "output_dir", dir, "max_steps", spec.Args.MaxSteps)
	p, _, _ := j.Snapshot()
	w.Header().Set("Location", p.URLs["self"])
	writeJSON(w, http.StatusCreated, p)
}

// queueFull reports whether MaxQueued jobs wait for a training slot.
func (s *Server) queueFull() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queued >= s.cfg.MaxQueued
}

func (s *Server) refuseQueueFull(w http.ResponseWriter) {
	w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds))
	writeError(w, http.StatusTooManyRequests, fmt.Sprintf("%d jobs are already queued for a training slot (the service's limit, -max_queued); retry later or cancel one", s.cfg.MaxQueued), nil)
}

// leftQueue records that a job's goroutine has taken a training slot or ended while queued.
func (s *Server) leftQueue() {
	s.mu.Lock()
	s.queued--
	s.mu.Unlock()
}

func (s *Server) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// runJob is a job's goroutine: it waits for a training slot, trains, and records the outcome;
// a panic while training is the job's failure (trainRecovered). The server's WaitGroup owns
// it; ctx is cancelled by DELETE or shutdown.
func (s *Server) runJob(ctx context.Context, j *Job) {
	defer s.wg.Done()
	defer close(j.done)
	defer j.cancel()
	// Runs before done is closed: whoever waits for the job (DELETE) sees its tokenizer
	// released and its request dropped.
	defer j.dropSpec()
	log := s.log.With("job", j.ID)
	var err error
	select {
	case s.slots <- struct{}{}:
		s.leftQueue()
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
			// A panic in the job's work fails the job, not the process (panics.go).
			err = s.trainRecovered(ctx, j, log)
		}
	case <-ctx.Done():
		s.leftQueue()
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
