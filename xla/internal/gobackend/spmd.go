package gobackend

import (
	"bytes"
	"fmt"
	"reflect"
	"sync"
	"unsafe"

	"github.com/gomlx/gomlx/backends"
)

// SPMD execution on virtual devices.
//
// The replicas of an SPMD computation run concurrently, one goroutine each, with their native
// operations sharing the host's cores (Backend.threads), and meet at the all-reduces
// (collective.go). Virtual devices are one memory, which gives two savings a real multi-device
// run cannot have, both invisible in the results:
//
//   - Shared values. A value is the same on every replica by construction if it is computed only
//     from inputs every replica holds in the same storage, from the results of all-reduces over
//     all replicas, and from constants. Each step that computes only such values (in a data-parallel
//     train step: the whole optimizer update after the gradient all-reduce) is run once, by
//     replica 0, with all the threads; the other replicas wait for what they read of it, and
//     every replica's output is the same storage.
//   - Identical outputs. After an execution, an output whose bytes are the same on every replica
//     is kept once, its storage referenced by every replica's buffer. The first train step of a
//     run gets the replicated variables as N separate copies, so it updates them N times; its
//     outputs are identical, so they are stored once, and from the second step on the variables
//     are shared inputs and the update runs once.
//
// Storage is never written while shared (buffer.go), so sharing cannot make a replica see
// another's writes.

// shared is what one SPMD execution's replicas share: which values and steps are the same on
// every replica, and replica 0's values, which the others read.
type shared struct {
	value    []bool // by value id: the same on every replica
	step     []bool // by step index: run by replica 0 for every replica
	deferred []bool // shared values that other replicas' steps read: freed after every replica stopped
	producer []int  // by value id: the step computing it, -1 for an input
	done     []chan struct{}
	abort    <-chan struct{}

	// env is replica 0's value table (tab's); owns marks the deferred values replica 0 owns (to
	// free after the execution, or return).
	tab  *valueTable
	env  []backends.Buffer
	owns []bool
}

// analyze finds the shared values and steps given which inputs are shared (the same storage on
// every replica). It returns nil if no step can be shared.
func (e *Executable) analyze(inShared []bool) *shared {
	sh := &shared{value: make([]bool, e.numValues), step: make([]bool, len(e.steps)),
		deferred: make([]bool, e.numValues), producer: make([]int, e.numValues), owns: make([]bool, e.numValues),
		done: make([]chan struct{}, len(e.steps))}
	for v := range sh.producer {
		sh.producer[v] = -1
	}
	for i, v := range e.inputs {
		sh.value[v] = inShared[i]
	}
	any := false
	for i, st := range e.steps {
		reads, outs := st.io()
		for _, v := range outs {
			sh.producer[v] = i
		}
		if st.nat != nil && st.nat.ar != nil {
			// Every replica runs its all-reduce; over one group of all replicas its results are the same everywhere.
			all := len(st.nat.ar.groups) == 1 && len(st.nat.ar.groups[0]) == e.replicas
			for _, v := range outs {
				sh.value[v] = all
			}
			continue
		}
		same := true
		for _, v := range reads {
			same = same && sh.value[v]
		}
		sh.step[i] = same
		any = any || same
		for _, v := range outs {
			sh.value[v] = same
		}
		if same {
			sh.done[i] = make(chan struct{})
		}
	}
	if !any {
		return nil
	}
	for i, st := range e.steps {
		if sh.step[i] {
			continue
		}
		reads, _ := st.io()
		for _, v := range reads {
			if sh.value[v] && sh.fromReplica0(v) {
				sh.deferred[v] = true
			}
		}
	}
	return sh
}

// fromReplica0 reports whether other replicas read v from replica 0: a shared input or the result
// of a shared step (an all-reduce's results are each replica's own).
func (sh *shared) fromReplica0(v int) bool {
	p := sh.producer[v]
	return p < 0 || sh.step[p]
}

// io lists the values a step reads and makes.
func (st step) io() (reads, outs []int) {
	switch {
	case st.seg != nil:
		return st.seg.inputs, st.seg.outputs
	case st.nat.outs != nil:
		return st.nat.reads, st.nat.outs
	case st.nat.fouts != nil:
		return st.nat.reads, st.nat.fouts
	}
	return st.nat.reads, []int{st.nat.out}
}

// adopt is called by replica 0 before its first step: it publishes its value table.
func (sh *shared) adopt(tab *valueTable) {
	sh.tab, sh.env = tab, tab.env
}

// adoptInputs takes over, from replica 0, the ownership of the shared inputs other replicas read.
func (sh *shared) adoptInputs(inputs []int, owned []bool) {
	for _, v := range inputs {
		if sh.deferred[v] {
			sh.owns[v], owned[v] = owned[v], false
		}
	}
}

// publish is called by replica 0 after shared step i: the values other replicas read become the
// execution's to free, and the step is marked done.
func (sh *shared) publish(i int, st step, owned []bool) {
	_, outs := st.io()
	for _, v := range outs {
		if sh.deferred[v] {
			sh.owns[v], owned[v] = owned[v], false
		}
	}
	close(sh.done[i])
}

// fetch, on a replica other than 0, waits for the shared values step st reads and takes them from
// replica 0.
func (sh *shared) fetch(st step, env []backends.Buffer) error {
	reads, _ := st.io()
	for _, v := range reads {
		if env[v] != nil || !sh.value[v] || !sh.fromReplica0(v) {
			continue
		}
		if p := sh.producer[v]; p >= 0 {
			select {
			case <-sh.done[p]:
			case <-sh.abort:
				return errReplicaFailed
			}
		}
		env[v] = sh.env[v]
	}
	return nil
}

// executeSPMD runs the replicas of an SPMD computation on checked inputs (replica-major).
func (e *Executable) executeSPMD(bufs []*buffer, donate []bool, devs []backends.DeviceNum) ([]backends.Buffer, error) {
	n, np := e.replicas, len(e.inputs)
	inShared := make([]bool, np)
	for i := range np {
		inShared[i] = true
		for r := 1; r < n; r++ {
			inShared[i] = inShared[i] && bufs[r*np+i].st == bufs[i].st
		}
	}
	sh := e.analyze(inShared)
	c := newCollectives(n)
	if sh != nil {
		sh.abort = c.abort
	}

	// Take the inputs. A donated buffer whose storage nobody else references becomes its replica's
	// to free or reuse. A shared input donated by every replica, and referenced by nothing else,
	// becomes replica 0's. Any other donated buffer is only read, its reference dropped at the end.
	donated := func(k int) bool { return len(donate) != 0 && donate[k] }
	ins, owned := make([][]backends.Buffer, n), make([][]bool, n)
	for r := range n {
		ins[r], owned[r] = make([]backends.Buffer, np), make([]bool, np)
	}
	var dropped []*storage
	for i := range np {
		st := bufs[i].st
		all := sh != nil && inShared[i] && st.refs.Load() == int32(n)
		for r := range n {
			all = all && donated(r*np+i)
		}
		for r := range n {
			bb := bufs[r*np+i]
			ins[r][i] = bb.st.sg
			if !donated(r*np+i) || bb.gone.Swap(true) {
				continue
			}
			e.backend.untrack(bb)
			switch {
			case all:
				owned[0][i] = r == 0
			case bb.st.shared():
				dropped = append(dropped, bb.st)
			default:
				owned[r][i] = true
			}
		}
	}
	defer func() {
		for _, st := range dropped {
			_ = e.backend.release(st)
		}
	}()

	results := make([][]backends.Buffer, n)
	errs := make([]error, n)
	threads := e.backend.threads(n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			errs[r] = e.runReplica(r, c, sh, ins[r], owned[r], threads, &results[r])
			if errs[r] != nil {
				c.fail() // release the replicas waiting for this one
			}
		})
	}
	wg.Wait()
	sg := e.backend.sg
	if sh != nil {
		for v, own := range sh.owns {
			if own && sh.env[v] != nil {
				_ = sg.BufferFinalize(sh.env[v])
			}
		}
		if sh.tab != nil {
			e.putTable(sh.tab)
		}
	}
	if err := firstError(errs); err != nil {
		for _, rs := range results {
			for _, buf := range rs {
				if buf != nil {
					_ = sg.BufferFinalize(buf)
				}
			}
		}
		return nil, err
	}

	outs := make([]backends.Buffer, n*len(e.outputs))
	for k, v := range e.outputs {
		var st *storage
		if sh != nil && sh.value[v] && results[0][k] != nil {
			st = newStorage(results[0][k])
		} else if e.identical(results, k) {
			st = newStorage(results[0][k])
			for r := 1; r < n; r++ {
				_ = sg.BufferFinalize(results[r][k])
			}
		}
		for r := range n {
			if st != nil {
				if r > 0 {
					st.retain()
				}
				outs[r*len(e.outputs)+k] = e.backend.newBuffer(st, devs[r])
				continue
			}
			outs[r*len(e.outputs)+k] = e.backend.newBuffer(newStorage(results[r][k]), devs[r])
		}
	}
	return outs, nil
}

// runReplica runs replica r on its own goroutine, turning a panic (in a fallback segment: native
// kernels already return theirs as errors) into an error, as the API edge does for a
// single-device execution: nothing may panic on a goroutine the caller cannot recover.
func (e *Executable) runReplica(r int, c *collectives, sh *shared, ins []backends.Buffer, owned []bool, threads int, out *[]backends.Buffer) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("gobackend: %q: replica %d panicked: %v", e.name, r, p)
		}
	}()
	*out, err = e.run(r, c, sh, ins, owned, threads)
	return err
}

// identical reports whether output k has the same bytes on every replica. Outputs that differ
// usually do so in their first bytes, so the comparison is cheap when it fails.
func (e *Executable) identical(results [][]backends.Buffer, k int) bool {
	first, err := e.backend.sg.BufferData(results[0][k])
	if err != nil {
		return false
	}
	want := rawBytes(first)
	for r := 1; r < len(results); r++ {
		flat, err := e.backend.sg.BufferData(results[r][k])
		if err != nil || !bytes.Equal(rawBytes(flat), want) {
			return false
		}
	}
	return true
}

// rawBytes views a flat slice's memory as bytes (for comparing and copying).
func rawBytes(flat any) []byte {
	v := reflect.ValueOf(flat)
	if v.Kind() != reflect.Slice || v.Len() == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(v.UnsafePointer()), v.Len()*int(v.Type().Elem().Size()))
}
