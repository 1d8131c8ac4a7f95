// Package atomicfile is gotpu's one policy for the files it leaves behind — final model
// directories (models.Model.Save), checkpoints (package checkpoint) and trainer_state.json — so
// that they all get the same modes and the same durability.
//
// # Modes
//
// Files are created with mode FileMode (0666) and directories with DirMode (0777), and the
// process's umask takes bits away, as with any Unix tool and as Python's open() and os.makedirs
// do for save_pretrained and HF's Trainer: umask 022 gives 0644 files in 0755 directories, umask
// 077 gives 0600 in 0700. Nothing is chmod-ed afterwards, and there is no separate mode setting:
// the umask of the process (or of the service's account) is the one knob, so a model and the
// checkpoints it came from are readable by the same people.
//
// # Durability
//
// WriteFile writes under a temporary name in the destination's directory, fsyncs the file,
// closes it, renames it over the destination and fsyncs the directory: a crash leaves either the
// old content or the new, never a prefix, and once WriteFile returns nil the new name survives a
// power loss. Rename does the same for a file or directory that is already durable (fsynced by
// its writer): the rename, then the directory. On error, WriteFile removes its temporary file.
package atomicfile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
)

const (
	// FileMode is the mode files are created with, before the umask.
	FileMode fs.FileMode = 0o666
	// DirMode is the mode directories are created with, before the umask.
	DirMode fs.FileMode = 0o777
)

// MkdirAll creates dir and its missing parents with DirMode.
func MkdirAll(dir string) error { return os.MkdirAll(dir, DirMode) }

// Mkdir creates dir with DirMode; it fails if dir exists.
func Mkdir(dir string) error { return os.Mkdir(dir, DirMode) }

// Create creates path for writing with FileMode; it fails if path exists (O_EXCL), so a name
// chosen to be fresh is never a file or symlink someone else put there.
func Create(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, FileMode)
}

// WriteFile atomically replaces path with what write writes (see the package comment). write
// gets a plain *os.File; buffer inside it if it writes in small pieces.
func WriteFile(path string, write func(w io.Writer) error) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, tmp, err := createTemp(dir, base)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close() // a second Close after a failed one only returns os.ErrClosed
			os.Remove(tmp)
		}
	}()
	if err := write(f); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	// The data must be on disk before the name points at it, or a crash after the rename could
	// leave the final name on an empty or partial file.
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", tmp, err)
	}
	return Rename(tmp, path)
}

// WriteFileBytes is WriteFile for data held in memory.
func WriteFileBytes(path string, data []byte) error {
	return WriteFile(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// createTemp creates a fresh file next to base in dir with FileMode. os.CreateTemp is not used:
// it creates 0600 whatever the umask, which is what made temporary-then-renamed files differ
// from the others.
func createTemp(dir, base string) (*os.File, string, error) {
	for range 100 {
		var b [6]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, "", err
		}
		name := filepath.Join(dir, "."+base+".tmp-"+hex.EncodeToString(b[:]))
		f, err := Create(name)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, "", err
		}
		return f, name, nil
	}
	return nil, "", fmt.Errorf("creating a temporary file for %s in %s: too many collisions", base, dir)
}

// Rename renames from to to and fsyncs to's directory (and from's, when it differs, so the old
// name's removal is durable too). from must already be durable: its writer fsynced it.
func Rename(from, to string) error {
	if err := os.Rename(from, to); err != nil {
		return err
	}
	if err := SyncDir(filepath.Dir(to)); err != nil {
		return err
	}
	if d := filepath.Dir(from); d != filepath.Dir(to) {
		return SyncDir(d)
	}
	return nil
}

// SyncDir fsyncs a directory, making the entries created, renamed or removed in it durable.
// On Windows it does nothing: directories cannot be flushed there (FlushFileBuffers refuses a
// directory handle), and NTFS journals the rename itself.
func SyncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}
