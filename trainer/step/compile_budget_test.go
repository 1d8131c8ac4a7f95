package step

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/xla"
)

// TestCompilationsPerShapeBudget: a run whose collator declares K bucket shapes compiles one
// train program (the SPMD step over 2 replicas) per declared shape — K — however many steps it
// runs; evaluating adds one program per shape; a batch outside the budget is refused before
// anything compiles. On the pure-Go backend with 2 virtual devices, for real.
func TestCompilationsPerShapeBudget(t *testing.T) {
	ctx := context.Background()
	rt := openGoDevices(t, xla.GoBackendGotpu, 2)
	m, err := models.Load(ctx, rt, fixtureDir("bert-tiny"), models.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const replicas, perReplica = 2, 2
	s, err := New(rt, m, Config{Optimizer: DefaultAdamW(), NumReplicas: replicas})
	if err != nil {
		t.Fatal(err)
	}
	coll := data.BucketCollator{Buckets: []int{8, 16, 32}}
	budget := data.NewShapeBudget(coll.Shapes(perReplica)...)
	k := budget.Declared()
	rng := rand.New(rand.NewPCG(9, 9))
	shard := func(longest int) *data.Batch {
		exs := make([]data.Example, perReplica)
		for i := range exs {
			ids := make([]int32, max(1, longest-i)) // the first example sets the bucket
			for j := range ids {
				ids[j] = int32(1 + rng.IntN(999))
			}
			exs[i] = data.Example{InputIDs: ids, Label: int32(rng.IntN(3)), HasLabel: true}
		}
		b, err := coll.Collate(exs)
		if err != nil {
			t.Fatal(err)
		}
		if err := budget.Check(b.Size, b.SeqLen); err != nil {
			t.Fatal(err)
		}
		return b
	}
	// Longest example per step: every bucket, then each again in another order.
	lengths := []int{5, 12, 30, 16, 3, 32, 9, 8}
	for i, longest := range lengths {
		shards := make([]*data.Batch, replicas)
		for r := range shards {
			shards[r] = shard(longest)
		}
		if _, err := s.Step(ctx, [][]*data.Batch{shards}, 1e-3); err != nil {
			t.Fatal(err)
		}
		n, _ := s.Compilations()
		if i == k-1 && n != k {
			t.Fatalf("after one step per bucket: %d programs compiled, want %d (one train step per shape)", n, k)
		}
	}
	if n, _ := s.Compilations(); n != k || budget.Seen() != k {
		t.Fatalf("%d steps over %d declared shapes: %d programs compiled (want %d), %d shapes seen",
			len(lengths), k, n, k, budget.Seen())
	}
	for _, longest := range []int{7, 15, 31, 2} {
		if _, _, _, err := s.Evaluate(ctx, shard(longest)); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := s.Compilations(); n != 2*k {
		t.Errorf("after evaluating every bucket: %d programs, want %d", n, 2*k)
	}
	// Outside the budget: too long for the largest bucket, or another batch size.
	if _, err := coll.Collate([]data.Example{{InputIDs: make([]int32, 33), HasLabel: true}}); err == nil ||
		!strings.Contains(err.Error(), "largest bucket") {
		t.Errorf("33 tokens with buckets %v: %v", coll.Buckets, err)
	}
	if err := budget.Check(perReplica+1, 8); err == nil {
		t.Error("an undeclared batch size passed the shape budget")
	}
	if n, _ := s.Compilations(); n != 2*k {
		t.Errorf("refused shapes compiled something: %d programs", n)
	}
}
