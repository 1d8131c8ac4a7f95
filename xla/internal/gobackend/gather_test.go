package gobackend

import (
	"fmt"
	"math"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// TestRowGather: the all-gather gotpu's FSDP step writes as an all-reduce (a broadcast shard
// times a one-hot row mask, summed over the group) runs as a native row gather, with results
// bitwise those of the all-reduce of the products it replaces — the same graph with the broadcast
// written so that it is not recognised — for one-hot rows, a row two replicas claim (a sum), a
// row none claims (zeros, as an index out of range leaves it) and a NaN in a shard; over one group
// and over two.
func TestRowGather(t *testing.T) {
	const replicas, rows = 4, 2
	gb := newGotpu(t, Config{NumDevices: replicas})
	shard := shapes.Make(dtypes.Float32, 3, 5)
	build := func(name string, recognisable bool, groups [][]int) (*Executable, error) {
		bld := gb.Builder(name)
		if err := bld.DistributedSPMD(replicas); err != nil {
			return nil, err
		}
		x, err := bld.Parameter("x", shard, nil)
		if err != nil {
			return nil, err
		}
		idx, err := bld.Parameter("idx", shapes.Make(dtypes.Int32), nil)
		if err != nil {
			return nil, err
		}
		whole := shapes.Make(dtypes.Float32, rows, 3, 5)
		var b backends.Op
		if recognisable {
			r, err := bld.Reshape(x, 1, 3, 5)
			if err != nil {
				return nil, err
			}
			b, err = bld.BroadcastInDim(r, whole, []int{0, 1, 2})
			if err != nil {
				return nil, err
			}
		} else if b, err = bld.BroadcastInDim(x, whole, []int{1, 2}); err != nil {
			return nil, err
		}
		iota, err := bld.Iota(shapes.Make(dtypes.Int32, rows), 0)
		if err != nil {
			return nil, err
		}
		eq, err := bld.Equal(iota, idx)
		if err != nil {
			return nil, err
		}
		m, err := bld.ConvertDType(eq, dtypes.Float32)
		if err != nil {
			return nil, err
		}
		mr, err := bld.Reshape(m, rows, 1, 1)
		if err != nil {
			return nil, err
		}
		prod, err := bld.Mul(b, mr)
		if err != nil {
			return nil, err
		}
		outs, err := bld.AllReduce([]backends.Op{prod}, backends.ReduceOpSum, groups)
		if err != nil {
			return nil, err
		}
		exec, err := bld.Compile(outs, nil)
		if err != nil {
			return nil, err
		}
		return exec.(*Executable), nil
	}
	for _, c := range []struct {
		name   string
		groups [][]int
		idx    [replicas]int32
	}{
		{"one-hot, two groups", [][]int{{0, 2}, {1, 3}}, [replicas]int32{0, 1, 1, 0}},
		{"shared and missing rows, one group", nil, [replicas]int32{1, 1, 5, 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var results [2][][]float32
			for k, recognisable := range []bool{true, false} {
				exec, err := build(fmt.Sprintf("%s/%v", c.name, recognisable), recognisable, c.groups)
				if err != nil {
					t.Fatal(err)
				}
				defer exec.Finalize()
				st := exec.Stats()
				if recognisable && (st.AllGathers != 1 || st.AllReduces != 0) || !recognisable && (st.AllGathers != 0 || st.AllReduces != 1) {
					t.Fatalf("recognisable %v: split %+v", recognisable, st)
				}
				var bufs []backends.Buffer
				for r := range replicas {
					flat := make([]float32, shard.Size())
					for i := range flat {
						flat[i] = float32(r*100+i) * 0.37
					}
					if r == 1 {
						flat[4] = float32(math.NaN())
					}
					xb, err := gb.BufferFromFlatData(backends.DeviceNum(r), flat, shard)
					if err != nil {
						t.Fatal(err)
					}
					ib, err := gb.BufferFromFlatData(backends.DeviceNum(r), []int32{c.idx[r]}, shapes.Make(dtypes.Int32))
					if err != nil {
						t.Fatal(err)
					}
					bufs = append(bufs, xb, ib)
				}
				got, err := exec.Execute(bufs, nil, 0)
				if err != nil {
					t.Fatal(err)
				}
				for r := range replicas {
					d, err := gb.BufferData(got[r])
					if err != nil {
						t.Fatal(err)
					}
					results[k] = append(results[k], append([]float32(nil), d.([]float32)...))
				}
			}
			for r := range replicas {
				for i, g := range results[0][r] {
					w := results[1][r][i]
					if math.Float32bits(g) != math.Float32bits(w) && !(math.IsNaN(float64(g)) && math.IsNaN(float64(w))) {
						t.Fatalf("replica %d [%d]: row gather %v, all-reduce %v", r, i, g, w)
					}
				}
			}
		})
	}
}
