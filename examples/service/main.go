// Command service is gotpu embedded in a Go HTTP service: clients start training jobs with a
// Hugging Face argument file as the request body, follow their progress (JSON, server-sent
// events, Prometheus metrics), cancel them (the trainer finishes its step and commits a
// checkpoint) and generate text from their latest checkpoint.
//
//	go run ./examples/service                    # 127.0.0.1:8080, this machine only
//	go run ./examples/service -addr :8080 -auth_token_file /etc/gotpu/token -device tpu -data_dir /mnt/jobs -input_roots /mnt/data
//
// Endpoints: POST /jobs, GET /jobs, GET /jobs/{id}, GET /jobs/{id}/events, DELETE /jobs/{id},
// GET (or POST) /jobs/{id}/generate, GET (or POST) /generate, GET /metrics, GET /healthz. The
// request format, the answers and curl lines for each are in README.md. With -hub, requests may name Hugging Face Hub
// repo ids where they name a model or tokenizer; the files are fetched into the cache that
// huggingface_hub shares. The service listens on loopback unless -addr says otherwise; beyond
// loopback it requires a bearer token (-auth_token_file or GOTPU_SERVICE_TOKEN) on every
// endpoint but /healthz.
//
// GET /metrics includes the shared runtime's compile counters (gotpu_xla_compiles_total,
// gotpu_xla_compile_seconds_total, gotpu_compilation_cache_{hits,misses,load_seconds,writes,
// errors}_total): with -compilation_cache_dir (default $GOTPU_COMPILATION_CACHE_DIR, else under
// the user's cache directory, PJRT devices only; "off" disables it) the next job with the same
// shapes loads its programs from the cache instead of compiling them.
//
// SIGTERM or SIGINT shut the service down gracefully: it stops accepting connections, cancels
// the running jobs (each commits a checkpoint after its current step), waits for them and exits
// 0. The service uses only gotpu's library API (xla, models, data, trainer, checkpoint, hub).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/gotpu/gotpu/xla"
	"github.com/gotpu/gotpu/xla/compilecache"
)

// defaultAddr is where the service listens unless told otherwise: this machine only. Listening
// beyond it is an explicit choice (-addr), which needs a token.
const defaultAddr = "127.0.0.1:8080"

func main() {
	addr := flag.String("addr", defaultAddr, "listen address (host:port; port 0 picks a free one); beyond loopback it needs -auth_token_file or "+tokenEnv)
	device := flag.String("device", "auto", "auto, tpu, cuda, cpu or go")
	numDevices := flag.Int("num_devices", 0, "devices to use (0: all; on the pure-Go backend, that many virtual devices)")
	dataDir := flag.String("data_dir", filepath.Join("out", "service"), "where jobs write: <data_dir>/jobs/<id> is each job's output_dir")
	inputRoots := flag.String("input_roots", ".", "comma-separated directories jobs may read models, tokenizers and data from")
	maxRunning := flag.Int("max_running", 1, "jobs that train at once (the others wait, queued)")
	maxQueued := flag.Int("max_queued", defaultMaxQueued, "jobs that may wait for a training slot; beyond it POST /jobs answers 429")
	maxGenerating := flag.Int("max_generating", 1, "generation requests served at once")
	useHub := flag.Bool("hub", false, "accept Hugging Face Hub repo ids (org/name[@rev]) for model_name_or_path, config_name, tokenizer_name and "+
		"GET /generate?model=, fetched into the shared cache; configured from the environment as huggingface_hub is "+
		"(HF_HUB_CACHE or HF_HOME, HF_ENDPOINT, HF_TOKEN for gated and private repos, HF_HUB_OFFLINE)")
	tokenFile := flag.String("auth_token_file", "", "file holding the bearer token every request but /healthz must carry (or set "+tokenEnv+"); required beyond loopback")
	cacheDir := flag.String("compilation_cache_dir", "", "directory of compiled XLA executables reused across jobs and restarts "+
		"(PJRT devices: tpu, cuda, cpu); \"off\" disables it. Default: $"+compilecache.EnvDir+", else "+
		"gotpu/xla-executables under the user's cache directory")
	cacheMaxBytes := flag.Int64("compilation_cache_max_bytes", 0, "size limit of the compilation cache; the least "+
		"recently used executables are removed past it (0: 10 GiB)")
	flag.Parse()

	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	token, err := loadAuthToken(*tokenFile, os.LookupEnv, log)
	if err == nil {
		err = checkExposure(ctx, *addr, token != "")
	}
	if err != nil {
		log.Error("service", "error", err)
		os.Exit(1)
	}
	cfg := Config{
		DataDir: *dataDir, InputRoots: strings.Split(*inputRoots, ","),
		MaxRunning: *maxRunning, MaxQueued: *maxQueued, MaxGenerating: *maxGenerating, Logger: log, AuthToken: token,
	}
	if *useHub {
		if cfg.Hub, err = newHubClient(os.Getenv, log); err != nil {
			log.Error("service: -hub", "error", err)
			os.Exit(1)
		}
		log.Info("Hub repo ids accepted", "cache", cfg.Hub.CacheDir())
	}
	xc := xla.Config{Device: *device, NumDevices: *numDevices}
	goBackend := strings.EqualFold(strings.TrimSpace(*device), xla.DeviceGo)
	if xc.CompilationCache, _, err = compilecache.Resolve(*cacheDir, *cacheMaxBytes, goBackend, os.Getenv, log); err != nil {
		log.Error("service", "error", err)
		os.Exit(1)
	}
	if err := run(ctx, cfg, xc, *addr); err != nil {
		log.Error("service", "error", err)
		os.Exit(1)
	}
}

// run opens the runtime and serves until ctx ends (SIGTERM/SIGINT), then shuts down gracefully.
func run(ctx context.Context, cfg Config, xc xla.Config, addr string) (err error) {
	rt, err := xla.Open(ctx, xc)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, rt.Close()) }()
	srv, err := NewServer(cfg, rt)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	if addr != defaultAddr {
		// Where a service listens decides who can reach it: a choice other than the default is
		// said out loud, beyond loopback all the more.
		msg := "listening on an explicitly chosen address (loopback)"
		if !listenerIsLoopback(ln) {
			msg = "listening on an explicitly chosen address BEYOND LOOPBACK: every request but /healthz needs the bearer token"
		}
		cfg.Logger.Warn(msg, "addr", addr, "listener", ln.Addr().String())
	}
	// Printed on stdout so scripts (and the SIGTERM test) can find a port picked with :0.
	fmt.Printf("listening on http://%s (%s, %d device(s))\n", ln.Addr(), rt.Kind(), rt.NumDevices())
	cache := "off"
	if st, ok := rt.CompileStats(); ok && st.CacheDir != "" {
		cache = st.CacheDir
	}
	cfg.Logger.Info("serving", "addr", ln.Addr().String(), "device", rt.Kind(), "num_devices", rt.NumDevices(),
		"data_dir", cfg.DataDir, "auth", cfg.AuthToken != "", "compilation_cache", cache)
	return srv.Serve(ctx, ln)
}
