package models

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/models/internal/core"
	"github.com/gotpu/gotpu/xla"
)

// Packing without cross-talk (issue #21): examples packed into rows by data.PackBFD and collated
// by data.CausalLMCollator (position ids restarting per example, padding) give every example
// exactly its logits, loss and gradients run alone.

// packingExamples are 5 examples of 3..17 tokens (ids 1..vocab-1, so never Gemma's pad 0), with
// assistant-only-style label masks on some.
func packingExamples(vocab int) []data.Example {
	rng := rand.New(rand.NewPCG(21, 21))
	lengths := []int{7, 17, 3, 14, 11}
	out := make([]data.Example, len(lengths))
	for i, n := range lengths {
		ids := make([]int32, n)
		for j := range ids {
			ids[j] = int32(1 + rng.IntN(vocab-1))
		}
		out[i].InputIDs = ids
		switch i {
		case 1, 3: // a prompt of 5 tokens not trained on
			out[i].Labels = slices.Clone(ids)
			for j := range 5 {
				out[i].Labels[j] = data.IgnoreIndex
			}
		case 4: // only the last 3 tokens trained on
			out[i].Labels = slices.Clone(ids)
			for j := range n - 3 {
				out[i].Labels[j] = data.IgnoreIndex
			}
		}
	}
	return out
}

// placement is where an example sits in the packed batch.
type placement struct{ row, start int }

// packedBatch packs exs into rows of 32, collates them (plus one row of padding only) and says
// where each example went (examples have distinct lengths: a segment is known by its length).
func packedBatch(t *testing.T, exs []data.Example) (*data.Batch, []placement) {
	t.Helper()
	rows, err := data.PackBFD(exs, 32)
	if err != nil {
		t.Fatal(err)
	}
	b, err := data.CausalLMCollator{BlockSize: 32, PadID: 0}.Collate(append(rows, data.Example{}))
	if err != nil {
		t.Fatal(err)
	}
	where := make([]placement, len(exs))
	for r, row := range rows {
		for j := 0; j < len(row.PositionIDs); {
			n := 1
			for j+n < len(row.PositionIDs) && row.PositionIDs[j+n] != 0 {
				n++
			}
			k := slices.IndexFunc(exs, func(e data.Example) bool { return len(e.InputIDs) == n })
			if k < 0 || !slices.Equal(exs[k].InputIDs, row.InputIDs[j:j+n]) {
				t.Fatalf("row %d [%d:%d] is no example", r, j, j+n)
			}
			where[k] = placement{r, j}
			j += n
		}
	}
	return b, where
}

// lossTerms counts an example's targets alone: labels[1:] not ignored (the model shifts).
func lossTerms(ex data.Example) int {
	labels := ex.Labels
	if labels == nil {
		labels = ex.InputIDs
	}
	n := 0
	for _, l := range labels[1:] {
		if l != data.IgnoreIndex {
			n++
		}
	}
	return n
}

type runOut struct {
	loss   float64
	logits []float32 // [B, T, V]
	grads  map[string][]float32
}

func runModel(t *testing.T, rt *xla.Runtime, m Model, in core.Inputs) runOut {
	t.Helper()
	res, err := core.Run(rt.Backend(), m.(core.Forwarder), in, true)
	if err != nil {
		t.Fatal(err)
	}
	out := runOut{loss: float64(res.Loss.Value().(float32)), logits: tensors.MustCopyFlatData[float32](res.Logits), grads: map[string][]float32{}}
	for name, g := range res.Grads {
		out.grads[name] = tensors.MustCopyFlatData[float32](g)
	}
	return out
}

func i32(v []int32, dims ...int) *tensors.Tensor {
	return tensors.FromFlatDataAndDimensions(v, dims...)
}

// TestPackedEqualsAlone: for the Llama, GPT-2, Qwen3 and Gemma 3 fixtures (Gemma's sliding
// window of 8 and its local and global RoPE bases included) and Llama's weights as a Mistral with
// a sliding window of 5, the packed batch's loss is the
// token-weighted mean of the examples' losses alone (|d| <= 1e-6), each example's logits packed
// are its logits alone (max |d| <= 1e-5), and the packed gradients are the token-weighted mean of
// the examples' gradients (<= 1e-5 relative, per parameter, to the largest component). The same
// rows without position ids (a plain causal mask) change the logits of every example but each
// row's first: the test would see cross-talk.
func TestPackedEqualsAlone(t *testing.T) {
	for _, fixture := range []string{"llama-tiny", "mistral-window5", "gpt2-tiny", "qwen3-tiny", "gemma3-tiny"} {
		t.Run(fixture, func(t *testing.T) {
			rt := openGo(t)
			dir := fixtureDir(t, fixture)
			if fixture == "mistral-window5" {
				dir = mistralWindow5(t)
			}
			m, err := Load(context.Background(), rt, dir, LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			V := m.(CausalLM).VocabSize()
			exs := packingExamples(V)
			b, where := packedBatch(t, exs)
			T := b.SeqLen
			packed := runModel(t, rt, m, core.Inputs{
				InputIDs: i32(b.InputIDs, b.Size, T), AttentionMask: i32(b.AttentionMask, b.Size, T),
				PositionIDs: i32(b.PositionIDs, b.Size, T), Labels: i32(b.Labels, b.Size, T),
			})
			var wantLoss, terms, maxLogit float64
			wantGrads := map[string][]float64{}
			for k, ex := range exs {
				n := len(ex.InputIDs)
				labels := ex.Labels
				if labels == nil {
					labels = ex.InputIDs
				}
				alone := runModel(t, rt, m, core.Inputs{InputIDs: i32(ex.InputIDs, 1, n), Labels: i32(labels, 1, n)})
				w := float64(lossTerms(ex))
				wantLoss += w * alone.loss
				terms += w
				for name, g := range alone.grads {
					acc := wantGrads[name]
					if acc == nil {
						acc = make([]float64, len(g))
						wantGrads[name] = acc
					}
					for i, v := range g {
						acc[i] += w * float64(v)
					}
				}
				p := where[k]
				for j := range n {
					got := packed.logits[((p.row*T)+p.start+j)*V:][:V]
					want := alone.logits[j*V:][:V]
					for v := range V {
						maxLogit = max(maxLogit, math.Abs(float64(got[v]-want[v])))
					}
				}
			}
			wantLoss /= terms
			lossDiff := math.Abs(packed.loss - wantLoss)
			var maxRel float64
			worst := ""
			for name, g := range packed.grads {
				want := wantGrads[name]
				var scale, d float64
				for i, v := range g {
					if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
						t.Fatalf("gradient of %s[%d] is %v", name, i, v)
					}
					want[i] /= terms
					scale = max(scale, math.Abs(want[i]))
					d = max(d, math.Abs(float64(v)-want[i]))
				}
				if scale > 0 && d/scale > maxRel {
					maxRel, worst = d/scale, name
				}
			}
			t.Logf("%s: %d rows of %d: loss packed %.7f, alone (token-weighted) %.7f, |d| %.3g; max |logits d| %.3g; max gradient d / max |gradient| %.3g (%s)",
				fixture, b.Size, T, packed.loss, wantLoss, lossDiff, maxLogit, maxRel, worst)
			if math.IsNaN(packed.loss) || lossDiff > 1e-6 || maxLogit > 1e-5 || maxRel > 1e-5 {
				t.Errorf("packed differs from alone: loss |d| %.3g (max 1e-6), logits %.3g (max 1e-5), gradients %.3g relative (max 1e-5)", lossDiff, maxLogit, maxRel)
			}

			// Teeth: the same rows without position ids attend across examples.
			plain := runModel(t, rt, m, core.Inputs{
				InputIDs: i32(b.InputIDs, b.Size, T), AttentionMask: i32(b.AttentionMask, b.Size, T), Labels: i32(b.Labels, b.Size, T),
			})
			var cross float64
			for k, ex := range exs {
				p := where[k]
				if p.start == 0 {
					continue // a row's first example sees nothing before it either way
				}
				for j := range len(ex.InputIDs) {
					i := ((p.row * T) + p.start + j) * V
					for v := range V {
						cross = max(cross, math.Abs(float64(plain.logits[i+v]-packed.logits[i+v])))
					}
				}
			}
			t.Logf("%s: without position ids (plain causal mask) later examples' logits move by up to %.3g", fixture, cross)
			if cross < 1e-3 {
				t.Errorf("a plain causal mask changes the packed examples' logits by only %.3g: the comparison cannot see cross-talk", cross)
			}
		})
	}
}

// mistralWindow5 is llama-tiny's weights as a MistralForCausalLM with sliding_window 5: every
// layer windowed, shorter than most of the examples.
func mistralWindow5(t *testing.T) string {
	t.Helper()
	dir := copyDir(t, fixtureDir(t, "llama-tiny"))
	path := filepath.Join(dir, "config.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["model_type"], cfg["architectures"], cfg["sliding_window"] = "mistral", []string{"MistralForCausalLM"}, 5
	if raw, err = json.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestPositionIDsRefusedByBERT: a classifier is not packed, and says so.
func TestPositionIDsRefusedByBERT(t *testing.T) {
	rt := openGo(t)
	m, err := Load(context.Background(), rt, fixtureDir(t, "bert-tiny"), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ids := []int32{101, 7, 8, 102}
	_, err = core.Run(rt.Backend(), m.(core.Forwarder), core.Inputs{InputIDs: i32(ids, 1, 4), PositionIDs: i32([]int32{0, 1, 0, 1}, 1, 4)}, false)
	if err == nil || !strings.Contains(err.Error(), "PositionIDs") || !strings.Contains(err.Error(), "not a causal language model") {
		t.Fatalf("BERT with position ids: err = %v", err)
	}
}
