package step

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/xla"
)

// Packed batches (data.PackBFD, issue #21) through the stepper: position_ids are one more
// leading input of every program, on every path.

const packLen = 32

// packingSet is n examples of 3..17 tokens (ids 1..vocab-1) with assistant-only-style label
// masks on every third.
func packingSet(n, vocab int, seed uint64) []data.Example {
	rng := rand.New(rand.NewPCG(seed, 21))
	out := make([]data.Example, n)
	for i := range out {
		ids := make([]int32, 3+rng.IntN(15))
		for j := range ids {
			ids[j] = int32(1 + rng.IntN(vocab-1))
		}
		out[i].InputIDs = ids
		if i%3 == 0 {
			out[i].Labels = slices.Clone(ids)
			for j := range len(ids) / 2 {
				out[i].Labels[j] = data.IgnoreIndex
			}
		}
	}
	return out
}

func packRows(t *testing.T, exs []data.Example) []data.Example {
	t.Helper()
	rows, st, err := data.PackBFDWithStats(exs, packLen)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d examples packed into %d rows of %d (%.1f%% padding)", st.Examples, st.Rows, packLen, 100*st.PaddingFraction())
	return rows
}

// collateRows collates rows[from:from+n] (cyclically) into one batch of packLen.
func collateRows(t *testing.T, rows []data.Example, from, n int) *data.Batch {
	t.Helper()
	exs := make([]data.Example, n)
	for i := range exs {
		exs[i] = rows[(from+i)%len(rows)]
	}
	b, err := data.CausalLMCollator{BlockSize: packLen}.Collate(exs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func loadFixture(t *testing.T, rt *xla.Runtime, name string) models.Model {
	t.Helper()
	m, err := models.Load(context.Background(), rt, fixtureDir(name), models.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestPackedTrainingOneProgram: 20 steps on packed batches (2 replicas, the SPMD step with its
// all-reduce) compile exactly one program; the loss is finite and falls; evaluating a packed
// batch adds one program, and its loss sum and term count are the sums of its examples'
// evaluated one by one (the eval program's position ids are honoured: no cross-talk).
func TestPackedTrainingOneProgram(t *testing.T) {
	ctx := context.Background()
	rt := openGoDevices(t, xla.GoBackendGotpu, 2)
	m := loadFixture(t, rt, "llama-tiny")
	s, err := New(rt, m, Config{Optimizer: DefaultAdamW(), NumReplicas: 2})
	if err != nil {
		t.Fatal(err)
	}
	exs := packingSet(60, m.(models.CausalLM).VocabSize(), 1)
	rows := packRows(t, exs)
	var losses []float64
	for i := range 20 {
		shards := []*data.Batch{collateRows(t, rows, 4*i, 2), collateRows(t, rows, 4*i+2, 2)}
		if shards[0].PositionIDs == nil {
			t.Fatal("a packed batch without position ids")
		}
		res, err := s.Step(ctx, [][]*data.Batch{shards}, 3e-3)
		if err != nil {
			t.Fatal(err)
		}
		if math.IsNaN(res.Loss) || math.IsInf(res.Loss, 0) || res.Skipped {
			t.Fatalf("step %d: loss %v, skipped %v", i+1, res.Loss, res.Skipped)
		}
		losses = append(losses, res.Loss)
	}
	n, _ := s.Compilations()
	t.Logf("20 packed steps: %d program(s) compiled; loss %.4f -> %.4f", n, losses[0], losses[19])
	if n != 1 {
		t.Errorf("20 packed steps of one shape compiled %d programs, want 1", n)
	}
	if losses[19] >= losses[0] {
		t.Errorf("loss did not fall: %.4f -> %.4f", losses[0], losses[19])
	}

	// Evaluation: the packed batch against each of its examples alone (each alone is a batch of
	// one, padded to nothing).
	batch := collateRows(t, rows, 0, 3)
	sum, terms, logits, err := s.Evaluate(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	logits.Release()
	if n, _ := s.Compilations(); n != 2 {
		t.Errorf("after one packed evaluation: %d programs, want 2", n)
	}
	var wantSum, wantTerms float64
	for _, row := range rows[:3] {
		for j := 0; j < len(row.InputIDs); {
			k := j + 1
			for k < len(row.InputIDs) && row.PositionIDs[k] != 0 {
				k++
			}
			s1, t1 := evalAlone(t, s, []data.Example{{InputIDs: row.InputIDs[j:k], Labels: row.Labels[j:k]}})
			wantSum += s1
			wantTerms += t1
			j = k
		}
	}
	rel := math.Abs(sum-wantSum) / wantSum
	t.Logf("packed evaluation: loss sum %.6f over %v terms; examples alone %.6f over %v (relative |d| %.3g)", sum, terms, wantSum, wantTerms, rel)
	if terms != wantTerms || rel > 1e-6 {
		t.Errorf("packed evaluation %.7g / %v terms, examples alone %.7g / %v", sum, terms, wantSum, wantTerms)
	}
}

// TestPackedFSDPAndAccumulation: packed batches through the FSDP programs (2 shards) with 2
// accumulation micro-batches (the gradient program, then the train program) train as the
// replicated programs do, and compile one program each.
func TestPackedFSDPAndAccumulation(t *testing.T) {
	ctx := context.Background()
	var losses [2][]float64
	for k, fsdp := range []*FSDP{nil, {Data: 1, Shard: 2}} {
		rt := openGoDevices(t, xla.GoBackendGotpu, 2)
		m := loadFixture(t, rt, "llama-tiny")
		s, err := New(rt, m, Config{Optimizer: DefaultAdamW(), NumReplicas: 2, FSDP: fsdp})
		if err != nil {
			t.Fatal(err)
		}
		rows := packRows(t, packingSet(30, m.(models.CausalLM).VocabSize(), 2))
		for i := range 4 {
			var micro [][]*data.Batch
			for a := range 2 {
				at := 8*i + 4*a
				micro = append(micro, []*data.Batch{collateRows(t, rows, at, 2), collateRows(t, rows, at+2, 2)})
			}
			res, err := s.Step(ctx, micro, 3e-3)
			if err != nil {
				t.Fatal(err)
			}
			losses[k] = append(losses[k], res.Loss)
		}
		if n, _ := s.Compilations(); n != 2 {
			t.Errorf("fsdp %v: 4 accumulated packed steps compiled %d programs, want 2 (gradient, train)", fsdp, n)
		}
	}
	t.Logf("losses replicated %v, FSDP %v", losses[0], losses[1])
	for i := range losses[0] {
		if d := math.Abs(losses[0][i] - losses[1][i]); d > 1e-5*losses[0][i] {
			t.Errorf("step %d: replicated loss %.7f, FSDP %.7f", i+1, losses[0][i], losses[1][i])
		}
	}
}

// TestPackedBatchRefusedByClassifier: a sequence classifier's stepper refuses position ids
// instead of feeding them to BERT as token types; its program shapes refuse them too, and a
// causal LM's refuse token types.
func TestPackedBatchRefusedByClassifier(t *testing.T) {
	ctx := context.Background()
	rt := openGo(t)
	s, err := New(rt, loadFixture(t, rt, "bert-tiny"), Config{Optimizer: DefaultAdamW(), NumReplicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	b := &data.Batch{Size: 1, SeqLen: 4, InputIDs: []int32{101, 7, 8, 102}, AttentionMask: []int32{1, 1, 1, 1},
		PositionIDs: []int32{0, 1, 0, 1}, Labels: []int32{1}}
	if _, err := s.TransferBatch([]*data.Batch{b}); err == nil || !strings.Contains(err.Error(), "position_ids") {
		t.Errorf("TransferBatch of a packed batch to BERT: err = %v", err)
	}
	if _, _, _, err := s.Evaluate(ctx, b); err == nil || !strings.Contains(err.Error(), "position_ids") {
		t.Errorf("Evaluate of a packed batch on BERT: err = %v", err)
	}
	if _, err := s.StableHLO(ctx, ProgramEval, BatchShape{Size: 1, SeqLen: 4, PositionIDs: true}); err == nil || !strings.Contains(err.Error(), "PositionIDs") {
		t.Errorf("BERT program with PositionIDs: err = %v", err)
	}
	causal, err := New(rt, loadFixture(t, rt, "llama-tiny"), Config{Optimizer: DefaultAdamW(), NumReplicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := causal.StableHLO(ctx, ProgramEval, BatchShape{Size: 1, SeqLen: 4, TokenTypeIDs: true}); err == nil || !strings.Contains(err.Error(), "TokenTypeIDs") {
		t.Errorf("causal program with TokenTypeIDs: err = %v", err)
	}
	spec, _, err := causal.ProgramGraph(ProgramGradient, BatchShape{Size: 2, SeqLen: 8, PositionIDs: true})
	if err != nil || len(spec.Inputs) != 4 {
		t.Fatalf("packed gradient program: %d inputs (want ids, mask, positions, labels), err %v", len(spec.Inputs), err)
	}
	hlo, err := causal.StableHLO(ctx, ProgramGradient, BatchShape{Size: 2, SeqLen: 8, PositionIDs: true})
	if err != nil || !strings.Contains(hlo, "tensor<2x8xi32>") {
		t.Fatalf("packed gradient program's StableHLO: err %v", err)
	}
}

// evalAlone evaluates each example alone (a batch of one, no padding) and returns the sums of
// their loss sums and loss terms.
func evalAlone(t *testing.T, s *Stepper, exs []data.Example) (sum, terms float64) {
	t.Helper()
	for _, ex := range exs {
		b, err := data.CausalLMCollator{BlockSize: len(ex.InputIDs)}.Collate([]data.Example{ex})
		if err != nil {
			t.Fatal(err)
		}
		s1, t1, l1, err := s.Evaluate(context.Background(), b)
		if err != nil {
			t.Fatal(err)
		}
		l1.Release()
		sum += s1
		terms += t1
	}
	return sum, terms
}
