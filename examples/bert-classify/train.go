package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/data/tokenizer"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/bert"
	"github.com/gotpu/gotpu/trainer"
	"github.com/gotpu/gotpu/xla"
)

type options struct {
	maxSteps, maxSeqLength, batch, evalEvery, patience int
	lr                                                 float64
	outputDir, tokenizerPath, device                   string
	numDevices                                         int
	seed                                               uint64
	corpus                                             corpusConfig
	logger                                             *slog.Logger // nil: slog.Default()
	quiet                                              bool         // no progress bar (tests)
}

// result is what a run measured on the held-out snippets.
type result struct {
	classes            []string
	trainSnippets      int
	heldOut, heldFiles int
	majorityClass      string
	baseline           float64 // accuracy of always answering the training set's majority class
	before, accuracy   float64 // held-out accuracy of the initial and of the final (best) model
	confusion          [][]int // [true class][predicted class]
	steps              int
	bestCheckpoint     string
	shapesSeen         int
	shapesDeclared     int
	evalSet            data.SliceDataset // the held-out examples, for tests to score a saved model on
}

func run(ctx context.Context, o options) (*result, error) {
	if o.corpus.root == "" {
		o.corpus.root = goRootSrc()
	}
	log := o.logger
	if log == nil {
		log = slog.Default()
	}
	full, err := tokenizer.FromFile(o.tokenizerPath)
	if err != nil {
		return nil, fmt.Errorf("%w (run from the repository root, or pass -tokenizer)", err)
	}
	// HF's max_seq_length: the tokenizer truncates, keeping [CLS] and [SEP].
	tok, err := full.WithTruncation(&tokenizer.Truncation{MaxLength: o.maxSeqLength})
	if err != nil {
		return nil, fmt.Errorf("-max_seq_length: %w", err)
	}
	trainSnips, evalSnips, err := buildCorpus(o.corpus)
	if err != nil {
		return nil, err
	}
	trainRecs, evalRecs := labeled(trainSnips), labeled(evalSnips)
	labelIDs, names := data.Labels(trainRecs)
	trainDS, err := data.TokenizeLabeled(ctx, tok, trainRecs, labelIDs, o.maxSeqLength)
	if err != nil {
		return nil, err
	}
	evalDS, err := data.TokenizeLabeled(ctx, tok, evalRecs, labelIDs, o.maxSeqLength)
	if err != nil {
		return nil, err
	}
	res := &result{classes: names, trainSnippets: len(trainDS), heldOut: len(evalDS), heldFiles: countFiles(evalSnips), evalSet: evalDS}
	res.majorityClass, res.baseline = majorityBaseline(trainDS, evalDS, names)
	log.Info("corpus", "classes", names, "train_snippets", len(trainDS), "train_files", countFiles(trainSnips),
		"held_out_snippets", len(evalDS), "held_out_files", res.heldFiles, "shared_files", sharedFiles(trainSnips, evalSnips))

	cfg := xla.DefaultConfig()
	cfg.Device, cfg.NumDevices = o.device, o.numDevices
	rt, err := xla.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer rt.Close()
	model, err := models.New(ctx, rt, modelConfig(tok.VocabSize(true), o.maxSeqLength, names), models.NewOptions{Seed: o.seed})
	if err != nil {
		return nil, err
	}

	args := trainingArguments(o)
	replicas := rt.NumDevices()
	if o.numDevices > 0 {
		replicas = o.numDevices
	}
	coll := budgetCollator(data.BucketCollator{Buckets: data.DefaultBuckets(o.maxSeqLength)},
		o.batch, args.PerDeviceEvalBatchSize*replicas, len(evalDS))
	var callbacks []trainer.Callback
	if o.patience > 0 {
		callbacks = append(callbacks, trainer.NewEarlyStopping(o.patience, 0))
	}
	tr, err := trainer.New(args, model, trainDS, evalDS, trainer.Options{
		Collator: coll, ComputeMetrics: trainer.Accuracy, Callbacks: callbacks, Logger: o.logger,
	})
	if err != nil {
		return nil, err
	}
	first, err := tr.Evaluate(ctx)
	if err != nil {
		return nil, err
	}
	res.before = first["eval_accuracy"]
	out, err := tr.Train(ctx)
	if err != nil {
		return nil, err
	}
	res.steps = out.GlobalStep
	if b := tr.State().BestModelCheckpoint; b != nil {
		res.bestCheckpoint = *b
	}
	// Predict on the held-out set with the final (best) model: accuracy and the confusion matrix.
	pred, err := tr.Predict(ctx, evalDS)
	if err != nil {
		return nil, err
	}
	res.accuracy = pred.Metrics["test_accuracy"]
	if res.confusion, err = confusion(pred, evalDS, len(names)); err != nil {
		return nil, err
	}
	res.shapesSeen, res.shapesDeclared = coll.budget.Seen(), coll.budget.Declared()
	if err := tr.SaveModel(o.outputDir); err != nil {
		return nil, err
	}
	if err := tr.SaveState(); err != nil {
		return nil, err
	}
	return res, nil
}

// modelConfig is the bert-tiny fixture's shape (hidden 64, 2 layers, 4 heads, intermediate 256)
// with the tokenizer's vocabulary, max_seq_length positions, HF's default dropout and
// initializer range for training from scratch, and the class names as id2label.
func modelConfig(vocab, maxSeq int, names []string) *bert.Config {
	c := bert.DefaultConfig()
	c.VocabSize, c.HiddenSize, c.NumHiddenLayers, c.NumAttentionHeads, c.IntermediateSize = vocab, 64, 2, 4, 256
	c.MaxPositionEmbeddings = maxSeq
	c.ID2Label, c.Label2ID = map[int]string{}, map[string]int{}
	for i, n := range names {
		c.ID2Label[i], c.Label2ID[n] = n, i
	}
	return c
}

func trainingArguments(o options) trainer.TrainingArguments {
	a := trainer.DefaultTrainingArguments()
	a.OutputDir, a.MaxSteps, a.Seed = o.outputDir, o.maxSteps, int(o.seed)
	a.PerDeviceTrainBatchSize, a.PerDeviceEvalBatchSize = o.batch, 64
	a.LearningRate, a.WarmupRatio, a.WeightDecay = o.lr, 0.1, 0.01
	a.LoggingSteps = 10
	every := float64(o.evalEvery)
	a.EvalStrategy, a.SaveStrategy, a.SaveSteps = trainer.IntervalSteps, trainer.SaveSteps, every
	a.SetEvalSteps(every)
	a.SetSaveTotalLimit(2)
	a.LoadBestModelAtEnd, a.MetricForBestModel = true, "accuracy"
	if o.quiet {
		a.SetDisableTqdm(true)
	}
	return a
}

// majorityBaseline is the held-out accuracy of always answering the most frequent training class.
func majorityBaseline(train, eval data.SliceDataset, names []string) (string, float64) {
	counts := make([]int, len(names))
	for _, ex := range train {
		counts[ex.Label]++
	}
	major := int32(slices.Index(counts, slices.Max(counts)))
	hit := 0
	for _, ex := range eval {
		if ex.Label == major {
			hit++
		}
	}
	return names[major], float64(hit) / float64(len(eval))
}

// confusion counts [true][predicted] from Predict's logits.
func confusion(p *trainer.Predictions, ds data.SliceDataset, classes int) ([][]int, error) {
	if len(p.Dims) != 2 || p.Dims[0] != len(ds) || p.Dims[1] != classes {
		return nil, fmt.Errorf("predictions have shape %v, want [%d %d]", p.Dims, len(ds), classes)
	}
	m := make([][]int, classes)
	for i := range m {
		m[i] = make([]int, classes)
	}
	for i, ex := range ds {
		row := p.Logits[i*classes : (i+1)*classes]
		m[ex.Label][slices.Index(row, slices.Max(row))]++
	}
	return m, nil
}

func countFiles(s []snippet) int {
	files := map[string]bool{}
	for _, x := range s {
		files[x.file] = true
	}
	return len(files)
}

// sharedFiles counts files with snippets on both sides of the split (0 by construction; logged
// as evidence).
func sharedFiles(a, b []snippet) int {
	inA := map[string]bool{}
	for _, x := range a {
		inA[x.file] = true
	}
	shared := map[string]bool{}
	for _, x := range b {
		if inA[x.file] {
			shared[x.file] = true
		}
	}
	return len(shared)
}

func (r *result) print(w io.Writer) {
	fmt.Fprintf(w, "held-out set: %d snippets from %d files never trained on, classes %v\n", r.heldOut, r.heldFiles, r.classes)
	fmt.Fprintf(w, "majority-class baseline (always %q): %.1f%%\n", r.majorityClass, 100*r.baseline)
	fmt.Fprintf(w, "accuracy: %.1f%% before training, %.1f%% after %d steps (best checkpoint %s): %+.1f points over the baseline\n",
		100*r.before, 100*r.accuracy, r.steps, r.bestCheckpoint, 100*(r.accuracy-r.baseline))
	fmt.Fprintf(w, "confusion (rows: true class, columns: predicted):\n%10s", "")
	for _, n := range r.classes {
		fmt.Fprintf(w, " %9s", n)
	}
	fmt.Fprintln(w)
	for i, row := range r.confusion {
		fmt.Fprintf(w, "%10s", r.classes[i])
		for _, n := range row {
			fmt.Fprintf(w, " %9d", n)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "batch shapes: %d of the %d declared (padding buckets)\n", r.shapesSeen, r.shapesDeclared)
}
