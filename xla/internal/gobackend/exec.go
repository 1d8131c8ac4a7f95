package gobackend

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"

	"github.com/gomlx/gomlx/backends"
)

// Execute runs the computation. Buffers are simplego's (this backend's). Donated inputs are
// handed on to the last step that reads them (a segment may then reuse them in place) or freed
// after it; intermediate buffers are freed right after their last reader, so an execution holds
// only what is still needed and the buffer pool recycles the rest for the next execution.
func (e *Executable) Execute(inputs []backends.Buffer, donate []bool, device backends.DeviceNum) (outs []backends.Buffer, err error) {
	if device != 0 {
		return nil, fmt.Errorf("gobackend: %q: device %d: the backend has one device (0)", e.name, device)
	}
	if len(inputs) != len(e.inputs) {
		return nil, fmt.Errorf("gobackend: %q takes %d inputs, got %d", e.name, len(e.inputs), len(inputs))
	}
	if len(donate) != 0 && len(donate) != len(inputs) {
		return nil, fmt.Errorf("gobackend: %q: %d donate flags for %d inputs", e.name, len(donate), len(inputs))
	}
	sg := e.backend.sg
	env := make([]backends.Buffer, e.numValues)
	owned := make([]bool, e.numValues)
	for i, buf := range inputs {
		if buf == nil {
			return nil, fmt.Errorf("gobackend: %q: input #%d (%q) is nil", e.name, i, e.inputNames[i])
		}
		s, err := sg.BufferShape(buf)
		if err != nil {
			return nil, fmt.Errorf("gobackend: %q: input #%d (%q): %w", e.name, i, e.inputNames[i], err)
		}
		if !s.Equal(e.inputShapes[i]) {
			return nil, fmt.Errorf("gobackend: %q: input #%d (%q) has shape %s, the computation takes %s",
				e.name, i, e.inputNames[i], s, e.inputShapes[i])
		}
		v := e.inputs[i]
		env[v] = buf
		owned[v] = len(donate) != 0 && donate[i]
	}
	// On failure, free every buffer this execution owns (donated inputs included: the caller gave
	// them up).
	defer func() {
		if err == nil {
			return
		}
		for v, buf := range env {
			if buf != nil && owned[v] {
				_ = sg.BufferFinalize(buf)
			}
		}
		for _, buf := range outs {
			if buf != nil {
				_ = sg.BufferFinalize(buf)
			}
		}
		outs = nil
	}()

	// The worker (GEMM pool and scratch) is taken at the first native product and kept for the
	// rest of the execution.
	var w *worker
	defer func() {
		if w != nil {
			e.backend.releaseWorker(w)
		}
	}()
	for i, st := range e.steps {
		if st.seg != nil {
			if err := e.runSegment(i, st.seg, env, owned); err != nil {
				return nil, err
			}
		} else {
			if w == nil {
				if w, err = e.backend.acquireWorker(); err != nil {
					return nil, err
				}
			}
			if err := e.runNative(st.nat, w, env, owned); err != nil {
				return nil, err
			}
		}
		for _, v := range st.release {
			if env[v] != nil && owned[v] {
				if err := sg.BufferFinalize(env[v]); err != nil {
					return nil, fmt.Errorf("gobackend: %q: freeing an intermediate buffer: %w", e.name, err)
				}
			}
			env[v], owned[v] = nil, false
		}
	}

	outs = make([]backends.Buffer, len(e.outputs))
	for i, v := range e.outputs {
		buf := env[v]
		if buf == nil {
			return outs, fmt.Errorf("gobackend: %q: output #%d was not computed (bug)", e.name, i)
		}
		if owned[v] {
			outs[i] = buf
			owned[v] = false // returned once; a repeated output gets a copy
			env[v] = nil
			continue
		}
		if outs[i], err = e.cloneBuffer(buf); err != nil {
			return outs, fmt.Errorf("gobackend: %q: output #%d: %w", e.name, i, err)
		}
	}
	// Whatever is left and owned (inputs donated but never read, repeated outputs' originals) is freed.
	for v, buf := range env {
		if buf != nil && owned[v] {
			_ = sg.BufferFinalize(buf)
		}
	}
	return outs, nil
}

// runSegment executes a fallback segment, donating the inputs it is the last reader of.
func (e *Executable) runSegment(stepIdx int, seg *segment, env []backends.Buffer, owned []bool) error {
	ins := make([]backends.Buffer, len(seg.inputs))
	don := make([]bool, len(seg.inputs))
	for j, v := range seg.inputs {
		ins[j] = env[v]
		if ins[j] == nil {
			return fmt.Errorf("gobackend: %q: %s reads a value that is not computed (bug)", e.name, seg.name)
		}
		don[j] = owned[v] && e.lastUse[v] == stepIdx && !e.isOutput[v]
	}
	outs, err := seg.exec.Execute(ins, don, 0)
	if err != nil {
		return fmt.Errorf("gobackend: %q: %s: %w", e.name, seg.name, err)
	}
	for j, v := range seg.inputs {
		if don[j] {
			env[v], owned[v] = nil, false // simplego owns it now
		}
	}
	for j, v := range seg.outputs {
		env[v], owned[v] = outs[j], true
	}
	return nil
}

// runNative runs a native operation into a new buffer.
func (e *Executable) runNative(nat *nativeOp, w *worker, env []backends.Buffer, owned []bool) error {
	sg := e.backend.sg
	in := make([]any, len(nat.reads))
	for i, v := range nat.reads {
		if env[v] == nil {
			return fmt.Errorf("gobackend: %q: %s reads a value (#%d) that is not computed (bug)", e.name, nat.name, v)
		}
		d, err := sg.BufferData(env[v])
		if err != nil {
			return fmt.Errorf("gobackend: %q: %s operand %d: %w", e.name, nat.name, i, err)
		}
		in[i] = d
	}
	outShape := e.valueShapes[nat.out]
	buf, out, err := sg.NewSharedBuffer(0, outShape)
	if err != nil {
		return fmt.Errorf("gobackend: %q: %s output %s: %w", e.name, nat.name, outShape, err)
	}
	switch {
	case nat.dot != nil:
		// Execute has no context (the backends interface has none); products are not cancellable.
		err = nat.dot.run(context.Background(), w.pool, &w.scratch, in[0], in[1], out)
		if err != nil {
			err = fmt.Errorf("%s x %s -> %s: %w", nat.dot.lhsS, nat.dot.rhsS, nat.dot.out, err)
		}
	case nat.fus != nil:
		srcs, bsrcs := w.srcs[:0], w.bsrcs[:0]
		for _, l := range nat.fus.leaves {
			var src []float32
			var bsrc []bool
			switch {
			case l.value < 0:
			case l.kind == leafBool:
				bsrc = in[slices.Index(nat.reads, l.value)].([]bool)
			default:
				src = in[slices.Index(nat.reads, l.value)].([]float32)
			}
			srcs, bsrcs = append(srcs, src), append(bsrcs, bsrc)
		}
		w.srcs, w.bsrcs = srcs, bsrcs
		err = nat.fus.run(out.([]float32), srcs, bsrcs, w.regs)
	case nat.red != nil:
		err = nat.red.run(out.([]float32), in[0].([]float32), len(w.regs))
	case nat.trans != nil:
		err = catch(func() { transpose(out.([]float32), in[0].([]float32), nat.trans.dims, nat.trans.perm) })
	}
	if err != nil {
		_ = sg.BufferFinalize(buf)
		return fmt.Errorf("gobackend: %q: %s: %w", e.name, nat.name, err)
	}
	env[nat.out], owned[nat.out] = buf, true
	return nil
}

// cloneBuffer copies a buffer the caller keeps (a non-donated input returned as an output, or a
// repeated output).
func (e *Executable) cloneBuffer(src backends.Buffer) (backends.Buffer, error) {
	sg := e.backend.sg
	s, err := sg.BufferShape(src)
	if err != nil {
		return nil, err
	}
	from, err := sg.BufferData(src)
	if err != nil {
		return nil, err
	}
	dst, to, err := sg.NewSharedBuffer(0, s)
	if err != nil {
		return nil, err
	}
	if n := reflect.Copy(reflect.ValueOf(to), reflect.ValueOf(from)); n != s.Size() {
		_ = sg.BufferFinalize(dst)
		return nil, errors.New("copied a buffer of the wrong size (bug)")
	}
	return dst, nil
}
