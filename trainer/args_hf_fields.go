package trainer

// This file is the table of every field of Hugging Face's TrainingArguments from transformers
// 4.28 to 5.x, with HF's default, and what gotpu does with it when it appears in an argument file
// (or, for the unimplemented ones, on the command line through RegisterUnsupportedFlags).

// hfPolicy is what gotpu does with an HF field.
type hfPolicy uint8

const (
	// hfImplemented: a TrainingArguments field (decoded, validated, written by ToJSON).
	hfImplemented hfPolicy = iota
	// hfAlias: an older name of an implemented field (evaluation_strategy).
	hfAlias
	// hfRefuse: not implemented; accepted only when it holds HF's default (in any of the forms
	// HF writes it), refused with advice otherwise.
	hfRefuse
	// hfInert: not implemented, and accepted with any value, because it only configures
	// machinery gotpu does not have (torch.distributed, the Hub upload, SageMaker, the CUDA
	// caching allocator…) and cannot change what gotpu computes or writes. These appear with
	// non-default values in ordinary dumps (local_rank 0 from a launcher, hub_private_repo false).
	hfInert
)

// hfField describes one HF TrainingArguments field.
type hfField struct {
	name string
	// def is HF's default as Python writes it, for documentation and messages. Where 4.x and 5.x
	// differ, both are given.
	def string
	// versions is empty for fields present from before 4.28 through 5.x, else the range. It is
	// informative only (from HF's deprecation messages and the dumps in testdata/hf-files; "4.5x"
	// marks a release not pinned down); no behaviour depends on it.
	versions string
	policy   hfPolicy
	// isDefault reports whether a value means HF's default (hfRefuse only).
	isDefault func(JSONValue) bool
	// advice says what to do instead (hfRefuse), or why the field is inert (hfInert).
	advice string
}

const (
	adviceSharding = "gotpu shards over --num_devices with data parallelism or fsdp (full_shard, hybrid_shard); DeepSpeed is not supported"
	adviceCompile  = "gotpu always compiles the training step with XLA; remove it"
	adviceFP16     = "TPUs have no fp16 autocast; use bf16"
	adviceHub      = "only used when pushing to the Hub, which gotpu does not do"
	adviceDDP      = "torch.distributed setting; gotpu runs one process over --num_devices"
	adviceAccel    = "Accelerate batch dispatching does not apply; gotpu shards each global batch over --num_devices"
	adviceDevice   = "select the device with device (--device cpu, tpu, cuda or auto)"
	adviceSampling = "gotpu samples training examples uniformly at random (HF's train_sampling_strategy \"random\")"
)

// hfTrainingArgumentFields lists every TrainingArguments field of transformers 4.28–5.x, in
// 4.5x declaration order followed by the fields only older or newer versions have.
var hfTrainingArgumentFields = []hfField{
	{name: "output_dir", def: `None (→ "trainer_output" since 4.50; required before)`, policy: hfImplemented},
	{name: "overwrite_output_dir", def: "False", versions: "≤4.57 (removed in 5.0)", policy: hfImplemented},
	{name: "do_train", def: "False", policy: hfImplemented},
	{name: "do_eval", def: "False", policy: hfImplemented},
	{name: "do_predict", def: "False", policy: hfImplemented},
	{name: "eval_strategy", def: `"no"`, versions: "4.41+ (evaluation_strategy before)", policy: hfImplemented},
	{name: "prediction_loss_only", def: "False", policy: hfRefuse, isDefault: isFalseOrNull,
		advice: "gotpu's evaluation always computes the loss and the metrics; remove it"},
	{name: "per_device_train_batch_size", def: "8", policy: hfImplemented},
	{name: "per_device_eval_batch_size", def: "8", policy: hfImplemented},
	{name: "per_gpu_train_batch_size", def: "None", versions: "≤4.57 (deprecated)", policy: hfRefuse, isDefault: isNull,
		advice: "use per_device_train_batch_size"},
	{name: "per_gpu_eval_batch_size", def: "None", versions: "≤4.57 (deprecated)", policy: hfRefuse, isDefault: isNull,
		advice: "use per_device_eval_batch_size"},
	{name: "gradient_accumulation_steps", def: "1", policy: hfImplemented},
	{name: "eval_accumulation_steps", def: "None", policy: hfImplemented},
	{name: "eval_delay", def: "0", policy: hfImplemented},
	{name: "torch_empty_cache_steps", def: "None", versions: "4.44+", policy: hfInert,
		advice: "CUDA caching-allocator tuning; XLA manages device memory"},
	{name: "learning_rate", def: "5e-05", policy: hfImplemented},
	{name: "weight_decay", def: "0.0", policy: hfImplemented},
	{name: "adam_beta1", def: "0.9", policy: hfImplemented},
	{name: "adam_beta2", def: "0.999", policy: hfImplemented},
	{name: "adam_epsilon", def: "1e-08", policy: hfImplemented},
	{name: "max_grad_norm", def: "1.0", policy: hfImplemented},
	{name: "num_train_epochs", def: "3.0", policy: hfImplemented},
	{name: "max_steps", def: "-1", policy: hfImplemented},
	{name: "lr_scheduler_type", def: `"linear"`, policy: hfImplemented},
	{name: "lr_scheduler_kwargs", def: "{} (5.x: None)", versions: "4.36+", policy: hfImplemented},
	{name: "warmup_ratio", def: "0.0 (5.x: None, deprecated)", policy: hfImplemented},
	{name: "warmup_steps", def: "0", policy: hfImplemented},
	{name: "log_level", def: `"passive"`, policy: hfImplemented},
	{name: "log_level_replica", def: `"warning"`, policy: hfInert,
		advice: "log level of replica processes; gotpu is one process"},
	{name: "log_on_each_node", def: "True", policy: hfInert, advice: "multi-node logging; gotpu is one process"},
	{name: "logging_dir", def: "None (→ output_dir/runs/<date>_<host>)", policy: hfImplemented},
	{name: "logging_strategy", def: `"steps"`, policy: hfImplemented},
	{name: "logging_first_step", def: "False", policy: hfImplemented},
	{name: "logging_steps", def: "500", policy: hfImplemented},
	{name: "logging_nan_inf_filter", def: "True", policy: hfImplemented},
	{name: "save_strategy", def: `"steps"`, policy: hfImplemented},
	{name: "save_steps", def: "500", policy: hfImplemented},
	{name: "save_total_limit", def: "None", policy: hfImplemented},
	{name: "save_safetensors", def: "True", versions: "4.27–4.57 (5.x always saves safetensors)", policy: hfImplemented},
	{name: "save_on_each_node", def: "False", policy: hfInert, advice: "multi-node saving; gotpu is one process"},
	{name: "save_only_model", def: "False", versions: "4.36+", policy: hfImplemented},
	{name: "restore_callback_states_from_checkpoint", def: "False", versions: "4.41+", policy: hfRefuse,
		isDefault: isFalseOrNull, advice: "callback states are not restored from checkpoints; remove it"},
	{name: "no_cuda", def: "False", versions: "≤4.57 (deprecated)", policy: hfRefuse, isDefault: isFalseOrNull,
		advice: adviceDevice},
	{name: "use_cpu", def: "False", versions: "4.35+", policy: hfRefuse, isDefault: isFalseOrNull, advice: adviceDevice},
	{name: "use_mps_device", def: "False", versions: "≤4.57 (deprecated)", policy: hfRefuse, isDefault: isFalseOrNull,
		advice: "Apple MPS is not a gotpu device; " + adviceDevice},
	{name: "seed", def: "42", policy: hfImplemented},
	{name: "data_seed", def: "None", policy: hfImplemented},
	{name: "jit_mode_eval", def: "False", versions: "≤4.57", policy: hfRefuse, isDefault: isFalseOrNull,
		advice: adviceCompile},
	{name: "use_ipex", def: "False", versions: "≤4.57", policy: hfRefuse, isDefault: isFalseOrNull,
		advice: "Intel Extension for PyTorch does not apply to XLA; remove it"},
	{name: "bf16", def: "False", policy: hfImplemented},
	{name: "fp16", def: "False", policy: hfRefuse, isDefault: isFalseOrNull, advice: adviceFP16},
	{name: "fp16_opt_level", def: `"O1"`, versions: "≤4.57", policy: hfRefuse, isDefault: isStringOrNull("O1"),
		advice: "Apex AMP levels do not apply; " + adviceFP16},
	{name: "half_precision_backend", def: `"auto" (post-init wrote "cuda_amp"/"cpu_amp"/"amp" before ~4.32)`,
		versions: "≤4.57", policy: hfRefuse, isDefault: isStringOrNull("auto", "cuda_amp", "cpu_amp", "amp"),
		advice: "Apex is not available; " + adviceFP16},
	{name: "bf16_full_eval", def: "False", policy: hfRefuse, isDefault: isFalseOrNull,
		advice: "gotpu evaluates in the training precision; use bf16 for bf16 autocast"},
	{name: "fp16_full_eval", def: "False", policy: hfRefuse, isDefault: isFalseOrNull, advice: adviceFP16},
	{name: "tf32", def: "None", policy: hfRefuse, isDefault: isNull,
		advice: "gotpu does not switch TF32 modes (XLA chooses matmul precision); remove it"},
	{name: "local_rank", def: "-1", versions: "(5.x: deprecated)", policy: hfInert,
		advice: "set by torch.distributed launchers; gotpu runs one process over --num_devices"},
	{name: "xpu_backend", def: "None", versions: "≤4.30", policy: hfInert, advice: adviceDDP},
	{name: "ddp_backend", def: "None", versions: "4.31+", policy: hfInert, advice: adviceDDP},
	{name: "tpu_num_cores", def: "None", versions: "≤4.57", policy: hfRefuse, isDefault: isNull,
		advice: "set the number of replicas with num_devices (--num_devices)"},
	{name: "tpu_metrics_debug", def: "False", versions: "≤4.57 (deprecated)", policy: hfRefuse,
		isDefault: isFalseOrNull, advice: "torch_xla debug metrics do not apply; remove it"},
	{name: "debug", def: `"" (post-init: [])`, policy: hfRefuse, isDefault: isEmptyish,
		advice: "HF's underflow_overflow and tpu_metrics_debug modes are not implemented; remove it"},
	{name: "dataloader_drop_last", def: "False", policy: hfImplemented},
	{name: "eval_steps", def: "None (→ logging_steps)", policy: hfImplemented},
	{name: "dataloader_num_workers", def: "0", policy: hfImplemented},
	{name: "dataloader_prefetch_factor", def: "None", versions: "4.36+", policy: hfImplemented},
	{name: "past_index", def: "-1", versions: "≤4.57", policy: hfRefuse, isDefault: isIntOrNull(-1),
		advice: "models with past states (Transformer-XL/XLNet mems) are not supported; remove it"},
	{name: "run_name", def: "None (→ output_dir)", policy: hfImplemented},
	{name: "disable_tqdm", def: "None", policy: hfImplemented},
	{name: "remove_unused_columns", def: "True", policy: hfImplemented},
	{name: "label_names", def: "None", policy: hfImplemented},
	{name: "load_best_model_at_end", def: "False", policy: hfImplemented},
	{name: "metric_for_best_model", def: "None", policy: hfImplemented},
	{name: "greater_is_better", def: "None", policy: hfImplemented},
	{name: "ignore_data_skip", def: "False", policy: hfImplemented},
	{name: "sharded_ddp", def: `"" (post-init: [])`, versions: "≤4.34", policy: hfRefuse, isDefault: isEmptyish,
		advice: adviceSharding},
	{name: "fsdp", def: `"" (post-init: []; 5.x: None)`, policy: hfImplemented},
	{name: "fsdp_min_num_params", def: "0", versions: "≤4.57 (deprecated)", policy: hfRefuse,
		isDefault: isIntOrNull(0), advice: "deprecated by HF; give min_num_params in fsdp_config"},
	{name: "fsdp_config", def: `None (post-init: {"min_num_params": 0, "xla": false, …})`, policy: hfImplemented},
	{name: "tp_size", def: "0", versions: "4.50–4.5x", policy: hfRefuse, isDefault: isIntOrNull(0, 1),
		advice: "tensor parallelism is not supported; " + adviceSharding},
	{name: "fsdp_transformer_layer_cls_to_wrap", def: "None", versions: "≤4.57 (deprecated)", policy: hfRefuse,
		isDefault: isNull, advice: "deprecated by HF; give transformer_layer_cls_to_wrap in fsdp_config"},
	{name: "accelerator_config", def: "None (post-init: AcceleratorConfig() as a dict)", versions: "4.38+",
		policy: hfRefuse, isDefault: isDefaultAcceleratorConfig, advice: adviceAccel},
	{name: "deepspeed", def: "None", policy: hfRefuse, isDefault: isNullOrEmptyString, advice: adviceSharding},
	{name: "label_smoothing_factor", def: "0.0", policy: hfImplemented},
	{name: "optim", def: `"adamw_torch" (5.x with torch ≥ 2.8: "adamw_torch_fused"; ≤4.3x: "adamw_hf")`,
		policy: hfImplemented},
	{name: "optim_args", def: "None", policy: hfImplemented},
	{name: "adafactor", def: "False", versions: "≤4.57 (deprecated)", policy: hfImplemented},
	{name: "group_by_length", def: "False", versions: "≤4.57", policy: hfRefuse, isDefault: isFalseOrNull,
		advice: adviceSampling},
	{name: "length_column_name", def: `"length"`, policy: hfInert, advice: "only used by group_by_length"},
	{name: "report_to", def: `None → "all" (4.x); "none" (5.x)`, policy: hfImplemented},
	{name: "ddp_find_unused_parameters", def: "None", policy: hfInert, advice: adviceDDP},
	{name: "ddp_bucket_cap_mb", def: "None", policy: hfInert, advice: adviceDDP},
	{name: "ddp_broadcast_buffers", def: "None", policy: hfInert, advice: adviceDDP},
	{name: "dataloader_pin_memory", def: "True", policy: hfInert, advice: "torch DataLoader memory pinning"},
	{name: "dataloader_persistent_workers", def: "False", versions: "4.36+", policy: hfInert,
		advice: "torch DataLoader worker lifetime"},
	{name: "skip_memory_metrics", def: "True", policy: hfRefuse, isDefault: isTrueOrNull,
		advice: "gotpu does not add memory-profiler metrics to the logs; remove it"},
	{name: "use_legacy_prediction_loop", def: "False", versions: "≤4.57", policy: hfRefuse, isDefault: isFalseOrNull,
		advice: "there is one evaluation loop; remove it"},
	{name: "push_to_hub", def: "False", policy: hfRefuse, isDefault: isFalseOrNull,
		advice: "gotpu does not upload; push output_dir with huggingface-cli upload"},
	{name: "resume_from_checkpoint", def: "None", policy: hfImplemented},
	{name: "hub_model_id", def: "None", policy: hfInert, advice: adviceHub},
	{name: "hub_strategy", def: `"every_save"`, policy: hfInert, advice: adviceHub},
	{name: "hub_token", def: `None (written as "<HUB_TOKEN>")`, policy: hfInert, advice: adviceHub},
	{name: "hub_private_repo", def: "None (False before ~4.46)", policy: hfInert, advice: adviceHub},
	{name: "hub_always_push", def: "False", versions: "4.34+", policy: hfInert, advice: adviceHub},
	{name: "hub_revision", def: "None", versions: "4.5x+", policy: hfInert, advice: adviceHub},
	{name: "gradient_checkpointing", def: "False", policy: hfImplemented},
	{name: "gradient_checkpointing_kwargs", def: "None", versions: "4.35+", policy: hfInert,
		advice: "torch.utils.checkpoint options (use_reentrant…) have no XLA counterpart and do not change the numbers"},
	{name: "include_inputs_for_metrics", def: "False", versions: "≤4.57 (deprecated)", policy: hfRefuse,
		isDefault: isFalseOrNull, advice: "gotpu does not pass inputs to metrics; remove it"},
	{name: "include_for_metrics", def: "[]", versions: "4.47+", policy: hfRefuse, isDefault: isEmptyish,
		advice: "gotpu does not pass inputs or losses to metrics; remove it"},
	{name: "eval_do_concat_batches", def: "True", versions: "4.40+", policy: hfRefuse, isDefault: isTrueOrNull,
		advice: "gotpu always concatenates evaluation outputs; remove it"},
	{name: "fp16_backend", def: `"auto"`, versions: "≤4.57 (deprecated)", policy: hfRefuse,
		isDefault: isStringOrNull("auto"), advice: adviceFP16},
	{name: "evaluation_strategy", def: "None", versions: "≤4.45 (eval_strategy since)", policy: hfAlias},
	{name: "push_to_hub_model_id", def: "None", versions: "≤4.57 (deprecated)", policy: hfInert, advice: adviceHub},
	{name: "push_to_hub_organization", def: "None", versions: "≤4.57 (deprecated)", policy: hfInert, advice: adviceHub},
	{name: "push_to_hub_token", def: `None (written as "<PUSH_TO_HUB_TOKEN>")`, versions: "≤4.57 (deprecated)",
		policy: hfInert, advice: adviceHub},
	{name: "mp_parameters", def: `""`, versions: "≤4.57", policy: hfInert, advice: "SageMaker launcher argument"},
	{name: "auto_find_batch_size", def: "False", policy: hfRefuse, isDefault: isFalseOrNull,
		advice: "set per_device_train_batch_size explicitly; gotpu does not retry after running out of memory"},
	{name: "full_determinism", def: "False", policy: hfImplemented},
	{name: "torchdynamo", def: "None", versions: "≤4.57 (deprecated)", policy: hfRefuse, isDefault: isNull,
		advice: adviceCompile},
	{name: "ray_scope", def: `"last"`, versions: "≤4.57", policy: hfInert, advice: "Ray hyperparameter search only"},
	{name: "ddp_timeout", def: "1800", policy: hfInert, advice: adviceDDP},
	{name: "torch_compile", def: "False", policy: hfRefuse, isDefault: isFalseOrNull, advice: adviceCompile},
	{name: "torch_compile_backend", def: "None", policy: hfRefuse, isDefault: isNull, advice: adviceCompile},
	{name: "torch_compile_mode", def: "None", policy: hfRefuse, isDefault: isNull, advice: adviceCompile},
	{name: "dispatch_batches", def: "None", versions: "4.34–4.5x (deprecated)", policy: hfRefuse,
		isDefault: isFalseOrNull, advice: adviceAccel},
	{name: "split_batches", def: "None", versions: "4.34–4.5x (deprecated)", policy: hfRefuse,
		isDefault: isFalseOrNull, advice: adviceAccel},
	{name: "include_tokens_per_second", def: "False", versions: "4.33–4.57", policy: hfImplemented},
	{name: "include_num_input_tokens_seen", def: `False (5.x: "no")`, versions: "4.37+", policy: hfImplemented},
	{name: "neftune_noise_alpha", def: "None", versions: "4.35+", policy: hfImplemented},
	{name: "optim_target_modules", def: "None", versions: "4.39+", policy: hfRefuse, isDefault: isNull,
		advice: "GaLore/APOLLO optimizers are not supported; remove it"},
	{name: "batch_eval_metrics", def: "False", versions: "4.41+", policy: hfRefuse, isDefault: isFalseOrNull,
		advice: "gotpu computes metrics over the whole evaluation set; remove it"},
	{name: "eval_on_start", def: "False", versions: "4.41+", policy: hfImplemented},
	{name: "use_liger_kernel", def: "False", versions: "4.45+", policy: hfRefuse, isDefault: isFalseOrNull,
		advice: "Liger kernels are CUDA Triton kernels; XLA fuses the step itself"},
	{name: "eval_use_gather_object", def: "False", versions: "4.43+", policy: hfRefuse, isDefault: isFalseOrNull,
		advice: "evaluation outputs are tensors gathered by gotpu; remove it"},
	{name: "average_tokens_across_devices", def: "False (5.x: True)", versions: "4.46+", policy: hfImplemented},
	// Fields newer than 4.5x's dataclass order above.
	{name: "liger_kernel_config", def: "None", versions: "4.53+", policy: hfRefuse, isDefault: isNull,
		advice: "Liger kernels are CUDA Triton kernels; remove it"},
	{name: "use_cache", def: "False", versions: "4.56+", policy: hfRefuse, isDefault: isFalseOrNull,
		advice: "the key/value cache is not used in training; remove it"},
	{name: "project", def: `"huggingface"`, versions: "4.56+", policy: hfInert, advice: "trackio only"},
	{name: "trackio_space_id", def: `"trackio"`, versions: "4.56+", policy: hfInert, advice: "trackio only"},
	{name: "parallelism_config", def: "None", versions: "4.56+", policy: hfRefuse, isDefault: isNull,
		advice: adviceSharding},
	{name: "enable_jit_checkpoint", def: "False", versions: "5.0+", policy: hfInert,
		advice: "gotpu always checkpoints on preemption: cancelling Train's context (gotpu train: SIGTERM/SIGINT) finishes the step, saves and returns"},
	{name: "train_sampling_strategy", def: `"random"`, versions: "5.0+", policy: hfRefuse,
		isDefault: isStringOrNull("random"), advice: adviceSampling},
	// Not an argument, but dataclasses.asdict wrote it in dumps of old versions.
	{name: "_n_gpu", def: "(computed)", versions: "asdict dumps of old 4.x", policy: hfInert,
		advice: "computed by HF, not an argument"},
}

// hfFieldByName indexes hfTrainingArgumentFields.
var hfFieldByName = func() map[string]*hfField {
	m := make(map[string]*hfField, len(hfTrainingArgumentFields))
	for i := range hfTrainingArgumentFields {
		m[hfTrainingArgumentFields[i].name] = &hfTrainingArgumentFields[i]
	}
	return m
}()

// foreignArgument names a config class a key comes from, for keys that belong to neither
// TrainingArguments nor the example scripts' model/data arguments.
type foreignArgument struct {
	origin string // "TRL GRPOConfig"…
	what   string // what that class trains, for the message
}

var (
	foreignGRPO    = foreignArgument{"TRL GRPOConfig", "GRPO reinforcement-learning fine-tuning with generation"}
	foreignSFT     = foreignArgument{"TRL SFTConfig", "TRL's supervised fine-tuning trainer"}
	foreignDPO     = foreignArgument{"TRL DPOConfig", "preference optimization"}
	foreignTRL     = foreignArgument{"TRL GRPOConfig/DPOConfig", "TRL's RL and preference trainers"}
	foreignUnsloth = foreignArgument{"Unsloth-patched TRL config", "Unsloth's patched TRL trainers"}
	foreignSeq2Seq = foreignArgument{"Seq2SeqTrainingArguments", "encoder-decoder generation training"}
)

// foreignArguments lists keys of configs that subclass or accompany TrainingArguments.
var foreignArguments = map[string]foreignArgument{
	"num_generations": foreignGRPO, "max_prompt_length": foreignTRL, "max_completion_length": foreignGRPO,
	"temperature": foreignGRPO, "top_p": foreignGRPO, "top_k": foreignGRPO, "min_p": foreignGRPO,
	"repetition_penalty": foreignGRPO, "use_vllm": foreignGRPO, "vllm_device": foreignGRPO,
	"vllm_gpu_memory_utilization": foreignGRPO, "vllm_dtype": foreignGRPO, "vllm_max_model_len": foreignGRPO,
	"vllm_sampling_params": foreignGRPO, "vllm_server_host": foreignGRPO, "vllm_server_port": foreignGRPO,
	"vllm_mode": foreignGRPO, "vllm_guided_decoding_regex": foreignGRPO, "vllm_enable_prefix_caching": foreignGRPO,
	"reward_weights": foreignGRPO, "sync_ref_model": foreignTRL, "ref_model_mixup_alpha": foreignTRL,
	"ref_model_sync_steps": foreignTRL, "log_completions": foreignGRPO, "ds3_gather_for_generation": foreignGRPO,
	"model_init_kwargs": foreignTRL, "beta": foreignTRL, "epsilon": foreignGRPO, "epsilon_high": foreignGRPO,
	"loss_type": foreignTRL, "scale_rewards": foreignGRPO, "num_iterations": foreignGRPO,
	"mask_truncated_completions": foreignGRPO, "generation_batch_size": foreignGRPO,
	"steps_per_generation": foreignGRPO, "num_completions_to_print": foreignGRPO,
	"wandb_log_unique_prompts": foreignGRPO, "cache_implementation": foreignGRPO, "delta": foreignGRPO,
	"disable_dropout": foreignTRL, "use_liger_loss": foreignTRL, "shuffle_dataset": foreignGRPO,
	"unsloth_num_chunks": foreignUnsloth,
	// SFTConfig's dataset_text_field, max_length, packing, packing_strategy, padding_free,
	// completion_only_loss, assistant_only_loss, eos_token, pad_token and chat_template_path
	// are ModelDataArguments (args_sft.go); these others are not implemented.
	"dataset_num_proc": foreignSFT, "dataset_kwargs": foreignSFT, "dataset_batch_size": foreignSFT,
	"eval_packing": foreignSFT, "pad_to_multiple_of": foreignSFT, "activation_offloading": foreignSFT,
	"label_pad_token_id": foreignDPO, "padding_value": foreignDPO, "truncation_mode": foreignDPO,
	"max_target_length": foreignDPO, "is_encoder_decoder": foreignDPO, "precompute_ref_log_probs": foreignDPO,
	"ref_adapter_name": foreignDPO, "rpo_alpha": foreignDPO, "reference_free": foreignDPO,
	"force_use_ref_model": foreignDPO, "f_divergence_type": foreignDPO, "use_weighting": foreignDPO,
	"ld_alpha": foreignDPO, "generate_during_eval": foreignDPO,
	"sortish_sampler": foreignSeq2Seq, "predict_with_generate": foreignSeq2Seq,
	"generation_max_length": foreignSeq2Seq, "generation_num_beams": foreignSeq2Seq,
	"generation_config": foreignSeq2Seq,
}

// Default-value predicates for hfRefuse fields. Each accepts every form in which HF writes the
// default: the dataclass default, its post-init form, and null where HF treats None as the
// default (bools left unset in subclass dumps, for instance).

func isNull(v JSONValue) bool { return v.IsNull() }

func isFalseOrNull(v JSONValue) bool {
	b, ok := v.Bool()
	return v.IsNull() || (ok && !b)
}

func isTrueOrNull(v JSONValue) bool {
	b, ok := v.Bool()
	return v.IsNull() || (ok && b)
}

// isEmptyish: None, "", [] or False — all of which HF's post-init turns into "no option"
// (debug="", sharded_ddp=[]).
func isEmptyish(v JSONValue) bool {
	switch v.Kind() {
	case JSONNull:
		return true
	case JSONString:
		s, _ := v.Str()
		return s == ""
	case JSONArray:
		return len(v.Array()) == 0
	case JSONBool:
		b, _ := v.Bool()
		return !b
	}
	return false
}

func isNullOrEmptyString(v JSONValue) bool {
	s, ok := v.Str()
	return v.IsNull() || (ok && s == "")
}

func isStringOrNull(allowed ...string) func(JSONValue) bool {
	return func(v JSONValue) bool {
		if v.IsNull() {
			return true
		}
		s, ok := v.Str()
		if !ok {
			return false
		}
		for _, a := range allowed {
			if s == a {
				return true
			}
		}
		return false
	}
}

func isIntOrNull(allowed ...int64) func(JSONValue) bool {
	return func(v JSONValue) bool {
		if v.IsNull() {
			return true
		}
		i, ok := v.Int()
		if !ok {
			return false
		}
		for _, a := range allowed {
			if i == a {
				return true
			}
		}
		return false
	}
}

// objectHasOnlyDefaults reports whether v is null, or an object whose members all appear in
// defaults with an equal value.
func objectHasOnlyDefaults(v JSONValue, defaults map[string]JSONValue) bool {
	if v.IsNull() {
		return true
	}
	if v.Kind() != JSONObject {
		return false
	}
	for _, m := range v.Object() {
		d, ok := defaults[m.Key]
		if !ok {
			return false
		}
		if d.Kind() == JSONInt || d.Kind() == JSONFloat { // 0 and 0.0 are the same default
			a, ok1 := d.Float()
			b, ok2 := m.Value.Float()
			if !ok1 || !ok2 || a != b {
				return false
			}
			continue
		}
		if !d.Equal(m.Value) {
			return false
		}
	}
	return true
}

// acceleratorConfigDefaults: AcceleratorConfig().to_dict() across 4.38–5.x.
var acceleratorConfigDefaults = map[string]JSONValue{
	"split_batches":                JSONBoolValue(false),
	"dispatch_batches":             JSONNullValue(),
	"even_batches":                 JSONBoolValue(true),
	"use_seedable_sampler":         JSONBoolValue(true),
	"non_blocking":                 JSONBoolValue(false),
	"gradient_accumulation_kwargs": JSONNullValue(),
	"use_configured_state":         JSONBoolValue(false),
}

func isDefaultAcceleratorConfig(v JSONValue) bool {
	return objectHasOnlyDefaults(v, acceleratorConfigDefaults)
}
