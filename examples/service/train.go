package main

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/hub"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/peft"
	"github.com/gotpu/gotpu/trainer"
	"github.com/gotpu/gotpu/xla"
)

// train runs one job to its end: model, data, Trainer.Train, and for a completed run the final
// model and trainer_state.json in output_dir (HF's trainer.save_model() and save_state()); a
// LoRA job (use_peft, adapter_name_or_path) trains the adapter alone and saves it, as PEFT's
// save_pretrained writes it (adapter_config.json, adapter_model.safetensors), not the base. A
// cancelled ctx makes Train finish its current update and commit a checkpoint there; train then
// returns the context's error. A model named by a Hub repo id has its weights fetched (hc) here,
// in the job, rather than while POST /jobs waited: that can take minutes.
func train(ctx context.Context, rt *xla.Runtime, hc *hub.Client, j *Job, log *slog.Logger, now func() time.Time) error {
	s := j.spec
	var (
		model models.Model
		err   error
	)
	if s.ModelRepo != nil {
		log.Info("fetching the model's weights from the Hub", "repo", s.ModelRepo.String())
		start := time.Now()
		if _, err := fetchWeights(ctx, hc, *s.ModelRepo, s.ModelDir); err != nil {
			return fmt.Errorf("model_name_or_path: %w", err)
		}
		log.Info("weights fetched", "repo", s.ModelRepo.String(), "seconds", time.Since(start).Seconds())
	}
	if s.ModelDir != "" {
		model, err = models.Load(ctx, rt, s.ModelDir, models.LoadOptions{})
	} else {
		model, err = models.New(ctx, rt, s.Config, models.NewOptions{Seed: uint64(s.Args.Seed)})
	}
	if err != nil {
		return fmt.Errorf("model: %w", err)
	}
	if _, ok := model.(models.CausalLM); !ok {
		return fmt.Errorf("model: %s is not a causal LM", model.Architecture())
	}
	if s.AdapterDir != "" {
		// Training continues the adapter: its config decides r, alpha and the targets.
		if s.AdapterRepo != nil {
			if err := fetchAdapterWeights(ctx, hc, *s.AdapterRepo, s.AdapterDir, s.modelCfg); err != nil {
				return fmt.Errorf("adapter_name_or_path: %w", err)
			}
		}
		if model, err = peft.Load(ctx, rt, model, s.AdapterDir, peft.Options{Log: log}); err != nil {
			return fmt.Errorf("adapter_name_or_path: %w", err)
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	trainSet, closeTrain, err := openData(ctx, s, s.TrainFile, s.MaxTrainSamples)
	if err != nil {
		return fmt.Errorf("train_file: %w", err)
	}
	defer closeTrain()
	var evalSet data.Dataset
	if s.EvalFile != "" {
		ds, closeEval, err := openData(ctx, s, s.EvalFile, s.MaxEvalSamples)
		if err != nil {
			return fmt.Errorf("validation_file: %w", err)
		}
		defer closeEval()
		evalSet = ds
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	tr, err := trainer.New(s.Args, model, trainSet, evalSet, trainer.Options{
		Runtime:   rt,
		Callbacks: []trainer.Callback{&progressCallback{job: j, now: now}},
		Logger:    log,
		// use_peft: the trainer attaches a new adapter (TRL's peft_config), drawn from seed.
		PeftConfig: s.Peft,
	})
	if err != nil {
		return err
	}
	out, err := tr.Train(ctx)
	if err != nil {
		return err
	}
	if err := tr.SaveModel(j.Dir); err != nil {
		return err
	}
	if err := tr.SaveState(); err != nil {
		return err
	}
	log.Info("job completed", "steps", out.GlobalStep, "train_loss", out.TrainingLoss)
	return nil
}

// openData opens a train or validation file: pre-tokenized JSON lines as they are, text through
// the tokenizer into block_size-token blocks (run_clm's tokenize_function + group_texts; a .txt
// file is one document per line, JSON lines take text_column_name).
func openData(ctx context.Context, s *jobSpec, path string, maxSamples int) (data.Dataset, func(), error) {
	var ds data.Dataset
	closeFn := func() {}
	if s.Pretokenized {
		jl, err := data.OpenJSONL(path)
		if err != nil {
			return nil, nil, err
		}
		if err := jl.Validate(); err != nil {
			jl.Close()
			return nil, nil, err
		}
		ds, closeFn = jl, func() { jl.Close() }
	} else {
		docs := data.TextLines(path)
		if ext := strings.ToLower(filepath.Ext(path)); ext == ".jsonl" || ext == ".json" {
			docs = data.JSONLTextField(path, s.TextColumn)
		}
		blocks, err := data.GroupTexts(ctx, s.Tokenizer, docs, s.BlockSize, data.GroupOptions{})
		if err != nil {
			return nil, nil, err
		}
		ds = blocks
	}
	if maxSamples > 0 && maxSamples < ds.Len() {
		ds = firstN{ds, maxSamples}
	}
	return ds, closeFn, nil
}

// firstN is the first n examples of a dataset (HF's max_train_samples / max_eval_samples).
type firstN struct {
	data.Dataset
	n int
}

func (f firstN) Len() int { return f.n }
