package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

const (
	// ManifestFile lists every other file of a checkpoint with its size and SHA-256.
	ManifestFile = "gotpu_manifest.json"
	// CommitFile is written last, after everything else is on disk; it holds the manifest's
	// SHA-256, so a manifest from another save can never pass as this one's.
	CommitFile = "gotpu_commit"
	// Format and Version identify the manifest format.
	Format  = "gotpu-checkpoint"
	Version = 1
	// MaxManifestSize caps what is read of a manifest: a corrupted length must not make a
	// reader allocate gigabytes.
	MaxManifestSize = 16 << 20
	// maxFiles caps the file list for the same reason.
	maxFiles = 100_000
)

// Errors wrapped by what this package returns.
var (
	// ErrCorrupt: a checkpoint's files do not match its manifest, or a file is malformed.
	ErrCorrupt = errors.New("corrupt checkpoint")
	// ErrNotCommitted: the directory has no valid commit marker (a crashed or foreign save).
	ErrNotCommitted = errors.New("checkpoint not committed")
	// ErrNoCheckpoint: no committed checkpoint exists where one was asked for.
	ErrNoCheckpoint = errors.New("no committed checkpoint")
	// ErrWriterHeld: another process of this host is already the writer of the directory.
	ErrWriterHeld = errors.New("checkpoint: another process on this host is the writer of this output directory")
	// ErrHostsMissing: in a multi-host save, some hosts did not deliver their part in time.
	ErrHostsMissing = errors.New("checkpoint: hosts missing")
)

// Manifest describes a committed checkpoint.
type Manifest struct {
	Format  string      `json:"format"`
	Version int         `json:"version"`
	Step    int         `json:"step"`
	Files   []FileEntry `json:"files"`
}

// FileEntry is one file of a checkpoint.
type FileEntry struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// Host is the host that wrote the file in a multi-host save (0, omitted: the primary).
	Host int `json:"host,omitempty"`
}

// Lookup returns the entry of name.
func (m *Manifest) Lookup(name string) (FileEntry, bool) {
	for _, f := range m.Files {
		if f.Name == name {
			return f, true
		}
	}
	return FileEntry{}, false
}

// Marshal encodes the manifest (indented, newline-terminated), after validating it.
func (m *Manifest) Marshal() ([]byte, error) {
	if err := m.validate(); err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// ParseManifest decodes and validates a manifest strictly: no unknown fields, no null, no
// trailing data, known format and version, valid file names (never a path), no duplicates,
// well-formed sizes and checksums.
func ParseManifest(b []byte) (*Manifest, error) {
	if len(b) > MaxManifestSize {
		return nil, fmt.Errorf("%w: %s: %d bytes exceeds the %d byte limit", ErrCorrupt, ManifestFile, len(b), MaxManifestSize)
	}
	if !utf8.Valid(b) {
		return nil, fmt.Errorf("%w: %s: not valid UTF-8", ErrCorrupt, ManifestFile)
	}
	trimmed := bytes.TrimSpace(b)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, fmt.Errorf("%w: %s: not a JSON object", ErrCorrupt, ManifestFile)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, ManifestFile, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: %s: trailing data after the JSON object", ErrCorrupt, ManifestFile)
	}
	if err := m.validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

func (m *Manifest) validate() error {
	switch {
	case m.Format != Format:
		return fmt.Errorf("%w: %s: format %q, want %q", ErrCorrupt, ManifestFile, m.Format, Format)
	case m.Version != Version:
		return fmt.Errorf("%w: %s: version %d is not supported (want %d)", ErrCorrupt, ManifestFile, m.Version, Version)
	case m.Step < 0:
		return fmt.Errorf("%w: %s: negative step %d", ErrCorrupt, ManifestFile, m.Step)
	case len(m.Files) > maxFiles:
		return fmt.Errorf("%w: %s: %d files exceeds the limit of %d", ErrCorrupt, ManifestFile, len(m.Files), maxFiles)
	}
	seen := make(map[string]bool, len(m.Files))
	for i, f := range m.Files {
		if err := ValidateName(f.Name); err != nil {
			return fmt.Errorf("%w: %s: files[%d]: %v", ErrCorrupt, ManifestFile, i, err)
		}
		if seen[f.Name] {
			return fmt.Errorf("%w: %s: files[%d]: duplicate name %q", ErrCorrupt, ManifestFile, i, f.Name)
		}
		seen[f.Name] = true
		if f.Host < 0 {
			return fmt.Errorf("%w: %s: %s: negative host %d", ErrCorrupt, ManifestFile, f.Name, f.Host)
		}
		if f.Size < 0 {
			return fmt.Errorf("%w: %s: %s: negative size %d", ErrCorrupt, ManifestFile, f.Name, f.Size)
		}
		if d, err := hex.DecodeString(f.SHA256); err != nil || len(d) != sha256.Size || strings.ToLower(f.SHA256) != f.SHA256 {
			return fmt.Errorf("%w: %s: %s: sha256 %q is not 64 lowercase hex digits", ErrCorrupt, ManifestFile, f.Name, f.SHA256)
		}
	}
	return nil
}

// ValidateName accepts a plain file name: non-empty valid UTF-8 without path separators, NUL or
// control characters, not "." or "..", and not one of the package's own files. A name read from
// a file is never trusted as a path.
func ValidateName(name string) error {
	switch {
	case name == "":
		return errors.New("empty file name")
	case len(name) > 255:
		return fmt.Errorf("file name of %d bytes is too long", len(name))
	case !utf8.ValidString(name):
		return fmt.Errorf("file name %q is not valid UTF-8", name)
	case name == "." || name == "..":
		return fmt.Errorf("file name %q is not a file", name)
	case strings.ContainsAny(name, "/\\:"):
		return fmt.Errorf("file name %q contains a path separator", name)
	case name == ManifestFile || name == CommitFile || strings.HasPrefix(name, partPrefix):
		return fmt.Errorf("file name %q is reserved", name)
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("file name %q contains a control character", name)
		}
	}
	return nil
}

// commitMarker is the content of CommitFile for a manifest.
func commitMarker(manifest []byte) []byte {
	sum := sha256.Sum256(manifest)
	return []byte(Format + " commit v1 sha256:" + hex.EncodeToString(sum[:]) + "\n")
}
