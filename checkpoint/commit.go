package checkpoint

import (
	"bufio"
	"context"
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

// File is one file of a snapshot: Data, or WriteTo. Unless Live, WriteTo must write only host
// memory captured when the snapshot was taken (it runs later, on the writer goroutine, while
// training mutates the device buffers).
type File struct {
	Name    string
	Data    []byte
	WriteTo func(w io.Writer) error
	// Live marks a WriteTo that reads state the caller changes once Save returns (device
	// buffers the next training step donates; see SafetensorsFile): a Writer writes every Live
	// file of a snapshot first and Save returns only once their WriteTo have run (see the
	// package documentation, Concurrency).
	Live bool

	// writeCtx, when set, is WriteTo taking the save's context and write buffers
	// (SafetensorsFile).
	writeCtx func(ctx context.Context, w io.Writer, bufs *writeBuffers) error
}

// live tells whether snap holds a Live file.
func (snap Snapshot) live() bool {
	for _, f := range snap.Files {
		if f.Live {
			return true
		}
	}
	return false
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
	return commit(outputDir, snap, nil)
}

// commit is Commit, staging the Live files with st (see writeFiles).
func commit(outputDir string, snap Snapshot, st *stager) (dir string, err error) {
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
	files, err := writeFiles(tmp, snap.Files, st)
	if err != nil {
		return "", err
	}
	return finishCommit(tmp, final, id, Manifest{Format: Format, Version: Version, Step: snap.Step, Files: files})
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

// stager is how a Writer's save stages its Live files: with the Save's context, and telling
// Save when they are written.
type stager struct {
	ctx context.Context
	// staged is called once every Live file's WriteTo has returned without error.
	staged func()
}

// writeFiles writes files into dir and returns their manifest entries, in the order of files.
// The Live files are written first (with st.ctx); st.staged is called once their bytes are
// written (every WriteTo has returned) and before any of them is fsynced, so a Save waiting for
// it is held for the staging only. Then the Live files are fsynced and the others written. On
// error every file is closed and st.staged not called; the caller removes dir. st may be nil
// (context.Background(), no call). The files share one set of write buffers (writeBuffers).
func writeFiles(dir string, files []File, st *stager) ([]FileEntry, error) {
	var bufs writeBuffers
	ctx := context.Background()
	if st != nil {
		ctx = st.ctx
	}
	entries := make([]FileEntry, len(files))
	var open []*openFile
	defer func() {
		for _, o := range open {
			o.abort()
		}
	}()
	for _, f := range files {
		if !f.Live {
			continue
		}
		o, err := startFile(ctx, filepath.Join(dir, f.Name), f, &bufs)
		if err != nil {
			return nil, err
		}
		open = append(open, o)
	}
	if st != nil && st.staged != nil {
		st.staged()
	}
	i := 0
	for k, f := range files {
		var err error
		if f.Live {
			entries[k], err = open[i].finish()
			open[i] = nil
			i++
		} else {
			entries[k], err = writeFileBuffered(filepath.Join(dir, f.Name), f, &bufs)
		}
		if err != nil {
			return nil, err
		}
	}
	if len(entries) == 0 {
		return nil, nil // a manifest of no files lists "files": null, as it always did
	}
	return entries, nil
}

// writeFile creates path, writes f through a SHA-256, fsyncs and closes it.
func writeFile(path string, f File) (FileEntry, error) {
	return writeFileBuffered(path, f, &writeBuffers{})
}

// writeFileBuffered is writeFile with the given buffers.
func writeFileBuffered(path string, f File, bufs *writeBuffers) (FileEntry, error) {
	o, err := startFile(context.Background(), path, f, bufs)
	if err != nil {
		return FileEntry{}, err
	}
	return o.finish()
}

// openFile is a file whose bytes are written but not yet fsynced.
type openFile struct {
	path string
	out  *os.File
	cw   *hashWriter
}

// writeBuffers are the host memory a file's write takes beyond its data: the buffer WriteTo
// writes into and the copy of the chunk being hashed (hashChunk each, allocated on first use),
// and the staging buffer of SafetensorsFile (the largest tensor). The files of one save share
// them, so a save allocates each once.
type writeBuffers struct {
	bw    *bufio.Writer
	hash  []byte
	stage []byte
}

// startFile creates path and writes f through a SHA-256, with bufs; on error the file is closed.
// Data is written without the write buffer (it is one Write). When it returns, bufs are free
// for the next file.
func startFile(ctx context.Context, path string, f File, bufs *writeBuffers) (_ *openFile, err error) {
	out, err := atomicfile.Create(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	o := &openFile{path: path, out: out, cw: &hashWriter{w: out, h: sha256.New(), buf: bufs.hash}}
	defer func() {
		// The last chunk's hash ends before the buffer goes to the next file.
		o.cw.wait()
		bufs.hash, o.cw.buf = o.cw.buf, nil
	}()
	if f.writeCtx == nil && f.WriteTo == nil {
		_, err = o.cw.Write(f.Data)
	} else {
		if bufs.bw == nil {
			bufs.bw = bufio.NewWriterSize(o.cw, hashChunk)
		} else {
			bufs.bw.Reset(o.cw)
		}
		if f.writeCtx != nil {
			err = f.writeCtx(ctx, bufs.bw, bufs)
		} else {
			err = f.WriteTo(bufs.bw)
		}
		if err == nil {
			err = bufs.bw.Flush()
		}
	}
	if err != nil {
		o.abort()
		return nil, fmt.Errorf("checkpoint: writing %s: %w", filepath.Base(path), err)
	}
	return o, nil
}

// finish fsyncs and closes the file and returns its manifest entry.
func (o *openFile) finish() (e FileEntry, err error) {
	defer func() {
		if cerr := o.out.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("checkpoint: closing %s: %w", o.path, cerr)
		}
	}()
	sum := o.cw.sum()
	if err := o.out.Sync(); err != nil {
		return FileEntry{}, fmt.Errorf("checkpoint: fsync %s: %w", o.path, err)
	}
	return FileEntry{Name: filepath.Base(o.path), Size: o.cw.n, SHA256: hex.EncodeToString(sum)}, nil
}

// abort closes a file that will not be committed (nil does nothing).
func (o *openFile) abort() {
	if o != nil {
		o.cw.wait()
		o.out.Close()
	}
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
