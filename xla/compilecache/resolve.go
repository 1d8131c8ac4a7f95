package compilecache

import (
	"fmt"
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
