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
	return &buffer{st: newStorage(sg), dev: d}, nil
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
	return &buffer{st: newStorage(sg), dev: d}, flat, nil
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
	return &buffer{st: st, dev: d}, nil
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
