package gobackend

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/gomlx/gomlx/backends"
)

// Execute runs the computation: once on the given device (or its assigned one), or, for an SPMD
// computation, once per replica — concurrently, each on its own inputs (inputs and outputs are
// replica-major, as GoMLX lays them out) — meeting at the collectives (see spmd.go). Donated
// inputs are handed on to the last step that reads them (a segment may then reuse them in place)
// or freed after it; intermediate buffers are freed right after their last reader, so an
// execution holds only what is still needed and the buffer pool recycles the rest for the next
// execution.
func (e *Executable) Execute(inputs []backends.Buffer, donate []bool, device backends.DeviceNum) (outs []backends.Buffer, err error) {
	np, n := len(e.inputs), e.replicas
	if len(inputs) != np*n {
		return nil, fmt.Errorf("gobackend: %q takes %d inputs × %d replicas, got %d", e.name, np, n, len(inputs))
	}
	if len(donate) != 0 && len(donate) != len(inputs) {
		return nil, fmt.Errorf("gobackend: %q: %d donate flags for %d inputs", e.name, len(donate), len(inputs))
	}
	devs := e.devices
	if devs == nil {
		devs = make([]backends.DeviceNum, n)
		for r := range devs {
			devs[r] = backends.DeviceNum(r)
		}
		if n == 1 {
			devs[0] = device // portable
		}
	}
	if err := e.backend.checkDevice(devs[0]); err != nil {
		return nil, fmt.Errorf("gobackend: %q: %w", e.name, err)
	}
	// Check every input before taking any donated one, so a refused call consumes nothing.
	bufs := make([]*buffer, len(inputs))
	for k, in := range inputs {
		r, i := k/np, k%np
		bb, err := unwrap(in)
		if err != nil {
			return nil, fmt.Errorf("gobackend: %q: input #%d (%q) of replica %d: %w", e.name, i, e.inputNames[i], r, err)
		}
		if bb.dev != devs[r] {
			return nil, fmt.Errorf("gobackend: %q: input #%d (%q) of replica %d is on device %d, the replica runs on device %d",
				e.name, i, e.inputNames[i], r, bb.dev, devs[r])
		}
		s, err := e.backend.sg.BufferShape(bb.st.sg)
		if err != nil {
			return nil, fmt.Errorf("gobackend: %q: input #%d (%q): %w", e.name, i, e.inputNames[i], err)
		}
		if !s.Equal(e.inputShapes[i]) {
			return nil, fmt.Errorf("gobackend: %q: input #%d (%q) has shape %s, the computation takes %s",
				e.name, i, e.inputNames[i], s, e.inputShapes[i])
		}
		bufs[k] = bb
	}
	defer e.trimSpares()
	if n > 1 {
		return e.executeSPMD(bufs, donate, devs)
	}
	// Take the inputs: a donated buffer whose storage nobody else references becomes the
	// execution's to free or reuse; one that is shared is only read, and its reference dropped
	// when the execution ends.
	ins, owned := make([]backends.Buffer, np), make([]bool, np)
	var dropped []*storage
	for i, bb := range bufs {
		ins[i] = bb.st.sg
		if len(donate) == 0 || !donate[i] || bb.gone.Swap(true) {
			continue
		}
		e.backend.untrack(bb)
		if bb.st.shared() {
			dropped = append(dropped, bb.st)
		} else {
			owned[i] = true
		}
	}
	defer func() {
		for _, st := range dropped {
			_ = e.backend.release(st)
		}
	}()
	res, err := e.run(0, newCollectives(1), nil, ins, owned, e.backend.threads(1))
	if err != nil {
		return nil, err
	}
	outs = make([]backends.Buffer, len(res))
	for i, sg := range res {
		outs[i] = e.backend.newBuffer(newStorage(sg), devs[0])
	}
	return outs, nil
}

// firstError returns the error of the replica that failed first in substance: the others may
// only report that it failed.
func firstError(errs []error) error {
	var first error
	for _, err := range errs {
		if err == nil {
			continue
		}
		if !errors.Is(err, errReplicaFailed) {
			return err
		}
		if first == nil {
			first = err
		}
	}
	return first
}

// run executes replica r's steps on its inputs (simplego buffers; inOwned[i] if the execution may
// free or reuse input i) and returns its outputs. sh, for an SPMD execution whose replicas share
// values, says which steps replica 0 runs for all of them (spmd.go); other replicas skip those,
// read their results from replica 0, and return nil for the shared outputs.
func (e *Executable) run(r int, c *collectives, sh *shared, inputs []backends.Buffer, inOwned []bool, threads int) (outs []backends.Buffer, err error) {
	sg := e.backend.sg
	tab := e.table()
	env, owned := tab.env, tab.owned
	leader := r == 0
	if sh != nil && leader {
		sh.adopt(tab) // executeSPMD puts the table back once every replica stopped
	} else {
		defer e.putTable(tab) // after the cleanup below (deferred calls run last-in first-out)
	}
	// The arena holds the intermediates only native operations read (but those the replicas of an
	// SPMD execution share: inArena).
	var local []localBuf
	if e.arenaSize > 0 {
		if tab.local == nil {
			tab.local = e.arenaViews()
		}
		local = tab.local
	}
	for i, buf := range inputs {
		v := e.inputs[i]
		env[v] = buf
		owned[v] = inOwned[i]
	}
	if sh != nil && leader {
		sh.adoptInputs(e.inputs, owned)
	}
	// On failure, free every buffer this execution owns (donated inputs included: the caller gave
	// them up); values other replicas read are freed by executeSPMD once they all stopped.
	defer func() {
		if err == nil {
			return
		}
		for v, buf := range env {
			if buf != nil && owned[v] && !isLocal(buf) {
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

	// The workers (GEMM pool and scratch) are taken at the first native operation and kept for
	// the rest of the execution: one for the replica's own operations, and on replica 0 one with
	// all the threads for the shared ones (the other replicas only wait for those).
	var w, wAll *worker
	defer func() {
		for _, x := range []*worker{w, wAll} {
			if x != nil {
				e.backend.releaseWorker(x)
			}
		}
	}()
	for i, st := range e.steps {
		sharedStep := sh != nil && sh.step[i]
		// Replica 0 runs a shared step for all; the others only drop what it was the last to read.
		if !sharedStep || leader {
			if err := e.runStep(i, st, r, c, sh, env, owned, local, sharedStep, &w, &wAll, threads); err != nil {
				return nil, err
			}
		}
		for _, v := range st.release {
			if sh != nil && sh.deferred[v] {
				continue // other replicas may still read it: executeSPMD frees it
			}
			if env[v] != nil && (owned[v] || c.release(env[v])) {
				if err := e.recycle(env[v]); err != nil {
					return nil, fmt.Errorf("gobackend: %q: freeing an intermediate buffer: %w", e.name, err)
				}
			}
			env[v], owned[v] = nil, false
		}
	}

	outs = make([]backends.Buffer, len(e.outputs))
	for i, v := range e.outputs {
		if sh != nil && sh.value[v] {
			if !leader {
				continue // replica 0 returns it for all
			}
			if sh.owns[v] {
				outs[i] = env[v]
				sh.owns[v] = false // returned once; a repeated output gets a copy
				continue
			}
		}
		buf := env[v]
		if buf == nil {
			return outs, fmt.Errorf("gobackend: %q: output #%d was not computed (bug)", e.name, i)
		}
		if owned[v] {
			outs[i] = buf
			owned[v] = false // returned once; a repeated output gets a copy of it
			continue
		}
		if outs[i], err = e.backend.cloneSG(buf); err != nil {
			return outs, fmt.Errorf("gobackend: %q: output #%d: %w", e.name, i, err)
		}
	}
	// Whatever is left and owned (inputs donated but never read, repeated outputs' originals) is
	// freed, and this replica lets go of the shared collective results it still holds.
	for v, buf := range env {
		if buf != nil && !isLocal(buf) && (owned[v] || c.release(buf)) {
			_ = sg.BufferFinalize(buf)
		}
	}
	return outs, nil
}

// runStep runs step i of replica r. w and wAll are the replica's workers for its own and for
// shared steps, taken at first use.
func (e *Executable) runStep(i int, st step, r int, c *collectives, sh *shared, env []backends.Buffer, owned []bool,
	local []localBuf, sharedStep bool, w, wAll **worker, threads int) (err error) {
	if sh != nil && r != 0 {
		if err := sh.fetch(st, env); err != nil {
			return err
		}
	}
	switch {
	case st.seg != nil:
		err = e.runSegment(i, st.seg, env, owned)
	case st.nat.ar != nil && st.nat.rows:
		err = e.runGatherRows(r, c, st.nat, env, owned)
	case st.nat.ar != nil:
		err = e.runAllReduce(r, c, st.nat, env, owned)
	case st.nat.rng != nil:
		err = e.runRNG(st.nat, env, owned)
	default:
		wk, t := w, threads
		if sharedStep {
			wk, t = wAll, e.backend.threads(1)
		}
		if *wk == nil {
			if *wk, err = e.backend.acquireWorker(t); err != nil {
				return err
			}
		}
		err = e.runNative(i, sh, st.nat, *wk, env, owned, local)
	}
	if err == nil && sharedStep {
		sh.publish(i, st, owned)
		e.sharedSteps.Add(1)
	}
	return err
}

// runAllReduce runs replica r's part of an all-reduce into the buffers its group shares: they are
// not the replica's (owned false), so it never donates or returns them without a copy; each
// member lets go of them after its last read (collectives.release) and the last recycles them.
func (e *Executable) runAllReduce(r int, c *collectives, nat *nativeOp, env []backends.Buffer, owned []bool) error {
	sg := e.backend.sg
	ins := make([]any, len(nat.reads))
	fail := func(err error) error {
		c.fail()
		return fmt.Errorf("gobackend: %q: %s (replica %d): %w", e.name, nat.name, r, err)
	}
	for i, v := range nat.reads {
		if env[v] == nil {
			return fail(fmt.Errorf("operand %d is not computed (bug)", i))
		}
		d, err := sg.BufferData(env[v])
		if err != nil {
			return fail(err)
		}
		ins[i] = d
	}
	alloc := func() ([]any, []backends.Buffer, error) {
		outs := make([]any, len(nat.outs))
		bufs := make([]backends.Buffer, 0, len(nat.outs))
		for i, v := range nat.outs {
			buf, out, err := sg.NewSharedBuffer(0, e.valueShapes[v])
			if err != nil {
				for _, b := range bufs {
					_ = sg.BufferFinalize(b)
				}
				return nil, nil, err
			}
			bufs, outs[i] = append(bufs, buf), out
		}
		return outs, bufs, nil
	}
	bufs, err := c.allReduce(nat.ar, r, ins, alloc)
	if err != nil {
		return fail(err)
	}
	for i, v := range nat.outs {
		env[v], owned[v] = bufs[i], false
	}
	return nil
}

// runRNG draws random bits into new buffers (the state input is only read).
func (e *Executable) runRNG(nat *nativeOp, env []backends.Buffer, owned []bool) error {
	sg := e.backend.sg
	if env[nat.reads[0]] == nil {
		return fmt.Errorf("gobackend: %q: %s reads a value that is not computed (bug)", e.name, nat.name)
	}
	state, err := sg.BufferData(env[nat.reads[0]])
	if err != nil {
		return fmt.Errorf("gobackend: %q: %s state: %w", e.name, nat.name, err)
	}
	stBuf, newState, err := sg.NewSharedBuffer(0, e.valueShapes[nat.outs[0]])
	if err != nil {
		return fmt.Errorf("gobackend: %q: %s: %w", e.name, nat.name, err)
	}
	bitsBuf, bits, err := sg.NewSharedBuffer(0, e.valueShapes[nat.outs[1]])
	if err != nil {
		_ = sg.BufferFinalize(stBuf)
		return fmt.Errorf("gobackend: %q: %s: %w", e.name, nat.name, err)
	}
	if err := (rngPlan{}).run(newState.([]uint64), state.([]uint64), rawBytes(bits)); err != nil {
		_ = sg.BufferFinalize(stBuf)
		_ = sg.BufferFinalize(bitsBuf)
		return fmt.Errorf("gobackend: %q: %w", e.name, err)
	}
	env[nat.outs[0]], owned[nat.outs[0]] = stBuf, true
	env[nat.outs[1]], owned[nat.outs[1]] = bitsBuf, true
	return nil
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

// runNative runs native operation stepIdx — a product on the GEMM, or a fusion, reduction,
// transpose or comparison of any of their types (runFlat) — into its place in the arena (local:
// the execution's arena views, nil without one), a new buffer, or, for a fusion, the buffer of an
// operand it is the last reader of (inPlace).
func (e *Executable) runNative(stepIdx int, sh *shared, nat *nativeOp, w *worker, env []backends.Buffer, owned []bool, local []localBuf) error {
	sg := e.backend.sg
	in := w.in[:0]
	defer func() { clear(w.in[:cap(w.in)]); w.in = in[:0] }() // no references kept past the operation
	for i, v := range nat.reads {
		in = append(in, nil)
		if env[v] == nil {
			return fmt.Errorf("gobackend: %q: %s reads a value (#%d) that is not computed (bug)", e.name, nat.name, v)
		}
		d, err := bufferData(sg, env[v])
		if err != nil {
			return fmt.Errorf("gobackend: %q: %s operand %d: %w", e.name, nat.name, i, err)
		}
		in[i] = d
	}
	outShape := e.valueShapes[nat.out]
	var buf backends.Buffer
	var out any
	var err error
	reuse := -1
	if local != nil && e.inArena(nat.out, sh) {
		// Its place was planned, over an operand's where the fusion writes in place (planLocal).
		buf, out = &local[nat.out], local[nat.out].flat
		if nat.cp != nil && nat.cp.alias && e.inArena(nat.reads[0], sh) {
			env[nat.out], owned[nat.out] = buf, true // the operand's place: nothing to copy
			return nil
		}
	} else if nat.fus != nil {
		reuse = e.inPlace(stepIdx, sh, nat.fus, owned, local != nil)
	}
	switch {
	case buf != nil:
	case reuse >= 0:
		buf, out = env[reuse], in[slices.Index(nat.reads, reuse)]
		env[reuse], owned[reuse] = nil, false // the output now; not released after this step
	default:
		if buf, out, err = e.newBuffer(outShape); err != nil {
			return fmt.Errorf("gobackend: %q: %s output %s: %w", e.name, nat.name, outShape, err)
		}
	}
	var extra [][]float32
	var xbufs []backends.Buffer
	if nat.fus != nil && len(nat.fus.extra) > 0 {
		extra, xbufs, err = e.extraOutputs(stepIdx, sh, nat, w, in, env, owned, local != nil)
		defer func() { clear(extra); clear(xbufs); w.extra, w.xbufs = extra[:0], xbufs[:0] }() // no references kept
		if err != nil {
			if !isLocal(buf) {
				_ = sg.BufferFinalize(buf)
			}
			return fmt.Errorf("gobackend: %q: %s: %w", e.name, nat.name, err)
		}
	}
	if nat.dot != nil && nat.dot.vec != nil && nat.dot.batch > 0 && nat.dot.m > 0 && nat.dot.n > 0 {
		var done bool
		if done, err = w.runVec(nat.dot.vec, in[0], in[1], out); !done {
			err = nat.dot.run(context.Background(), w.pool, &w.scratch, in[0], in[1], out)
		}
	} else if nat.dot != nil {
		// Execute has no context (the backends interface has none); products are not cancellable.
		err = nat.dot.run(context.Background(), w.pool, &w.scratch, in[0], in[1], out)
		if err != nil {
			err = fmt.Errorf("%s x %s -> %s: %w", nat.dot.lhsS, nat.dot.rhsS, nat.dot.out, err)
		}
	} else if perr := catch(func() { err = nat.runFlat(w, in, out, extra) }); perr != nil {
		err = perr
	}
	if err != nil {
		for _, b := range xbufs {
			_ = sg.BufferFinalize(b)
		}
		if !isLocal(buf) {
			_ = sg.BufferFinalize(buf)
		}
		return fmt.Errorf("gobackend: %q: %s: %w", e.name, nat.name, err)
	}
	env[nat.out], owned[nat.out] = buf, true
	for i, b := range xbufs {
		v := nat.fus.extra[i].value
		env[v], owned[v] = b, true
	}
	return nil
}

// extraOutputs returns the data and buffers of fusion nat's extra outputs (outputs of the
// program, never in the arena: fuse_outputs.go), in the worker's reused tables: each over an
// operand the fusion may overwrite that no other output took (taking one ends its ownership,
// so inPlace does not offer it again), or a new buffer. runNative calls it only for a fusion
// that has extra outputs, so other operations pay nothing for them.
func (e *Executable) extraOutputs(stepIdx int, sh *shared, nat *nativeOp, w *worker, in []any, env []backends.Buffer, owned []bool, arena bool) ([][]float32, []backends.Buffer, error) {
	extra, xbufs := w.extra[:0], w.xbufs[:0]
	for _, o := range nat.fus.extra {
		var buf backends.Buffer
		var out any
		if u := e.inPlace(stepIdx, sh, nat.fus, owned, arena); u >= 0 {
			buf, out = env[u], in[slices.Index(nat.reads, u)]
			env[u], owned[u] = nil, false
		} else {
			var err error
			if buf, out, err = e.newBuffer(e.valueShapes[o.value]); err != nil {
				for _, b := range xbufs {
					_ = e.backend.sg.BufferFinalize(b)
				}
				return extra, xbufs, fmt.Errorf("output %s: %w", e.valueShapes[o.value], err)
			}
		}
		extra, xbufs = append(extra, out.([]float32)), append(xbufs, buf)
	}
	return extra, xbufs, nil
}

// runGatherRows runs replica r's part of a row gather (gather.go) into the buffer its group
// shares, held as runAllReduce holds its results.
func (e *Executable) runGatherRows(r int, c *collectives, nat *nativeOp, env []backends.Buffer, owned []bool) error {
	sg := e.backend.sg
	fail := func(err error) error {
		c.fail()
		return fmt.Errorf("gobackend: %q: %s (replica %d): %w", e.name, nat.name, r, err)
	}
	var in [2][]float32
	for i, v := range nat.reads {
		if env[v] == nil {
			return fail(fmt.Errorf("operand %d is not computed (bug)", i))
		}
		d, err := sg.BufferData(env[v])
		if err != nil {
			return fail(err)
		}
		f, ok := d.([]float32)
		if !ok {
			return fail(fmt.Errorf("operand %d is %T, not float32 (bug)", i, d))
		}
		in[i] = f
	}
	alloc := func() ([]float32, backends.Buffer, error) {
		buf, out, err := sg.NewSharedBuffer(0, e.valueShapes[nat.outs[0]])
		if err != nil {
			return nil, nil, err
		}
		return out.([]float32), buf, nil
	}
	buf, err := c.gatherRows(nat.ar, r, in[0], in[1], alloc)
	if err != nil {
		return fail(err)
	}
	env[nat.outs[0]], owned[nat.outs[0]] = buf, false
	return nil
}

// inPlace returns the value whose buffer fusion f may write its output into, or -1: an operand
// this execution owns (an intermediate, or a donated input), that this step is the last to read,
// that is not an output, has the output's shape and is read only elementwise at the output's own
// index (every leaf of it direct), and, in an SPMD execution, not a value the replicas share. Each block of a fusion loads its operands' elements before
// the last instruction stores the same elements of the output, and every kernel reads and writes
// element i at the same index, so overwriting the operand as the output is computed is safe.
// It saves a buffer wherever a chain ends the life of its input — an optimizer update writing
// the new weight, moment or variance over the old one, a gradient over the activation it was
// computed from — which is most of the memory a training step would otherwise hold twice.
func (e *Executable) inPlace(stepIdx int, sh *shared, f *fusion, owned []bool, arena bool) int {
	want := e.valueShapes[f.out]
	for _, l := range f.leaves {
		v := l.value
		if l.kind != leafDirect || v < 0 || !owned[v] || e.lastUse[v] != stepIdx || e.isOutput[v] || !e.valueShapes[v].Equal(want) ||
			sh != nil && sh.value[v] || // other replicas may be reading a shared value
			arena && e.inArena(v, sh) { // its place in the arena is not a buffer the result can keep
			continue
		}
		if f.overwritable(v) {
			return v
		}
	}
	return -1
}
