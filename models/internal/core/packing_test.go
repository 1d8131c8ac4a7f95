package core

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// packedMask runs PackedCausalMask on host position ids and key mask [B, T].
func packedMask(t *testing.T, pos, keys [][]int32, window int) [][][]bool {
	t.Helper()
	rt := openGo(t)
	B, T := len(pos), len(pos[0])
	flat := func(v [][]int32) []int32 {
		var out []int32
		for _, r := range v {
			out = append(out, r...)
		}
		return out
	}
	e, err := NewExec(rt.Backend(), func(p, k *Node) *Node { return PackedCausalMask(p, k, window) })
	if err != nil {
		t.Fatal(err)
	}
	defer e.Finalize()
	out, err := e.Exec(tensors.FromFlatDataAndDimensions(flat(pos), B, T), tensors.FromFlatDataAndDimensions(flat(keys), B, T))
	if err != nil {
		t.Fatal(err)
	}
	return out[0].Value().([][][]bool)
}

// render draws a [T, T] mask as rows of '#' (may see) and '.'.
func render(m [][]bool) string {
	var sb strings.Builder
	for _, row := range m {
		for _, v := range row {
			sb.WriteByte(map[bool]byte{true: '#', false: '.'}[v])
		}
		sb.WriteByte('\n')
	}
	return sb.String()
}

// TestPackedCausalMask: two examples and padding in one row, a plain row, and a row of padding
// only. Causal within each example, nothing across, padding keys hidden, and every query sees at
// least itself (padding queries included), so no softmax row is empty.
func TestPackedCausalMask(t *testing.T) {
	pos := [][]int32{
		{0, 1, 2, 0, 1, 2, 3}, // examples of 3 and 2 tokens, padding continuing the second
		{0, 1, 2, 3, 4, 5, 6}, // one example of 4 tokens, padding
		{0, 1, 2, 3, 4, 5, 6}, // padding only
	}
	keys := [][]int32{{1, 1, 1, 1, 1, 0, 0}, {1, 1, 1, 1, 0, 0, 0}, {0, 0, 0, 0, 0, 0, 0}}
	got := packedMask(t, pos, keys, 0)
	want := []string{
		"#......\n##.....\n###....\n...#...\n...##..\n...###.\n...##.#\n",
		"#......\n##.....\n###....\n####...\n#####..\n####.#.\n####..#\n",
		"#......\n.#.....\n..#....\n...#...\n....#..\n.....#.\n......#\n",
	}
	for b := range pos {
		if render(got[b]) != want[b] {
			t.Errorf("row %d: mask\n%swant\n%s", b, render(got[b]), want[b])
		}
	}
	// A window of 2 (HF's sliding window: i - j < 2) inside the examples.
	got = packedMask(t, pos[:1], keys[:1], 2)
	if w := "#......\n##.....\n.##....\n...#...\n...##..\n....##.\n......#\n"; render(got[0]) != w {
		t.Errorf("window 2: mask\n%swant\n%s", render(got[0]), w)
	}
}

// TestPositionsRefusesBadShapes: position ids must be integer and shaped like input_ids, and do
// not go with a cache offset.
func TestPositionsRefusesBadShapes(t *testing.T) {
	rt := openGo(t)
	run := func(build func(g *Graph) *Node) (msg string) {
		defer func() {
			if r := recover(); r != nil {
				msg = fmt.Sprint(r)
			}
		}()
		e, err := NewExec(rt.Backend(), build)
		if err != nil {
			return err.Error()
		}
		defer e.Finalize()
		if _, err := e.Exec(); err != nil {
			return err.Error()
		}
		return ""
	}
	i32 := func(g *Graph, dims ...int) *Node { return Zeros(g, shapes.Make(dtypes.Int32, dims...)) }
	for _, tc := range []struct {
		name   string
		build  func(g *Graph) *Node
		substr string
	}{
		{"shape", func(g *Graph) *Node { return Positions(i32(g, 2, 4), nil, i32(g, 2, 3)) }, "like input_ids"},
		{"batch", func(g *Graph) *Node { return Positions(i32(g, 2, 4), nil, i32(g, 1, 4)) }, "like input_ids"},
		{"dtype", func(g *Graph) *Node {
			return Positions(i32(g, 2, 4), nil, Zeros(g, shapes.Make(dtypes.Float32, 2, 4)))
		}, "integer"},
		{"offset", func(g *Graph) *Node { return Positions(i32(g, 1, 4), Scalar(g, dtypes.Int32, 3), i32(g, 1, 4)) }, "KV-cache offset"},
		{"fine", func(g *Graph) *Node { return Positions(i32(g, 2, 4), nil, Zeros(g, shapes.Make(dtypes.Int64, 2, 4))) }, ""},
	} {
		if msg := run(tc.build); (tc.substr == "") != (msg == "") || !strings.Contains(msg, tc.substr) {
			t.Errorf("%s: got %q, want mention of %q", tc.name, msg, tc.substr)
		}
	}
}
