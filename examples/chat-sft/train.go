package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/data/chat"
	"github.com/gotpu/gotpu/data/sft"
	"github.com/gotpu/gotpu/data/tokenizer"
	"github.com/gotpu/gotpu/examples/internal/gocorpus"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/qwen3"
	"github.com/gotpu/gotpu/trainer"
	"github.com/gotpu/gotpu/xla"
)

type options struct {
	maxSteps, maxLength, batch, turns, vocab, evalEvery int
	lr                                                  float64
	packing, assistantOnly                              bool
	outputDir, tokenizerPath, templatePath, device      string
	seed                                                uint64
	logger                                              *slog.Logger // nil: slog.Default()
	quiet                                               bool         // no progress bar (tests)
}

// result is what a run measured.
type result struct {
	trainConvs, heldOutConvs int
	maxLength                int
	train, heldOut           sft.Stats
	// trainedShare is the fraction of the training rows' tokens that carry a label.
	trainedShare float64
	steps        int
	// before and after are the held-out loss over the assistant's tokens (eval_loss: the mean
	// cross-entropy of the labelled tokens), with the random initialisation and after training.
	before, after float64
	// programs is the number of training programs the run compiled: one for a run whose
	// batches keep one shape.
	programs int
	duration time.Duration
	// question is the held-out question the model answers greedily; reply its answer and
	// reference the documentation's sentence.
	question, reply, reference string
	modelDir                   string
}

func run(ctx context.Context, o options) (*result, error) {
	log := o.logger
	if log == nil {
		log = slog.Default()
	}
	tok, err := tokenizer.FromFile(o.tokenizerPath)
	if err != nil {
		return nil, fmt.Errorf("%w (run from the repository root, or pass -tokenizer)", err)
	}
	tmpl, err := chat.LoadTemplate(o.templatePath, "")
	if err != nil {
		return nil, fmt.Errorf("%w (run from the repository root, or pass -chat_template_path)", err)
	}
	trainConvs, heldOutConvs, err := conversations(gocorpus.GoRootSrc(), o.turns)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.outputDir, 0o755); err != nil {
		return nil, err
	}
	res := &result{maxLength: o.maxLength, trainConvs: len(trainConvs), heldOutConvs: len(heldOutConvs), modelDir: filepath.Join(o.outputDir, "model")}
	trainFile, heldOutFile := filepath.Join(o.outputDir, "train.jsonl"), filepath.Join(o.outputDir, "heldout.jsonl")
	if err := writeConversations(trainFile, trainConvs); err != nil {
		return nil, err
	}
	if err := writeConversations(heldOutFile, heldOutConvs); err != nil {
		return nil, err
	}

	// TRL's SFTConfig: packing (bfd) into max_length rows, assistant-only loss from the
	// template's generation blocks.
	cfg := sft.DefaultConfig()
	cfg.MaxLength, cfg.Packing, cfg.AssistantOnlyLoss = o.maxLength, o.packing, o.assistantOnly
	train, trainStats, err := sft.Prepare(ctx, sft.ReadJSONL(trainFile), tok, tmpl, cfg)
	if err != nil {
		return nil, err
	}
	heldOut, heldOutStats, err := sft.Prepare(ctx, sft.ReadJSONL(heldOutFile), tok, tmpl, cfg)
	if err != nil {
		return nil, err
	}
	res.train, res.heldOut = trainStats, heldOutStats
	res.trainedShare = float64(trainStats.TrainedTokens) / float64(trainStats.Tokens)

	// A compact vocabulary: Qwen3's 151,669-entry output layer would be nearly all of a small
	// model's compute on a CPU.
	var all []uint32
	for _, ex := range train {
		for _, id := range ex.InputIDs {
			all = append(all, uint32(id))
		}
	}
	vm, err := gocorpus.NewVocabMap(all, gocorpus.SpecialIDs(tok), o.vocab)
	if err != nil {
		return nil, err
	}
	compact(vm, train)
	compact(vm, heldOut)
	log.Info("conversations", "train", res.trainConvs, "held_out", res.heldOutConvs, "train_rows", len(train), "held_out_rows", len(heldOut),
		"other_token_rate", vm.OtherRate(all))

	xcfg := xla.DefaultConfig()
	xcfg.Device, xcfg.NumDevices = o.device, 1
	rt, err := xla.Open(ctx, xcfg)
	if err != nil {
		return nil, err
	}
	defer rt.Close()
	m, err := models.New(ctx, rt, qwen3Config(vm.Size(), o.maxLength), models.NewOptions{Seed: o.seed})
	if err != nil {
		return nil, err
	}
	start := time.Now()
	tr, err := trainer.New(arguments(o), m, data.SliceDataset(train), data.SliceDataset(heldOut),
		trainer.Options{Logger: o.logger, Collator: data.CausalLMCollator{BlockSize: o.maxLength}})
	if err != nil {
		return nil, err
	}
	defer tr.Close()
	first, err := tr.Evaluate(ctx)
	if err != nil {
		return nil, err
	}
	res.before = first["eval_loss"]
	// The evaluation programs are compiled now; what Train adds is the training programs (the
	// periodic evaluations reuse the programs compiled here: same shapes).
	evalPrograms, _ := tr.Compilations()
	if _, err := tr.Train(ctx); err != nil {
		return nil, err
	}
	res.steps = tr.State().GlobalStep
	compiled, _ := tr.Compilations()
	res.programs = compiled - evalPrograms
	last, err := tr.Evaluate(ctx)
	if err != nil {
		return nil, err
	}
	res.after = last["eval_loss"]
	res.duration = time.Since(start)
	if err := m.Save(res.modelDir, models.SaveOptions{}); err != nil {
		return nil, err
	}
	if err := vm.Save(filepath.Join(res.modelDir, gocorpus.VocabFile)); err != nil {
		return nil, err
	}

	// A held-out question, answered greedily after the template's generation prompt.
	conv := heldOutConvs[0]
	res.question, res.reference = conv[1].Content, conv[2].Content
	if res.reply, err = reply(ctx, rt, m, tok, tmpl, vm, conv[:2]); err != nil {
		return nil, err
	}
	return res, nil
}

// compact maps the examples' ids and labels to the compact vocabulary in place (labels that are
// data.IgnoreIndex stay so).
func compact(vm *gocorpus.VocabMap, exs []data.Example) {
	for i := range exs {
		ex := &exs[i]
		ids := make([]uint32, len(ex.InputIDs))
		for j, id := range ex.InputIDs {
			ids[j] = uint32(id)
		}
		mapped := vm.Apply(ids)
		for j, l := range ex.Labels {
			if l != data.IgnoreIndex {
				ex.Labels[j] = vm.Apply([]uint32{uint32(l)})[0]
			}
		}
		ex.InputIDs = mapped
	}
}

// reply renders messages with the generation prompt, generates greedily until the template's
// end of turn (chat.Template.StopTokens: <|im_end|>) and decodes the reply.
func reply(ctx context.Context, rt *xla.Runtime, m models.Model, tok *tokenizer.Pipeline, tmpl *chat.Template,
	vm *gocorpus.VocabMap, msgs []message) (string, error) {
	raw := make([]json.RawMessage, len(msgs))
	for i, msg := range msgs {
		b, err := json.Marshal(msg)
		if err != nil {
			return "", err
		}
		raw[i] = b
	}
	r, err := tmpl.Render(ctx, raw, chat.RenderOptions{AddGenerationPrompt: true})
	if err != nil {
		return "", err
	}
	enc, err := tok.Encode(r.Text, false)
	if err != nil {
		return "", err
	}
	prompt := make([]int, len(enc.IDs))
	for i, c := range vm.Apply(enc.IDs) {
		prompt[i] = int(c)
	}
	// The template's stop tokens (<|im_end|> for Qwen3), in the compact vocabulary.
	opts := models.DefaultGenerateOptions()
	opts.MaxNewTokens = 64
	stops, err := tmpl.StopTokens(ctx, tok)
	if err != nil {
		return "", err
	}
	for _, id := range stops {
		opts.EOSTokenIDs = append(opts.EOSTokenIDs, int(vm.Apply([]uint32{uint32(id)})[0]))
	}
	if len(opts.EOSTokenIDs) == 0 {
		return "", fmt.Errorf("chat template %s: no end-of-turn token", tmpl.Name())
	}
	lm, ok := m.(models.CausalLM)
	if !ok {
		return "", fmt.Errorf("%s is not a causal LM", m.Config().Architecture())
	}
	out, err := models.Generate(ctx, rt, lm, prompt, opts)
	if err != nil {
		return "", err
	}
	var ids []uint32
	for _, c := range out { // the new tokens, the stop token last (skipped as special)
		if c < len(vm.Mistral) {
			ids = append(ids, vm.Mistral[c])
		}
	}
	text, err := tok.Decode(ids, true)

	if err != nil {
		return "", err
	}
	return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(text), "<think>\n\n</think>")), nil
}

// qwen3Config is a small Qwen3 (hidden 64, 2 layers, 4 query and 2 key/value heads of 16,
// q/k RMSNorm, SiLU MLP of 192, untied head) over the compact vocabulary.
func qwen3Config(vocab, positions int) *qwen3.Config {
	c := qwen3.DefaultConfig()
	c.VocabSize, c.HiddenSize, c.IntermediateSize, c.NumHiddenLayers = vocab, 64, 192, 2
	c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim = 4, 2, 16
	c.MaxPositionEmbeddings = positions
	return c
}

// arguments: float32 (the pure-Go backend has no bfloat16 arithmetic), a cosine schedule,
// held-out evaluation every so many updates, no checkpoints (the model is saved at the end).
func arguments(o options) trainer.TrainingArguments {
	a := trainer.DefaultTrainingArguments()
	a.OutputDir, a.Seed = o.outputDir, int(o.seed)
	a.PerDeviceTrainBatchSize, a.PerDeviceEvalBatchSize = o.batch, o.batch
	a.MaxSteps, a.LearningRate, a.WeightDecay = o.maxSteps, o.lr, 0.1
	a.LRSchedulerType, a.WarmupRatio = trainer.SchedulerCosine, 0.1
	a.LoggingSteps = 10
	a.EvalStrategy = trainer.IntervalSteps
	a.SetEvalSteps(float64(o.evalEvery))
	a.SaveStrategy = trainer.SaveNo
	if o.quiet {
		a.SetDisableTqdm(true)
	}
	return a
}

// print writes the run's figures.
func (r *result) print(w io.Writer) {
	fmt.Fprintf(w, "conversations: %d for training, %d held out (other packages)\n", r.trainConvs, r.heldOutConvs)
	fmt.Fprintf(w, "training rows: %d of %d tokens from %d conversations (%d tokens, %.1f%% padding); %.1f%% of the tokens are the assistant's and carry labels\n",
		r.train.Rows, r.maxLength, r.train.Examples, r.train.Tokens, 100*r.train.PaddingFraction(r.maxLength), 100*r.trainedShare)
	fmt.Fprintf(w, "held-out assistant-token loss: %.4f before, %.4f after %d steps (%s)\n",
		r.before, r.after, r.steps, r.duration.Round(time.Second))
	fmt.Fprintf(w, "training programs compiled over %d steps: %d\n", r.steps, r.programs)
	fmt.Fprintf(w, "held-out question: %s\n  reply:     %s\n  reference: %s\n", r.question, r.reply, r.reference)
	fmt.Fprintf(w, "model saved to %s\n", r.modelDir)
}
