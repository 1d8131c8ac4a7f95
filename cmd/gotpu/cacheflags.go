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

// apply sets cfg.CompilationCache from the flags, the environment or the default
// (compilecache.Resolve: the environment and the default apply to PJRT devices only, and
// --compilation_cache_dir with --device go is refused).
func (c *cacheFlags) apply(cfg *xla.Config) error {
	getenv := c.getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	goBackend := strings.EqualFold(strings.TrimSpace(cfg.Device), xla.DeviceGo)
	cc, source, err := compilecache.Resolve(c.dir, c.maxBytes, goBackend, getenv, slog.Default())
	if err != nil {
		return cli.UsageError("%v", err)
	}
	cfg.CompilationCache = cc
	c.explicit = source == compilecache.SourceFlag && cc.Dir != ""
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
