package checkpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/gotpu/gotpu/internal/safetensors"
)

// Checkpoint is a committed checkpoint whose files were all verified against its manifest.
type Checkpoint struct {
	Dir      string
	Manifest *Manifest
}

// Open verifies the committed checkpoint dir before anything is used from it: the commit
// marker matches the manifest; every file listed exists, is a regular file of the listed size and
// SHA-256; no file is listed that is not there; every *.safetensors file passes the strict
// safetensors reader; and each name in require is present. Errors name the file.
func Open(dir string, require ...string) (*Checkpoint, error) {
	m, err := readCommitted(dir)
	if err != nil {
		return nil, err
	}
	if err := verifyFiles(dir, m); err != nil {
		return nil, err
	}
	for _, r := range require {
		if _, ok := m.Lookup(r); !ok {
			return nil, fmt.Errorf("%w: %s: %s is missing", ErrCorrupt, dir, r)
		}
	}
	for _, f := range m.Files {
		if !strings.HasSuffix(f.Name, ".safetensors") {
			continue
		}
		sf, err := safetensors.Open(filepath.Join(dir, f.Name))
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		sf.Close()
	}
	return &Checkpoint{Dir: dir, Manifest: m}, nil
}

// verifyDir checks a directory's marker, manifest and checksums (Cleanup's roll-forward test).
func verifyDir(dir string) error {
	m, err := readCommitted(dir)
	if err != nil {
		return err
	}
	return verifyFiles(dir, m)
}

func verifyFiles(dir string, m *Manifest) error {
	for _, f := range m.Files {
		if err := verifyFile(filepath.Join(dir, f.Name), f); err != nil {
			return err
		}
	}
	return nil
}

func verifyFile(path string, e FileEntry) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%w: %s: not a regular file", ErrCorrupt, path)
	}
	if st.Size() != e.Size {
		return fmt.Errorf("%w: %s: %d bytes, the manifest says %d (truncated or overwritten)", ErrCorrupt, path, st.Size(), e.Size)
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrCorrupt, path, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != e.SHA256 {
		return fmt.Errorf("%w: %s: SHA-256 %s, the manifest says %s", ErrCorrupt, path, got, e.SHA256)
	}
	return nil
}

// Path is the path of a file of the checkpoint (name must be listed in the manifest).
func (c *Checkpoint) Path(name string) (string, error) {
	if _, ok := c.Manifest.Lookup(name); !ok {
		return "", fmt.Errorf("%w: %s: %s is not in the checkpoint", ErrCorrupt, c.Dir, name)
	}
	return filepath.Join(c.Dir, name), nil
}

// Has reports whether the checkpoint lists name.
func (c *Checkpoint) Has(name string) bool { _, ok := c.Manifest.Lookup(name); return ok }

// ReadFile reads a listed file and checks it again against the manifest (it may have changed
// since Open).
func (c *Checkpoint) ReadFile(name string) ([]byte, error) {
	e, ok := c.Manifest.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("%w: %s: %s is not in the checkpoint", ErrCorrupt, c.Dir, name)
	}
	path := filepath.Join(c.Dir, name)
	b, err := readCapped(path, e.Size)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	sum := sha256.Sum256(b)
	if int64(len(b)) != e.Size || hex.EncodeToString(sum[:]) != e.SHA256 {
		return nil, fmt.Errorf("%w: %s: changed since it was verified", ErrCorrupt, path)
	}
	return b, nil
}

// IsCommitted reports whether dir holds a committed checkpoint (marker and manifest agree; the
// files are not read).
func IsCommitted(dir string) bool {
	_, err := readCommitted(dir)
	return err == nil
}
