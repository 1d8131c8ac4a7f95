package shard

import (
	"errors"
	"slices"
	"testing"
)

func TestChoose(t *testing.T) {
	cases := []struct {
		name  string
		shape []int
		n     int
		min   int64
		dim   int
		shard []int
	}{
		{"c_attn.weight", []int{768, 2304}, 8, 0, 0, []int{96, 2304}},
		{"wte", []int{50257, 768}, 8, 0, 1, []int{50257, 96}},
		{"ln_f.bias", []int{768}, 8, 0, 0, []int{96}},
		{"ln_f.bias small", []int{768}, 8, 1000, -1, []int{768}},
		{"one device", []int{50257, 768}, 1, 0, -1, []int{50257, 768}},
		{"scalar", nil, 8, 0, -1, nil},
		{"hybrid fsdp 4", []int{6, 8}, 4, 0, 1, []int{6, 2}},
	}
	for _, c := range cases {
		l, err := Choose(c.name, c.shape, c.n, c.min)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if l.Dim != c.dim || !slices.Equal(l.ShardShape, c.shard) {
			t.Errorf("%s: %s, shard %v; want dim %d shard %v", c.name, l, l.ShardShape, c.dim, c.shard)
		}
		if l.Sharded() && l.ShardElements()*int64(c.n) != l.Elements() {
			t.Errorf("%s: %d elements per shard × %d != %d", c.name, l.ShardElements(), c.n, l.Elements())
		}
	}
}

func TestChooseUneven(t *testing.T) {
	_, err := Choose("odd.bias", []int{7, 3}, 8, 0)
	if !errors.Is(err, ErrUneven) {
		t.Fatalf("err = %v, want ErrUneven", err)
	}
	if l, err := Choose("odd.bias", []int{7, 3}, 8, 22); err != nil || l.Sharded() {
		t.Fatalf("under min_num_params: %v, %v; want replicated", l, err)
	}
	if _, err := Choose("x", []int{4}, 0, 0); err == nil {
		t.Fatal("fsdp size 0 accepted")
	}
	if _, err := Choose("x", []int{-4}, 2, 0); err == nil {
		t.Fatal("negative dimension accepted")
	}
}

func FuzzChoose(f *testing.F) {
	f.Add(768, 2304, 8, int64(0))
	f.Add(50257, 768, 8, int64(100))
	f.Fuzz(func(t *testing.T, a, b, n int, min int64) {
		if n < 1 || n > 1<<16 || a < 0 || b < 0 {
			return
		}
		l, err := Choose("t", []int{a, b}, n, min)
		if err != nil {
			return
		}
		if l.Sharded() && (l.Shape[l.Dim]%n != 0 || l.ShardShape[l.Dim]*n != l.Shape[l.Dim]) {
			t.Fatalf("%v: bad shard %v", l, l.ShardShape)
		}
	})
}
