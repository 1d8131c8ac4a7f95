package trainer_test

import (
	"context"
	"testing"
	"time"

	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/gpt2"
	"github.com/gotpu/gotpu/trainer"
	"github.com/gotpu/gotpu/xla"
)

// blockTimer measures, per save, the time from the end of the step to OnSave: what the save
// cost the training loop (host staging, plus the write itself when saves are synchronous).
type blockTimer struct {
	trainer.BaseCallback
	stepEnd time.Time
	blocked time.Duration
	saves   int
}

func (b *blockTimer) OnStepEnd(context.Context, *trainer.Event) error {
	b.stepEnd = time.Now()
	return nil
}

func (b *blockTimer) OnSave(context.Context, *trainer.Event) error {
	b.blocked += time.Since(b.stepEnd)
	b.saves++
	return nil
}

// BenchmarkCheckpointBlocking: the time training is blocked per checkpoint of a ~6M-parameter
// GPT-2 (≈ 75 MB of weights and AdamW state) with async saves (staging only) and with
// synchronous ones, and their ratio. Saves are 4 steps apart, so an async save is normally
// written before the next one is due (at most one is pending: a save due earlier would wait).
//
//	go test -run XXX -bench BenchmarkCheckpointBlocking -benchtime 1x ./trainer/
func BenchmarkCheckpointBlocking(b *testing.B) {
	rt, err := xla.Open(context.Background(), xla.Config{Device: "go", NumDevices: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close()
	var blocked [2]time.Duration
	var saves [2]int
	for range b.N {
		for i, sync := range []bool{false, true} {
			cfg := gpt2.DefaultConfig()
			cfg.VocabSize, cfg.NEmbd, cfg.NLayer, cfg.NHead, cfg.NPositions = 8192, 256, 4, 4, 16
			cfg.ResidPdrop, cfg.EmbdPdrop, cfg.AttnPdrop = 0, 0, 0
			m, err := models.New(context.Background(), rt, cfg, models.NewOptions{Seed: 1})
			if err != nil {
				b.Fatal(err)
			}
			a := trainer.DefaultTrainingArguments()
			a.OutputDir = b.TempDir()
			a.PerDeviceTrainBatchSize, a.MaxSteps, a.SaveSteps, a.LoggingSteps = 2, 12, 4, 1000
			noBar := true
			a.DisableTqdm = &noBar
			bt := &blockTimer{}
			tr, err := trainer.New(a, m, counting(16, 0), nil, trainer.Options{Runtime: rt, Logger: quiet(),
				SyncCheckpoints: sync, Callbacks: []trainer.Callback{bt}})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := tr.Train(context.Background()); err != nil {
				b.Fatal(err)
			}
			blocked[i] += bt.blocked
			saves[i] += bt.saves
		}
	}
	async := blocked[0].Seconds() / float64(saves[0]) * 1e3
	sync := blocked[1].Seconds() / float64(saves[1]) * 1e3
	b.ReportMetric(async, "async_blocked_ms/save")
	b.ReportMetric(sync, "sync_blocked_ms/save")
	b.ReportMetric(sync/async, "sync/async")
}
