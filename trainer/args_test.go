package trainer

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestDefaultTrainingArguments(t *testing.T) {
	a := DefaultTrainingArguments()
	if err := a.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	// HF's defaults (transformers 5.x; 4.57 for the fields 5.0 dropped).
	checks := map[string]any{
		"output_dir": "trainer_output", "per_device_train_batch_size": 8, "per_device_eval_batch_size": 8,
		"gradient_accumulation_steps": 1, "learning_rate": 5e-5, "weight_decay": 0.0, "adam_beta1": 0.9,
		"adam_beta2": 0.999, "adam_epsilon": 1e-8, "max_grad_norm": 1.0, "num_train_epochs": 3.0, "max_steps": -1,
		"lr_scheduler_type": SchedulerLinear, "warmup_ratio": 0.0, "warmup_steps": 0.0, "log_level": "passive",
		"logging_strategy": IntervalSteps, "logging_steps": 500.0, "logging_nan_inf_filter": true, "save_strategy": SaveSteps,
		"save_steps": 500.0, "save_safetensors": true, "seed": 42, "eval_strategy": IntervalNo, "remove_unused_columns": true,
		"optim": OptimAdamWTorch, "report_to": []string{"none"}, "include_num_input_tokens_seen": "no",
		"average_tokens_across_devices": true, "max_consecutive_nonfinite": 10, "num_devices": 0, "device": "auto", "device_prefetch_size": 1,
		"eval_steps": (*float64)(nil), "save_total_limit": (*int)(nil), "greater_is_better": (*bool)(nil),
		"fsdp": []string{}, "fsdp_config": FSDPConfig{},
	}
	v := reflect.ValueOf(a)
	for name, want := range checks {
		got := v.Field(trainingArgsMeta.byName[name].index).Interface()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %#v, want %#v", name, got, want)
		}
	}
}

// TestHFFieldTable keeps the table of HF fields and the struct in step.
func TestHFFieldTable(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range hfTrainingArgumentFields {
		if seen[f.name] {
			t.Errorf("%s listed twice", f.name)
		}
		seen[f.name] = true
		_, inStruct := trainingArgsMeta.byName[f.name]
		if (f.policy == hfImplemented) != inStruct {
			t.Errorf("%s: policy %d but struct field present = %v", f.name, f.policy, inStruct)
		}
		if f.def == "" {
			t.Errorf("%s: no HF default", f.name)
		}
		if f.policy == hfRefuse && (f.isDefault == nil || f.advice == "") {
			t.Errorf("%s: refused without a default check or advice", f.name)
		}
		if f.policy == hfInert && f.advice == "" {
			t.Errorf("%s: inert without a reason", f.name)
		}
		if _, ok := modelDataArgsMeta.byName[f.name]; ok {
			t.Errorf("%s is both an HF field and a model/data argument", f.name)
		}
		if _, ok := foreignArguments[f.name]; ok {
			t.Errorf("%s is both an HF field and a foreign key", f.name)
		}
	}
	for _, f := range trainingArgsMeta.fields {
		if !seen[f.name] && !strings.Contains(argHelp[f.name], "gotpu:") {
			t.Errorf("struct field %s is not in the HF table (and not a gotpu extra)", f.name)
		}
		if k := reflect.TypeFor[TrainingArguments]().Field(f.index).Type.Kind(); k == reflect.Bool && !f.nullable {
			t.Errorf("bool %s does not take null as its default", f.name)
		}
		if argHelp[f.name] == "" {
			t.Errorf("%s has no flag help", f.name)
		}
	}
	// Every key of the full dumps is a known HF field, apart from the GRPO config's own keys.
	for _, file := range []string{"sizifs_trainer_args_full_dump.json", "marketguardians_training_args_full_dump.json",
		"grpo_accounting_grpoconfig_dump.json"} {
		v, err := parsePyJSON(readTestFile(t, filepath.Join(argsDir, file)))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range v.Object() {
			if _, ok := hfFieldByName[m.Key]; !ok && foreignArguments[m.Key].origin == "" {
				t.Errorf("%s: key %s is in no table", file, m.Key)
			}
		}
	}
	// The refused fields accept the default forms found in the real dumps.
	for _, c := range []struct{ field, value string }{
		{"debug", `[]`}, {"sharded_ddp", `[]`}, {"debug", `""`}, {"fsdp_min_num_params", `0`},
		{"fsdp_transformer_layer_cls_to_wrap", `null`},
		{"accelerator_config", `{"split_batches": false, "dispatch_batches": null, "even_batches": true, "use_seedable_sampler": true, "non_blocking": false, "gradient_accumulation_kwargs": null}`},
		{"half_precision_backend", `"cuda_amp"`}, {"half_precision_backend", `"auto"`}, {"tp_size", `0`},
		{"fp16", `null`}, {"skip_memory_metrics", `true`}, {"eval_do_concat_batches", `true`}, {"train_sampling_strategy", `"random"`},
	} {
		v, err := parsePyJSON([]byte(c.value))
		if err != nil {
			t.Fatal(err)
		}
		if !hfFieldByName[c.field].isDefault(v) {
			t.Errorf("%s: %s not taken as HF's default", c.field, c.value)
		}
	}
	for _, c := range []struct{ field, value string }{
		{"fsdp_min_num_params", `1000`}, {"fsdp_transformer_layer_cls_to_wrap", `"LlamaDecoderLayer"`},
		{"accelerator_config", `{"even_batches": false}`}, {"accelerator_config", `"accel.json"`}, {"half_precision_backend", `"apex"`},
		{"tp_size", `2`}, {"debug", `"underflow_overflow"`}, {"skip_memory_metrics", `false`}, {"past_index", `0`},
	} {
		v, _ := parsePyJSON([]byte(c.value))
		if hfFieldByName[c.field].isDefault(v) {
			t.Errorf("%s: %s taken as HF's default", c.field, c.value)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, tt := range []struct {
		name   string
		mutate func(a *TrainingArguments)
		fields []string
		want   string
		kind   error
	}{
		{"negative lr", func(a *TrainingArguments) { a.LearningRate = -1 }, []string{"learning_rate"},
			"trainer.TrainingArguments.learning_rate: -1 is negative", ErrInvalidArgument},
		{"nan lr", func(a *TrainingArguments) { a.LearningRate = nan() }, []string{"learning_rate"}, "not a finite number", ErrInvalidArgument},
		{"unknown scheduler", func(a *TrainingArguments) { a.LRSchedulerType = "onecycle" }, []string{"lr_scheduler_type"},
			`"onecycle" is not one of`, ErrInvalidArgument},
		{"unknown strategies", func(a *TrainingArguments) {
			a.EvalStrategy, a.LoggingStrategy, a.SaveStrategy = "step", "always", "never"
		},
			[]string{"eval_strategy", "logging_strategy", "save_strategy"}, `"step" is not one of no, steps, epoch`, ErrInvalidArgument},
		{"accumulation", func(a *TrainingArguments) { a.GradientAccumulationSteps = 0 }, []string{"gradient_accumulation_steps"},
			"0 is less than 1", ErrInvalidArgument},
		{"batch sizes", func(a *TrainingArguments) { a.PerDeviceTrainBatchSize, a.PerDeviceEvalBatchSize = 0, -2 },
			[]string{"per_device_train_batch_size", "per_device_eval_batch_size"}, "-2 is less than 1", ErrInvalidArgument},
		{"betas", func(a *TrainingArguments) { a.AdamBeta1, a.AdamBeta2 = 1, -0.1 }, []string{"adam_beta1", "adam_beta2"},
			"1 is not in [0, 1)", ErrInvalidArgument},
		{"warmup ratio", func(a *TrainingArguments) { a.WarmupRatio = 1.5 }, []string{"warmup_ratio"}, "1.5 is not in [0, 1]", ErrInvalidArgument},
		{"max steps 0", func(a *TrainingArguments) { a.MaxSteps = 0 }, []string{"max_steps"}, "trains nothing", ErrInvalidArgument},
		{"seed", func(a *TrainingArguments) { a.Seed = -1; a.DataSeed = intp(1 << 33) }, []string{"seed", "data_seed"}, "2**32", ErrInvalidArgument},
		{"optim 8bit", func(a *TrainingArguments) { a.Optim = "adamw_8bit" }, []string{"optim"}, "use adamw_torch or adafactor", ErrUnsupportedArgument},
		{"optim unknown", func(a *TrainingArguments) { a.Optim = "adam" }, []string{"optim"}, `"adam" is not one of adamw_torch`, ErrInvalidArgument},
		{"optim args", func(a *TrainingArguments) { a.OptimArgs = "foo=1" }, []string{"optim_args"}, "ignores it for adamw_torch", ErrUnsupportedArgument},
		{"safetensors", func(a *TrainingArguments) { a.SaveSafetensors = false }, []string{"save_safetensors"}, "model.safetensors only", ErrUnsupportedArgument},
		{"report_to", func(a *TrainingArguments) { a.ReportTo = []string{"mlflow", "tensorbord"} }, []string{"report_to", "report_to"},
			`"tensorbord" is not an integration`, ErrInvalidArgument},
		{"report_to none mixed", func(a *TrainingArguments) { a.ReportTo = []string{"tensorboard", "none"} }, []string{"report_to"},
			`"none" must be the only entry`, ErrInvalidArgument},
		{"tokens seen", func(a *TrainingArguments) { a.IncludeNumInputTokensSeen = "some" }, []string{"include_num_input_tokens_seen"}, "", ErrInvalidArgument},
		{"device", func(a *TrainingArguments) { a.Device = "npu"; a.NumDevices = -1 }, []string{"num_devices", "device"}, `"npu"`, ErrInvalidArgument},
		{"label smoothing", func(a *TrainingArguments) { a.LabelSmoothingFactor = 1 }, []string{"label_smoothing_factor"}, "", ErrInvalidArgument},
		{"max grad norm", func(a *TrainingArguments) { a.MaxGradNorm = -1 }, []string{"max_grad_norm"}, "use 0 to disable clipping", ErrInvalidArgument},
		{"kwargs", func(a *TrainingArguments) {
			a.LRSchedulerType, a.LRSchedulerKwargs = "cosine_with_min_lr", map[string]any{"min_lr": 1e-6, "min_lr_rate": 0.1}
		}, []string{"lr_scheduler_kwargs"}, "only one of min_lr or min_lr_rate", ErrInvalidArgument},
		{"unsupported recorded", func(a *TrainingArguments) {
			a.Unsupported = []UnsupportedSetting{{Name: "tp_size", Value: "2", Advice: "tensor parallelism is not supported"},
				{Name: "deepspeed", Value: "ds.json", Advice: adviceSharding}}
		}, []string{"tp_size", "deepspeed"}, `deepspeed: ds.json — gotpu shards over --num_devices with data parallelism or fsdp (full_shard, hybrid_shard); DeepSpeed is not supported`, ErrUnsupportedArgument},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := DefaultTrainingArguments()
			tt.mutate(&a)
			before := a
			err := a.Validate()
			var ae *ArgumentsError
			if !errors.As(err, &ae) {
				t.Fatalf("err = %v", err)
			}
			if !reflect.DeepEqual(ae.FieldNames(), tt.fields) {
				t.Errorf("fields %v, want %v (%v)", ae.FieldNames(), tt.fields, err)
			}
			if !strings.Contains(err.Error(), tt.want) || !errors.Is(err, tt.kind) {
				t.Errorf("err = %v, want %q (%v)", err, tt.want, tt.kind)
			}
			if string(a.ToJSON()) != string(before.ToJSON()) || !reflect.DeepEqual(a.Unsupported, before.Unsupported) {
				t.Error("Validate modified the arguments")
			}
		})
	}
}

func nan() float64 { z := 0.0; return z / z }

func TestFinalize(t *testing.T) {
	a := DefaultTrainingArguments()
	a.OutputDir, a.EvalStrategy, a.LoggingSteps = "./results", "steps", 50
	a.LoadBestModelAtEnd, a.SaveSteps, a.Adafactor, a.ReportTo = true, 100, true, []string{"all"}
	if err := a.finalize(fixedTime, "box"); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"logging_dir": "./results/runs/Nov11_15-08-45_box", "run_name": "./results", "do_eval": true,
		"eval_steps": f64p(50), "metric_for_best_model": "loss", "greater_is_better": boolp(false),
		"optim": OptimAdafactor, "report_to": []string{"tensorboard"}, "disable_tqdm": boolp(false),
	}
	v := reflect.ValueOf(a)
	for name, w := range want {
		if got := v.Field(trainingArgsMeta.byName[name].index).Interface(); !reflect.DeepEqual(got, w) {
			t.Errorf("%s = %#v, want %#v", name, printable(got), printable(w))
		}
	}
	// Finalize is idempotent.
	b := a
	if err := b.finalize(fixedTime.Add(time.Hour), "other"); err != nil || !reflect.DeepEqual(a, b) {
		t.Errorf("second Finalize changed something: %v", err)
	}

	g := DefaultTrainingArguments()
	g.MetricForBestModel, g.LogLevel = "eval_accuracy", "error"
	if err := g.Finalize(); err != nil || !*g.GreaterIsBetter || !*g.DisableTqdm || g.LoggingDir == "" {
		t.Errorf("greater_is_better/disable_tqdm: %v %+v", err, g)
	}

	for _, tt := range []struct {
		name   string
		mutate func(a *TrainingArguments)
		fields []string
		want   string
	}{
		{"strategies differ", func(a *TrainingArguments) { a.LoadBestModelAtEnd, a.EvalStrategy = true, "epoch" },
			[]string{"load_best_model_at_end"}, `eval_strategy ("epoch") and save_strategy ("steps") to match`},
		{"not a multiple", func(a *TrainingArguments) {
			a.LoadBestModelAtEnd, a.EvalStrategy, a.EvalSteps, a.SaveSteps = true, "steps", f64p(300), 500
		},
			[]string{"load_best_model_at_end"}, "round multiple"},
		{"mixed ratio", func(a *TrainingArguments) {
			a.LoadBestModelAtEnd, a.EvalStrategy, a.EvalSteps, a.SaveSteps = true, "steps", f64p(0.1), 500
		},
			[]string{"load_best_model_at_end"}, "one is a ratio"},
		{"ratio not multiple", func(a *TrainingArguments) {
			a.LoadBestModelAtEnd, a.EvalStrategy, a.EvalSteps, a.SaveSteps = true, "steps", f64p(0.3), 0.5
		}, []string{"load_best_model_at_end"}, "to be a multiple"},
		{"fractional steps", func(a *TrainingArguments) { a.LoggingSteps, a.SaveSteps = 10.5, 2.5 },
			[]string{"logging_steps", "save_steps"}, "10.5 must be an integer when above 1"},
		{"no interval", func(a *TrainingArguments) { a.EvalStrategy, a.LoggingSteps = "steps", 0 },
			[]string{"eval_steps", "logging_steps"}, `eval_strategy "steps" requires a non-zero eval_steps or logging_steps`},
		{"prefetch", func(a *TrainingArguments) { a.DataloaderPrefetchFactor = intp(2) },
			[]string{"dataloader_prefetch_factor"}, "dataloader_num_workers is 0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := DefaultTrainingArguments()
			tt.mutate(&a)
			err := a.finalize(fixedTime, "h")
			var ae *ArgumentsError
			if !errors.As(err, &ae) || !reflect.DeepEqual(ae.FieldNames(), tt.fields) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want fields %v and %q", err, tt.fields, tt.want)
			}
		})
	}
	// Ratio intervals that are multiples pass (HF 5.x; 4.50 refused them by mistake).
	r := DefaultTrainingArguments()
	r.LoadBestModelAtEnd, r.EvalStrategy, r.EvalSteps, r.SaveSteps = true, "steps", f64p(0.1), 0.2
	if err := r.finalize(fixedTime, "h"); err != nil {
		t.Errorf("0.2 is a multiple of 0.1: %v", err)
	}
}

func TestDefaultLoggingDir(t *testing.T) {
	for _, tt := range []struct{ out, want string }{
		{"out", "out/runs/Nov11_15-08-45_host"},
		{"./results", "./results/runs/Nov11_15-08-45_host"},
		{"results/", "results/runs/Nov11_15-08-45_host"},
		{"", "runs/Nov11_15-08-45_host"},
	} {
		if got := DefaultLoggingDir(tt.out, fixedTime, "host"); got != tt.want {
			t.Errorf("DefaultLoggingDir(%q) = %q, want %q", tt.out, got, tt.want)
		}
	}
	if got := expandUser("~/x"); strings.HasPrefix(got, "~") {
		t.Errorf("expandUser(~/x) = %q", got)
	}
	if got := expandUser("~user/x"); got != "~user/x" {
		t.Errorf("expandUser(~user/x) = %q", got)
	}
}

func TestToJSON(t *testing.T) {
	a := DefaultTrainingArguments()
	a.LRSchedulerType, a.LRSchedulerKwargs = "cosine_with_min_lr", map[string]any{"num_cycles": int64(1), "min_lr_rate": 0.1}
	a.EvalSteps, a.LoggingSteps, a.WarmupSteps, a.EvalDelay = f64p(0.25), 10, 0.05, 2
	a.LabelNames, a.SaveTotalLimit, a.PeakFlops = []string{"labels"}, intp(3), 1.97e14
	out := string(a.ToJSON())
	for _, want := range []string{
		"{\n  \"output_dir\": \"trainer_output\",\n  \"overwrite_output_dir\": false,\n  \"do_train\": false,",
		`"learning_rate": 5e-05,`, `"num_train_epochs": 3.0,`, `"adam_epsilon": 1e-08,`, `"eval_delay": 2,`,
		"\"lr_scheduler_kwargs\": {\n    \"min_lr_rate\": 0.1,\n    \"num_cycles\": 1\n  },",
		`"warmup_steps": 0.05,`, `"logging_steps": 10,`, `"logging_dir": null,`, `"eval_steps": 0.25,`,
		`"save_total_limit": 3,`, "\"report_to\": [\n    \"none\"\n  ],", "\"label_names\": [\n    \"labels\"\n  ],",
		`"peak_flops": 197000000000000.0`, `"greater_is_better": null,`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("ToJSON lacks %q:\n%s", want, out)
		}
	}
	if strings.HasSuffix(out, "\n") || !strings.HasSuffix(out, "}") {
		t.Error("to_json_string has no trailing newline")
	}
	// Keys in declaration order: output_dir first, the gotpu extras last.
	v, err := parsePyJSON([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	keys := v.Object()
	if keys[0].Key != "output_dir" || keys[len(keys)-1].Key != "device_prefetch_size" || len(keys) != len(trainingArgsMeta.fields) {
		t.Errorf("key order: %s … %s (%d keys)", keys[0].Key, keys[len(keys)-1].Key, len(keys))
	}
	back, _, err := ParseTrainingArgumentsJSON([]byte(out), "x")
	if err != nil {
		t.Fatal(err)
	}
	assertArgs(t, back, &a)
}
