package safetensors

import (
	"fmt"
	"io"
	"os"
)

// File is an open, validated safetensors file.
type File struct {
	path   string
	header *Header
	f      *os.File
	// mapped is the whole file when it is memory-mapped, nil when reads go through f.ReadAt.
	mapped []byte
	unmap  func([]byte) error
	data   int64 // offset of the data buffer in the file
}

// Open opens and validates path. Every error names path.
func Open(path string) (*File, error) { return open(path, true) }

// open is Open with the memory mapping optional, so tests exercise the positioned-read fallback.
func open(path string, tryMap bool) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err // *PathError already names the file.
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: %w: not a regular file", path, ErrInvalid)
	}
	size := st.Size()
	sf := &File{path: path, f: f}
	var prefix [8]byte
	if size >= 8 {
		if _, err := f.ReadAt(prefix[:], 0); err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	n, err := readHeaderLength(prefix[:], size)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if tryMap {
		if m, unmap, err := mapFile(f, size); err == nil {
			sf.mapped, sf.unmap = m, unmap
		}
	}
	js := make([]byte, n)
	if sf.mapped != nil {
		copy(js, sf.mapped[8:8+n])
	} else if _, err := f.ReadAt(js, 8); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	h, err := parseHeader(js, size-8-n)
	if err != nil {
		sf.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	sf.header = h
	sf.data = 8 + n
	return sf, nil
}

// Path is the file's path as given to Open.
func (f *File) Path() string { return f.path }

// Header returns the validated header.
func (f *File) Header() *Header { return f.header }

// Metadata returns the "__metadata__" object (nil when absent).
func (f *File) Metadata() map[string]string { return f.header.Metadata }

// Names lists the tensors in data-offset order.
func (f *File) Names() []string {
	names := make([]string, len(f.header.Tensors))
	for i, t := range f.header.Tensors {
		names[i] = t.Name
	}
	return names
}

// Info returns the description of tensor name.
func (f *File) Info(name string) (TensorInfo, bool) { return f.header.Lookup(name) }

// Mapped tells whether the file is memory-mapped (Bytes then copies nothing).
func (f *File) Mapped() bool { return f.mapped != nil }

// Bytes returns the raw little-endian bytes of tensor name. When the file is mapped the slice aliases
// the mapping: it is read-only and valid until Close. Otherwise it is a fresh slice read from disk.
func (f *File) Bytes(name string) ([]byte, error) {
	t, ok := f.header.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("%s: no tensor %q", f.path, name)
	}
	begin, end := f.data+t.Begin, f.data+t.End
	if f.mapped != nil {
		return f.mapped[begin:end:end], nil
	}
	buf := make([]byte, end-begin)
	if _, err := f.f.ReadAt(buf, begin); err != nil {
		if err == io.EOF {
			err = ErrTruncated
		}
		return nil, fmt.Errorf("%s: tensor %q: %w", f.path, name, err)
	}
	return buf, nil
}

// Close unmaps and closes the file. Slices returned by Bytes must not be used afterwards.
func (f *File) Close() error {
	var err error
	if f.mapped != nil {
		err = f.unmap(f.mapped)
		f.mapped = nil
	}
	if f.f != nil {
		if cerr := f.f.Close(); err == nil {
			err = cerr
		}
		f.f = nil
	}
	return err
}
