package table

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
)

// The IPC file format starts with "ARROW1" and two bytes of padding; the stream format (what
// datasets writes in its cache and in save_to_disk) starts with a message: the continuation
// marker 0xFFFFFFFF, or (before Arrow 0.15) directly a message length.
var ipcFileMagic = []byte("ARROW1")

// ipcFile is one Arrow file of a table: a .arrow file, or one shard of a save_to_disk dataset.
type ipcFile struct {
	path   string
	size   int64
	stream bool
	rows   int64
}

// ipcSource reads one or more Arrow IPC files in order, as one table.
type ipcSource struct{ files []ipcFile }

func openIPC(t *Table, size int64) error {
	f, sc, err := inspectIPC(t.path, size, t.opts)
	if err != nil {
		return err
	}
	t.cols = columnsOf(sc)
	t.nrows, t.known = f.rows, true
	t.src = batchScanner{ipcSource{files: []ipcFile{f}}}
	return nil
}

// inspectIPC verifies an Arrow file's metadata and counts its rows from the message headers
// (seeking past the bodies), then reads its schema with arrow-go.
func inspectIPC(path string, size int64, opts Options) (ipcFile, *arrow.Schema, error) {
	f, err := os.Open(path)
	if err != nil {
		return ipcFile{}, nil, fmt.Errorf("table: %w", err)
	}
	defer f.Close()
	head := make([]byte, 8)
	n, _ := io.ReadFull(f, head)
	info := ipcFile{path: path, size: size, stream: !bytes.HasPrefix(head[:n], ipcFileMagic)}
	if info.stream {
		info.rows, err = countStreamRows(f, size)
	} else {
		info.rows, err = countFileRows(f, size)
	}
	if err != nil {
		kind := "stream"
		if !info.stream {
			kind = "file"
		}
		return ipcFile{}, nil, fmt.Errorf("table: %s: not a valid Arrow IPC %s: %w", path, kind, err)
	}
	var sc *arrow.Schema
	if info.stream {
		r, err := newStreamReader(f, size, opts)
		if err != nil {
			return ipcFile{}, nil, fmt.Errorf("table: %s: Arrow IPC stream: %w (%w)", path, err, ErrCorrupt)
		}
		sc = r.Schema()
		r.Release()
	} else {
		r, err := newFileReader(f, size, opts)
		if err != nil {
			return ipcFile{}, nil, fmt.Errorf("table: %s: Arrow IPC file: %w (%w)", path, err, ErrCorrupt)
		}
		sc = r.Schema()
		r.Close()
	}
	return info, sc, nil
}

// ipcLimits bounds what an IPC message may claim: no body larger than the file.
func ipcOptions(size int64, opts Options) []ipc.Option {
	return []ipc.Option{
		ipc.WithAllocator(newCappedAllocator(allocLimit(opts, size))),
		ipc.WithMetadataSizeLimit(min(size, maxIPCMetadata)),
		ipc.WithBodySizeLimit(size),
	}
}

func newStreamReader(f *os.File, size int64, opts Options) (*ipc.Reader, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	return ipc.NewReader(bufio.NewReaderSize(f, int(min(1<<16, max(size, 16)))), ipcOptions(size, opts)...)
}

func newFileReader(f *os.File, size int64, opts Options) (*ipc.FileReader, error) {
	return ipc.NewFileReader(f, ipcOptions(size, opts)...)
}

// batches implements batchSource: every record batch of every file, in order.
func (s ipcSource) batches(ctx context.Context, t *Table, names []string, fn batchFn) error {
	var base int64
	for _, info := range s.files {
		n, err := scanIPCFile(ctx, t, info, base, fn)
		if err != nil {
			return err
		}
		if n != info.rows {
			return fmt.Errorf("table: %s: read %d rows where the message headers count %d: %w", info.path, n, info.rows, ErrCorrupt)
		}
		base += n
	}
	return nil
}

func scanIPCFile(ctx context.Context, t *Table, info ipcFile, base int64, fn batchFn) (rows int64, err error) {
	defer recoverAt(info.path, &err)
	f, err := os.Open(info.path)
	if err != nil {
		return 0, fmt.Errorf("table: %w", err)
	}
	defer f.Close()
	each := func(rec arrow.RecordBatch) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(info.path, base+rows, rec); err != nil {
			return err
		}
		rows += rec.NumRows()
		return nil
	}
	if info.stream {
		r, err := newStreamReader(f, info.size, t.opts)
		if err != nil {
			return 0, fmt.Errorf("table: %s: %w (%w)", info.path, err, ErrCorrupt)
		}
		defer r.Release()
		for r.Next() {
			if err := each(r.RecordBatch()); err != nil {
				return rows, err
			}
		}
		if err := r.Err(); err != nil {
			return rows, fmt.Errorf("table: %s: after row %d: %w (%w)", info.path, base+rows, err, ErrCorrupt)
		}
		return rows, nil
	}
	r, err := newFileReader(f, info.size, t.opts)
	if err != nil {
		return 0, fmt.Errorf("table: %s: %w (%w)", info.path, err, ErrCorrupt)
	}
	defer r.Close()
	for i := 0; i < r.NumRecords(); i++ {
		rec, err := r.RecordBatchAt(i)
		if err != nil {
			return rows, fmt.Errorf("table: %s: record batch %d: %w (%w)", info.path, i, err, ErrCorrupt)
		}
		err = each(rec)
		rec.Release()
		if err != nil {
			return rows, err
		}
	}
	return rows, nil
}
