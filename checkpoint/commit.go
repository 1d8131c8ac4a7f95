package checkpoint

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"

	"github.com/gotpu/gotpu/internal/atomicfile"
)

// File is one file of a snapshot, staged in host memory: Data, or WriteTo, which must write only
// host memory captured when the snapshot was taken (it runs later, on the writer goroutine, while
// training mutates the device buffers).
type File struct {
	Name    string
	Data    []byte
	WriteTo func(w io.Writer) error
}

// Snapshot is everything one save writes.
type Snapshot struct {
	// Step is the global step; the checkpoint is output_dir/checkpoint-<Step>.
	Step  int
	Files []File
	// Keep names checkpoint directories (paths or base names) that retention must not delete:
	// the best checkpoint under load_best_model_at_end.
	Keep []string
}

// DirName is the directory name of the checkpoint of step.
func DirName(step int) string { return fmt.Sprintf("checkpoint-%d", step) }

// Commit writes snap into outputDir/checkpoint-<Step> atomically: everything goes into
// checkpoint-<Step>.tmp-<id>/, each file is fsynced, then the manifest, then the commit marker
// (last), then the directory; the directory is renamed to its final name and the parent fsynced.
// An existing checkpoint of the same step stays in place until the new one is committed. On
// error nothing is left behind. It returns the committed directory.
func Commit(outputDir string, snap Snapshot) (dir string, err error) {
	if err := validateSnapshot(snap); err != nil {
		return "", err
	}
	if err := atomicfile.MkdirAll(outputDir); err != nil {
		return "", fmt.Errorf("checkpoint: %w", err)
	}
	id, err := randomID()
	if err != nil {
		return "", err
	}
	final := filepath.Join(outputDir, DirName(snap.Step))
	tmp := final + ".tmp-" + id
	if err := atomicfile.Mkdir(tmp); err != nil {
		return "", fmt.Errorf("checkpoint: %w", err)
	}
	defer func() {
		if err != nil {
			if rerr := os.RemoveAll(tmp); rerr != nil {
				err = errors.Join(err, fmt.Errorf("checkpoint: removing %s: %w", tmp, rerr))
			}
		}
	}()
	m := Manifest{Format: Format, Version: Version, Step: snap.Step}
	for _, f := range snap.Files {
		e, err := writeFile(filepath.Join(tmp, f.Name), f)
		if err != nil {
			return "", err
		}
		m.Files = append(m.Files, e)
	}
	return finishCommit(tmp, final, id, m)
}

// finishCommit commits a staged directory whose files (listed in m) are durable: it writes and
// fsyncs the manifest, fsyncs the directory, writes the commit marker, fsyncs again and installs
// the directory under its final name.
func finishCommit(tmp, final, id string, m Manifest) (string, error) {
	mb, err := m.Marshal()
	if err != nil {
		return "", err
	}
	if _, err := writeFile(filepath.Join(tmp, ManifestFile), File{Data: mb}); err != nil {
		return "", err
	}
	if err := syncDir(tmp); err != nil {
		return "", err
	}
	// The marker is the commit point: it exists only once every byte above is durable.
	if _, err := writeFile(filepath.Join(tmp, CommitFile), File{Data: commitMarker(mb)}); err != nil {
		return "", err
	}
	if err := syncDir(tmp); err != nil {
		return "", err
	}
	if err := install(tmp, final, id); err != nil {
		return "", err
	}
	return final, nil
}

// install renames a committed tmp directory to final. A previous final directory is moved aside
// first and removed only after the new one is in place; Cleanup resolves a crash in between
// (the committed tmp rolls forward, the old one is removed).
func install(tmp, final, id string) error {
	parent := filepath.Dir(final)
	old := ""
	if _, err := os.Lstat(final); err == nil {
		old = final + ".old-" + id
		if err := os.Rename(final, old); err != nil {
			return fmt.Errorf("checkpoint: moving the previous %s aside: %w", final, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := os.Rename(tmp, final); err != nil {
		if old != "" {
			// Best effort: the old checkpoint stays the committed one.
			if os.Rename(old, final) == nil {
				_ = syncDir(parent)
			}
		}
		return fmt.Errorf("checkpoint: committing %s: %w", final, err)
	}
	if err := syncDir(parent); err != nil {
		return err
	}
	if old != "" {
		if err := os.RemoveAll(old); err != nil {
			return fmt.Errorf("checkpoint: removing the replaced %s: %w", old, err)
		}
	}
	return nil
}

// writeFile creates path, writes f through a SHA-256, fsyncs and closes it.
func writeFile(path string, f File) (e FileEntry, err error) {
	out, err := atomicfile.Create(path)
	if err != nil {
		return FileEntry{}, fmt.Errorf("checkpoint: %w", err)
	}
	defer func() {
		if cerr := out.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("checkpoint: closing %s: %w", path, cerr)
		}
	}()
	cw := &hashWriter{w: out, h: sha256.New()}
	defer cw.wait()
	bw := bufio.NewWriterSize(cw, hashChunk)
	if f.WriteTo != nil {
		err = f.WriteTo(bw)
	} else {
		_, err = bw.Write(f.Data)
	}
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		return FileEntry{}, fmt.Errorf("checkpoint: writing %s: %w", filepath.Base(path), err)
	}
	if err := out.Sync(); err != nil {
		return FileEntry{}, fmt.Errorf("checkpoint: fsync %s: %w", path, err)
	}
	return FileEntry{Name: filepath.Base(path), Size: cw.n, SHA256: hex.EncodeToString(cw.sum())}, nil
}

// hashChunk is the unit hashWriter hashes while the previous one is written.
const hashChunk = 4 << 20

// hashWriter writes to w and hashes what it wrote, the SHA-256 of each chunk running on a
// goroutine while the chunk is written to the file, so a save costs about max(hash, write)
// rather than their sum. The goroutine is always waited for (wait) before Write returns the
// next chunk's turn, before the sum is read, and on every error path.
type hashWriter struct {
	w    io.Writer
	h    hash.Hash
	n    int64
	buf  []byte
	done chan struct{} // closed when the in-flight hash ends; nil when none is in flight
}

func (c *hashWriter) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), hashChunk)]
		c.wait()
		c.buf = append(c.buf[:0], chunk...)
		c.done = make(chan struct{})
		go func(b []byte, done chan struct{}) {
			c.h.Write(b)
			close(done)
		}(c.buf, c.done)
		n, err := c.w.Write(chunk)
		written += n
		c.n += int64(n)
		if err != nil {
			c.wait()
			return written, err
		}
		p = p[len(chunk):]
	}
	return written, nil
}

// wait blocks until no hash is in flight.
func (c *hashWriter) wait() {
	if c.done != nil {
		<-c.done
		c.done = nil
	}
}

// sum is the SHA-256 of everything written.
func (c *hashWriter) sum() []byte {
	c.wait()
	return c.h.Sum(nil)
}

// syncDir fsyncs a directory so the entries created or renamed in it are durable.
func syncDir(dir string) error {
	if err := atomicfile.SyncDir(dir); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

func randomID() (string, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("checkpoint: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}
