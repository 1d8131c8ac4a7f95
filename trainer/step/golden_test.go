package step

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/xla"
)

// update rewrites the golden files instead of comparing with them (make golden).
var update = flag.Bool("update", false, "rewrite testdata/golden from the programs traced now")

const (
	goldenReplicas = 8
	goldenDir      = "../../testdata/golden"
	goldenName     = "gpt2-tiny-step-8"
)

// goldenBatch is one replica's batch in the golden program (the fixture allows 64 positions).
var goldenBatch = BatchShape{Size: 2, SeqLen: 16}

// hostTransferOps are the StableHLO operations that move data between host and device, or that
// could (a custom call can be anything): none may appear inside a train step.
var hostTransferOps = []string{"infeed", "outfeed", "send", "recv", "custom_call"}

// stepSummary is the structure of a replicated train step that the golden tests pin; it is
// written next to the golden text as JSON, so a change shows as a readable diff.
type stepSummary struct {
	Program     string `json:"program"`
	NumReplicas int    `json:"num_replicas"`
	Inputs      int    `json:"inputs"`
	Outputs     int    `json:"outputs"`
	AllReduce   []struct {
		Operands      int     `json:"operands"`
		ReplicaGroups [][]int `json:"replica_groups"`
		Reduction     string  `json:"reduction"`
	} `json:"all_reduce"`
	HostTransfers int `json:"host_transfers"`
	// UpdatedAfterAllReduce counts the updated variables (parameters and optimizer state) whose new
	// value is computed from the all-reduce's results.
	UpdatedAfterAllReduce int            `json:"updated_after_all_reduce"`
	Ops                   map[string]int `json:"ops"`
}

// checkReplicatedStep verifies a parsed ProgramReplicatedStep of s over n replicas and returns
// its summary: exactly one all_reduce (sum) over replica_groups {0..n-1} of every gradient plus the
// loss sum and term count, each of its results used; every updated parameter and optimizer state
// computed from it; the global loss and count returned straight from it; no host transfer
// anywhere. The first error found is returned with the summary so far.
func checkReplicatedStep(m *xla.HLOModule, s *Stepper, n int) (stepSummary, error) {
	sum := stepSummary{Program: m.Name, NumReplicas: m.NumReplicas, Inputs: len(m.Args), Outputs: len(m.Results),
		Ops: map[string]int{}}
	var walk func(ops []xla.HLOOp)
	walk = func(ops []xla.HLOOp) {
		for _, op := range ops {
			sum.Ops[op.Name]++
			for _, h := range hostTransferOps {
				if strings.HasSuffix(op.Name, "."+h) {
					sum.HostTransfers++
				}
			}
			for _, r := range op.Regions {
				walk(r)
			}
		}
	}
	walk(m.Ops)
	p := len(s.params)
	state := 0 // optimizer variables, all updated in place
	for _, prm := range s.params {
		state += len(s.stateShapes(prm))
	}
	if m.NumReplicas != n {
		return sum, fmt.Errorf("num_replicas = %d, want %d", m.NumReplicas, n)
	}
	if want := p + state + 5; len(m.Results) != want {
		return sum, fmt.Errorf("%d outputs, want %d (%d parameters, %d optimizer variables, loss sum, count, norm, applied, counter)",
			len(m.Results), want, p, state)
	}
	if sum.HostTransfers > 0 {
		return sum, fmt.Errorf("%d host-transfer operations (%v) inside the step", sum.HostTransfers, hostTransferOps)
	}
	ars := m.Find("stablehlo.all_reduce")
	for _, i := range ars {
		op := m.Ops[i]
		groups, err := op.ReplicaGroups()
		if err != nil {
			return sum, err
		}
		red := ""
		if len(op.Regions) == 1 && len(op.Regions[0]) > 0 {
			red = op.Regions[0][0].Name
		}
		sum.AllReduce = append(sum.AllReduce, struct {
			Operands      int     `json:"operands"`
			ReplicaGroups [][]int `json:"replica_groups"`
			Reduction     string  `json:"reduction"`
		}{len(op.Operands), groups, red})
	}
	if len(ars) != 1 {
		return sum, fmt.Errorf("%d stablehlo.all_reduce operations, want exactly 1 (the gradients, loss sum and count of all %d replicas)",
			len(ars), n)
	}
	ar := m.Ops[ars[0]]
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	if g := sum.AllReduce[0].ReplicaGroups; len(g) != 1 || !slices.Equal(g[0], all) {
		return sum, fmt.Errorf("all_reduce replica_groups %v, want [%v]", g, all)
	}
	if r := sum.AllReduce[0].Reduction; r != "stablehlo.add" {
		return sum, fmt.Errorf("all_reduce reduces with %q, want a sum (stablehlo.add)", r)
	}
	if len(ar.Operands) != p+2 {
		return sum, fmt.Errorf("all_reduce has %d operands, want %d (%d gradients, loss sum, count)", len(ar.Operands), p+2, p)
	}
	// Its operands are computed on the replica from its own batch (input_ids is %arg0).
	for _, v := range ar.Operands[:p+1] {
		if _, args := m.Ancestors(v); !slices.Contains(args, "%arg0") {
			return sum, fmt.Errorf("all_reduce operand %s is not computed from the replica's batch", v)
		}
	}
	for _, r := range ar.Results {
		if len(m.Users(r)) == 0 && !slices.Contains(m.Results, r) {
			return sum, fmt.Errorf("all_reduce result %s is never used", r)
		}
	}
	for k, r := range m.Results[:p+state] {
		if !m.DependsOn(r, ars[0]) {
			return sum, fmt.Errorf("updated variable #%d (%s) is not computed from the all-reduced gradients", k, r)
		}
		sum.UpdatedAfterAllReduce++
	}
	if got, want := m.Results[p+state:p+state+2], ar.Results[p:]; !slices.Equal(got, want) {
		return sum, fmt.Errorf("loss sum and count outputs are %v, want the all-reduced %v", got, want)
	}
	for _, r := range m.Results[p+state+2:] {
		if !m.DependsOn(r, ars[0]) {
			return sum, fmt.Errorf("gradient norm / applied / counter output %s does not depend on the all_reduce", r)
		}
	}
	// The update's scalars come from the window table and counter inputs (after the batch), not
	// from constants or the host: every updated parameter descends from both.
	nb := len(s.batchShapes(goldenBatch))
	for _, arg := range []string{fmt.Sprintf("%%arg%d", nb), fmt.Sprintf("%%arg%d", nb+1)} {
		for k, r := range m.Results[:p] {
			if _, args := m.Ancestors(r); !slices.Contains(args, arg) {
				return sum, fmt.Errorf("updated parameter #%d (%s) is not computed from the window input %s", k, r, arg)
			}
		}
	}
	return sum, nil
}

func goldenStepper(t *testing.T) *Stepper { return goldenStepperWith(t, nil) }

// goldenStepperWith is the golden programs' stepper (GPT-2 fixture, goldenReplicas, AdamW with
// weight decay), sharded with fsdp when it is not nil; traced only: the runtime has one device.
func goldenStepperWith(t *testing.T, fsdp *FSDP) *Stepper {
	t.Helper()
	rt := openGo(t)
	m, err := models.Load(context.Background(), rt, fixtureDir("gpt2-tiny"), models.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	opt := DefaultAdamW()
	opt.WeightDecay = 0.01 // exercises HF's decay groups in the update
	s, err := New(rt, m, Config{Optimizer: opt, NumReplicas: goldenReplicas, FSDP: fsdp})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func traceStep(t *testing.T, s *Stepper) (string, *xla.HLOModule) {
	t.Helper()
	text, err := s.StableHLO(context.Background(), ProgramReplicatedStep, goldenBatch)
	if err != nil {
		t.Fatal(err)
	}
	m, err := xla.ParseStableHLO(text)
	if err != nil {
		t.Fatal(err)
	}
	return text, m
}

// compareGolden compares got with the golden file, or rewrites it under -update.
func compareGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join(goldenDir, name)
	if *update {
		if err := os.MkdirAll(goldenDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d bytes)", path, len(got))
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run `make golden` to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the program traced now at %s\nIf the change is intended, run `make golden` and review the diff.",
			path, firstDiff(string(got), string(want)))
	}
}

func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range min(len(g), len(w)) {
		if g[i] != w[i] {
			return fmt.Sprintf("line %d:\n  now:    %s\n  golden: %s", i+1, g[i], w[i])
		}
	}
	return fmt.Sprintf("the end: %d lines now, %d in the golden file", len(g), len(w))
}

// TestReplicatedStepGolden: the 8-replica GPT-2 train step handed to XLA all-reduces the
// gradients in-graph over replica_groups {0..7}, updates after the all-reduce, and never touches
// the host; its text and structure match testdata/golden (make golden regenerates them).
func TestReplicatedStepGolden(t *testing.T) {
	s := goldenStepper(t)
	text, m := traceStep(t, s)
	summary, err := checkReplicatedStep(m, s, goldenReplicas)
	if err != nil {
		t.Fatalf("replicated step: %v", err)
	}
	js, err := json.MarshalIndent(summary, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	compareGolden(t, goldenName+".summary.json", append(js, '\n'))
	compareGolden(t, goldenName+".stablehlo.txt", []byte(text))
}

// TestReplicatedStepWithoutAllReduceFails is the golden tests' own test: the same step built
// without its all-reduce (replicas would train apart) is rejected by the checker and differs
// from the golden text.
func TestReplicatedStepWithoutAllReduceFails(t *testing.T) {
	s := goldenStepper(t)
	s.omitAllReduce = true
	text, m := traceStep(t, s)
	_, err := checkReplicatedStep(m, s, goldenReplicas)
	if err == nil || !strings.Contains(err.Error(), "0 stablehlo.all_reduce") {
		t.Fatalf("checker accepted a step without all-reduce: %v", err)
	}
	t.Logf("checker on the step without all-reduce: %v", err)
	if golden, rerr := os.ReadFile(filepath.Join(goldenDir, goldenName+".stablehlo.txt")); rerr == nil {
		if string(golden) == text {
			t.Error("the step without all-reduce has the golden text")
		} else {
			t.Logf("golden text comparison: differs at %s", firstDiff(text, string(golden)))
		}
	}
}

// TestReplicatedStepNeedsReplicas: a one-replica "replicated" step is refused with the field named.
func TestReplicatedStepNeedsReplicas(t *testing.T) {
	rt := openGo(t)
	m, err := models.Load(context.Background(), rt, fixtureDir("gpt2-tiny"), models.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(rt, m, Config{Optimizer: DefaultAdamW(), NumReplicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.StableHLO(context.Background(), ProgramReplicatedStep, goldenBatch); err == nil || !strings.Contains(err.Error(), "NumReplicas") {
		t.Errorf("1 replica: %v", err)
	}
	if _, err := s.StableHLO(context.Background(), ProgramGradient, BatchShape{Size: 0, SeqLen: 8}); err == nil || !strings.Contains(err.Error(), "BatchShape") {
		t.Errorf("empty batch: %v", err)
	}
	if _, err := s.StableHLO(context.Background(), "nonsense", goldenBatch); err == nil || !strings.Contains(err.Error(), "nonsense") {
		t.Errorf("unknown program: %v", err)
	}
}
