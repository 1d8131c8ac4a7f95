//go:build !noxla

package xla

// TestAutoShardingMatchesGoMLXExec pins an AutoSharding trace byte for byte to the program GoMLX's
// own context.Exec builds on GoMLX's XLA backend for the same graph function, built without a
// plugin on xla/xlatest's GoMLXBackend (which also fakes the host→device transfers context.Exec
// does before building).

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/distributed"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/gotpu/gotpu/xla/xlatest"
)

func TestAutoShardingMatchesGoMLXExec(t *testing.T) {
	f := newShardedFixture(t)
	f.spec.Name = "fsdp_step#0" // context.Exec names its first graph "<name>#0"
	got, err := StableHLOContext(context.Background(), f.spec, f.c, f.fn)
	if err != nil {
		t.Fatal(err)
	}
	// The trace leaves the variables' specs as they were.
	if f.b.ShardingSpec() != nil || f.cnt.ShardingSpec() != nil || f.w.ShardingSpec() != f.byFSDP {
		t.Errorf("specs after the trace: b %s, count %s, w %s", f.b.ShardingSpec(), f.cnt.ShardingSpec(), f.w.ShardingSpec())
	}

	// GoMLX's context.Exec for the same function: AutoSharding over the mesh, the input's spec, and
	// output specs for the updated variables (w, m, count in context order) then y and the loss.
	be := xlatest.NewGoMLXBackend(f.mesh.NumDevices())
	e, err := mlctx.NewExec(be, f.c, f.fn)
	if err != nil {
		t.Fatal(err)
	}
	replicated := distributed.NewReplicatedShardingSpec(f.mesh)
	var varSpecs []*distributed.ShardingSpec
	for v := range f.c.IterVariables() {
		if v == f.w || v == f.m || v == f.cnt {
			varSpecs = append(varSpecs, cmp.Or(v.ShardingSpec(), replicated))
		}
	}
	e.WithName("fsdp_step").AutoSharding(f.mesh).WithInputShardingSpecs(f.byData).
		WithOutputShardingSpecs(append(varSpecs, f.byData, replicated)...)
	shards := make([]any, f.mesh.NumDevices()) // one [2, 8] shard of x per device
	for i := range shards {
		shards[i] = tensors.FromShape(f32(2, 8))
	}
	if err := e.PreCompile(shards...); err == nil {
		t.Fatal("GoMLX compiled without a PJRT client?")
	}
	want := be.Module(t)
	if got != want {
		t.Errorf("the AutoSharding trace differs from GoMLX's context.Exec program at %s\ngotpu:\n%s\nGoMLX:\n%s",
			firstLineDiff(got, want), got, want)
	}
	if !strings.Contains(want, `sdy.sharding = #sdy.sharding<@mesh, [{"fsdp"}, {}]>`) {
		t.Errorf("GoMLX's program lacks the sharded w:\n%s", want)
	}
}

// firstLineDiff shows where two texts part.
func firstLineDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			return fmt.Sprintf("line %d:\n  gotpu: %s\n  GoMLX: %s", i+1, al[i], bl[i])
		}
	}
	return fmt.Sprintf("lengths differ: %d vs %d lines", len(al), len(bl))
}
