package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/gotpu/gotpu/internal/cli"
	"github.com/gotpu/gotpu/xla/compilecache"
)

// runCache implements `gotpu cache [list|clear] [--compilation_cache_dir DIR] [--json]`: the
// persistent compilation cache's directory, size and entries (list, the default), or emptying it
// (clear). The directory is --compilation_cache_dir, else $GOTPU_COMPILATION_CACHE_DIR, else the
// default under the user's cache directory (compilecache.ResolveDir); "off" in either means no
// cache. The command never creates the directory: one that does not exist lists as empty.
//
// list, text:
//
//	cache        /home/me/.cache/gotpu/xla-executables (from --compilation_cache_dir)
//	size         63.4 MiB of 10.0 GiB limit, 3 entries
//	  3f2a9c01d4e5  61.2 MiB  2025-03-14T09:05:07Z  gotpu_train_step_0  platform=cpu devices=8
//	  77b0e1aa0c93  1.2 MiB  2025-03-14T08:55:00Z  gotpu_eval_step_0  platform=cpu devices=8
//	  c0ffee000001  1.0 MiB  2025-03-13T17:00:00Z  (problem: checksum mismatch: the file is corrupt)
//
// The first line says where the directory came from: "(from --compilation_cache_dir)", "(from
// GOTPU_COMPILATION_CACHE_DIR)" or "(default)"; with the cache off it is "cache        off (from
// --compilation_cache_dir off)" or "(from GOTPU_COMPILATION_CACHE_DIR=off)" and nothing follows.
// The size is the entries' files, the limit --compilation_cache_max_bytes (as given to train;
// default compilecache.DefaultMaxBytes; the listing removes nothing past it). Then one
// line per entry, most recently used first: the first 12 hex digits of its ID, its file's size,
// when it was last used (RFC 3339, local time), the program's name ("-" if none) and the key's
// platform and devices fields when it has them; an entry that fails its checks (corrupt,
// truncated, another key's) shows "(problem: …)" instead of name and key, and is what a run
// would ignore and recompile. Sizes are "N B" under 1 KiB, else KiB, MiB, GiB or TiB with one
// decimal.
//
// list --json: one object {"dir", "source" ("flag", "env" or "default"), "max_bytes", "bytes",
// "entries": [{"id", "path", "name", "bytes", "payload_bytes", "created" (absent for an entry with
// a problem), "last_used", "compile_seconds", "key" {field name: value}, "problem" (absent unless
// there is one)}]}; "dir" is "" when the cache is off.
//
// clear removes every entry (and temporary files of writers that crashed more than an hour ago)
// and prints "removed N entries (X MiB) from DIR"; with --json, {"dir", "removed", "bytes"}.
func runCache(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("cache")
	flagDir := fs.String("compilation_cache_dir", "", "cache directory (default $"+compilecache.EnvDir+", else under the user's cache directory; \"off\": none)")
	maxBytes := fs.Int64("compilation_cache_max_bytes", 0, "the size limit to show, as given to train (0: 10 GiB)")
	asJSON := fs.Bool("json", false, "print one JSON object instead of text")
	const synopsis = "[list|clear] [--compilation_cache_dir DIR] [--compilation_cache_max_bytes N] [--json]"
	sub := ""
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sub, args = args[0], args[1:]
	}
	if err := parse(fs, args, stderr, synopsis); err != nil {
		return err
	}
	if sub == "" && fs.NArg() > 0 { // the subcommand after the flags
		sub = fs.Arg(0)
		if err := parse(fs, fs.Args()[1:], stderr, synopsis); err != nil {
			return err
		}
	}
	if fs.NArg() > 0 {
		return cli.UsageError("unexpected arguments %q", fs.Args())
	}
	switch sub {
	case "", "list", "clear":
	default:
		return cli.UsageError("unknown subcommand %q%s (gotpu cache takes list or clear)", sub, cli.SuggestCommand(sub, []string{"list", "clear"}))
	}
	if *maxBytes < 0 {
		return cli.UsageError("--compilation_cache_max_bytes %d: must not be negative (0: %d)", *maxBytes, compilecache.DefaultMaxBytes)
	}
	if *maxBytes == 0 {
		*maxBytes = compilecache.DefaultMaxBytes
	}
	dir, source, err := compilecache.ResolveDir(*flagDir, os.Getenv)
	if err != nil {
		return err
	}
	if sub == "clear" {
		return clearCache(dir, source, *asJSON, stdout)
	}
	return listCache(dir, source, *maxBytes, *asJSON, stdout)
}

// cacheListJSON is list --json's object.
type cacheListJSON struct {
	Dir      string           `json:"dir"`
	Source   string           `json:"source"`
	MaxBytes int64            `json:"max_bytes"`
	Bytes    int64            `json:"bytes"`
	Entries  []cacheEntryJSON `json:"entries"`
}

type cacheEntryJSON struct {
	ID             string            `json:"id"`
	Path           string            `json:"path"`
	Name           string            `json:"name"`
	Bytes          int64             `json:"bytes"`
	PayloadBytes   int64             `json:"payload_bytes"`
	Created        *time.Time        `json:"created,omitempty"`
	LastUsed       time.Time         `json:"last_used"`
	CompileSeconds float64           `json:"compile_seconds"`
	Key            map[string]string `json:"key"`
	Problem        string            `json:"problem,omitempty"`
}

// openExisting opens the cache at dir if the directory exists; (nil, nil) if it does not, so
// that looking at a cache never creates one.
func openExisting(dir string) (*compilecache.Store, error) {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return compilecache.Open(compilecache.Config{Dir: dir}, nil)
}

func listCache(dir, source string, maxBytes int64, asJSON bool, stdout io.Writer) error {
	out := cacheListJSON{Dir: dir, Source: source, MaxBytes: maxBytes, Entries: []cacheEntryJSON{}}
	var list []compilecache.Entry
	if dir != "" {
		s, err := openExisting(dir)
		if err != nil {
			return err
		}
		if s != nil {
			if list, err = s.List(); err != nil {
				return err
			}
		}
	}
	for _, e := range list {
		j := cacheEntryJSON{ID: e.ID, Path: e.Path, Name: e.Name, Bytes: e.Bytes, PayloadBytes: e.PayloadBytes,
			LastUsed: e.LastUsed, CompileSeconds: e.CompileSeconds, Key: map[string]string{}, Problem: e.Problem}
		if !e.Created.IsZero() {
			j.Created = &e.Created
		}
		for _, f := range e.Key.Fields {
			j.Key[f.Name] = f.Value
		}
		out.Bytes += e.Bytes
		out.Entries = append(out.Entries, j)
	}
	if asJSON {
		return json.NewEncoder(stdout).Encode(out)
	}
	if dir == "" {
		fmt.Fprintf(stdout, "cache        off (%s)\n", offSource(source))
		return nil
	}
	fmt.Fprintf(stdout, "cache        %s (%s)\n", dir, sourceText(source))
	fmt.Fprintf(stdout, "size         %s of %s limit, %s\n", humanBytes(out.Bytes), humanBytes(out.MaxBytes), nEntries(len(list)))
	for _, e := range list {
		id := e.ID
		if len(id) > 12 {
			id = id[:12]
		}
		what := "(problem: " + e.Problem + ")"
		if e.Problem == "" {
			what = e.Name
			if what == "" {
				what = "-"
			}
			if sum := keySummary(e.Key); sum != "" {
				what += "  " + sum
			}
		}
		fmt.Fprintf(stdout, "  %s  %s  %s  %s\n", id, humanBytes(e.Bytes), e.LastUsed.Local().Format(time.RFC3339), what)
	}
	return nil
}

func clearCache(dir, source string, asJSON bool, stdout io.Writer) error {
	var removed int
	var bytes int64
	if dir != "" {
		s, err := openExisting(dir)
		if err != nil {
			return err
		}
		if s != nil {
			if removed, bytes, err = s.Clear(); err != nil {
				return err
			}
		}
	}
	if asJSON {
		return json.NewEncoder(stdout).Encode(map[string]any{"dir": dir, "removed": removed, "bytes": bytes})
	}
	if dir == "" {
		fmt.Fprintf(stdout, "cache        off (%s): nothing to clear\n", offSource(source))
		return nil
	}
	fmt.Fprintf(stdout, "removed %s (%.1f MiB) from %s\n", nEntries(removed), float64(bytes)/(1<<20), dir)
	return nil
}

// keySummary names the key's platform and devices, the fields that tell a listing's entries
// apart at a glance.
func keySummary(k compilecache.Key) string {
	var parts []string
	for _, name := range []string{compilecache.FieldPlatform, compilecache.FieldDevices} {
		for _, f := range k.Fields {
			if f.Name == name {
				parts = append(parts, f.Name+"="+f.Value)
				break
			}
		}
	}
	return strings.Join(parts, " ")
}

func sourceText(source string) string {
	switch source {
	case compilecache.SourceFlag:
		return "from --compilation_cache_dir"
	case compilecache.SourceEnv:
		return "from " + compilecache.EnvDir
	}
	return "default"
}

func offSource(source string) string {
	if source == compilecache.SourceFlag {
		return "from --compilation_cache_dir off"
	}
	return "from " + compilecache.EnvDir + "=off"
}

// nEntries is "1 entry", "3 entries".
func nEntries(n int) string {
	if n == 1 {
		return "1 entry"
	}
	return fmt.Sprintf("%d entries", n)
}

// humanBytes writes n in binary units with one decimal ("N B" below 1 KiB).
func humanBytes(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v := float64(n)
	for _, unit := range []string{"KiB", "MiB", "GiB"} {
		v /= 1024
		if v < 1024 {
			return fmt.Sprintf("%.1f %s", v, unit)
		}
	}
	return fmt.Sprintf("%.1f TiB", v/1024)
}
