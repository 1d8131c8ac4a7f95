package gobackend

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/dtypes/bfloat16"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// TestFoldTransposes checks each way a transpose folds into a product — read through by the
// product, written by the swapped product, or placed by a short-vector outer product — and one
// that must not fold, against simplego, and that the folded transposes no longer run.
func TestFoldTransposes(t *testing.T) {
	cases := []struct {
		name           string
		build          func(bld backends.Builder, must func(backends.Op, error) backends.Op, x, y backends.Op) backends.Op
		x, y           []int
		wantTransposes int
	}{
		{"operand", func(bld backends.Builder, must func(backends.Op, error) backends.Op, x, y backends.Op) backends.Op {
			return must(bld.Dot(x, must(bld.Transpose(y, 1, 0)))) // x [5,7] · yᵀ, y [9,7]
		}, []int{5, 7}, []int{9, 7}, 0},
		{"batched-operand", func(bld backends.Builder, must func(backends.Op, error) backends.Op, x, y backends.Op) backends.Op {
			yt := must(bld.Transpose(y, 0, 2, 1, 3)) // [2,4,3,6] -> [2,3,4,6]
			return must(bld.DotGeneral(x, []int{3}, []int{0, 1}, yt, []int{3}, []int{0, 1}))
		}, []int{2, 3, 5, 6}, []int{2, 4, 3, 6}, 0},
		{"swapped-result", func(bld backends.Builder, must func(backends.Op, error) backends.Op, x, y backends.Op) backends.Op {
			return must(bld.Transpose(must(bld.Dot(x, y)), 1, 0)) // (x·y)ᵀ
		}, []int{5, 7}, []int{7, 9}, 0},
		{"outer-placed", func(bld backends.Builder, must func(backends.Op, error) backends.Op, x, y backends.Op) backends.Op {
			o := must(bld.DotGeneral(x, nil, nil, y, nil, nil)) // [2,5,7] ⊗ [3] = [2,5,7,3]
			return must(bld.Transpose(o, 0, 1, 3, 2))           // [2,5,3,7]
		}, []int{2, 5, 7}, []int{3}, 0},
		{"placed-heads", func(bld backends.Builder, must func(backends.Op, error) backends.Op, x, y backends.Op) backends.Op {
			// Attention's P·V: [b,h,q,k] · [b,k,h,d] = [b,h,q,d], written as [b,q,h,d].
			o := must(bld.DotGeneral(x, []int{3}, []int{0, 1}, y, []int{1}, []int{0, 2}))
			return must(bld.Transpose(o, 0, 2, 1, 3))
		}, []int{2, 3, 5, 4}, []int{2, 4, 3, 6}, 0},
		{"placed-swapped", func(bld backends.Builder, must func(backends.Op, error) backends.Op, x, y backends.Op) backends.Op {
			// The value gradient: [b,q,h,d] · [b,h,q,k] = [b,h,d,k], written as [b,k,h,d]: the
			// rows are k, so the swapped product writes it.
			o := must(bld.DotGeneral(x, []int{1}, []int{0, 2}, y, []int{2}, []int{0, 1}))
			return must(bld.Transpose(o, 0, 3, 1, 2))
		}, []int{2, 5, 3, 6}, []int{2, 3, 5, 7}, 0},
		{"placed-nowhere", func(bld backends.Builder, must func(backends.Op, error) backends.Op, x, y backends.Op) backends.Op {
			// x's two free axes exchanged in the output are not one run of rows, and the
			// swapped product would need them contiguous: the transpose stays.
			o := must(bld.DotGeneral(x, []int{2}, nil, y, []int{0}, nil)) // [4,5,3]
			return must(bld.Transpose(o, 1, 0, 2))
		}, []int{4, 5, 7}, []int{7, 3}, 1},
		{"free-axes-reordered", func(bld backends.Builder, must func(backends.Op, error) backends.Op, x, y backends.Op) backends.Op {
			// x's free axes come out of the transpose reversed: reading x through would
			// reorder the output, so the transpose stays.
			return must(bld.DotGeneral(must(bld.Transpose(x, 1, 0, 2)), []int{2}, nil, y, []int{0}, nil))
		}, []int{4, 5, 7}, []int{7, 3}, 1},
	}
	sg := newSimpleGo(t)
	gb := newGotpu(t, Config{})
	for _, dt := range []dtypes.DType{dtypes.Float32, dtypes.BFloat16} {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/%s", dt, c.name), func(t *testing.T) {
				build := func(b backends.Backend) backends.Executable {
					bld := b.Builder(c.name)
					must := mustOp(t)
					x := must(bld.Parameter("x", shapes.Make(dt, c.x...), nil))
					y := must(bld.Parameter("y", shapes.Make(dt, c.y...), nil))
					exec, err := bld.Compile([]backends.Op{c.build(bld, must, x, y)}, nil)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(exec.Finalize)
					return exec
				}
				rng := rand.New(rand.NewPCG(5, uint64(len(c.name))))
				args := []arg{{randomFlat(rng, dt, size(c.x)), c.x}, {randomFlat(rng, dt, size(c.y)), c.y}}
				exec := build(gb)
				if st := exec.(*Executable).Stats(); st.Transposes != c.wantTransposes || st.Segments != 0 {
					t.Fatalf("%+v: want %d transposes and no segment", st, c.wantTransposes)
				}
				want := execute(t, sg, build(sg), args, nil)[0]
				got := execute(t, gb, exec, args, nil)[0]
				tol := 1e-5
				if dt == dtypes.BFloat16 {
					tol = 1.0 / 128
				}
				g, w := asF64(got), asF64(want)
				if len(g) != len(w) {
					t.Fatalf("%d values, want %d", len(g), len(w))
				}
				for i := range w {
					if math.Abs(g[i]-w[i]) > tol*(1+math.Abs(w[i])) {
						t.Fatalf("element %d is %g, simplego's is %g", i, g[i], w[i])
					}
				}
			})
		}
	}
}

// asF64 widens float32 or bfloat16 flat data.
func asF64(flat any) []float64 {
	var out []float64
	switch x := flat.(type) {
	case []float32:
		for _, v := range x {
			out = append(out, float64(v))
		}
	case []bfloat16.BFloat16:
		for _, v := range x {
			out = append(out, float64(v.Float32()))
		}
	}
	return out
}

func size(dims []int) int {
	n := 1
	for _, d := range dims {
		n *= d
	}
	return n
}
