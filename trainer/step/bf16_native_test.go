package step

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/gpt2"
	"github.com/gotpu/gotpu/xla"
)

// TestBF16NativeMatchesFallback trains a small GPT-2 in bf16 mixed precision for a few steps on
// gotpu's backend with its native bfloat16 paths and comparisons, and again with them left to
// simplego (xla.Config.GoFallbackBF16): every step's loss and gradient norm must be bitwise the
// same — the native paths compute exactly what simplego computes over a whole training step
// (forward, backward and the AdamW update) — while the programs are split differently.
func TestBF16NativeMatchesFallback(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model twice")
	}
	type record struct{ loss, norm float64 }
	prev := slog.Default()
	defer slog.SetDefault(prev)
	train := func(fallback bool) ([]record, []string) {
		log := &compileLog{}
		slog.SetDefault(slog.New(log))
		ctx := t.Context()
		rt, err := xla.Open(ctx, xla.Config{Device: xla.DeviceGo, GoBackend: xla.GoBackendGotpu, GoFallbackBF16: fallback})
		if err != nil {
			t.Fatal(err)
		}
		defer rt.Close()
		cfg := gpt2.DefaultConfig()
		cfg.VocabSize, cfg.NEmbd, cfg.NLayer, cfg.NHead, cfg.NPositions = 320, 64, 2, 2, 32
		cfg.ResidPdrop, cfg.EmbdPdrop, cfg.AttnPdrop = 0, 0, 0
		m, err := models.New(ctx, rt, cfg, models.NewOptions{Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		opt := DefaultAdamW()
		opt.WeightDecay = 0.01
		s, err := New(rt, m, Config{Optimizer: opt, NumReplicas: 1, BF16: true})
		if err != nil {
			t.Fatal(err)
		}
		var recs []record
		for i, bt := range fixedBatches(3, 2, 32, cfg.VocabSize) {
			res, err := s.Step(ctx, [][]*data.Batch{{bt}}, 3e-3)
			if err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			recs = append(recs, record{res.Loss, res.GradNorm})
		}
		return recs, log.splits
	}
	native, nativeSplits := train(false)
	fallback, fallbackSplits := train(true)
	t.Logf("native bfloat16: %s", strings.Join(nativeSplits, "; "))
	t.Logf("fallback:        %s", strings.Join(fallbackSplits, "; "))
	if len(nativeSplits) == 0 || slices.Equal(nativeSplits, fallbackSplits) {
		t.Fatal("the programs were split the same way with and without the native bfloat16 paths")
	}
	for i := range native {
		t.Logf("step %d: loss %.9g, grad norm %.9g", i, native[i].loss, native[i].norm)
		if native[i] != fallback[i] {
			t.Errorf("step %d: loss %v, grad norm %v with native bfloat16; %v, %v on simplego", i,
				native[i].loss, native[i].norm, fallback[i].loss, fallback[i].norm)
		}
	}
}

// fixedBatches returns n batches of size random sequences of seq tokens, each its own labels.
func fixedBatches(n, size, seq, vocab int) []*data.Batch {
	rng := rand.New(rand.NewPCG(1, 2))
	batches := make([]*data.Batch, n)
	for i := range batches {
		batches[i] = fullBatch(rng, size, seq, vocab)
	}
	return batches
}

// compileLog records the gobackend's "compiled" log lines (how each program was split).
type compileLog struct{ splits []string }

func (h *compileLog) Enabled(context.Context, slog.Level) bool { return true }

func (h *compileLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "gobackend: compiled" {
		return nil
	}
	var sb strings.Builder
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&sb, " %s=%v", a.Key, a.Value)
		return true
	})
	h.splits = append(h.splits, sb.String())
	return nil
}

func (h *compileLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *compileLog) WithGroup(string) slog.Handler      { return h }
