package trainer

// TrainingArguments holds the subset of Hugging Face's TrainingArguments that gotpu implements,
// under HF's names (the json tags), plus a few gotpu extras at the end.
//
// Defaults (DefaultTrainingArguments) follow transformers 5.x where a field still exists there,
// and the last 4.x release (4.57) for the fields 5.0 removed that gotpu keeps
// (overwrite_output_dir, save_safetensors, adafactor, include_tokens_per_second). Where the two
// lines differ (report_to, output_dir, average_tokens_across_devices, optim,
// include_num_input_tokens_seen, warmup_steps) the field comment says so.
//
// Fields are declared in the order of transformers 4.5x's dataclass, which is the key order of
// every training_args dump written by 4.x; ToJSON writes them in this order. The hf struct tag
// carries how a field is read and written:
//   - nullable: JSON null means HF's default (HF's default is None, or a null bool HF tolerates);
//   - steps: an "int or float ratio" field, written as an int when integral (HF keeps the int).
//
// Pointer fields are those whose HF default is None (nil; JSON null): set one as HF's keyword
// argument reads with its setter, args.SetEvalSteps(10) (args_setters.go). Enumerated fields
// have typed constants (args_enums.go): args.EvalStrategy = trainer.IntervalSteps.
//
// A TrainingArguments is a plain value: copy it freely; it is not safe for concurrent mutation.
type TrainingArguments struct {
	// OutputDir: where checkpoints and the final model go. HF ≥ 4.50 defaults to "trainer_output"
	// (earlier versions required it).
	OutputDir string `json:"output_dir" hf:"nullable"`
	// OverwriteOutputDir (removed in transformers 5.0; default false).
	OverwriteOutputDir bool `json:"overwrite_output_dir" hf:"nullable"`
	DoTrain            bool `json:"do_train" hf:"nullable"`
	DoEval             bool `json:"do_eval" hf:"nullable"`
	DoPredict          bool `json:"do_predict" hf:"nullable"`
	// EvalStrategy: IntervalNo, IntervalSteps or IntervalEpoch. The pre-4.46 name
	// evaluation_strategy is accepted as an alias when reading JSON and flags.
	EvalStrategy              IntervalStrategy `json:"eval_strategy"`
	PerDeviceTrainBatchSize   int              `json:"per_device_train_batch_size"`
	PerDeviceEvalBatchSize    int              `json:"per_device_eval_batch_size"`
	GradientAccumulationSteps int              `json:"gradient_accumulation_steps"`
	EvalAccumulationSteps     *int             `json:"eval_accumulation_steps"`
	// EvalDelay: epochs or steps (per eval_strategy) before the first evaluation.
	EvalDelay    float64 `json:"eval_delay" hf:"nullable,steps"`
	LearningRate float64 `json:"learning_rate"`
	WeightDecay  float64 `json:"weight_decay"`
	AdamBeta1    float64 `json:"adam_beta1"`
	AdamBeta2    float64 `json:"adam_beta2"`
	AdamEpsilon  float64 `json:"adam_epsilon"`
	MaxGradNorm  float64 `json:"max_grad_norm"`
	// NumTrainEpochs may be fractional: the last epoch is cut at that fraction of its steps.
	NumTrainEpochs float64 `json:"num_train_epochs"`
	// MaxSteps > 0 overrides NumTrainEpochs; -1 means "from the epochs".
	MaxSteps        int           `json:"max_steps"`
	LRSchedulerType SchedulerType `json:"lr_scheduler_type"`
	// LRSchedulerKwargs are passed to the schedule as HF's get_scheduler passes them (see
	// NewScheduleFromKwargs). Values are float64, int64, string, bool or nil.
	LRSchedulerKwargs map[string]any `json:"lr_scheduler_kwargs" hf:"nullable"`
	// WarmupRatio: 4.x's ratio of the run spent warming up, used when WarmupSteps is 0
	// (deprecated in 5.x, where warmup_steps < 1 is the ratio instead).
	WarmupRatio float64 `json:"warmup_ratio" hf:"nullable"`
	// WarmupSteps: an integer number of steps, or (5.x) a float in (0, 1) meaning a ratio.
	WarmupSteps float64 `json:"warmup_steps" hf:"steps"`
	// LogLevel: "passive", "debug", "info", "warning", "error" or "critical".
	LogLevel string `json:"log_level"`
	// LoggingDir: TensorBoard directory; Finalize defaults it to output_dir/runs/<date>_<host>
	// as transformers 4.x does (5.x deprecates the field and derives the same directory later).
	LoggingDir      string           `json:"logging_dir" hf:"nullable"`
	LoggingStrategy IntervalStrategy `json:"logging_strategy"`
	// LoggingFirstStep: also log after the first update.
	LoggingFirstStep bool `json:"logging_first_step" hf:"nullable"`
	// LoggingSteps: an interval in updates, or a ratio of max_steps when < 1.
	LoggingSteps             float64      `json:"logging_steps" hf:"steps"`
	LoggingNanInfFilter      bool         `json:"logging_nan_inf_filter" hf:"nullable"`
	SaveStrategy             SaveStrategy `json:"save_strategy"`
	SaveSteps                float64      `json:"save_steps" hf:"steps"`
	SaveTotalLimit           *int         `json:"save_total_limit"`
	SaveSafetensors          bool         `json:"save_safetensors" hf:"nullable"`
	SaveOnlyModel            bool         `json:"save_only_model" hf:"nullable"`
	Seed                     int          `json:"seed"`
	DataSeed                 *int         `json:"data_seed"`
	BF16                     bool         `json:"bf16" hf:"nullable"`
	DataloaderDropLast       bool         `json:"dataloader_drop_last" hf:"nullable"`
	EvalSteps                *float64     `json:"eval_steps" hf:"steps"`
	DataloaderNumWorkers     int          `json:"dataloader_num_workers"`
	DataloaderPrefetchFactor *int         `json:"dataloader_prefetch_factor"`
	// RunName defaults (Finalize) to OutputDir, as transformers 4.x does.
	RunName             string   `json:"run_name" hf:"nullable"`
	DisableTqdm         *bool    `json:"disable_tqdm"`
	RemoveUnusedColumns bool     `json:"remove_unused_columns" hf:"nullable"`
	LabelNames          []string `json:"label_names"`
	LoadBestModelAtEnd  bool     `json:"load_best_model_at_end" hf:"nullable"`
	// MetricForBestModel: "" is HF's None; Finalize sets "loss" when load_best_model_at_end.
	MetricForBestModel string `json:"metric_for_best_model" hf:"nullable"`
	GreaterIsBetter    *bool  `json:"greater_is_better"`
	IgnoreDataSkip     bool   `json:"ignore_data_skip" hf:"nullable"`
	// FSDP: HF's fsdp options (FSDPFullShard…), [] when off. gotpu implements full_shard and
	// hybrid_shard, with auto_wrap; see args_fsdp.go and FSDPPlan. JSON and flags also take HF's
	// space-separated string ("full_shard auto_wrap") and true (full_shard).
	FSDP []string `json:"fsdp"`
	// FSDPConfig: HF's fsdp_config (a dict, or the path of a JSON file, read when given), as HF's
	// post-init leaves it; see FSDPConfig.
	FSDPConfig           FSDPConfig `json:"fsdp_config"`
	LabelSmoothingFactor float64    `json:"label_smoothing_factor"`
	// Optim: "adamw_torch" (the default before torch 2.8; 5.x picks "adamw_torch_fused" on newer
	// torch — the same update), "adamw_torch_fused", "adamw_hf", "adamw_torch_xla" (all AdamW)
	// or "adafactor".
	Optim     OptimizerName `json:"optim"`
	OptimArgs string        `json:"optim_args" hf:"nullable"`
	// Adafactor (deprecated 4.x spelling of optim=adafactor; removed in 5.0).
	Adafactor bool `json:"adafactor" hf:"nullable"`
	// ReportTo: integrations. HF 5.x defaults to none (4.x defaulted to "all"); "none" and "all"
	// are expanded by Finalize.
	ReportTo []string `json:"report_to" hf:"nullable"`
	// ResumeFromCheckpoint: a checkpoint directory, or "true" for the latest in output_dir.
	ResumeFromCheckpoint  string `json:"resume_from_checkpoint" hf:"nullable"`
	GradientCheckpointing bool   `json:"gradient_checkpointing" hf:"nullable"`
	FullDeterminism       bool   `json:"full_determinism" hf:"nullable"`
	// IncludeTokensPerSecond (4.x; default false).
	IncludeTokensPerSecond bool `json:"include_tokens_per_second" hf:"nullable"`
	// IncludeNumInputTokensSeen: 5.x's "no", "all" or "non_padding"; 4.x's booleans map to
	// "all"/"no".
	IncludeNumInputTokensSeen string   `json:"include_num_input_tokens_seen" hf:"nullable"`
	NeftuneNoiseAlpha         *float64 `json:"neftune_noise_alpha"`
	EvalOnStart               bool     `json:"eval_on_start" hf:"nullable"`
	// AverageTokensAcrossDevices: true in 5.x (4.x defaulted to false and forced false on one
	// device).
	AverageTokensAcrossDevices bool `json:"average_tokens_across_devices" hf:"nullable"`

	// gotpu extras (not Hugging Face fields).

	// MaxConsecutiveNonfinite: how many consecutive updates with a non-finite loss or gradient
	// are skipped before training stops with an error.
	MaxConsecutiveNonfinite int `json:"max_consecutive_nonfinite"`
	// NumDevices: replicas for data-parallel training; 0 means all devices of the runtime.
	NumDevices int `json:"num_devices"`
	// Device: "auto", or a device kind the xla runtime knows ("tpu", "cuda", "cpu", …).
	Device string `json:"device"`
	// PeakFlops: the hardware's peak FLOP/s per device, for model FLOPs utilization (MFU)
	// reporting; 0 means unknown (no MFU).
	PeakFlops float64 `json:"peak_flops"`
	// LogGotpuMetrics: print gotpu's own counters (step time, throughput, MFU, pipeline
	// figures: GotpuLogKeys) in the console's log lines too; they are always in
	// log_history.jsonl, trainer_state.json and TensorBoard.
	LogGotpuMetrics bool `json:"log_gotpu_metrics" hf:"nullable"`
	// DevicePrefetchSize: training batches transferred to the devices ahead of the step that
	// takes them (torch_xla's device_prefetch_size), on top of dataloader_prefetch_factor batches
	// collated on the host; it bounds the device memory the input pipeline holds.
	DevicePrefetchSize int `json:"device_prefetch_size"`

	// Unsupported lists Hugging Face settings that were given (in a JSON file or on the command
	// line) with a value gotpu cannot honour. Validate reports each one; it is never written.
	Unsupported []UnsupportedSetting `json:"-"`
}

// UnsupportedSetting is a Hugging Face argument gotpu does not implement, given a value other
// than its default.
type UnsupportedSetting struct {
	Name   string // HF field name
	Value  string // the value as given, in JSON or flag form
	Advice string // what to do instead
}

// DefaultTrainingArguments returns Hugging Face's defaults (see TrainingArguments for the
// version) and gotpu's defaults for its extras.
func DefaultTrainingArguments() TrainingArguments {
	return TrainingArguments{
		OutputDir:                  "trainer_output",
		EvalStrategy:               "no",
		PerDeviceTrainBatchSize:    8,
		PerDeviceEvalBatchSize:     8,
		GradientAccumulationSteps:  1,
		LearningRate:               5e-5,
		AdamBeta1:                  0.9,
		AdamBeta2:                  0.999,
		AdamEpsilon:                1e-8,
		MaxGradNorm:                1.0,
		NumTrainEpochs:             3.0,
		MaxSteps:                   -1,
		LRSchedulerType:            "linear",
		LRSchedulerKwargs:          map[string]any{},
		LogLevel:                   "passive",
		LoggingStrategy:            "steps",
		LoggingSteps:               500,
		LoggingNanInfFilter:        true,
		SaveStrategy:               "steps",
		SaveSteps:                  500,
		SaveSafetensors:            true,
		Seed:                       42,
		RemoveUnusedColumns:        true,
		FSDP:                       []string{},
		Optim:                      "adamw_torch",
		ReportTo:                   []string{"none"},
		IncludeNumInputTokensSeen:  "no",
		AverageTokensAcrossDevices: true,
		MaxConsecutiveNonfinite:    10,
		DevicePrefetchSize:         1,
		NumDevices:                 0,
		Device:                     "auto",
	}
}

// ModelDataArguments holds the model and data arguments of Hugging Face's example scripts
// (run_clm.py, run_mlm.py, run_glue.py, run_classification.py: their ModelArguments and
// DataTrainingArguments), which HfArgumentParser reads from the same JSON file or command line
// as TrainingArguments. Every field is optional (nil: not given), because each script has its
// own defaults (max_seq_length is 128 in run_glue.py, unset in run_mlm.py); the command that
// runs the job applies them.
type ModelDataArguments struct {
	ModelNameOrPath  *string `json:"model_name_or_path"`
	ModelType        *string `json:"model_type"`
	ConfigOverrides  *string `json:"config_overrides"`
	ConfigName       *string `json:"config_name"`
	TokenizerName    *string `json:"tokenizer_name"`
	CacheDir         *string `json:"cache_dir"`
	UseFastTokenizer *bool   `json:"use_fast_tokenizer"`
	ModelRevision    *string `json:"model_revision"`
	Token            *string `json:"token"`
	UseAuthToken     *bool   `json:"use_auth_token"` // deprecated by the scripts in favour of token
	TrustRemoteCode  *bool   `json:"trust_remote_code"`
	// TorchDtype: "auto", "bfloat16", "float16" or "float32" (5.x scripts call it dtype; that
	// name is accepted as an alias).
	TorchDtype            *string `json:"torch_dtype"`
	LowCPUMemUsage        *bool   `json:"low_cpu_mem_usage"`
	IgnoreMismatchedSizes *bool   `json:"ignore_mismatched_sizes"`
	TaskName              *string `json:"task_name"`
	DatasetName           *string `json:"dataset_name"`
	DatasetConfigName     *string `json:"dataset_config_name"`
	// TrainSplit and ValidationSplit pick the splits of --dataset_name (TRL's
	// dataset_train_split / dataset_test_split are accepted as aliases); nil: "train", and
	// "validation" when the dataset has one.
	TrainSplit                *string  `json:"train_split"`
	ValidationSplit           *string  `json:"validation_split"`
	TrainFile                 *string  `json:"train_file"`
	ValidationFile            *string  `json:"validation_file"`
	TestFile                  *string  `json:"test_file"`
	MaxTrainSamples           *int     `json:"max_train_samples"`
	MaxEvalSamples            *int     `json:"max_eval_samples"`
	MaxPredictSamples         *int     `json:"max_predict_samples"`
	Streaming                 *bool    `json:"streaming"`
	BlockSize                 *int     `json:"block_size"`
	MaxSeqLength              *int     `json:"max_seq_length"`
	PadToMaxLength            *bool    `json:"pad_to_max_length"`
	OverwriteCache            *bool    `json:"overwrite_cache"`
	ValidationSplitPercentage *int     `json:"validation_split_percentage"`
	PreprocessingNumWorkers   *int     `json:"preprocessing_num_workers"`
	KeepLinebreaks            *bool    `json:"keep_linebreaks"`
	TextColumnName            *string  `json:"text_column_name"`
	TextColumnNames           *string  `json:"text_column_names"`
	LabelColumnName           *string  `json:"label_column_name"`
	MLMProbability            *float64 `json:"mlm_probability"`
	LineByLine                *bool    `json:"line_by_line"`
	// PEFT / LoRA, with TRL's ModelConfig names (PeftConfig turns them into a peft.LoraConfig):
	// use_peft, lora_r (16), lora_alpha (32), lora_dropout (0.05), lora_target_modules (none:
	// PEFT's default for the architecture; "all-linear"), lora_modules_to_save (refused),
	// lora_task_type (CAUSAL_LM), use_rslora, use_dora (refused), and adapter_name_or_path: an
	// adapter directory or Hub repo id to load on the base model (its config then wins).
	UsePeft           *bool    `json:"use_peft"`
	LoraR             *int     `json:"lora_r"`
	LoraAlpha         *float64 `json:"lora_alpha"`
	LoraDropout       *float64 `json:"lora_dropout"`
	LoraTargetModules []string `json:"lora_target_modules"`
	LoraModulesToSave []string `json:"lora_modules_to_save"`
	LoraTaskType      *string  `json:"lora_task_type"`
	UseRSLoRA         *bool    `json:"use_rslora"`
	UseDoRA           *bool    `json:"use_dora"`
	AdapterNameOrPath *string  `json:"adapter_name_or_path"`
	// TRL SFTConfig's data arguments (args_sft.go; SFTConfig turns them into an sft.Config);
	// nil: TRL's default.
	DatasetTextField   *string `json:"dataset_text_field"`
	MaxLength          *int    `json:"max_length"`
	Packing            *bool   `json:"packing"`
	PackingStrategy    *string `json:"packing_strategy"`
	PaddingFree        *bool   `json:"padding_free"`
	CompletionOnlyLoss *bool   `json:"completion_only_loss"`
	AssistantOnlyLoss  *bool   `json:"assistant_only_loss"`
	EOSToken           *string `json:"eos_token"`
	PadToken           *string `json:"pad_token"`
	ChatTemplatePath   *string `json:"chat_template_path"`
}
