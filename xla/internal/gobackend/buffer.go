package gobackend

import (
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// buffer is what the backend hands out: simplego storage placed on one of the backend's virtual
// devices. Virtual devices share the host's memory, so a buffer is a device number plus a
// reference to storage; an SPMD execution hands the same storage to every replica whose output
// is the same by construction (see spmd.go), and several buffers may then reference it.
type buffer struct {
	st  *storage
	dev backends.DeviceNum
	// bytes is the storage's size, counted in the device's live bytes (Backend.DeviceBytes) from
	// the buffer's creation until it is finalized or donated.
	bytes int64
	// gone is set when the buffer is finalized or donated: a second finalize is a no-op, and
	// any other use is an error rather than a use after free.
	gone atomic.Bool
}

// storage is one simplego buffer with the number of gotpu buffers (and executions) that reference it.
type storage struct {
	sg   backends.Buffer
	refs atomic.Int32
}

func newStorage(sg backends.Buffer) *storage {
	st := &storage{sg: sg}
	st.refs.Store(1)
	return st
}

// retain adds a reference.
func (st *storage) retain() *storage {
	st.refs.Add(1)
	return st
}

// release drops a reference, freeing the simplego buffer (into its pool) with the last one.
func (b *Backend) release(st *storage) error {
	if st.refs.Add(-1) == 0 {
		return b.sg.BufferFinalize(st.sg)
	}
	return nil
}

// shared reports whether other buffers or executions reference the storage too.
func (st *storage) shared() bool { return st.refs.Load() > 1 }

var errNotOurs = errors.New("not a buffer of the gotpu backend")

// unwrap returns the live gotpu buffer behind a backends.Buffer.
func unwrap(buf backends.Buffer) (*buffer, error) {
	b, ok := buf.(*buffer)
	if !ok || b == nil {
		return nil, fmt.Errorf("%T is %w", buf, errNotOurs)
	}
	if b.gone.Load() {
		return nil, errors.New("buffer was finalized or donated")
	}
	return b, nil
}

func (b *Backend) checkDevice(d backends.DeviceNum) error {
	if d < 0 || int(d) >= b.numDevices {
		return fmt.Errorf("gobackend: device %d does not exist (the backend has %d virtual devices)", d, b.numDevices)
	}
	return nil
}

// The data interface: simplego's storage behind device-tagged buffers. Native operations and
// fallback segments read and write the simplego buffers directly, without copies.

// BufferFinalize releases the buffer; finalizing it again is a no-op.
func (b *Backend) BufferFinalize(buf backends.Buffer) error {
	bb, ok := buf.(*buffer)
	if !ok || bb == nil {
		return fmt.Errorf("gobackend: BufferFinalize: %T is %w", buf, errNotOurs)
	}
	if bb.gone.Swap(true) {
		return nil
	}
	b.untrack(bb)
	return b.release(bb.st)
}

func (b *Backend) BufferShape(buf backends.Buffer) (shapes.Shape, error) {
	bb, err := unwrap(buf)
	if err != nil {
		return shapes.Invalid(), fmt.Errorf("gobackend: BufferShape: %w", err)
	}
	return b.sg.BufferShape(bb.st.sg)
}

func (b *Backend) BufferDeviceNum(buf backends.Buffer) (backends.DeviceNum, error) {
	bb, err := unwrap(buf)
	if err != nil {
		return 0, fmt.Errorf("gobackend: BufferDeviceNum: %w", err)
	}
	return bb.dev, nil
}

func (b *Backend) BufferToFlatData(buf backends.Buffer, flat any) error {
	bb, err := unwrap(buf)
	if err != nil {
		return fmt.Errorf("gobackend: BufferToFlatData: %w", err)
	}
	return b.sg.BufferToFlatData(bb.st.sg, flat)
}

func (b *Backend) BufferFromFlatData(d backends.DeviceNum, flat any, s shapes.Shape) (backends.Buffer, error) {
	if err := b.checkDevice(d); err != nil {
		return nil, err
	}
	sg, err := b.sg.BufferFromFlatData(0, flat, s)
	if err != nil {
		return nil, err
	}
	return b.newBuffer(newStorage(sg), d), nil
}

func (b *Backend) HasSharedBuffers() bool { return true }

func (b *Backend) NewSharedBuffer(d backends.DeviceNum, s shapes.Shape) (backends.Buffer, any, error) {
	if err := b.checkDevice(d); err != nil {
		return nil, nil, err
	}
	sg, flat, err := b.sg.NewSharedBuffer(0, s)
	if err != nil {
		return nil, nil, err
	}
	return b.newBuffer(newStorage(sg), d), flat, nil
}

// BufferData returns the buffer's memory. Storage is shared between buffers only when an SPMD
// execution returns the same value to several replicas (spmd.go); GoMLX reads such outputs
// through BufferData (Tensor.ConstFlatData) and writes only to buffers it made with
// NewSharedBuffer, whose storage is never shared, so no write through here can reach another buffer.
func (b *Backend) BufferData(buf backends.Buffer) (any, error) {
	bb, err := unwrap(buf)
	if err != nil {
		return nil, fmt.Errorf("gobackend: BufferData: %w", err)
	}
	return b.sg.BufferData(bb.st.sg)
}

// BufferCopyToDevice copies the buffer to another virtual device.
func (b *Backend) BufferCopyToDevice(src backends.Buffer, d backends.DeviceNum) (backends.Buffer, error) {
	if err := b.checkDevice(d); err != nil {
		return nil, err
	}
	bb, err := unwrap(src)
	if err != nil {
		return nil, fmt.Errorf("gobackend: BufferCopyToDevice: %w", err)
	}
	st, err := b.copyStorage(bb.st)
	if err != nil {
		return nil, fmt.Errorf("gobackend: BufferCopyToDevice: %w", err)
	}
	return b.newBuffer(st, d), nil
}

// copyStorage makes an unshared copy of st's contents.
func (b *Backend) copyStorage(st *storage) (*storage, error) {
	sg, err := b.cloneSG(st.sg)
	if err != nil {
		return nil, err
	}
	return newStorage(sg), nil
}

// cloneSG copies a simplego buffer into a new one from the pool.
func (b *Backend) cloneSG(src backends.Buffer) (backends.Buffer, error) {
	s, err := b.sg.BufferShape(src)
	if err != nil {
		return nil, err
	}
	from, err := b.sg.BufferData(src)
	if err != nil {
		return nil, err
	}
	dst, to, err := b.sg.NewSharedBuffer(0, s)
	if err != nil {
		return nil, err
	}
	if n := reflect.Copy(reflect.ValueOf(to), reflect.ValueOf(from)); n != s.Size() {
		_ = b.sg.BufferFinalize(dst)
		return nil, errors.New("copied a buffer of the wrong size (bug)")
	}
	return dst, nil
}

// newBuffer hands out st on device d, counting its bytes as live on d.
func (b *Backend) newBuffer(st *storage, d backends.DeviceNum) *buffer {
	bb := &buffer{st: st, dev: d}
	if sh, err := b.sg.BufferShape(st.sg); err == nil {
		bb.bytes = int64(sh.Memory())
	}
	if int(d) >= 0 && int(d) < len(b.live) {
		b.live[d].Add(bb.bytes)
	}
	return bb
}

// untrack stops counting a buffer that was finalized or donated (its gone flag just set).
func (b *Backend) untrack(bb *buffer) {
	if int(bb.dev) >= 0 && int(bb.dev) < len(b.live) {
		b.live[bb.dev].Add(-bb.bytes)
	}
}

// DeviceBytes returns, per virtual device, the bytes of the buffers the backend has handed out on
// it and that are still live (not finalized or donated): what a device with its own memory would
// hold. Storage that several replicas' buffers share (spmd.go) counts on each of their devices,
// as each would hold a copy; an execution's intermediate values are not buffers and do not count.
func (b *Backend) DeviceBytes() []int64 {
	out := make([]int64, len(b.live))
	for d := range b.live {
		out[d] = b.live[d].Load()
	}
	return out
}
