package tensorboard

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/gotpu/gotpu/internal/atomicfile"
)

// FileVersion is the file_version of the first event of every event file.
const FileVersion = "brain.Event:2"

// ErrClosed is returned by a Writer's methods after Close.
var ErrClosed = errors.New("tensorboard: writer is closed")

// Writer appends events to one new event file. Create it with NewWriter; call Close when done.
type Writer struct {
	mu     sync.Mutex
	path   string
	f      *os.File
	bw     *bufio.Writer
	closed bool
	scr    []byte // scratch for encoding, reused between events
}

// NewWriter creates dir if needed and a new event file in it, named as SummaryWriter names its
// files (events.out.tfevents.<unix time>.<hostname>.<pid>.<n>, n chosen so the name is new),
// and writes the file_version event. The file is flushed, so TensorBoard can open it at once.
func NewWriter(dir string) (*Writer, error) {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return newWriter(dir, time.Now(), host, os.Getpid())
}

func newWriter(dir string, now time.Time, host string, pid int) (*Writer, error) {
	// The file policy of the rest of gotpu's output (internal/atomicfile): the umask decides.
	if err := atomicfile.MkdirAll(dir); err != nil {
		return nil, fmt.Errorf("tensorboard: creating log directory: %w", err)
	}
	var f *os.File
	for n := 0; f == nil; n++ {
		name := filepath.Join(dir, fmt.Sprintf("events.out.tfevents.%010d.%s.%d.%d", now.Unix(), host, pid, n))
		var err error
		f, err = atomicfile.Create(name)
		if err != nil && (!errors.Is(err, fs.ErrExist) || n >= 1000) {
			return nil, fmt.Errorf("tensorboard: creating event file: %w", err)
		}
	}
	w := &Writer{path: f.Name(), f: f, bw: bufio.NewWriter(f)}
	w.scr = appendEvent(w.scr[:0], wallSeconds(now), 0, FileVersion, nil)
	if err := w.writeRecord(); err != nil {
		f.Close()
		return nil, err
	}
	if err := w.flush(); err != nil {
		f.Close()
		return nil, err
	}
	return w, nil
}

// Path returns the event file's path.
func (w *Writer) Path() string { return w.path }

// AddScalars writes one event at step and wallTime holding a scalar summary value per entry of
// values, in tag order (as SummaryWriter.add_scalar, values are stored as float32). Nothing is
// written for an empty map.
func (w *Writer) AddScalars(step int64, wallTime time.Time, values map[string]float64) error {
	if len(values) == 0 {
		return w.check()
	}
	tags := make([]string, 0, len(values))
	for t := range values {
		tags = append(tags, t)
	}
	slices.Sort(tags)
	var summary []byte
	for _, t := range tags {
		summary = appendBytesField(summary, summaryValue, scalarValue(t, values[t]))
	}
	return w.addSummary(step, wallTime, summary)
}

// AddText writes a text summary as SummaryWriter.add_text does: tag "<tag>/text_summary", a
// one-element DT_STRING tensor, and the "text" plugin.
func (w *Writer) AddText(step int64, wallTime time.Time, tag, text string) error {
	return w.addSummary(step, wallTime, appendBytesField(nil, summaryValue, textValue(tag+"/text_summary", text)))
}

func (w *Writer) addSummary(step int64, wallTime time.Time, summary []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	w.scr = appendEvent(w.scr[:0], wallSeconds(wallTime), step, "", summary)
	return w.writeRecord()
}

func (w *Writer) check() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	return nil
}

// Flush writes buffered events to the file.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	return w.flush()
}

// Close flushes and closes the file. Later calls return nil.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	err := w.flush()
	if cerr := w.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("tensorboard: closing %s: %w", w.path, cerr)
	}
	return err
}

func (w *Writer) writeRecord() error {
	// Framing goes into a second scratch region after the event so one Write call suffices.
	n := len(w.scr)
	w.scr = appendRecord(w.scr, w.scr[:n])
	_, err := w.bw.Write(w.scr[n:])
	w.scr = w.scr[:n]
	if err != nil {
		return fmt.Errorf("tensorboard: writing %s: %w", w.path, err)
	}
	return nil
}

func (w *Writer) flush() error {
	if err := w.bw.Flush(); err != nil {
		return fmt.Errorf("tensorboard: writing %s: %w", w.path, err)
	}
	return nil
}

// wallSeconds is time.time() for t: seconds since the Unix epoch, as a double.
func wallSeconds(t time.Time) float64 {
	return float64(t.Unix()) + float64(t.Nanosecond())*1e-9
}

// appendEvent encodes a tensorflow.Event. Like Python's protobuf, fields holding proto3
// defaults (0, "") are left out; summary is an encoded Summary, or nil for none.
func appendEvent(b []byte, wallTime float64, step int64, fileVersion string, summary []byte) []byte {
	if wallTime != 0 || math.Signbit(wallTime) {
		b = appendDoubleField(b, eventWallTime, wallTime)
	}
	if step != 0 {
		b = appendVarintField(b, eventStep, uint64(step)) // negative int64: 10-byte two's complement
	}
	if fileVersion != "" {
		b = appendBytesField(b, eventFileVersion, []byte(fileVersion))
	}
	if summary != nil {
		b = appendBytesField(b, eventSummary, summary)
	}
	return b
}

// scalarValue encodes Summary.Value{tag, simple_value}. simple_value is a oneof member, so it
// is written even when 0.
func scalarValue(tag string, v float64) []byte {
	b := appendBytesField(nil, valueTag, []byte(tag))
	return appendFloatField(b, valueSimpleValue, float32(v))
}

// textValue encodes the Summary.Value torch.utils.tensorboard.summary.text builds. Fields are in
// field-number order, as Python's serializer writes them; TextPluginData{version: 0} serializes
// to nothing, so the plugin content is omitted.
func textValue(tag, text string) []byte {
	shape := appendBytesField(nil, shapeDim, appendVarintField(nil, dimSize, 1))
	tensor := appendVarintField(nil, tensorDtype, dtString)
	tensor = appendBytesField(tensor, tensorShape, shape)
	tensor = appendBytesField(tensor, tensorStringVal, []byte(text))
	meta := appendBytesField(nil, metadataPluginData, appendBytesField(nil, pluginName, []byte("text")))
	b := appendBytesField(nil, valueTag, []byte(tag))
	b = appendBytesField(b, valueTensor, tensor)
	return appendBytesField(b, valueMetadata, meta)
}
