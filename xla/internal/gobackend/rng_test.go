package gobackend

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// TestRNGMatchesSimpleGo: the native RNGBitGenerator draws simplego's bits and advances the state
// as simplego does, for several output dtypes and awkward sizes, over chained draws (each run's
// new state feeds the next); it runs natively (no fallback segment), reading its state input
// without consuming it.
func TestRNGMatchesSimpleGo(t *testing.T) {
	sg := newSimpleGo(t)
	gb := newGotpu(t, Config{})
	for _, out := range []shapes.Shape{
		shapes.Make(dtypes.Uint32, 7, 129), shapes.Make(dtypes.Uint64, 5), shapes.Make(dtypes.Uint8, 1),
		shapes.Make(dtypes.Uint32, 1), shapes.Make(dtypes.Uint64, 2, 3, 4),
	} {
		t.Run(out.String(), func(t *testing.T) {
			build := func(b backends.Backend) backends.Executable {
				bld := b.Builder("rng")
				must := mustOp(t)
				st := must(bld.Parameter("state", shapes.Make(dtypes.Uint64, 3), nil))
				ns, bits, err := bld.RNGBitGenerator(st, out)
				if err != nil {
					t.Fatal(err)
				}
				e, err := bld.Compile([]backends.Op{ns, bits}, nil)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(e.Finalize)
				return e
			}
			want, got := build(sg), build(gb)
			if st := got.(*Executable).Stats(); st.RNGs != 1 || st.Segments != 0 {
				t.Fatalf("split %+v, want one native RNG", st)
			}
			state := []uint64{0x0123456789abcdef, 42, 7}
			for draw := range 4 {
				// simplego gets its state donated: only then does it keep the third word.
				sgIn, err := sg.BufferFromFlatData(0, state, shapes.Make(dtypes.Uint64, 3))
				if err != nil {
					t.Fatal(err)
				}
				wantOut, err := want.Execute([]backends.Buffer{sgIn}, []bool{true}, 0)
				if err != nil {
					t.Fatal(err)
				}
				gbIn, err := gb.BufferFromFlatData(0, state, shapes.Make(dtypes.Uint64, 3))
				if err != nil {
					t.Fatal(err)
				}
				gotOut, err := got.Execute([]backends.Buffer{gbIn}, nil, 0)
				if err != nil {
					t.Fatal(err)
				}
				if s, err := gb.BufferShape(gbIn); err != nil || !s.Equal(shapes.Make(dtypes.Uint64, 3)) {
					t.Fatalf("the state input was consumed or changed: %v %v", s, err)
				}
				for i, what := range []string{"new state", "bits"} {
					w, _ := sg.BufferData(wantOut[i])
					g, _ := gb.BufferData(gotOut[i])
					if !bytes.Equal(rawBytes(w), rawBytes(g)) {
						t.Fatalf("draw %d: %s differ from simplego's:\n got %v\nwant %v", draw, what, g, w)
					}
				}
				next, _ := gb.BufferData(gotOut[0])
				state = append([]uint64(nil), next.([]uint64)...)
				for _, b := range wantOut {
					_ = sg.BufferFinalize(b)
				}
				for _, b := range append(gotOut, gbIn) {
					_ = gb.BufferFinalize(b)
				}
			}
			t.Logf("state after 4 draws: %s", fmt.Sprint(state))
		})
	}
}
