package main

import (
	"flag"
	"log/slog"
	"os"
	"strings"

	"github.com/gotpu/gotpu/internal/cli"
	"github.com/gotpu/gotpu/xla"
	"github.com/gotpu/gotpu/xla/compilecache"
)

// cacheFlags are the persistent compilation cache's flags, taken by every command that compiles
// programs on a PJRT device (train, eval, generate, score, merge, devices).
type cacheFlags struct {
	dir      string
	maxBytes int64
	getenv   func(string) string // os.Getenv; tests of the resolution pass their own
	explicit bool                // apply set a directory the flag named
}

func (c *cacheFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.dir, "compilation_cache_dir", "", "directory of compiled XLA executables reused across runs "+
		"(PJRT devices: tpu, cuda, cpu); \"off\" disables it. Default: $"+compilecache.EnvDir+", else "+
		"gotpu/xla-executables under the user's cache directory")
	fs.Int64Var(&c.maxBytes, "compilation_cache_max_bytes", 0, "size limit of the compilation cache; the least "+
		"recently used executables are removed past it (0: 10 GiB)")
}

// apply sets cfg.CompilationCache from the flags, the environment or the default. The default
// and the environment only apply to PJRT devices (the pure-Go backend compiles nothing worth
// caching); --compilation_cache_dir with --device go is refused.
func (c *cacheFlags) apply(cfg *xla.Config) error {
	getenv := c.getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if c.maxBytes < 0 {
		return cli.UsageError("--compilation_cache_max_bytes %d: must not be negative (0: %d)", c.maxBytes, compilecache.DefaultMaxBytes)
	}
	dir, source, err := compilecache.ResolveDir(c.dir, getenv)
	if err != nil {
		if source == compilecache.SourceDefault { // no user cache directory: run without a cache
			slog.Warn("gotpu: no compilation cache", "reason", err)
			return nil
		}
		return cli.UsageError("%v", err)
	}
	if strings.EqualFold(strings.TrimSpace(cfg.Device), xla.DeviceGo) {
		if source == compilecache.SourceFlag && dir != "" {
			return cli.UsageError("--compilation_cache_dir %s: --device go (the pure-Go backend) compiles no XLA executables "+
				"to cache; remove the flag, or choose --device tpu, cuda or cpu", c.dir)
		}
		return nil
	}
	cfg.CompilationCache = compilecache.Config{Dir: dir, MaxBytes: c.maxBytes}
	c.explicit = source == compilecache.SourceFlag && dir != ""
	return nil
}

// opened warns when --compilation_cache_dir was given but --device auto chose the pure-Go
// backend, where nothing is cached: the flag would otherwise be accepted without effect, silently.
func (c *cacheFlags) opened(rt *xla.Runtime) {
	if c.explicit && rt.Kind() == xla.DeviceGo {
		slog.Warn("--compilation_cache_dir is unused: --device auto chose the pure-Go backend, which compiles no XLA executables",
			"compilation_cache_dir", c.dir)
	}
}
