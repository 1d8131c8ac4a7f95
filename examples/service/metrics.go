package main

import (
	"log/slog"
	"net/http"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gotpu/gotpu/xla"
)

// serviceMetrics are the metrics the handlers update themselves.
type serviceMetrics struct {
	gens         *prometheus.CounterVec
	streams      prometheus.Gauge
	unauthorized prometheus.Counter
}

// newRegistry builds the service's own registry (never the global default one, so several
// servers in one process — tests — do not collide): the Go runtime and process collectors, the
// job metrics read from the jobs at scrape time, generation requests and open event streams.
func newRegistry(s *Server) (*prometheus.Registry, serviceMetrics) {
	reg := prometheus.NewRegistry()
	m := serviceMetrics{
		gens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gotpu_generate_requests_total",
			Help: "Generation requests served, by outcome (ok, bad_request, no_checkpoint, error).",
		}, []string{"outcome"}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gotpu_event_streams",
			Help: "Server-sent event streams (GET /jobs/{id}/events) open now.",
		}),
		unauthorized: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gotpu_http_unauthorized_total",
			Help: "Requests refused for a missing or wrong bearer token.",
		}),
	}
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		newJobCollector(s),
		m.gens, m.streams, m.unauthorized,
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "gotpu_tokenizer_loads_total",
			Help: "Tokenizer files loaded (jobs and generation requests on the same file share one load while any of them holds it).",
		}, func() float64 { n, _ := s.toks.stats(); return float64(n) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "gotpu_tokenizers_loaded",
			Help: "Tokenizers in memory now, held by queued or running jobs and generation requests.",
		}, func() float64 { _, n := s.toks.stats(); return float64(n) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "gotpu_http_requests_in_flight",
			Help: "HTTP requests being handled now (event streams included).",
		}, func() float64 { return float64(s.requestsInFlight()) }),
	)
	if _, ok := s.rt.CompileStats(); ok {
		reg.MustRegister(newCompileCollector(s.rt))
	}
	return reg, m
}

// compileCollector reports the shared runtime's compile counters (xla.Runtime.CompileStats), read
// from one snapshot at scrape time: programs compiled and the time it took, and what the
// persistent compilation cache (-compilation_cache_dir) answered. They are the runtime's, so they
// sum every job and generation request since the service started. A runtime keeps them or not
// for its whole life, so the series are registered only where it does (a PJRT plugin gotpu
// hooked, or gotpu's pure-Go backend, whose compiles are its fusion planning and whose cache
// series stay 0: it has no cache); on GoMLX's simplego they are absent rather than a misleading 0.
type compileCollector struct {
	rt                                                    *xla.Runtime
	compiles, seconds, hits, misses, load, writes, errors *prometheus.Desc
}

func newCompileCollector(rt *xla.Runtime) *compileCollector {
	return &compileCollector{
		rt:       rt,
		compiles: prometheus.NewDesc("gotpu_xla_compiles_total", "Programs the runtime compiled (with the compilation cache on: its misses).", nil, nil),
		seconds:  prometheus.NewDesc("gotpu_xla_compile_seconds_total", "Wall time of those compiles (writing them into the cache not included).", nil, nil),
		hits:     prometheus.NewDesc("gotpu_compilation_cache_hits_total", "Programs loaded from the compilation cache instead of compiled.", nil, nil),
		misses:   prometheus.NewDesc("gotpu_compilation_cache_misses_total", "Cache lookups that found no usable entry (each then compiled).", nil, nil),
		load:     prometheus.NewDesc("gotpu_compilation_cache_load_seconds_total", "Time reading, checking and loading the cache's hits.", nil, nil),
		writes:   prometheus.NewDesc("gotpu_compilation_cache_writes_total", "Executables stored in the compilation cache.", nil, nil),
		errors:   prometheus.NewDesc("gotpu_compilation_cache_errors_total", "Entries that could not be stored or that the plugin refused to load (each a warning in the log).", nil, nil),
	}
}

func (c *compileCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.compiles, c.seconds, c.hits, c.misses, c.load, c.writes, c.errors} {
		ch <- d
	}
}

func (c *compileCollector) Collect(ch chan<- prometheus.Metric) {
	st, _ := c.rt.CompileStats()
	for _, m := range []struct {
		d *prometheus.Desc
		v float64
	}{{c.compiles, float64(st.Compiles)}, {c.seconds, st.CompileSeconds}, {c.hits, float64(st.CacheHits)},
		{c.misses, float64(st.CacheMisses)}, {c.load, st.LoadSeconds}, {c.writes, float64(st.CacheWrites)},
		{c.errors, float64(st.CacheErrors)}} {
		ch <- prometheus.MustNewConstMetric(m.d, prometheus.CounterValue, m.v)
	}
}

func metricsHandler(reg *prometheus.Registry, log *slog.Logger) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ErrorHandling: promhttp.ContinueOnError,
	})
}

// jobCollector reports each job's progress as it is at scrape time, so /metrics and
// GET /jobs/{id} never disagree and nothing is double-booked.
type jobCollector struct {
	s                                   *Server
	step, maxSteps, loss, lr, tps, info *prometheus.Desc
	saves, byState, syncs, idle         *prometheus.Desc
}

func newJobCollector(s *Server) *jobCollector {
	job := []string{"job"}
	return &jobCollector{
		s:        s,
		step:     prometheus.NewDesc("gotpu_job_step", "Optimizer updates done (the trainer's global_step).", job, nil),
		maxSteps: prometheus.NewDesc("gotpu_job_max_steps", "Optimizer updates the job runs in all.", job, nil),
		loss:     prometheus.NewDesc("gotpu_job_loss", "Training loss of the last log entry (mean over logging_steps updates).", job, nil),
		lr:       prometheus.NewDesc("gotpu_job_learning_rate", "Learning rate of the last log entry.", job, nil),
		tps:      prometheus.NewDesc("gotpu_job_tokens_per_second", "Training throughput of the last log interval, all devices.", job, nil),
		saves:    prometheus.NewDesc("gotpu_job_checkpoint_saves_total", "Checkpoints the job's trainer has saved.", job, nil),
		syncs:    prometheus.NewDesc("gotpu_job_host_syncs", "Blocking device-to-host reads in the last log interval (logging, evaluation and save points).", job, nil),
		idle:     prometheus.NewDesc("gotpu_job_device_idle_fraction", "Share of the last log interval the devices sat idle between executions.", job, nil),
		info:     prometheus.NewDesc("gotpu_job_state", "1 for the job's current state.", []string{"job", "state"}, nil),
		byState:  prometheus.NewDesc("gotpu_jobs", "Jobs by state.", []string{"state"}, nil),
	}
}

func (c *jobCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.step, c.maxSteps, c.loss, c.lr, c.tps, c.syncs, c.idle, c.saves, c.info, c.byState} {
		ch <- d
	}
}

func (c *jobCollector) Collect(ch chan<- prometheus.Metric) {
	c.s.mu.Lock()
	jobs := slices.Clone(c.s.order)
	c.s.mu.Unlock()
	counts := map[State]int{}
	for _, j := range jobs {
		j.mu.Lock()
		p := j.p
		j.mu.Unlock()
		counts[p.State]++
		ch <- prometheus.MustNewConstMetric(c.step, prometheus.GaugeValue, float64(p.Step), j.ID)
		ch <- prometheus.MustNewConstMetric(c.maxSteps, prometheus.GaugeValue, float64(p.MaxSteps), j.ID)
		ch <- prometheus.MustNewConstMetric(c.saves, prometheus.CounterValue, float64(p.Saves), j.ID)
		ch <- prometheus.MustNewConstMetric(c.info, prometheus.GaugeValue, 1, j.ID, string(p.State))
		for _, m := range []struct {
			d *prometheus.Desc
			v *float64
		}{{c.loss, p.Loss}, {c.lr, p.LearningRate}, {c.tps, p.TokensPerSecond}, {c.syncs, p.HostSyncs}, {c.idle, p.DeviceIdleFraction}} {
			if m.v != nil {
				ch <- prometheus.MustNewConstMetric(m.d, prometheus.GaugeValue, *m.v, j.ID)
			}
		}
	}
	for _, st := range allStates() {
		ch <- prometheus.MustNewConstMetric(c.byState, prometheus.GaugeValue, float64(counts[st]), string(st))
	}
}
