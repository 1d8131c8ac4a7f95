package trainer

import (
	"fmt"
	"sort"
)

// This file is the policy of every argument `gotpu train` takes (issue #39: nothing an HF user
// asks for is silently ignored). Each name is implemented (tests named here show its effect),
// refused by name when given a value other than HF's default (with what to do instead), or
// inert: accepted because it cannot change what gotpu computes or writes, with the reason. The
// TrainingArguments fields gotpu does not implement keep their policy in hfTrainingArgumentFields
// (args_hf_fields.go); ArgumentPolicies merges both. cmd/gotpu's TestEveryTrainFlagHasAPolicy
// walks the flag set of `gotpu train` against it.

// ArgumentEffect is what gotpu does with an argument.
type ArgumentEffect uint8

const (
	// EffectImplemented: the argument changes the run; Tests name the tests that show how.
	EffectImplemented ArgumentEffect = iota
	// EffectRefused: any value but HF's default is refused, naming the argument; RefuseValue is
	// such a value.
	EffectRefused
	// EffectInert: accepted with any value; Reason says why it cannot change the results.
	EffectInert
	// EffectAlias: another name of the argument AliasOf.
	EffectAlias
)

func (e ArgumentEffect) String() string {
	return [...]string{"implemented", "refused", "inert", "alias"}[e]
}

// ArgumentPolicy is the policy of one argument name.
type ArgumentPolicy struct {
	Name   string
	Effect ArgumentEffect
	// Tests are test functions (a trailing * matches a prefix) whose checks show the effect.
	Tests []string
	// RefuseValue is a flag value gotpu refuses for this argument (EffectRefused).
	RefuseValue string
	// Reason: why the argument is inert, or (refused) what to do instead.
	Reason  string
	AliasOf string
}

// implementedArgs names, for each implemented TrainingArguments field and gotpu extra, the
// tests that show its effect.
var implementedArgs = map[string][]string{
	"output_dir":                    {"TestOutputDirNotClobbered"},
	"overwrite_output_dir":          {"TestOutputDirNotClobbered"},
	"do_train":                      {"TestTrainDoFlags"},
	"do_eval":                       {"TestTrainDoEvalFinalEvaluation"},
	"eval_strategy":                 {"TestEvaluateEarlyStoppingAndBestModel", "TestEvalStrategyNeedsEvalData"},
	"per_device_train_batch_size":   {"TestResumeOnOtherDeviceCount", "TestBatchAndStepArithmetic"},
	"per_device_eval_batch_size":    {"TestEvalBatchesPrefetched"},
	"gradient_accumulation_steps":   {"TestExactResume", "TestBatchAndStepArithmetic"},
	"eval_delay":                    {"TestFlowSteps"},
	"learning_rate":                 {"TestTrainReproducesFixtures"},
	"weight_decay":                  {"TestTrainReproducesFixtures"},
	"adam_beta1":                    {"TestTrainReproducesFixtures"},
	"adam_beta2":                    {"TestTrainReproducesFixtures"},
	"adam_epsilon":                  {"TestTrainReproducesFixtures"},
	"max_grad_norm":                 {"TestTrainReproducesFixtures"},
	"num_train_epochs":              {"TestBatchAndStepArithmetic"},
	"max_steps":                     {"TestTrainOnText", "TestBatchAndStepArithmetic"},
	"lr_scheduler_type":             {"TestScheduleReproducesRealLogs"},
	"lr_scheduler_kwargs":           {"TestScheduleKwargs"},
	"warmup_ratio":                  {"TestNumWarmupSteps"},
	"warmup_steps":                  {"TestNumWarmupSteps", "TestScheduleFixtureLinearWarmup"},
	"logging_dir":                   {"TestTensorBoardReport"},
	"logging_strategy":              {"TestFlowSteps"},
	"logging_first_step":            {"TestFlowSteps"},
	"logging_steps":                 {"TestFlowSteps", "TestTrainOnText"},
	"logging_nan_inf_filter":        {"TestNonFiniteInjection"},
	"save_strategy":                 {"TestExactResume", "TestEvalStrategyNeedsEvalData"},
	"save_steps":                    {"TestExactResume"},
	"save_total_limit":              {"TestRetentionKeepsBest"},
	"save_only_model":               {"TestSaveOnlyModel"},
	"seed":                          {"TestExactResume"},
	"data_seed":                     {"TestDataSeedOrdersBatches"},
	"bf16":                          {"TestBF16NativeMatchesFallback"},
	"dataloader_drop_last":          {"TestBatchAndStepArithmetic"},
	"eval_steps":                    {"TestRetentionKeepsBest"},
	"disable_tqdm":                  {"TestProgressCallbackPrintsLogs"},
	"load_best_model_at_end":        {"TestEvaluateEarlyStoppingAndBestModel", "TestEvalStrategyNeedsEvalData"},
	"metric_for_best_model":         {"TestEvaluateEarlyStoppingAndBestModel"},
	"greater_is_better":             {"TestEvaluateEarlyStoppingAndBestModel"},
	"ignore_data_skip":              {"TestIgnoreDataSkip"},
	"fsdp":                          {"TestFSDPEvaluateAndLoadBest"},
	"fsdp_config":                   {"TestFSDPArgsConfigFile"},
	"label_smoothing_factor":        {"TestLabelSmoothingFixtureLoss", "TestTrainerLabelSmoothingFactor"},
	"optim":                         {"TestAdafactorLearns"},
	"adafactor":                     {"TestAdafactorLearns"},
	"report_to":                     {"TestTensorBoardReport"},
	"resume_from_checkpoint":        {"TestExactResume"},
	"include_tokens_per_second":     {"TestMeterIntervalAndSummary"},
	"include_num_input_tokens_seen": {"TestTokensSeenLogged*"},
	"neftune_noise_alpha":           {"TestNEFTuneTrainsNotEvaluates", "TestTrainerNEFTuneNoiseAlpha"},
	"eval_on_start":                 {"TestEvalOnStart"},
	"gradient_checkpointing":        {"TestGradientCheckpointingBitwise", "TestGradientCheckpointingOnXLACPU", "TestTrainGradientCheckpointing"},
	"average_tokens_across_devices": {"TestResumeOnOtherDeviceCount", "TestAverageTokensAcrossDevicesFalse"},
	"log_gotpu_metrics":             {"TestConsoleLogsKeys", "TestConsoleLogLinesHFKeys"},
	// gotpu extras.
	"max_consecutive_nonfinite": {"TestNonFiniteInjection"},
	"num_devices":               {"TestResumeOnOtherDeviceCount", "TestTrainOnText"},
	"device":                    {"TestBackendsAgreeOnXLACPU"},
	"peak_flops":                {"TestResolvePeakFLOPS"},
	"device_prefetch_size":      {"TestEvalBatchesPrefetched"},
}

// refusedImplementedArgs are TrainingArguments fields that exist (JSON dumps carry them) but
// whose non-default values gotpu refuses (Validate, or the train command for script-level ones).
var refusedImplementedArgs = map[string]ArgumentPolicy{
	"do_predict": {RefuseValue: "true", Reason: "run_clm.py has no prediction step; score examples with gotpu score"},
	"save_safetensors": {RefuseValue: "false",
		Reason: "gotpu writes model.safetensors only"},
	"optim_args":  {RefuseValue: "betas=0.9", Reason: "HF passes it only to optimizers gotpu does not have"},
	"label_names": {RefuseValue: "start_positions", Reason: `gotpu's models read labels from "labels" only`},
}

// inertImplementedArgs are TrainingArguments fields that configure nothing gotpu's results
// depend on.
var inertImplementedArgs = map[string]string{
	"eval_accumulation_steps": "HF moves evaluation outputs to the CPU every N steps to save device memory; gotpu's " +
		"evaluation reads each batch's loss terms (and logits for compute_metrics) as it goes, so the metrics are the same for any value",
	"log_level": "gotpu logs through log/slog whatever log_level says (HF's verbosity of its own logger); as in HF's " +
		"__post_init__, error and critical turn disable_tqdm on by default (TestFinalize)",
	"dataloader_num_workers": "workers only prepare the same batches in parallel; the batches, their order and the " +
		"results are the same for any value",
	"dataloader_prefetch_factor": "how many batches are prepared ahead; the batches and the results are the same for any value",
	"run_name": "a display name for experiment trackers (wandb, mlflow…) gotpu does not report to; it is " +
		"written to training_args.json",
	"remove_unused_columns": "gotpu's readers keep only the columns the model takes (input_ids, attention_mask, " +
		"token_type_ids, labels, position_ids); there are no others to keep or remove",
	"full_determinism": "gotpu's compiled steps have no non-deterministic kernels to switch off: a run repeats " +
		"bitwise for a given seed, device count and backend (TestExactResume)",
}

// modelDataPolicies is the policy of every ModelDataArguments field (the model/data arguments
// of run_clm.py, run_mlm.py, run_glue.py/run_classification.py, TRL's ModelConfig and SFTConfig)
// in `gotpu train`.
var modelDataPolicies = map[string]ArgumentPolicy{
	"model_name_or_path": {Effect: EffectImplemented, Tests: []string{"TestTrainOnText"}},
	// From-scratch models (helper C of #39).
	"model_type":       {Effect: EffectImplemented, Tests: []string{"TestTrainFromScratch*"}},
	"config_overrides": {Effect: EffectImplemented, Tests: []string{"TestTrainFromScratch*"}},
	"config_name":      {Effect: EffectImplemented, Tests: []string{"TestTrainFromScratch*"}},
	"tokenizer_name":   {Effect: EffectImplemented, Tests: []string{"TestTrainFromScratch*"}},
	"cache_dir":        {Effect: EffectImplemented, Tests: []string{"TestTrainFromHub"}},
	"use_fast_tokenizer": {Effect: EffectRefused, RefuseValue: "false",
		Reason: "gotpu tokenizes with the fast tokenizer (tokenizer.json) only; remove it"},
	"model_revision": {Effect: EffectImplemented, Tests: []string{"TestTrainFromHub"}},
	"token":          {Effect: EffectImplemented, Tests: []string{"TestTokenGoesToTheHubOnly"}},
	"use_auth_token": {Effect: EffectInert,
		Reason: "deprecated by the scripts in favour of token; gotpu's Hub client sends the token of --token, HF_TOKEN " +
			"or the saved login whenever it has one, which is what use_auth_token=true asked for"},
	"trust_remote_code": {Effect: EffectRefused, RefuseValue: "true",
		Reason: "gotpu runs its own Go implementations of the architectures it knows and never executes a repository's Python code; remove it"},
	"torch_dtype": {Effect: EffectImplemented, Tests: []string{"TestSaveLoadSaveByteIdentical", "TestBF16AdamWTraining", "TestBF16AdamWOptimizer", "TestBF16StateCheckpoint"}},
	"low_cpu_mem_usage": {Effect: EffectInert,
		Reason: "how PyTorch materializes weights while loading; gotpu loads safetensors straight into the device buffers and the weights are the same"},
	"ignore_mismatched_sizes": {Effect: EffectRefused, RefuseValue: "true",
		Reason: "gotpu does not re-initialize weights whose shapes differ from the checkpoint; use a config that matches the checkpoint"},
	"task_name": {Effect: EffectRefused, RefuseValue: "mrpc",
		Reason: "GLUE tasks are not downloaded by name; give the task's files with --train_file and --validation_file (JSON lines with text and label fields)"},
	"dataset_name":        {Effect: EffectImplemented, Tests: []string{"TestTrainFromHub"}},
	"dataset_config_name": {Effect: EffectImplemented, Tests: []string{"TestTrainFromHub"}},
	"train_split":         {Effect: EffectImplemented, Tests: []string{"TestDatasetNameErrors"}},
	"validation_split":    {Effect: EffectImplemented, Tests: []string{"TestValidationSplitPercentage"}},
	"train_file":          {Effect: EffectImplemented, Tests: []string{"TestTrainOnText"}},
	"validation_file":     {Effect: EffectImplemented, Tests: []string{"TestTrainDoEvalFinalEvaluation"}},
	"test_file": {Effect: EffectRefused, RefuseValue: "test.jsonl",
		Reason: "gotpu train has no prediction step (do_predict); score a file with gotpu score"},
	"max_train_samples": {Effect: EffectImplemented, Tests: []string{"TestTrainDoEvalFinalEvaluation"}},
	"max_eval_samples":  {Effect: EffectImplemented, Tests: []string{"TestTrainDoEvalFinalEvaluation"}},
	"max_predict_samples": {Effect: EffectRefused, RefuseValue: "10",
		Reason: "gotpu train has no prediction step (do_predict); remove it"},
	"streaming": {Effect: EffectRefused, RefuseValue: "true",
		Reason: "gotpu reads local and Hub files without loading them into memory (indexed or disk-backed) and shuffles them as HF does without streaming; remove it"},
	"block_size": {Effect: EffectImplemented, Tests: []string{"TestTrainOnText"}},
	// max_seq_length, text_column_names and label_column_name are run_glue/run_classification's:
	// used for sequence classifiers, refused for causal LMs (RefusedForCausalLM).
	"max_seq_length": {Effect: EffectImplemented, Tests: []string{"TestCausalLMRefusesClassifierArgs"}, RefuseValue: "64",
		Reason: "sequence classifiers only; a causal LM's examples are --block_size tokens long"},
	"pad_to_max_length": {Effect: EffectInert,
		Reason: "padding is masked out of attention and loss: padding every example to max_seq_length or to its batch's bucket gives the same losses (causal LM blocks are all full length)"},
	"overwrite_cache": {Effect: EffectInert,
		Reason: "gotpu keeps no preprocessing cache: every run tokenizes its data afresh"},
	"validation_split_percentage": {Effect: EffectImplemented, Tests: []string{"TestValidationSplitPercentage"}},
	"preprocessing_num_workers": {Effect: EffectInert,
		Reason: "the number of tokenization processes; the tokens are the same for any value"},
	"keep_linebreaks":   {Effect: EffectImplemented, Tests: []string{"TestKeepLinebreaks"}},
	"text_column_name":  {Effect: EffectImplemented, Tests: []string{"TestTextColumnRule", "TestFormatsGiveIdenticalBatches"}},
	"text_column_names": {Effect: EffectImplemented, Tests: []string{"TestCausalLMRefusesClassifierArgs"}, RefuseValue: "a,b", Reason: "sequence classifiers only"},
	"label_column_name": {Effect: EffectImplemented, Tests: []string{"TestCausalLMRefusesClassifierArgs"}, RefuseValue: "y", Reason: "sequence classifiers only"},
	"mlm_probability": {Effect: EffectRefused, RefuseValue: "0.2",
		Reason: "masked-language-model training (run_mlm.py) is not implemented; gotpu trains causal LMs and sequence classifiers"},
	"line_by_line": {Effect: EffectRefused, RefuseValue: "true",
		Reason: "run_mlm.py's line-by-line examples are not implemented; a causal LM's text is grouped into --block_size blocks as run_clm.py does"},
	// PEFT (TRL ModelConfig).
	"use_peft":             {Effect: EffectImplemented, Tests: []string{"TestTrainLoRAReproducesFixtures"}},
	"lora_r":               {Effect: EffectImplemented, Tests: []string{"TestTrainLoRABadInput", "TestProgramsOnXLACPU"}},
	"lora_alpha":           {Effect: EffectImplemented, Tests: []string{"TestTrainLoRAReproducesFixtures"}},
	"lora_dropout":         {Effect: EffectImplemented, Tests: []string{"TestDropoutOnBranchOnly"}},
	"lora_target_modules":  {Effect: EffectImplemented, Tests: []string{"TestPeftConfigTargets", "TestTrainLoRAAllLinear"}},
	"lora_modules_to_save": {Effect: EffectRefused, RefuseValue: "lm_head", Reason: "modules_to_save is not implemented"},
	"lora_task_type":       {Effect: EffectImplemented, Tests: []string{"TestPeftConfigTargets"}},
	"use_rslora":           {Effect: EffectImplemented, Tests: []string{"TestConfigRoundTrip"}},
	"use_dora":             {Effect: EffectRefused, RefuseValue: "true", Reason: "DoRA is not implemented"},
	"adapter_name_or_path": {Effect: EffectImplemented, Tests: []string{"TestLoRAJob"}},
	// TRL SFTConfig.
	"dataset_text_field":   {Effect: EffectImplemented, Tests: []string{"TestTextFormat"}},
	"max_length":           {Effect: EffectImplemented, Tests: []string{"TestPackBFDMatchesTRLDocstring"}},
	"packing":              {Effect: EffectImplemented, Tests: []string{"TestPacking"}},
	"packing_strategy":     {Effect: EffectImplemented, Tests: []string{"TestPacking"}},
	"padding_free":         {Effect: EffectImplemented, Tests: []string{"TestSFTFlags"}},
	"completion_only_loss": {Effect: EffectImplemented, Tests: []string{"TestPromptCompletion"}},
	"assistant_only_loss":  {Effect: EffectImplemented, Tests: []string{"TestAssistantOnlyLossMatchesTransformers", "TestTrainSFTAssistantOnly"}},
	"eos_token":            {Effect: EffectImplemented, Tests: []string{"TestStopTokens"}},
	"pad_token":            {Effect: EffectImplemented, Tests: []string{"TestPadding"}},
	"chat_template_path":   {Effect: EffectImplemented, Tests: []string{"TestTrainSFTAssistantOnly"}},
}

// argumentAliases are the other flag names `gotpu train` registers (args_flags.go).
var argumentAliases = map[string]string{
	"evaluation_strategy": "eval_strategy",
	"dtype":               "torch_dtype",
	"revision":            "model_revision",
	"dataset_train_split": "train_split",
	"dataset_test_split":  "validation_split",
}

// ArgumentPolicies returns the policy of every TrainingArguments field (HF's, implemented or
// not, and gotpu's extras), every model/data argument and every alias, sorted by name.
func ArgumentPolicies() []ArgumentPolicy {
	var out []ArgumentPolicy
	seen := map[string]bool{}
	add := func(p ArgumentPolicy) {
		if !seen[p.Name] {
			seen[p.Name] = true
			out = append(out, p)
		}
	}
	for name, tests := range implementedArgs {
		add(ArgumentPolicy{Name: name, Effect: EffectImplemented, Tests: tests})
	}
	for name, p := range refusedImplementedArgs {
		p.Name, p.Effect = name, EffectRefused
		add(p)
	}
	for name, reason := range inertImplementedArgs {
		add(ArgumentPolicy{Name: name, Effect: EffectInert, Reason: reason})
	}
	for name, p := range modelDataPolicies {
		p.Name = name
		add(p)
	}
	for alias, of := range argumentAliases {
		add(ArgumentPolicy{Name: alias, Effect: EffectAlias, AliasOf: of})
	}
	for i := range hfTrainingArgumentFields {
		f := &hfTrainingArgumentFields[i]
		switch f.policy {
		case hfRefuse:
			add(ArgumentPolicy{Name: f.name, Effect: EffectRefused, RefuseValue: refuseValue(f), Reason: f.advice})
		case hfInert:
			add(ArgumentPolicy{Name: f.name, Effect: EffectInert, Reason: f.advice})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// refuseValue finds a flag value that is not HF's default for a refused field.
func refuseValue(f *hfField) string {
	for _, c := range []string{"true", "false", "7", "x", `{"split_batches": true}`} {
		if !f.isDefault(flagValueToJSON(c)) {
			return c
		}
	}
	return ""
}

// RefusedForTraining reports the model/data arguments `gotpu train` refuses whatever the model
// (see modelDataPolicies): every one given a value other than its default, by name, with what
// to do instead. It returns nil or an *ArgumentsError.
func (m *ModelDataArguments) RefusedForTraining() error {
	var l errorList
	refuse := func(name string, given bool, value string) {
		if given {
			l.add("ModelDataArguments", name, ErrUnsupportedArgument, "%s — %s", value, modelDataPolicies[name].Reason)
		}
	}
	isTrue := func(p *bool) bool { return p != nil && *p }
	isFalse := func(p *bool) bool { return p != nil && !*p }
	nonEmpty := func(p *string) bool { return p != nil && *p != "" }
	refuse("use_fast_tokenizer", isFalse(m.UseFastTokenizer), "false")
	refuse("trust_remote_code", isTrue(m.TrustRemoteCode), "true")
	refuse("ignore_mismatched_sizes", isTrue(m.IgnoreMismatchedSizes), "true")
	refuse("task_name", nonEmpty(m.TaskName), derefOr(m.TaskName))
	refuse("test_file", nonEmpty(m.TestFile), derefOr(m.TestFile))
	refuse("max_predict_samples", m.MaxPredictSamples != nil, fmt.Sprint(derefOr(m.MaxPredictSamples)))
	refuse("streaming", isTrue(m.Streaming), "true")
	refuse("mlm_probability", m.MLMProbability != nil, fmtFloat(derefOr(m.MLMProbability)))
	refuse("line_by_line", isTrue(m.LineByLine), "true")
	if p := m.ValidationSplitPercentage; p != nil && (*p < 0 || *p >= 100) {
		l.add("ModelDataArguments", "validation_split_percentage", ErrInvalidArgument,
			"%d is not in [0, 100): the percentage of the training data held out for evaluation", *p)
	}
	return l.err("", "")
}

// RefusedForCausalLM reports run_glue/run_classification's arguments given for a causal LM,
// which does not use them: max_seq_length (use block_size), text_column_names and
// label_column_name.
func (m *ModelDataArguments) RefusedForCausalLM() error {
	var l errorList
	if m.MaxSeqLength != nil {
		l.add("ModelDataArguments", "max_seq_length", ErrUnsupportedArgument,
			"%d — sequence classifiers only (run_glue.py); a causal LM's examples are --block_size tokens long: use --block_size", *m.MaxSeqLength)
	}
	if m.TextColumnNames != nil && *m.TextColumnNames != "" {
		l.add("ModelDataArguments", "text_column_names", ErrUnsupportedArgument,
			"%q — sequence classifiers only (run_classification.py); a causal LM reads one text column: use --text_column_name", *m.TextColumnNames)
	}
	if m.LabelColumnName != nil && *m.LabelColumnName != "" {
		l.add("ModelDataArguments", "label_column_name", ErrUnsupportedArgument,
			"%q — sequence classifiers only; a causal LM's labels are its input_ids: remove it", *m.LabelColumnName)
	}
	return l.err("", "")
}

// ScriptArgsForTraining refuses the script-level TrainingArguments `gotpu train` cannot honour:
// do_predict (run_clm.py has no prediction), and do_train explicitly false (doTrainSet: given on
// the command line), which in run_clm.py skips training — gotpu eval is that command.
func (a *TrainingArguments) ScriptArgsForTraining(doTrainSet bool) error {
	var l errorList
	if a.DoPredict {
		l.add("TrainingArguments", "do_predict", ErrUnsupportedArgument,
			"true — run_clm.py has no prediction step and gotpu train has none; score a file with gotpu score, or remove it")
	}
	if doTrainSet && !a.DoTrain {
		what := "there is nothing else to do"
		if a.DoEval {
			what = "to evaluate only, as run_clm.py --do_eval without --do_train does, run gotpu eval with the same arguments"
		}
		l.add("TrainingArguments", "do_train", ErrUnsupportedArgument, "false — gotpu train always trains; %s", what)
	}
	return l.err("", "")
}

func derefOr[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
