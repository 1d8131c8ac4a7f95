package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/gotpu/gotpu/checkpoint"
	"github.com/gotpu/gotpu/data/tokenizer"
	"github.com/gotpu/gotpu/hub"
	"github.com/gotpu/gotpu/internal/atomicfile"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/peft"
	"github.com/gotpu/gotpu/trainer"
	"github.com/gotpu/gotpu/xla"
)

// maxBodyBytes bounds a POST /jobs body: an argument file is a few kB.
const maxBodyBytes = 1 << 20

// maxConfigBytes bounds a config.json the service reads while checking a request (an HF
// config is a few kB); a request must not make it read a large file into memory.
const maxConfigBytes = 1 << 20

// maxFirstRecordBytes bounds what is read of a .json/.jsonl data file to tell pre-tokenized
// data from text (its first record).
const maxFirstRecordBytes = 16 << 20

// defaultSaveTotalLimit is the save_total_limit of a job whose request sets none: without one,
// a job with a small save_steps keeps every checkpoint (85 checkpoints, 284 MB in 40 s were
// seen). Two keep the newest, to resume and generate from, and the one before it; a request
// that wants more says so.
const defaultSaveTotalLimit = 2

// jobSpec is a checked POST /jobs body: the TrainingArguments and HF run_clm.py's model/data
// arguments, with every path resolved and every cheap check already done, so that a job fails
// at run time only for what needs the weights or the data (an unreadable file, a diverging run).
type jobSpec struct {
	// Body is the request as posted, kept in job.json.
	Body json.RawMessage
	Args trainer.TrainingArguments
	// Model is where the weights come from: ModelDir (model_name_or_path) is loaded; otherwise
	// Config (from config_name, or model_type with config_overrides) is initialised at random
	// with the run's seed, as run_clm.py does "from scratch". ModelRepo is set when
	// model_name_or_path was a Hub repo id: ModelDir is then the cache's snapshot of the repo at
	// ModelRepo's commit, holding config.json (fetched at validation) and, once the job has
	// fetched them, the weights.
	ModelDir  string
	ModelRepo *hub.Repo
	Config    models.Config
	VocabSize int
	MaxPos    int
	// modelCfg is the model's config whichever the source, for the resource budget; modelField
	// is the request field it came from.
	modelCfg   models.Config
	modelField string
	// Tokenizer is tokenizer_name (or the model directory's tokenizer.json); nil only for
	// pre-tokenized data without one, where generation takes token ids. It is borrowed from the
	// server's tokenizer cache; releaseTok gives it back (release).
	Tokenizer     tokenizer.Tokenizer
	TokenizerPath string
	releaseTok    func()
	TrainFile     string
	EvalFile      string
	// Pretokenized: the files are JSON lines with input_ids; otherwise text, grouped into
	// BlockSize-token blocks (run_clm's group_texts), from TextColumn for JSON lines.
	Pretokenized    bool
	BlockSize       int
	TextColumn      string
	MaxTrainSamples int
	MaxEvalSamples  int
	// Peft is the new LoRA adapter a use_peft job trains on the frozen model_name_or_path
	// (TRL's peft_config, from the lora_* fields); AdapterDir is adapter_name_or_path resolved, an
	// adapter to continue training: a directory under the service's directories, or the Hub
	// cache's snapshot of AdapterRepo (adapter_config.json fetched at validation,
	// adapter_model.safetensors by the job). With either, the job trains and saves the adapter
	// only (adapter_config.json + adapter_model.safetensors), as PEFT's save_pretrained does.
	Peft        *peft.LoraConfig
	AdapterDir  string
	AdapterRepo *hub.Repo
	// trainable bounds the adapter's trained elements, for the resource budget (0: every
	// parameter is trained).
	trainable int64
}

// lora reports whether the job trains a LoRA adapter rather than the whole model.
func (s *jobSpec) lora() bool { return s.Peft != nil || s.AdapterDir != "" }

// fieldError is one problem with one field of a request.
type fieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// requestError is a 400 answer: what is wrong with the request, field by field.
type requestError struct {
	Fields []fieldError
	cause  error
}

// release gives the spec's tokenizer back to the cache. It may be called more than once.
func (s *jobSpec) release() {
	if s.releaseTok != nil {
		s.releaseTok()
		s.releaseTok = nil
	}
	s.Tokenizer = nil
}

func (e *requestError) Error() string {
	if len(e.Fields) == 1 {
		return e.Fields[0].Message
	}
	msgs := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		msgs[i] = f.Message
	}
	return fmt.Sprintf("%d problems with the request: %s", len(e.Fields), strings.Join(msgs, "; "))
}

func (e *requestError) Unwrap() error { return e.cause }

func (e *requestError) add(field, format string, args ...any) {
	e.Fields = append(e.Fields, fieldError{Field: field, Message: field + ": " + fmt.Sprintf(format, args...)})
}

func (e *requestError) errOrNil() error {
	if len(e.Fields) == 0 {
		return nil
	}
	return e
}

// fromArgumentsError turns the trainer's per-field errors into a requestError.
func fromArgumentsError(err error) error {
	var ae *trainer.ArgumentsError
	if !errors.As(err, &ae) {
		return &requestError{Fields: []fieldError{{Field: "", Message: err.Error()}}, cause: err}
	}
	re := &requestError{cause: err}
	for _, f := range ae.Fields {
		re.Fields = append(re.Fields, fieldError{Field: f.Field, Message: f.Error()})
	}
	if len(re.Fields) == 0 {
		re.Fields = []fieldError{{Message: err.Error()}}
	}
	return re
}

// specEnv is what parsing a spec needs from the server.
type specEnv struct {
	paths      *pathPolicy
	jobDir     string // the job's output_dir, already created
	deviceKind string // the runtime's kind ("go", "tpu", ...)
	numDevices int
	toks       *tokenizerCache
	// rt, when set, is the runtime the job will train on: the spec's model and batch are checked
	// against its memory (trainer.CheckBudget) before the job is accepted.
	rt *xla.Runtime
	// hub fetches config.json and tokenizer.json of the Hub repos a request names; nil: the
	// service takes no repo ids (-hub not given).
	hub *hubFetcher
}

// parseSpec checks a POST /jobs body. Problems come back as *requestError (a 400); the body's
// own field names are used in every message. A spec with a tokenizer holds it in env.toks until
// its release method is called.
func parseSpec(ctx context.Context, body []byte, env specEnv) (_ *jobSpec, err error) {
	args, md, err := trainer.ParseTrainingArgumentsJSON(body, "POST /jobs body")
	if err != nil {
		return nil, fromArgumentsError(err)
	}
	s := &jobSpec{Body: json.RawMessage(bytes.TrimSpace(body)), Args: *args}
	defer func() {
		if err != nil {
			s.release()
		}
	}()
	re := &requestError{}
	s.checkServiceFields(re, env)
	s.checkHubFields(re, md)
	s.resolveModel(ctx, re, md, env)
	s.resolvePeft(ctx, re, md, env)
	s.resolveData(ctx, re, md, env)
	if err := re.errOrNil(); err != nil {
		return nil, err
	}
	// The trainer checks the arguments again in trainer.New; checking a finalized copy here makes
	// a bad combination (say, an unknown lr_scheduler_type) a 400 instead of a failed job.
	check := s.Args
	if err := check.Finalize(); err != nil {
		return nil, fromArgumentsError(err)
	}
	if err := check.Validate(); err != nil {
		return nil, fromArgumentsError(err)
	}
	if err := s.checkBudget(env, check); err != nil {
		return nil, err
	}
	return s, nil
}

// checkBudget refuses, as a 400, a model and batch that cannot fit in the memory of the
// service's runtime (trainer.CheckBudget: parameters, gradients, optimizer state, activations
// and input batches against the host's available memory on the pure-Go backend), before anything
// is allocated: such a job would otherwise be accepted and then take the process down with an
// out-of-memory fatal error. The trainer checks again when the job starts (memory may have gone
// to other jobs meanwhile).
func (s *jobSpec) checkBudget(env specEnv, args trainer.TrainingArguments) error {
	if env.rt == nil || s.modelCfg == nil {
		return nil
	}
	est, err := trainer.CheckBudget(env.rt, s.budgetRequest(args))
	if err == nil {
		return nil
	}
	var fe *trainer.FieldError
	if errors.As(err, &fe) {
		return &requestError{Fields: []fieldError{{Field: fe.Field, Message: fe.Error()}}, cause: err}
	}
	// The field to change: the model when its state (parameters, gradients, optimizer) is most
	// of the estimate, else the batch.
	field := "per_device_train_batch_size"
	if state := est.Parameters + est.Gradients + est.Optimizer; state >= est.Activations && state >= est.Inputs {
		field = s.modelField
	}
	return &requestError{Fields: []fieldError{{Field: field, Message: field + ": " + err.Error()}}, cause: err}
}

// budgetRequest is what the spec asks of the runtime's memory: with a LoRA adapter, gradients and
// optimizer state for the adapter's tensors only, beside the frozen base.
func (s *jobSpec) budgetRequest(args trainer.TrainingArguments) trainer.BudgetRequest {
	return trainer.BudgetRequest{Model: s.modelCfg, Args: args, Replicas: args.NumDevices, SeqLen: s.BlockSize, TrainableParams: s.trainable}
}

// checkServiceFields handles the TrainingArguments the service decides itself: where a job
// writes, which devices it runs on, and what it resumes from.
func (s *jobSpec) checkServiceFields(re *requestError, env specEnv) {
	def := trainer.DefaultTrainingArguments()
	if s.Args.OutputDir != def.OutputDir && s.Args.OutputDir != "" {
		re.add("output_dir", "set by the service (each job writes to its own directory under -data_dir); remove it")
	}
	if s.Args.LoggingDir != "" {
		re.add("logging_dir", "set by the service (output_dir/runs/...); remove it")
	}
	s.Args.OutputDir = env.jobDir
	if s.Args.SaveTotalLimit == nil {
		limit := defaultSaveTotalLimit
		s.Args.SaveTotalLimit = &limit
	}
	// A server has no terminal to draw progress bars on; progress is served by GET /jobs/{id}.
	tqdmOff := true
	s.Args.DisableTqdm = &tqdmOff
	switch d := strings.ToLower(strings.TrimSpace(s.Args.Device)); d {
	case "", "auto", env.deviceKind:
	default:
		if !(d == "gpu" && env.deviceKind == "cuda") {
			re.add("device", "%q, but this service runs on %q (its -device flag); remove it", s.Args.Device, env.deviceKind)
		}
	}
	s.Args.Device = env.deviceKind
	if s.Args.NumDevices > env.numDevices {
		re.add("num_devices", "%d, but this service's runtime has %d device(s)", s.Args.NumDevices, env.numDevices)
	}
	switch r := strings.TrimSpace(s.Args.ResumeFromCheckpoint); {
	case r == "" || strings.EqualFold(r, "false"):
	case strings.EqualFold(r, "true"):
		re.add("resume_from_checkpoint", `"true" means the latest checkpoint in output_dir, which is new for each job; pass a checkpoint directory (the latest_checkpoint.dir of the job to continue)`)
	default:
		dir, err := env.paths.resolve(r)
		if err != nil {
			re.add("resume_from_checkpoint", "%q: %v", r, err)
		} else if !checkpoint.IsCommitted(dir) {
			re.add("resume_from_checkpoint", "%q is not a committed checkpoint", r)
		} else {
			s.Args.ResumeFromCheckpoint = dir
		}
	}
}

// checkHubFields refuses the run_clm.py arguments about the Hub that the service decides itself.
func (s *jobSpec) checkHubFields(re *requestError, md *trainer.ModelDataArguments) {
	if md.Token != nil && *md.Token != "" {
		// Never echoed: it is a secret. The request is kept in job.json, so a token in it would
		// be written to disk.
		re.add("token", "not accepted in a request (it would be stored with the job); the service reads the Hub with its own token: set HF_TOKEN in its environment")
	}
	if str(md.CacheDir) != "" {
		re.add("cache_dir", "set by the service (its Hub cache: HF_HUB_CACHE or HF_HOME in its environment); remove it")
	}
}

// resolveModel picks the model source the way run_clm.py does: model_name_or_path, else
// config_name, else model_type (+ config_overrides) — the last two train from scratch. A name
// that is no path the service may read but a Hub repo id has its config.json fetched now; the
// weights are fetched by the job.
func (s *jobSpec) resolveModel(ctx context.Context, re *requestError, md *trainer.ModelDataArguments, env specEnv) {
	modelDir, configName := str(md.ModelNameOrPath), str(md.ConfigName)
	modelType, overrides := str(md.ModelType), str(md.ConfigOverrides)
	if overrides != "" && (modelDir != "" || configName != "") {
		// run_clm.py's own rule (ModelArguments.__post_init__).
		re.add("config_overrides", "can't be used in combination with config_name or model_name_or_path (use model_type)")
		return
	}
	var cfg models.Config
	var err error
	switch {
	case modelDir != "":
		if configName != "" {
			re.add("config_name", "not supported together with model_name_or_path (the model directory's config.json is used)")
			return
		}
		src, ferr := resolveName(ctx, env.paths, env.hub, "model_name_or_path", modelDir, modelRevision(md), "config.json")
		if ferr != nil {
			re.add(ferr.field, "%s", ferr.msg)
			return
		}
		s.ModelDir, s.ModelRepo = src.path, src.repo
		if src.repo != nil {
			s.ModelDir = filepath.Dir(src.path)
		}
		if cfg, err = parseConfig(filepath.Join(s.ModelDir, "config.json")); err != nil {
			re.add("model_name_or_path", "%s", relabel(err, s.ModelDir, modelDir))
			return
		}
	case configName != "":
		src, ferr := resolveName(ctx, env.paths, env.hub, "config_name", configName, modelRevision(md), "config.json")
		if ferr != nil {
			re.add(ferr.field, "%s", ferr.msg)
			return
		}
		path := src.path
		if st, err := os.Stat(path); err == nil && st.IsDir() {
			path = filepath.Join(path, "config.json")
		}
		if cfg, err = parseConfig(path); err != nil {
			re.add("config_name", "%s", relabel(err, path, configName))
			return
		}
	case modelType != "":
		if cfg, err = scratchConfig(modelType, overrides, env.jobDir); err != nil {
			var fe *fieldErr
			if errors.As(err, &fe) {
				re.add(fe.field, "%s", fe.msg)
			} else {
				re.add("model_type", "%v", err)
			}
			return
		}
	default:
		re.add("model_name_or_path", "required: a Hugging Face model directory (or, with -hub, a Hub repo id) to fine-tune, or config_name / model_type (with config_overrides) to train from scratch")
		return
	}
	var ok bool
	if s.VocabSize, s.MaxPos, ok = causalDims(cfg); !ok {
		re.add("model_name_or_path", "%s is not a causal language model; this service trains and serves causal LMs (GPT-2, Llama, Mistral, Qwen2, Qwen3, Gemma 3)", cfg.Architecture())
		return
	}
	if modelDir == "" {
		s.Config = cfg
	}
	s.modelCfg = cfg
	switch {
	case modelDir != "":
		s.modelField = "model_name_or_path"
	case configName != "":
		s.modelField = "config_name"
	case overrides != "":
		s.modelField = "config_overrides"
	default:
		s.modelField = "model_type"
	}
	if dt := str(md.TorchDtype); dt != "" && dt != "auto" && dt != "float32" {
		re.add("torch_dtype", "%q: the service keeps float32 master weights (use bf16: true for bfloat16 compute)", dt)
	}
}

// modelRevision is the request's model_revision (run_clm.py's, for the model, its config and
// its tokenizer when they are Hub repo ids).
func modelRevision(md *trainer.ModelDataArguments) revision {
	return revision{value: str(md.ModelRevision), field: "model_revision"}
}

// parseConfig is models.ParseConfig for a file of at most maxConfigBytes.
func parseConfig(path string) (models.Config, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Base(path), bareError(err))
	}
	if st.IsDir() {
		return nil, fmt.Errorf("%s is a directory, want a config.json", filepath.Base(path))
	}
	if st.Size() > maxConfigBytes {
		return nil, fmt.Errorf("%s is %d bytes; a config.json is at most %d here", filepath.Base(path), st.Size(), maxConfigBytes)
	}
	return models.ParseConfig(path)
}

// resolveData checks the data files and the tokenizer.
func (s *jobSpec) resolveData(ctx context.Context, re *requestError, md *trainer.ModelDataArguments, env specEnv) {
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"dataset_name", str(md.DatasetName) != ""},
		{"streaming", md.Streaming != nil && *md.Streaming},
		{"line_by_line", md.LineByLine != nil && *md.LineByLine},
		{"mlm_probability", md.MLMProbability != nil},
	} {
		if f.set {
			re.add(f.name, "not supported by this service (it trains causal LMs on local files: train_file)")
		}
	}
	s.TextColumn = str(md.TextColumnName)
	if s.TextColumn == "" {
		s.TextColumn = "text"
	}
	if md.MaxTrainSamples != nil {
		s.MaxTrainSamples = *md.MaxTrainSamples
	}
	if md.MaxEvalSamples != nil {
		s.MaxEvalSamples = *md.MaxEvalSamples
	}
	var err error
	if str(md.TrainFile) == "" {
		re.add("train_file", "required: pre-tokenized JSON lines ({\"input_ids\": [...]}) or text (.txt, or JSON lines with text_column_name) with tokenizer_name")
		return
	}
	if s.TrainFile, err = env.paths.resolve(*md.TrainFile); err != nil {
		re.add("train_file", "%q: %v", *md.TrainFile, err)
		return
	}
	if s.Pretokenized, err = isPretokenized(s.TrainFile); err != nil {
		re.add("train_file", "%q: %v", *md.TrainFile, err)
		return
	}
	if v := str(md.ValidationFile); v != "" {
		if s.EvalFile, err = env.paths.resolve(v); err != nil {
			re.add("validation_file", "%q: %v", v, err)
			return
		}
		pre, err := isPretokenized(s.EvalFile)
		if err != nil {
			re.add("validation_file", "%q: %v", v, err)
			return
		}
		if pre != s.Pretokenized {
			re.add("validation_file", "is %s but train_file is %s", dataKind(pre), dataKind(s.Pretokenized))
			return
		}
	}
	if md.BlockSize != nil && *md.BlockSize <= 0 {
		re.add("block_size", "%d: must be positive", *md.BlockSize)
	}
	if s.MaxPos > 0 {
		// run_clm.py: block_size defaults to the model's length (at most 1024) and is capped by it.
		s.BlockSize = min(1024, s.MaxPos)
		if md.BlockSize != nil && *md.BlockSize > 0 {
			s.BlockSize = min(*md.BlockSize, s.MaxPos)
		}
	}

	s.resolveTokenizer(ctx, re, md, env)
}

// resolveTokenizer finds the tokenizer (tokenizer_name, else the model's own: AutoTokenizer's
// rule) and borrows it from the server's cache.
func (s *jobSpec) resolveTokenizer(ctx context.Context, re *requestError, md *trainer.ModelDataArguments, env specEnv) {
	name := str(md.TokenizerName)
	field, given := "tokenizer_name", name
	// shown is the part of the tokenizer's path that messages show as given.
	var shown string
	switch {
	case name != "":
		src, ferr := resolveName(ctx, env.paths, env.hub, field, name, modelRevision(md), "tokenizer.json")
		if ferr != nil {
			re.add(ferr.field, "%s", ferr.msg)
			return
		}
		s.TokenizerPath, shown = src.path, src.path
		if src.repo != nil {
			shown = filepath.Dir(src.path) // "org/name/tokenizer.json: ..."
		}
	case s.ModelDir != "":
		field, given = "model_name_or_path", str(md.ModelNameOrPath)
		p, err := modelTokenizer(ctx, env.hub, s.ModelDir, s.ModelRepo)
		if err != nil { // only a Hub model's fetch fails; a local directory is looked at
			re.add(field, "%s", env.hub.describe(err, given, *s.ModelRepo, "tokenizer.json"))
			return
		}
		s.TokenizerPath, shown = p, s.ModelDir
	}
	if s.TokenizerPath == "" {
		// A model that could not be resolved (already a field error) may have had a tokenizer.
		modelFailed := str(md.ModelNameOrPath) != "" && s.ModelDir == ""
		if !s.Pretokenized && !modelFailed {
			re.add("tokenizer_name", "required: train_file %q is text (give a tokenizer.json, or pre-tokenized JSON lines)", str(md.TrainFile))
		}
		return
	}
	tok, release, err := env.toks.acquire(ctx, s.TokenizerPath)
	if err != nil {
		re.add(field, "%s", relabel(bareError(err), shown, given))
		return
	}
	s.Tokenizer, s.releaseTok = tok, release
	if n := tok.VocabSize(true); s.VocabSize > 0 && n > s.VocabSize {
		re.add(field, "the tokenizer has %d tokens but the model's vocab_size is %d", n, s.VocabSize)
	}
}

func dataKind(pretokenized bool) string {
	if pretokenized {
		return "pre-tokenized JSON lines"
	}
	return "text"
}

// isPretokenized tells whether path is JSON lines whose first record has input_ids (what HF
// datasets store after tokenization); anything else is text. Errors do not name the file (the
// caller names it as the request did).
func isPretokenized(path string) (bool, error) {
	st, err := os.Stat(path)
	if err != nil {
		return false, bareError(err)
	}
	if st.IsDir() {
		return false, errors.New("is a directory, want a file")
	}
	if ext := strings.ToLower(filepath.Ext(path)); ext != ".jsonl" && ext != ".json" {
		return false, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return false, bareError(err)
	}
	defer f.Close()
	ok, err := firstRecordHasInputIDs(io.LimitReader(f, maxFirstRecordBytes))
	if err != nil {
		return false, fmt.Errorf("first line is not a JSON object (within its first %d MiB): %w", maxFirstRecordBytes>>20, err)
	}
	return ok, nil
}

// firstRecordHasInputIDs reads the first JSON object of r token by token, so that memory stays
// bounded by the largest single token rather than the record (one line of 50M ids was seen), and
// reports whether it has an input_ids key.
func firstRecordHasInputIDs(r io.Reader) (bool, error) {
	dec := json.NewDecoder(r)
	tok, err := dec.Token()
	if err != nil {
		return false, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return false, fmt.Errorf("starts with %v", tok)
	}
	found := false
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return false, err
		}
		if key == "input_ids" {
			found = true
		}
		if err := skipValue(dec); err != nil {
			return false, err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return false, err
	}
	return found, nil
}

// skipValue consumes one JSON value from dec.
func skipValue(dec *json.Decoder) error {
	depth := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); ok {
			if d == '{' || d == '[' {
				depth++
			} else {
				depth--
			}
		}
		if depth == 0 {
			return nil
		}
	}
}

// relabel is err's message with the real path of a file (inside the service's directories)
// replaced by the name the request gave it: answers show the request's own names, not where the
// service's directories are.
func relabel(err error, real, given string) string {
	return strings.ReplaceAll(err.Error(), real, given)
}

// bareError drops the path from an *os.PathError: request errors name files as the request did.
func bareError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// fieldErr is an error about one named request field.
type fieldErr struct{ field, msg string }

func (e *fieldErr) Error() string { return e.field + ": " + e.msg }

// scratchConfig is run_clm.py's CONFIG_MAPPING[model_type]() with config_overrides applied
// (models.ScratchConfig: update_from_string's rules). The result is written to
// jobDir/init_config.json, the record of what the job was initialised from.
func scratchConfig(modelType, overrides, jobDir string) (models.Config, error) {
	cfg, err := models.ScratchConfig(modelType, overrides)
	if err != nil {
		var se *models.ScratchError
		switch {
		case errors.As(err, &se) && se.Field == "model_type":
			return nil, &fieldErr{"model_type", fmt.Sprintf("%q: the service builds gpt2, llama, mistral, qwen2, qwen3 or gemma3_text from scratch", modelType)}
		case errors.As(err, &se):
			return nil, &fieldErr{se.Field, se.Msg}
		}
		return nil, err
	}
	out, err := cfg.JSON()
	if err != nil {
		return nil, err
	}
	if err := atomicfile.WriteFileBytes(filepath.Join(jobDir, "init_config.json"), out); err != nil {
		return nil, fmt.Errorf("writing init_config.json: %w", bareError(err))
	}
	return cfg, nil
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return strings.TrimSpace(*p)
}

// pathPolicy resolves the file paths of a request: relative to the service's working directory,
// symlinks followed, and only inside the directories the service was told it may read
// (-input_roots) or its own -data_dir — a job request must not make the service read arbitrary
// files of its host, nor learn which exist.
type pathPolicy struct {
	base string
	// roots are the allowed directories with symlinks resolved: what a resolved path must lie
	// in. lexRoots are the same directories as configured (absolute, cleaned) and resolved: a
	// path is only looked at on disk if it lies in one of these as written.
	roots, lexRoots []string
}

// errPathRefused is the one answer for a path the service will not read, whatever the reason:
// outside the allowed directories, missing, unreadable, or a symlink leading out. One answer
// for all keeps a request from probing which files exist on the host, and it names none of the
// service's own directories.
var errPathRefused = errors.New("not a file this service can read (requests may name only files under the directories the service was started with: -input_roots, -data_dir)")

func newPathPolicy(base string, roots []string) (*pathPolicy, error) {
	p := &pathPolicy{base: base}
	for _, r := range roots {
		if r == "" {
			continue
		}
		if !filepath.IsAbs(r) {
			r = filepath.Join(base, r)
		}
		real, err := filepath.EvalSymlinks(r)
		if err != nil {
			return nil, fmt.Errorf("input root %s: %w", r, err)
		}
		p.roots = append(p.roots, real)
		p.lexRoots = append(p.lexRoots, filepath.Clean(r), real)
	}
	return p, nil
}

// resolve returns the real path of a request's path, or errPathRefused. Containment is checked
// before existence: a path outside every root as written is refused without touching the disk;
// one inside is resolved (symlinks followed) and must still lie inside a root.
func (p *pathPolicy) resolve(path string) (string, error) {
	if path == "" {
		return "", errPathRefused
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(p.base, path)
	}
	if !within(filepath.Clean(path), p.lexRoots) {
		return "", errPathRefused
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil || !within(real, p.roots) {
		return "", errPathRefused
	}
	return real, nil
}

// within reports whether path is one of dirs or lies under one of them.
func within(path string, dirs []string) bool {
	for _, d := range dirs {
		if rel, err := filepath.Rel(d, path); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return true
		}
	}
	return false
}
