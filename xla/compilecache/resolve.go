package compilecache

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
)

// EnvDir is the environment variable naming the cache directory when no flag does.
const EnvDir = "GOTPU_COMPILATION_CACHE_DIR"

// Off is the directory value, in the flag or EnvDir, that turns the cache off.
const Off = "off"

// Sources of a resolved directory, as ResolveDir reports them.
const (
	SourceFlag    = "flag"
	SourceEnv     = "env"
	SourceDefault = "default"
)

// DefaultDir is the cache directory when neither the flag nor EnvDir names one: gotpu/
// xla-executables under the user's cache directory ($XDG_CACHE_HOME or ~/.cache on Linux).
func DefaultDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no default compilation cache directory (set --compilation_cache_dir or %s): %w", EnvDir, err)
	}
	return filepath.Join(base, "gotpu", "xla-executables"), nil
}

// ResolveDir picks the cache directory: flagValue (--compilation_cache_dir) if set, else the
// environment's EnvDir (read through getenv, os.Getenv in a program), else DefaultDir. source says
// which: SourceFlag, SourceEnv or SourceDefault. The value "off" in the flag or the environment
// turns the cache off: dir is "" then, with the source that said so. A relative directory is
// made absolute against the working directory.
func ResolveDir(flagValue string, getenv func(string) string) (dir string, source string, err error) {
	switch {
	case flagValue != "":
		dir, source = flagValue, SourceFlag
	case getenv != nil && getenv(EnvDir) != "":
		dir, source = getenv(EnvDir), SourceEnv
	default:
		dir, err = DefaultDir()
		if err != nil {
			return "", SourceDefault, err
		}
		return dir, SourceDefault, nil
	}
	if dir == Off {
		return "", source, nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", source, fmt.Errorf("compilation cache directory %q (from %s): %w", dir, source, err)
	}
	return abs, source, nil
}

// Resolve turns the cache's two flags (--compilation_cache_dir flagDir,
// --compilation_cache_max_bytes maxBytes) into the Config for a device, the one rule the gotpu
// CLI and the service share: the directory is ResolveDir's, for PJRT devices. On the pure-Go
// backend (goBackend: the device "go") nothing is cached, so the environment and the default are
// ignored there and a directory the flag names is an error naming the flag. A default that cannot
// be found (no user cache directory) leaves the cache off, with a warning on log. source is
// ResolveDir's: the caller can tell a directory the flag named (SourceFlag) from one it did not.
func Resolve(flagDir string, maxBytes int64, goBackend bool, getenv func(string) string, log *slog.Logger) (cfg Config, source string, err error) {
	if maxBytes < 0 {
		return Config{}, "", fmt.Errorf("--compilation_cache_max_bytes %d: must not be negative (0: %d)", maxBytes, DefaultMaxBytes)
	}
	dir, source, err := ResolveDir(flagDir, getenv)
	if err != nil {
		if source != SourceDefault {
			return Config{}, source, err
		}
		if log != nil {
			log.Warn("gotpu: no compilation cache", "reason", err)
		}
		return Config{}, source, nil
	}
	if goBackend {
		if source == SourceFlag && dir != "" {
			return Config{}, source, fmt.Errorf("--compilation_cache_dir %s: --device go (the pure-Go backend) compiles no XLA "+
				"executables to cache; remove the flag, or choose a PJRT device (tpu, cuda or cpu)", flagDir)
		}
		return Config{}, source, nil
	}
	return Config{Dir: dir, MaxBytes: maxBytes}, source, nil
}
