package trainer

// Setters for the optional fields of TrainingArguments. Those fields are pointers because HF's
// default for them is None, which is not a value of their type (save_total_limit=None keeps
// every checkpoint; 0 would be a limit): nil is None, in JSON null. A setter reads like HF's
// keyword argument (args.SetEvalSteps(10) for eval_steps=10); assigning nil restores None.

// SetEvalAccumulationSteps sets eval_accumulation_steps.
func (a *TrainingArguments) SetEvalAccumulationSteps(n int) { a.EvalAccumulationSteps = &n }

// SetSaveTotalLimit sets save_total_limit: keep at most n checkpoints.
func (a *TrainingArguments) SetSaveTotalLimit(n int) { a.SaveTotalLimit = &n }

// SetDataSeed sets data_seed, the seed of the data sampler (None: seed).
func (a *TrainingArguments) SetDataSeed(seed int) { a.DataSeed = &seed }

// SetEvalSteps sets eval_steps: an interval in updates, or a ratio of max_steps when below 1.
func (a *TrainingArguments) SetEvalSteps(steps float64) { a.EvalSteps = &steps }

// SetDataloaderPrefetchFactor sets dataloader_prefetch_factor.
func (a *TrainingArguments) SetDataloaderPrefetchFactor(n int) { a.DataloaderPrefetchFactor = &n }

// SetDisableTqdm sets disable_tqdm (None: on unless the log level is above warning).
func (a *TrainingArguments) SetDisableTqdm(disable bool) { a.DisableTqdm = &disable }

// SetGreaterIsBetter sets greater_is_better (None: Finalize derives it from
// metric_for_best_model).
func (a *TrainingArguments) SetGreaterIsBetter(greater bool) { a.GreaterIsBetter = &greater }

// SetNeftuneNoiseAlpha sets neftune_noise_alpha (None: no NEFTune noise).
func (a *TrainingArguments) SetNeftuneNoiseAlpha(alpha float64) { a.NeftuneNoiseAlpha = &alpha }
