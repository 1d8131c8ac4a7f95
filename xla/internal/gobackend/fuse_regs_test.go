package gobackend

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// simulateRegisters runs a fusion program on symbolic values: each leaf holds its own value,
// each instruction makes a new one, a uniform Where's register views the buffer of the operand
// it picks (a when pickA), as runRange does. It returns the values every instruction reads, in
// order, and the value of the last instruction, so a renumbered program can be checked to read
// exactly what the original one reads.
func simulateRegisters(f *fusion, pickA bool) (reads []int, out int) {
	buf := make([]int, f.nregs)  // the value a register's own buffer holds
	view := make([]int, f.nregs) // the register whose buffer a register reads
	for i := range buf {
		buf[i], view[i] = -1, i
	}
	for i, l := range f.leaves {
		buf[l.reg] = 1000 + i
	}
	val := func(reg int) int { return buf[view[reg]] }
	for k, in := range f.instrs {
		for _, reg := range in.operands() {
			reads = append(reads, val(reg))
		}
		if in.op == backends.OpTypeWhere && in.uniform && k != len(f.instrs)-1 {
			view[in.dst] = view[in.b]
			if pickA {
				view[in.dst] = view[in.a]
			}
			continue
		}
		buf[in.dst], view[in.dst] = k, in.dst
	}
	return reads, val(f.instrs[len(f.instrs)-1].dst)
}

// randomProgram builds an SSA program as buildFusion does — a register per leaf and per
// instruction — of binary, unary and Where instructions (some on a single condition) reading
// leaves and earlier results.
func randomProgram(rng *rand.Rand, leaves, instrs int) *fusion {
	f := &fusion{}
	for range leaves {
		f.leaves = append(f.leaves, fusedLeaf{kind: leafDirect, reg: f.nregs})
		f.nregs++
	}
	pick := func() int {
		// Mostly recent values, as elementwise chains read them.
		if f.nregs > leaves && rng.IntN(3) > 0 {
			return f.nregs - 1 - rng.IntN(min(3, f.nregs-leaves))
		}
		return rng.IntN(f.nregs)
	}
	for range instrs {
		in := fusedInstr{a: pick(), b: -1, dst: f.nregs}
		switch rng.IntN(4) {
		case 0:
			in.op = backends.OpTypeTanh
		case 1:
			in.op, in.b, in.cond, in.uniform = backends.OpTypeWhere, pick(), rng.IntN(leaves), rng.IntN(2) == 0
		default:
			in.op, in.b = backends.OpTypeMul, pick()
		}
		f.instrs = append(f.instrs, in)
		f.nregs++
	}
	return f
}

// TestAllocRegistersRandomPrograms: after allocRegisters every instruction of 500 random
// programs reads the values it read before, whichever operand each single-condition Where
// picks; no result shares a register with its own operands or with a leaf; and programs use
// fewer registers.
func TestAllocRegistersRandomPrograms(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	before, after := 0, 0
	for p := range 500 {
		f := randomProgram(rng, 1+rng.IntN(6), 1+rng.IntN(40))
		wantA, outA := simulateRegisters(f, true)
		wantB, outB := simulateRegisters(f, false)
		before += f.nregs
		f.allocRegisters()
		after += f.nregs
		for _, pickA := range []bool{true, false} {
			want, wantOut := wantB, outB
			if pickA {
				want, wantOut = wantA, outA
			}
			got, out := simulateRegisters(f, pickA)
			if fmt.Sprint(got) != fmt.Sprint(want) || out != wantOut {
				t.Fatalf("program %d (pick a %v): reads %v, out %d; want %v, out %d", p, pickA, got, out, want, wantOut)
			}
		}
		for k, in := range f.instrs {
			for _, reg := range in.operands() {
				if reg == in.dst {
					t.Fatalf("program %d: instruction %d writes its operand's register %d", p, k, reg)
				}
			}
			if f.isLeafReg(in.dst) {
				t.Fatalf("program %d: instruction %d writes leaf register %d", p, k, in.dst)
			}
		}
	}
	if after >= before {
		t.Fatalf("registers %d after allocation, %d before", after, before)
	}
	t.Logf("registers: %d before allocation, %d after", before, after)
}

// TestFusionRegistersReused compiles a chain of 30 elementwise operations, with the
// optimizer's kind of Where on one condition among them, into one fusion: it must run on a
// handful of registers instead of one per operation, and give simplego's results bitwise for
// either condition.
func TestFusionRegistersReused(t *testing.T) {
	sg := newSimpleGo(t)
	gb := newGotpu(t, Config{})
	const n = 3000
	build := func(b backends.Backend) backends.Executable {
		bld := b.Builder("chain")
		must := mustOp(t)
		x := must(bld.Parameter("x", shapes.Make(dtypes.Float32, n), nil))
		y := must(bld.Parameter("y", shapes.Make(dtypes.Float32, n), nil))
		s := must(bld.Parameter("s", shapes.Make(dtypes.Float32), nil))
		c := must(bld.Parameter("c", shapes.Make(dtypes.Bool), nil))
		v := must(bld.Mul(x, y))
		for i := range 30 {
			switch i % 5 {
			case 0:
				v = must(bld.Add(v, s))
			case 1:
				v = must(bld.Mul(v, y))
			case 2:
				v = must(bld.Sub(v, x))
			case 3:
				v = must(bld.Div(v, must(bld.Add(y, s))))
			default:
				v = must(bld.Where(c, v, must(bld.Mul(v, s))))
			}
		}
		exec, err := bld.Compile([]backends.Op{v}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(exec.Finalize)
		return exec
	}
	wantExec, gotExec := build(sg), build(gb)
	var fus *fusion
	for _, st := range gotExec.(*Executable).steps {
		if st.nat != nil && st.nat.fus != nil {
			if fus != nil {
				t.Fatal("the chain compiled to more than one fusion")
			}
			fus = st.nat.fus
		}
	}
	if fus == nil {
		t.Fatal("the chain compiled to no fusion")
	}
	if fus.nregs > len(fus.leaves)+4 {
		t.Fatalf("%d registers for %d leaves and %d instructions, want at most %d", fus.nregs, len(fus.leaves), len(fus.instrs), len(fus.leaves)+4)
	}
	rng := rand.New(rand.NewPCG(23, 24))
	xs, ys := randomTensor(rng, dtypes.Float32, n), randomTensor(rng, dtypes.Float32, n)
	for _, cond := range []bool{true, false} {
		in := []*tensors.Tensor{xs, ys, tensors.FromScalar(float32(1.25)), tensors.FromScalar(cond)}
		bufs := func(b backends.Backend) []backends.Buffer {
			var out []backends.Buffer
			for _, x := range in {
				var buf backends.Buffer
				var err error
				if x.DType() == dtypes.Bool {
					buf, err = b.BufferFromFlatData(0, []bool{cond}, x.Shape())
				} else {
					buf, err = b.BufferFromFlatData(0, tensors.MustCopyFlatData[float32](x), x.Shape())
				}
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, buf)
			}
			return out
		}
		want, err := wantExec.Execute(bufs(sg), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		got, err := gotExec.Execute(bufs(gb), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		w, g := flat(t, sg, want[0]), flat(t, gb, got[0])
		for i := range w {
			if math.Float32bits(w[i]) != math.Float32bits(g[i]) {
				t.Fatalf("condition %v: [%d] = %g, simplego %g", cond, i, g[i], w[i])
			}
		}
	}
	t.Logf("%d leaves, %d instructions, %d registers", len(fus.leaves), len(fus.instrs), fus.nregs)
}
