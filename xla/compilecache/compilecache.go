package compilecache

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gotpu/gotpu/internal/atomicfile"
)

// Config selects the cache. Dir "" means off.
type Config struct {
	// Dir is the cache directory; Open makes a relative one absolute and creates it.
	Dir string `json:"dir,omitempty"`
	// MaxBytes bounds the total size of the entries' files; 0 means DefaultMaxBytes.
	MaxBytes int64 `json:"max_bytes,omitempty"`
}

// DefaultMaxBytes is the size limit when Config.MaxBytes is 0: a few dozen large TPU programs.
const DefaultMaxBytes int64 = 10 << 30

// Validate checks the fields, naming the one at fault.
func (c Config) Validate() error {
	if c.MaxBytes < 0 {
		return fmt.Errorf("compilecache.Config.MaxBytes: %d is negative (0 means the default, %d)", c.MaxBytes, DefaultMaxBytes)
	}
	if strings.ContainsRune(c.Dir, 0) {
		return fmt.Errorf("compilecache.Config.Dir: %q holds a NUL byte", c.Dir)
	}
	return nil
}

// KeyField is one part of a Key.
type KeyField struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Names of key fields that `gotpu cache` shows in its listing when a key has them. A key may have
// any fields; these are only the ones a person reading the listing wants to tell entries apart.
const (
	FieldPlatform = "platform"
	FieldDevices  = "devices"
)

// Key is everything that changes the compiled program, in a fixed order: two keys are the same
// key only if their fields are equal one by one.
type Key struct{ Fields []KeyField }

// ID returns the hex SHA-256 of the key's encoding: a version tag, then the number of fields,
// then each field's name and value, each length-prefixed (uvarint), in order. No two different
// field lists encode alike, so no two keys share an ID short of a SHA-256 collision.
func (k Key) ID() string {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	put := func(s string) {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(s)))])
		h.Write([]byte(s))
	}
	put("gotpu compilecache key v1")
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(k.Fields)))])
	for _, f := range k.Fields {
		put(f.Name)
		put(f.Value)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// validate refuses keys that could not come back equal from the header's JSON.
func (k Key) validate() error {
	if len(k.Fields) == 0 {
		return errors.New("the key has no fields")
	}
	for i, f := range k.Fields {
		if f.Name == "" {
			return fmt.Errorf("key field %d has no name", i)
		}
		// JSON would replace invalid UTF-8, and the stored key would never match again.
		if !utf8.ValidString(f.Name) || !utf8.ValidString(f.Value) {
			return fmt.Errorf("key field %q: not valid UTF-8 (hash binary values first)", f.Name)
		}
	}
	return nil
}

// diff describes the first difference between a stored key and the wanted one, "" if none.
func (k Key) diff(want Key) string {
	for i := range max(len(k.Fields), len(want.Fields)) {
		switch {
		case i >= len(k.Fields):
			return fmt.Sprintf("it lacks field %q", want.Fields[i].Name)
		case i >= len(want.Fields):
			return fmt.Sprintf("it has an extra field %q", k.Fields[i].Name)
		case k.Fields[i].Name != want.Fields[i].Name:
			return fmt.Sprintf("its field %d is %q, wanted %q", i, k.Fields[i].Name, want.Fields[i].Name)
		case k.Fields[i].Value != want.Fields[i].Value:
			return fmt.Sprintf("its %s is %q, wanted %q", k.Fields[i].Name, k.Fields[i].Value, want.Fields[i].Value)
		}
	}
	return ""
}

// Meta is what an entry records besides its key and payload, for listings.
type Meta struct {
	Name           string  // program name
	CompileSeconds float64 // what compiling it cost
}

// Entry describes one entry file.
type Entry struct {
	ID             string
	Path           string
	Bytes          int64 // the file's size
	PayloadBytes   int64
	Created        time.Time
	LastUsed       time.Time // the file's modification time: Put and every hit set it
	Name           string
	CompileSeconds float64
	Key            Key
	// Problem is non-empty for an entry that is unreadable or fails its checks (List only;
	// then the fields from the header are zero).
	Problem string
}

// Stats sums the entries' files.
type Stats struct {
	Entries int
	Bytes   int64
}

// entrySuffix ends every entry's file name.
const entrySuffix = ".xlaexe"

// Store is an open cache directory. It holds no state but its configuration: the directory is
// the state, shared with other processes.
type Store struct {
	dir      string
	maxBytes int64
	log      *slog.Logger
}

// Open validates cfg and creates the directory if needed. Dir "" (the cache off) is an error:
// check for it first. A nil log discards the warnings.
func Open(cfg Config, log *slog.Logger) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Dir == "" {
		return nil, errors.New("compilecache.Config.Dir is empty: the cache is off, there is nothing to open")
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("compilecache.Config.Dir %q: %w", cfg.Dir, err)
	}
	if err := atomicfile.MkdirAll(dir); err != nil {
		return nil, fmt.Errorf("creating the compilation cache directory (compilecache.Config.Dir): %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	maxBytes := cfg.MaxBytes
	if maxBytes == 0 {
		maxBytes = DefaultMaxBytes
	}
	return &Store{dir: dir, maxBytes: maxBytes, log: log}, nil
}

// Dir returns the absolute cache directory.
func (s *Store) Dir() string { return s.dir }

// MaxBytes returns the size limit in force.
func (s *Store) MaxBytes() int64 { return s.maxBytes }

func (s *Store) path(id string) string { return filepath.Join(s.dir, id+entrySuffix) }

// readLimit bounds what Get reads: no valid entry is larger than the limit, but one written by a
// process with a larger limit may be a little larger; the header's bound is the slack.
func (s *Store) readLimit() int64 { return s.maxBytes + maxHeaderBytes + overheadLen }

// Get returns the payload stored under k. A missing entry is a plain miss; an entry with any
// problem (see the package comment) is a miss with a warning naming the file and the problem, and
// is never returned. A hit sets the file's modification time, the eviction's clock.
func (s *Store) Get(k Key) (payload []byte, e Entry, ok bool) {
	p := s.path(k.ID())
	h, payload, size, err := s.read(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, Entry{}, false
	}
	if err == nil {
		if d := (Key{h.Key}).diff(k); d != "" {
			err = fmt.Errorf("it holds another key (%s): an entry of another plugin, device set or program under this key's name", d)
		}
	}
	if err != nil {
		s.log.Warn("compilation cache entry ignored, will recompile", "file", p, "problem", err.Error())
		return nil, Entry{}, false
	}
	now := time.Now()
	// Failing to bump the clock only makes eviction less fair (a read-only directory, or the
	// entry removed meanwhile); the payload is good.
	if err := os.Chtimes(p, now, now); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log.Warn("compilation cache: cannot mark the entry used", "file", p, "err", err.Error())
	}
	return payload, entryOf(k.ID(), p, size, now, h), true
}

// read opens and checks the entry at p. The size checked is the opened file's (fstat), so a
// rename over p meanwhile is harmless: the open file is one version to its end.
func (s *Store) read(p string) (header, []byte, int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return header{}, nil, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return header{}, nil, 0, err
	}
	if !fi.Mode().IsRegular() {
		return header{}, nil, 0, fmt.Errorf("not a regular file (%s)", fi.Mode())
	}
	if fi.Size() > s.readLimit() {
		return header{}, nil, fi.Size(), fmt.Errorf("%d bytes, more than the cache's limit of %d", fi.Size(), s.maxBytes)
	}
	h, payload, err := readEntry(f, fi.Size(), true)
	return h, payload, fi.Size(), err
}

func entryOf(id, p string, size int64, lastUsed time.Time, h header) Entry {
	return Entry{
		ID: id, Path: p, Bytes: size, PayloadBytes: h.PayloadBytes,
		Created: h.Created, LastUsed: lastUsed,
		Name: h.Name, CompileSeconds: h.CompileSeconds,
		Key: Key{h.Key},
	}
}

// Put stores payload under k, replacing any entry there, then evicts least recently used entries
// until the entries fit MaxBytes (never this one) and returns how many it removed. A payload
// whose entry alone exceeds MaxBytes is not stored: that is an error. Problems evicting are
// logged, not returned: the entry is stored.
func (s *Store) Put(k Key, payload []byte, m Meta) (evicted int, err error) {
	if err := k.validate(); err != nil {
		return 0, fmt.Errorf("compilation cache: %w", err)
	}
	now := time.Now()
	hdr, err := encodeHeader(k, payload, m, now)
	if err != nil {
		return 0, fmt.Errorf("compilation cache: %w", err)
	}
	if size := entrySize(hdr, payload); size > s.maxBytes {
		return 0, fmt.Errorf("compilation cache: the entry for %q would be %d bytes, more than the cache's limit of %d bytes: not stored (raise the limit to cache it)",
			m.Name, size, s.maxBytes)
	}
	p := s.path(k.ID())
	if err := atomicfile.WriteFile(p, func(w io.Writer) error { return writeEntry(w, hdr, payload) }); err != nil {
		return 0, fmt.Errorf("compilation cache: writing %s: %w", p, err)
	}
	// The rename may keep the temporary file's times, whose clock is the file system's (coarse
	// on some); setting them exactly orders entries put in quick succession.
	if err := os.Chtimes(p, now, now); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log.Warn("compilation cache: cannot mark the entry used", "file", p, "err", err.Error())
	}
	return s.evict(p), nil
}
