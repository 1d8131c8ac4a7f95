package step

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/internal/shard"
	"github.com/gotpu/gotpu/xla"
)

const goldenFSDPName = "gpt2-tiny-fsdp-step-8"

// fsdpGoldenStepper is the golden stepper over a 1 × 8 fsdp mesh.
func fsdpGoldenStepper(t *testing.T) *Stepper {
	return goldenStepperWith(t, &FSDP{Data: 1, Shard: goldenReplicas})
}

// checkFSDPStep verifies a parsed FSDPStableHLO of s: an AutoSharding module over the mesh with
// the step's devices as partitions; the batch split over every device on its first dimension;
// every parameter and optimizer-state argument, and the result that updates it, annotated with
// its layout over the fsdp axis (sharded ones on exactly their dimension, so no optimizer state
// of a sharded parameter is replicated); no collective and no host transfer written in the text
// (Shardy inserts the collectives). It returns every violation found.
func checkFSDPStep(m *xla.HLOModule, s *Stepper, batchArgs int) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	f := s.fsdp
	if m.NumPartitions != f.cfg.Data*f.cfg.Shard {
		bad("num_partitions %d, want %d", m.NumPartitions, f.cfg.Data*f.cfg.Shard)
	}
	if len(m.Meshes) != 1 || m.Meshes[0].NumDevices() != m.NumPartitions {
		bad("meshes %v: want one mesh of the %d devices", m.Meshes, m.NumPartitions)
	} else {
		var axes []string
		for _, a := range m.Meshes[0].Axes {
			axes = append(axes, a.Name)
		}
		if !slices.Equal(axes, []string{DataAxis, FSDPAxis}) {
			bad("mesh axes %v, want [%s %s]", axes, DataAxis, FSDPAxis)
		}
	}
	for i := range batchArgs {
		if sh := m.ArgShardings[i]; sh == nil || !slices.Equal(sh.Axes(0), []string{DataAxis, FSDPAxis}) {
			bad("batch argument %s: sharding %v, want its first dimension over [%s %s]", m.Args[i], sh, DataAxis, FSDPAxis)
		}
	}
	type sharding = interface {
		Axes(int) []string
		IsReplicated() bool
	}
	wantLayout := func(name string, sh sharding, isNil bool, l shard.Layout) {
		switch {
		case isNil:
			bad("%s: no sharding annotation", name)
		case !l.Sharded() && !sh.IsReplicated():
			bad("%s: sharded, but its layout is replicated", name)
		case l.Sharded():
			for d := range l.Shape {
				got := sh.Axes(d)
				if d == l.Dim && !slices.Equal(got, []string{FSDPAxis}) || d != l.Dim && len(got) > 0 {
					bad("%s: dimension %d split over %v; its layout is %s", name, d, got, l)
				}
			}
		}
	}
	want := func(name string, sh sharding, isNil bool, i int) { wantLayout(name, sh, isNil, f.layouts[i]) }
	c := s.model.Context()
	argVars := map[string]int{} // variable parameter name → parameter index
	for i, p := range s.params {
		names := []string{s.variable(c, p).ParameterName()}
		for _, st := range s.stateShapes(p) {
			names = append(names, c.GetVariableByScopeAndName(optimizerScope(st.kind, p), p.Var()).ParameterName())
		}
		for _, n := range names {
			k := m.ArgIndex(n)
			if k < 0 {
				bad("%s: not an argument of the program", n)
				continue
			}
			want(n, m.ArgShardings[k], m.ArgShardings[k] == nil, i)
			argVars[n] = i
		}
	}
	// A frozen parameter (a LoRA adapter's base) is an argument with its layout, like a trained
	// one, and never a result: the program does not update it.
	frozen := map[string]bool{}
	for _, fp := range f.frozen {
		n := fp.v.ParameterName()
		frozen[n] = true
		if k := m.ArgIndex(n); k < 0 {
			bad("frozen %s: not an argument of the program", n)
		} else {
			wantLayout("frozen "+n, m.ArgShardings[k], m.ArgShardings[k] == nil, fp.layout)
		}
	}
	// Updated variables are returned first, in the context's variable order (xla.StableHLOContext).
	var updated []string
	for v := range c.IterVariables() {
		if m.ArgIndex(v.ParameterName()) >= 0 && !frozen[v.ParameterName()] {
			updated = append(updated, v.ParameterName())
		}
	}
	if len(m.Results) < len(updated) {
		bad("%d results for %d updated variables", len(m.Results), len(updated))
	} else {
		for k, n := range updated {
			if i, ok := argVars[n]; ok {
				want(n+" (result)", m.ResultShardings[k], m.ResultShardings[k] == nil, i)
			}
		}
	}
	var walk func(ops []xla.HLOOp)
	walk = func(ops []xla.HLOOp) {
		for _, op := range ops {
			for _, h := range append([]string{"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "collective_permute"}, hostTransferOps...) {
				if strings.HasSuffix(op.Name, "."+h) {
					bad("%s in the program: the partitioner inserts collectives, and a step has no host transfer", op.Name)
				}
			}
			for _, r := range op.Regions {
				walk(r)
			}
		}
	}
	walk(m.Ops)
	return errs
}

// TestFSDPStepGolden pins the StableHLO of the GPT-2 fixture's FSDP train step over 8 devices
// (the program gotpu hands a PJRT plugin; `make golden` rewrites it) and checks its annotations.
func TestFSDPStepGolden(t *testing.T) {
	s := fsdpGoldenStepper(t)
	text, err := s.FSDPStableHLO(context.Background(), goldenBatch)
	if err != nil {
		t.Fatal(err)
	}
	m, err := xla.ParseStableHLO(text)
	if err != nil {
		t.Fatal(err)
	}
	if errs := checkFSDPStep(m, s, 3); len(errs) > 0 {
		t.Fatal(errors.Join(errs...))
	}
	compareGolden(t, goldenFSDPName+".stablehlo.txt", []byte(text))
}

// TestFSDPStepCheckerRejectsUnannotated: the same step traced without the sharding annotations
// (variables without sharding specs, batch without shardings) fails the checker, naming the
// batch and the variables.
func TestFSDPStepCheckerRejectsUnannotated(t *testing.T) {
	s := fsdpGoldenStepper(t)
	spec, err := s.fsdpHLOSpec(goldenBatch, false)
	if err != nil {
		t.Fatal(err)
	}
	text, err := xla.StableHLOContext(context.Background(), spec, s.model.Context(), s.trainGraph)
	if err != nil {
		t.Fatal(err)
	}
	m, err := xla.ParseStableHLO(text)
	if err != nil {
		t.Fatal(err)
	}
	errs := checkFSDPStep(m, s, 3)
	joined := errors.Join(errs...)
	if joined == nil {
		t.Fatal("the checker accepted a step without sharding annotations")
	}
	for _, want := range []string{"batch argument", "adamw_m", "adamw_v", "wte"} {
		if !strings.Contains(joined.Error(), want) {
			t.Errorf("the checker's errors do not name %q:\n%v", want, joined)
		}
	}
	t.Logf("%d violations, e.g. %v", len(errs), errs[0])
}
