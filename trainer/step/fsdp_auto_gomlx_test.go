//go:build !noxla

package step

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/distributed"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/gotpu/gotpu/xla"
	"github.com/gotpu/gotpu/xla/xlatest"
)

// TestFSDPAutoShardingExecMatchesTrace: the program an FSDP stepper builds on a PJRT plugin — the
// train Exec configured as Dispatch configures it on such a runtime (AutoSharding over the mesh,
// the batch's and the window's input shardings, the output shardings set by autoOutputs), given
// each of the 8 devices its shard of a global batch — is, as GoMLX's own XLA backend builds it,
// byte for byte the program FSDPStableHLO prints (and the golden file pins). No plugin runs it
// here: this checks everything up to XLA's compiler.
func TestFSDPAutoShardingExecMatchesTrace(t *testing.T) {
	s := fsdpGoldenStepper(t)
	want, err := s.FSDPStableHLO(context.Background(), goldenBatch)
	if err != nil {
		t.Fatal(err)
	}
	s.auto = true
	be := xlatest.NewGoMLXBackend(goldenReplicas)
	var e *mlctx.Exec
	e, err = mlctx.NewExec(be, s.model.Context(), s.autoOutputs(&e, s.trainGraph, s.trainOutputSpecs))
	if err != nil {
		t.Fatal(err)
	}
	s.autoExec(e)
	specs, err := s.autoInputSpecs([]int{2, 2, 2}, 2, false)
	if err != nil {
		t.Fatal(err)
	}
	e.WithInputShardingSpecs(specs...)
	if err := e.PreCompile(goldenArgs(goldenReplicas)...); err == nil {
		t.Fatal("GoMLX compiled without a PJRT client?")
	}
	text := be.Module(t)
	name := regexp.MustCompile(`^module @\S+`)
	got := name.ReplaceAllString(text, "module @m")
	if w := name.ReplaceAllString(want, "module @m"); got != w {
		t.Errorf("GoMLX's program for the PJRT FSDP step differs from FSDPStableHLO's at %s", firstLineDiffStep(got, w))
	}
}

// firstLineDiffStep shows where two texts part (lines cut at 400 characters).
func firstLineDiffStep(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	cut := func(s string) string { return s[:min(len(s), 400)] }
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			return fmt.Sprintf("line %d:\n  GoMLX: %s\n  trace: %s", i+1, cut(al[i]), cut(bl[i]))
		}
	}
	return fmt.Sprintf("lengths differ: %d vs %d lines", len(al), len(bl))
}

// goldenArgs are per-device train-program arguments for goldenBatch (three batch tensors, the
// window table and the counter), for n devices.
func goldenArgs(n int) []any {
	var args []any
	for range n {
		for range 3 {
			args = append(args, tensors.FromShape(shapes.Make(dtypes.Int32, goldenBatch.Size, goldenBatch.SeqLen)))
		}
		args = append(args, tensors.FromShape(shapes.Make(dtypes.Float32, 1, replicatedScalars)), tensors.FromShape(shapes.Make(dtypes.Int32, 3)))
	}
	return args
}

// TestDataParallelOnPJRTIsAutoSharding: GoMLX v0.26.0's XLA backend cannot build the SPMD form of
// the data-parallel step (context.Exec.SPMD gives every variable a replicated sharding spec, and
// the builder resolves specs against AutoSharding meshes only), so on a PJRT plugin New makes
// data parallelism the AutoSharding program with an fsdp axis of 1: the batch split over the
// data axis, every parameter and optimizer variable replicated. Both shown with GoMLX's own
// backend, up to the missing PJRT client.
func TestDataParallelOnPJRTIsAutoSharding(t *testing.T) {
	spmd := goldenStepper(t)
	mesh, err := distributed.NewDeviceMesh([]int{goldenReplicas}, []string{xla.ReplicaAxis})
	if err != nil {
		t.Fatal(err)
	}
	e, err := mlctx.NewExec(xlatest.NewGoMLXBackend(goldenReplicas), spmd.model.Context(), spmd.trainGraph)
	if err != nil {
		t.Fatal(err)
	}
	e.SPMD(mesh)
	if err := e.PreCompile(goldenArgs(goldenReplicas)...); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("GoMLX's XLA backend and the SPMD data-parallel step: %v; want its \"mesh not found\" refusal", err)
	}

	s := goldenStepper(t)
	if s.fsdp, err = s.newFSDPPlan(FSDP{Data: goldenReplicas, Shard: 1}); err != nil {
		t.Fatal(err)
	}
	s.auto = true
	be := xlatest.NewGoMLXBackend(goldenReplicas)
	var ae *mlctx.Exec
	if ae, err = mlctx.NewExec(be, s.model.Context(), s.autoOutputs(&ae, s.trainGraph, s.trainOutputSpecs)); err != nil {
		t.Fatal(err)
	}
	s.autoExec(ae)
	if err := s.shardVariables(); err != nil {
		t.Fatal(err)
	}
	specs, err := s.autoInputSpecs([]int{2, 2, 2}, 2, false)
	if err != nil {
		t.Fatal(err)
	}
	ae.WithInputShardingSpecs(specs...)
	if err := ae.PreCompile(goldenArgs(goldenReplicas)...); err == nil {
		t.Fatal("GoMLX compiled without a PJRT client?")
	}
	m, err := xla.ParseStableHLO(be.Module(t))
	if err != nil {
		t.Fatal(err)
	}
	if m.NumPartitions != goldenReplicas {
		t.Errorf("num_partitions %d, want %d", m.NumPartitions, goldenReplicas)
	}
	for i := range 3 {
		if sh := m.ArgShardings[i]; sh == nil || !slices.Equal(sh.Axes(0), []string{DataAxis, FSDPAxis}) {
			t.Errorf("batch argument %d: sharding %v, want the rows over the devices", i, sh)
		}
	}
	vars := 0
	for i, name := range m.Args {
		if strings.HasPrefix(name, "%var__") {
			vars++
			if sh := m.ArgShardings[i]; sh == nil || !sh.IsReplicated() {
				t.Errorf("%s: sharding %v, want replicated", name, sh)
			}
		}
	}
	if want := len(s.params) * 3; vars < want {
		t.Errorf("%d variable arguments, want at least %d (parameters and AdamW moments)", vars, want)
	}
}

// TestFSDPEvalOnPJRTKeepsWeightsSharded: on a PJRT plugin an FSDP stepper evaluates with the
// AutoSharding program too — every device gets the whole evaluation batch (replicated), the
// weights keep their fsdp layout (XLA gathers what each device needs), the loss sum, term count
// and logits come back replicated — so evaluation never puts the whole model on one device.
// Built through GoMLX's own backend, up to the missing PJRT client.
func TestFSDPEvalOnPJRTKeepsWeightsSharded(t *testing.T) {
	s := fsdpGoldenStepper(t)
	s.auto = true
	be := xlatest.NewGoMLXBackend(goldenReplicas)
	var e *mlctx.Exec
	var err error
	if e, err = mlctx.NewExec(be, s.model.Context(), s.autoOutputs(&e, s.evalGraph, s.trainOutputSpecs)); err != nil {
		t.Fatal(err)
	}
	s.autoExec(e)
	if err := s.shardVariables(); err != nil {
		t.Fatal(err)
	}
	s.eval = e
	s.autoEvalSpecs(3)
	var args []any
	for range goldenReplicas {
		for range 3 {
			args = append(args, tensors.FromShape(shapes.Make(dtypes.Int32, goldenBatch.Size, goldenBatch.SeqLen)))
		}
	}
	if err := e.PreCompile(args...); err == nil {
		t.Fatal("GoMLX compiled without a PJRT client?")
	}
	m, err := xla.ParseStableHLO(be.Module(t))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if sh := m.ArgShardings[i]; sh == nil || !sh.IsReplicated() {
			t.Errorf("batch argument %d: sharding %v, want replicated", i, sh)
		}
	}
	if len(m.Results) != 3 {
		t.Fatalf("%d results, want the loss sum, the term count and the logits", len(m.Results))
	}
	for i, sh := range m.ResultShardings {
		if sh == nil || !sh.IsReplicated() {
			t.Errorf("result %d: sharding %v, want replicated", i, sh)
		}
	}
	c := s.model.Context()
	for i, p := range s.params {
		k := m.ArgIndex(s.variable(c, p).ParameterName())
		if k < 0 {
			t.Fatalf("%s is not an argument", p.Name)
		}
		l := s.fsdp.layouts[i]
		if sh := m.ArgShardings[k]; sh == nil || l.Sharded() && !slices.Equal(sh.Axes(l.Dim), []string{FSDPAxis}) {
			t.Errorf("%s: sharding %v, want its layout %s", p.Name, sh, l)
		}
	}
}

// TestFSDPAccumulationOnPJRTKeepsShards: the gradient program of an accumulating FSDP step on a
// PJRT plugin (a later micro-batch: the batch, then the loss-sum pair, term count and gradient
// sums carried from the earlier ones) takes and returns every gradient sum in its parameter's
// layout, so the accumulators stay sharded between micro-batches, and updates no variable. Built
// through GoMLX's own backend, up to the missing PJRT client.
func TestFSDPAccumulationOnPJRTKeepsShards(t *testing.T) {
	s := fsdpGoldenStepper(t)
	s.auto = true
	be := xlatest.NewGoMLXBackend(goldenReplicas)
	var e *mlctx.Exec
	var err error
	if e, err = mlctx.NewExec(be, s.model.Context(), s.autoOutputs(&e, s.gradGraph, s.gradOutputSpecs)); err != nil {
		t.Fatal(err)
	}
	s.autoExec(e)
	if err := s.shardVariables(); err != nil {
		t.Fatal(err)
	}
	specs, err := s.autoInputSpecs([]int{2, 2, 2}, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	e.WithInputShardingSpecs(specs...)
	var args []any
	for range goldenReplicas {
		for range 3 {
			args = append(args, tensors.FromShape(shapes.Make(dtypes.Int32, goldenBatch.Size, goldenBatch.SeqLen)))
		}
		for range carryScalars {
			args = append(args, tensors.FromShape(shapes.Make(dtypes.Float32)))
		}
		for i := range s.params {
			args = append(args, tensors.FromShape(shapes.Make(dtypes.Float32, s.accShape(i)...)))
		}
	}
	if err := e.PreCompile(args...); err == nil {
		t.Fatal("GoMLX compiled without a PJRT client?")
	}
	m, err := xla.ParseStableHLO(be.Module(t))
	if err != nil {
		t.Fatal(err)
	}
	if want := carryScalars + len(s.params); len(m.Results) != want {
		t.Fatalf("%d results, want %d (loss pair, count, a gradient sum per parameter): a variable was updated?", len(m.Results), want)
	}
	for i, l := range s.fsdp.layouts {
		in, out := m.ArgShardings[3+carryScalars+i], m.ResultShardings[carryScalars+i]
		for _, sh := range []*xla.HLOSharding{in, out} {
			if sh == nil || l.Sharded() && !slices.Equal(sh.Axes(l.Dim), []string{FSDPAxis}) {
				t.Errorf("%s's gradient sum: sharding %v, want its layout %s", s.params[i].Name, sh, l)
			}
		}
	}
}
