package trainer

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// withoutKeys returns the JSON object data minus the given top-level keys, in Python's compact
// layout.
func withoutKeys(t *testing.T, data []byte, drop []string) []byte {
	t.Helper()
	v, err := parsePyJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	var kept []JSONMember
	for _, m := range v.Object() {
		dropped := false
		for _, d := range drop {
			dropped = dropped || m.Key == d
		}
		if !dropped {
			kept = append(kept, m)
		}
	}
	return appendPyJSON(nil, JSONObjectValue(kept...), pyJSONStyle{indent: -1}, 0)
}

// TestRealTrainingArgsFiles pins the outcome for each real argument file: refused with exactly
// these fields (in file order), and — with those keys removed — accepted with these values.
func TestRealTrainingArgsFiles(t *testing.T) {
	trl := []string{"model_init_kwargs", "max_prompt_length", "num_generations", "temperature",
		"max_completion_length", "ds3_gather_for_generation", "use_vllm", "vllm_device",
		"vllm_gpu_memory_utilization", "vllm_dtype", "vllm_max_model_len", "beta", "reward_weights",
		"sync_ref_model", "ref_model_mixup_alpha", "ref_model_sync_steps", "log_completions",
		"vllm_sampling_params", "unsloth_num_chunks"}
	tests := []struct {
		file    string
		refused []string
		kinds   map[string]error // error kind of some refused fields
		hint    string
		check   func(t *testing.T, a *TrainingArguments, md *ModelDataArguments)
	}{
		{
			file:    "cbdetect_training_args.json",
			refused: []string{"image_square_size", "fp16", "eval_do_concat_batches"},
			kinds: map[string]error{"image_square_size": ErrUnknownArgument, "fp16": ErrUnsupportedArgument,
				"eval_do_concat_batches": ErrUnsupportedArgument},
			check: func(t *testing.T, a *TrainingArguments, md *ModelDataArguments) {
				want := DefaultTrainingArguments()
				want.OutputDir, want.OverwriteOutputDir, want.DoTrain, want.DoEval = "target/model", true, true, true
				want.NumTrainEpochs, want.LearningRate, want.WeightDecay = 10, 5e-5, 1e-4
				want.DataloaderNumWorkers, want.DataloaderPrefetchFactor = 4, intp(2)
				want.PerDeviceTrainBatchSize, want.GradientAccumulationSteps = 8, 1
				want.RemoveUnusedColumns, want.MetricForBestModel, want.GreaterIsBetter = false, "eval_map", boolp(true)
				want.LoadBestModelAtEnd, want.LoggingStrategy, want.EvalStrategy = true, "epoch", "epoch" // evaluation_strategy
				want.SaveStrategy, want.SaveTotalLimit, want.Seed = "epoch", intp(2), 42
				want.RunName, want.DisableTqdm, want.ReportTo = "target/model", boolp(false), []string{} // Finalize
				assertArgs(t, a, &want)
				wantMD := ModelDataArguments{DatasetName: strp("target/board_imgs"), IgnoreMismatchedSizes: boolp(true),
					ModelNameOrPath: strp("facebook/detr-resnet-50")}
				if !reflect.DeepEqual(md, &wantMD) {
					t.Errorf("model/data = %+v", md)
				}
			},
		},
		{
			file:    "torgo_training_args.json",
			refused: []string{"group_by_length", "push_to_hub"},
			check: func(t *testing.T, a *TrainingArguments, _ *ModelDataArguments) {
				want := DefaultTrainingArguments()
				want.EvalStrategy, want.EvalDelay, want.LearningRate, want.WeightDecay = "steps", 0, 1e-4, 0.005
				want.WarmupSteps, want.SaveSteps, want.SaveTotalLimit, want.EvalSteps = 1000, 500, intp(3), f64p(250)
				want.DoEval, want.RunName, want.DisableTqdm, want.ReportTo = true, "trainer_output", boolp(false), []string{} // Finalize
				assertArgs(t, a, &want)
			},
		},
		{
			file:    "sizifs_trainer_args_full_dump.json",
			refused: []string{"save_safetensors", "fp16"},
			check: func(t *testing.T, a *TrainingArguments, _ *ModelDataArguments) {
				out := "/content/drive/My Drive/Colab Data/LLaMA-LoRA Tuner/lora_models/sizifs-llma-v1.3"
				want := DefaultTrainingArguments()
				want.OutputDir, want.RunName, want.LoggingDir = out, out, out+"/runs/Nov11_15-08-45_1f58c4d82d2b"
				want.PerDeviceTrainBatchSize, want.LearningRate, want.NumTrainEpochs = 10, 0.00032, 17
				want.WarmupSteps, want.LoggingSteps, want.SaveSteps, want.SaveTotalLimit = 100, 3, 50, intp(30)
				want.ReportTo, want.DisableTqdm, want.LoadBestModelAtEnd = []string{"tensorboard"}, boolp(false), false
				want.IncludeNumInputTokensSeen = "no"
				// 4.28 wrote fsdp_min_num_params unstripped; HF's post-init moves it last when it
				// strips the prefix, then appends xla_fsdp_v2.
				want.FSDPConfig.order = []string{"xla", "xla_fsdp_grad_ckpt", "min_num_params", "xla_fsdp_v2"}
				assertArgs(t, a, &want)
			},
		},
		{
			file:    "marketguardians_training_args_full_dump.json",
			refused: []string{"fp16"},
			check: func(t *testing.T, a *TrainingArguments, _ *ModelDataArguments) {
				want := DefaultTrainingArguments()
				want.OutputDir, want.RunName, want.LoggingDir, want.DoEval = "./results", "./results", "./logs", true
				want.EvalStrategy, want.PerDeviceTrainBatchSize, want.PerDeviceEvalBatchSize = "epoch", 16, 16
				want.GradientAccumulationSteps, want.LearningRate, want.WeightDecay, want.NumTrainEpochs = 2, 2e-5, 0.01, 5
				want.WarmupSteps, want.LoggingSteps, want.SaveStrategy = 300, 10, "epoch"
				want.LoadBestModelAtEnd, want.MetricForBestModel, want.GreaterIsBetter = true, "eval_loss", boolp(false)
				want.ReportTo, want.DisableTqdm, want.AverageTokensAcrossDevices = []string{"tensorboard"}, boolp(false), true
				assertArgs(t, a, &want)
			},
		},
		{
			file:    "grpo_accounting_grpoconfig_dump.json",
			refused: append([]string{"fp16", "tf32", "optim"}, trl...),
			kinds:   map[string]error{"optim": ErrUnsupportedArgument, "num_generations": ErrUnknownArgument},
			hint:    "this looks like a TRL GRPOConfig dump",
			check: func(t *testing.T, a *TrainingArguments, _ *ModelDataArguments) {
				want := DefaultTrainingArguments()
				want.OutputDir, want.RunName, want.LoggingDir = "outputs", "outputs", "outputs/runs/Apr04_07-29-01_001716c6e116"
				want.PerDeviceTrainBatchSize, want.PerDeviceEvalBatchSize, want.GradientAccumulationSteps = 6, 4, 2
				want.EvalAccumulationSteps, want.LearningRate, want.WeightDecay, want.AdamBeta2 = intp(2), 0.0002, 0.1, 0.99
				want.MaxSteps, want.LRSchedulerType, want.WarmupRatio, want.LoggingSteps = 100, "cosine", 0.1, 1
				want.LoggingNanInfFilter, want.SaveSteps, want.Seed, want.DataSeed = false, 20, 3407, intp(3407)
				want.DataloaderNumWorkers, want.RemoveUnusedColumns, want.ReportTo = 2, false, []string{}
				want.DisableTqdm, want.AverageTokensAcrossDevices = boolp(false), false
				assertArgs(t, a, &want)
				if w := a.NumWarmupSteps(100); w != 10 {
					t.Errorf("warmup steps = %d, want ceil(100 × 0.1)", w)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join(argsDir, tt.file)
			_, _, err := LoadTrainingArguments(path)
			var ae *ArgumentsError
			if !errors.As(err, &ae) {
				t.Fatalf("err = %v, want an *ArgumentsError", err)
			}
			if got := ae.FieldNames(); !reflect.DeepEqual(got, tt.refused) {
				t.Errorf("refused fields\n got %v\nwant %v", got, tt.refused)
			}
			if ae.Source != path || !strings.HasPrefix(err.Error(), path+": ") {
				t.Errorf("error does not name the file: %v", err)
			}
			if !strings.Contains(ae.Hint, tt.hint) {
				t.Errorf("hint = %q, want %q", ae.Hint, tt.hint)
			}
			for _, f := range ae.Fields {
				if kind, ok := tt.kinds[f.Field]; ok && !errors.Is(f, kind) {
					t.Errorf("%s: kind %v, want %v", f.Field, f.Kind, kind)
				}
			}
			if !errors.Is(err, ErrUnsupportedArgument) && !errors.Is(err, ErrUnknownArgument) {
				t.Errorf("errors.Is finds no kind in %v", err)
			}

			rest := withoutKeys(t, readTestFile(t, path), tt.refused)
			a, md, err := ParseTrainingArgumentsJSON(rest, tt.file)
			if err != nil {
				t.Fatalf("without the refused keys: %v", err)
			}
			if err := a.finalize(fixedTime, "host"); err != nil {
				t.Fatalf("Finalize: %v", err)
			}
			if err := a.Validate(); err != nil {
				t.Fatalf("Validate after Finalize: %v", err)
			}
			tt.check(t, a, md)
			// ToJSON → parse is the identity.
			back, _, err := ParseTrainingArgumentsJSON(a.ToJSON(), "roundtrip")
			if err != nil {
				t.Fatal(err)
			}
			assertArgs(t, back, a)
		})
	}
}

func boolp(b bool) *bool { return &b }

// assertArgs compares field by field, naming the differing HF fields.
func assertArgs(t *testing.T, got, want *TrainingArguments) {
	t.Helper()
	gv, wv := reflect.ValueOf(got).Elem(), reflect.ValueOf(want).Elem()
	for _, f := range trainingArgsMeta.fields {
		g, w := gv.Field(f.index).Interface(), wv.Field(f.index).Interface()
		if f.name == "lr_scheduler_kwargs" && reflect.ValueOf(g).Len() == 0 && reflect.ValueOf(w).Len() == 0 {
			continue
		}
		if f.name == "logging_dir" && w == "" {
			continue // derived from the clock and host when not given
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s = %#v, want %#v", f.name, printable(g), printable(w))
		}
	}
}

func printable(x any) any {
	v := reflect.ValueOf(x)
	if v.Kind() == reflect.Pointer && !v.IsNil() {
		return v.Elem().Interface()
	}
	return x
}

func TestParseTrainingArgumentsBadFiles(t *testing.T) {
	for _, tt := range []struct {
		name, in string
		fields   []string // offending fields, in order ("" for a syntax error)
		want     []string // substrings of the error
		kind     error
	}{
		{"negative lr", `{"learning_rate": -1}`, []string{"learning_rate"},
			[]string{"bad.json: trainer.TrainingArguments.learning_rate: -1 is negative"}, ErrInvalidArgument},
		{"unknown scheduler", `{"lr_scheduler_type": "cosine_annealing"}`, []string{"lr_scheduler_type"},
			[]string{`lr_scheduler_type: "cosine_annealing" is not one of linear, cosine`}, ErrInvalidArgument},
		{"plateau", `{"lr_scheduler_type": "reduce_lr_on_plateau", "eval_strategy": "epoch"}`, []string{"lr_scheduler_type"},
			[]string{"reduce_lr_on_plateau"}, ErrUnsupportedArgument},
		{"fsdp offload", `{"fsdp": "full_shard offload auto_wrap"}`, []string{"fsdp"},
			[]string{`fsdp: "offload" is not implemented by gotpu (supported: full_shard, hybrid_shard, auto_wrap)`}, ErrUnsupportedArgument},
		{"fsdp list and deepspeed", `{"fsdp": ["shard_grad_op"], "deepspeed": "ds_config.json"}`, []string{"fsdp", "deepspeed"},
			[]string{`deepspeed: "ds_config.json" — gotpu shards`, `fsdp: "shard_grad_op" is not implemented by gotpu`}, ErrUnsupportedArgument},
		{"fsdp config", `{"fsdp": "full_shard", "fsdp_config": {"min_num_params": 1000, "transformer_layer_cls_to_wrap": "GPT2Block"}}`,
			[]string{"fsdp_config"}, []string{"mutually exclusive"}, ErrInvalidArgument},
		{"accelerator config", `{"accelerator_config": {"split_batches": true}}`, []string{"accelerator_config"}, nil, ErrUnsupportedArgument},
		{"string lr", `{"learning_rate": "fast"}`, []string{"learning_rate"},
			[]string{`bad.json: trainer.TrainingArguments.learning_rate: "fast" is a string, want a number`}, ErrInvalidArgument},
		{"float batch", `{"per_device_train_batch_size": 8.5}`, []string{"per_device_train_batch_size"},
			[]string{"8.5 is a float, want an integer"}, ErrInvalidArgument},
		{"list of numbers", `{"report_to": [1]}`, []string{"report_to"}, []string{"want a list of strings"}, ErrInvalidArgument},
		{"null lr", `{"learning_rate": null}`, []string{"learning_rate"}, []string{"null, want a number"}, ErrInvalidArgument},
		{"truncated", "{\n  \"learning_rate\": 5e-05,\n", []string{""}, []string{"bad.json", "line 3 column 1"}, ErrJSONSyntax},
		{"not an object", `["learning_rate", 1]`, []string{""}, []string{"bad.json", "top level is a list"}, ErrJSONSyntax},
		{"null top level", `null`, []string{""}, []string{"top level is a null"}, ErrJSONSyntax},
		{"alias conflict", `{"eval_strategy": "steps", "evaluation_strategy": "epoch"}`, []string{"evaluation_strategy"},
			[]string{`"epoch" disagrees with eval_strategy "steps"`}, ErrInvalidArgument},
		{"bad alias value", `{"evaluation_strategy": 3}`, []string{"evaluation_strategy"}, []string{"want a string"}, ErrInvalidArgument},
		{"typo", `{"learning-rate": 1e-4, "per_device_train_batchsize": 4}`, []string{"learning-rate", "per_device_train_batchsize"},
			[]string{"did you mean learning_rate?", "did you mean per_device_train_batch_size?"}, ErrUnknownArgument},
		{"bad kwargs", `{"lr_scheduler_kwargs": {"num_cycles": 2}}`, []string{"lr_scheduler_kwargs"},
			[]string{`linear takes no keyword "num_cycles"`}, ErrInvalidArgument},
		{"kwargs not object", `{"lr_scheduler_kwargs": "num_cycles=2"}`, []string{"lr_scheduler_kwargs"}, nil, ErrInvalidArgument},
		{"wandb", `{"report_to": ["tensorboard", "wandb"]}`, []string{"report_to"}, []string{`"wandb" — gotpu reports to tensorboard`}, ErrUnsupportedArgument},
		{"model data type", `{"block_size": "long"}`, []string{"block_size"},
			[]string{`trainer.ModelDataArguments.block_size: "long" is a string, want an integer`}, ErrInvalidArgument},
		{"many at once", `{"fp16": true, "learning_rate": "x", "push_to_hub": true, "max_steps": 0, "num_generations": 4}`,
			[]string{"fp16", "learning_rate", "push_to_hub", "max_steps", "num_generations"},
			[]string{"5 problems", "this looks like a TRL GRPOConfig dump",
				"push_to_hub: true — gotpu does not upload; push output_dir with huggingface-cli upload",
				"num_generations: not a TrainingArguments field; this looks like a TRL GRPOConfig key"}, ErrUnknownArgument},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := ParseTrainingArgumentsJSON([]byte(tt.in), "bad.json")
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, tt.kind) {
				t.Errorf("%v is not %v", err, tt.kind)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			var ae *ArgumentsError
			if errors.As(err, &ae) {
				if !reflect.DeepEqual(ae.FieldNames(), tt.fields) {
					t.Errorf("fields %v, want %v", ae.FieldNames(), tt.fields)
				}
			} else if tt.fields[0] != "" {
				t.Errorf("not an *ArgumentsError: %v", err)
			}
		})
	}
}

func TestParseTrainingArgumentsAcceptedForms(t *testing.T) {
	in := `{
  "bf16": null, "do_train": null, "overwrite_output_dir": null, "output_dir": null,
  "fp16": false, "push_to_hub": null, "fsdp": "", "sharded_ddp": [], "debug": [], "deepspeed": null,
  "fsdp_config": {"fsdp_min_num_params": 0, "xla": false, "xla_fsdp_grad_ckpt": false},
  "accelerator_config": {"split_batches": false, "dispatch_batches": null, "even_batches": true, "use_seedable_sampler": true},
  "hub_token": "<HUB_TOKEN>", "push_to_hub_token": "<PUSH_TO_HUB_TOKEN>", "hub_private_repo": true,
  "half_precision_backend": "cuda_amp", "local_rank": 3, "_n_gpu": 1, "ddp_find_unused_parameters": false,
  "include_num_input_tokens_seen": true, "report_to": "tensorboard", "evaluation_strategy": null,
  "lr_scheduler_type": "cosine", "lr_scheduler_kwargs": "{\"num_cycles\": \"2\", \"x\": {\"y\": \"true\"}}",
  "eval_steps": 0.25, "model_name_or_path": "gpt2", "dtype": "bfloat16", "max_seq_length": null
}`
	// The kwargs hold a key cosine does not take, to see _convert_str_dict; drop it after.
	a := DefaultTrainingArguments()
	md := ModelDataArguments{}
	err := a.ApplyJSON([]byte(in), "ok.json", &md)
	var ae *ArgumentsError
	if !errors.As(err, &ae) || !reflect.DeepEqual(ae.FieldNames(), []string{"lr_scheduler_kwargs"}) {
		t.Fatalf("err = %v", err)
	}
	if !reflect.DeepEqual(a.LRSchedulerKwargs, map[string]any{"num_cycles": int64(2), "x": map[string]any{"y": true}}) {
		t.Errorf("kwargs = %#v", a.LRSchedulerKwargs)
	}
	in = strings.Replace(in, `, \"x\": {\"y\": \"true\"}`, "", 1)
	p, md2, err := ParseTrainingArgumentsJSON([]byte(in), "ok.json")
	if err != nil {
		t.Fatal(err)
	}
	if p.BF16 || p.DoTrain || p.OutputDir != "trainer_output" || len(p.Unsupported) != 0 ||
		p.IncludeNumInputTokensSeen != "all" || !reflect.DeepEqual(p.ReportTo, []string{"tensorboard"}) ||
		p.EvalStrategy != "no" || *p.EvalSteps != 0.25 {
		t.Errorf("parsed %+v", p)
	}
	if *md2.ModelNameOrPath != "gpt2" || *md2.TorchDtype != "bfloat16" || md2.MaxSeqLength != nil {
		t.Errorf("model/data %+v", md2)
	}
}

func TestLoadTrainingArgumentsFileErrors(t *testing.T) {
	if _, _, err := LoadTrainingArguments(filepath.Join(t.TempDir(), "none.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	path := filepath.Join(t.TempDir(), "args.json")
	if err := os.WriteFile(path, append([]byte{0xEF, 0xBB, 0xBF}, `{"learning_rate": 1e-4}`...), 0o644); err != nil {
		t.Fatal(err)
	}
	a, _, err := LoadTrainingArguments(path)
	if err != nil || a.LearningRate != 1e-4 {
		t.Errorf("BOM file: %v", err)
	}
}

// FuzzParseTrainingArgumentsJSON: the parser never panics; arguments it accepts write (ToJSON)
// to a file it accepts again, with the same content.
func FuzzParseTrainingArgumentsJSON(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(argsDir, "*.json"))
	for _, p := range files {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(`{"learning_rate": 1e-4, "lr_scheduler_type": "warmup_stable_decay", "lr_scheduler_kwargs": {"num_decay_steps": 3}}`))
	f.Add([]byte(`{"eval_steps": 0.5, "report_to": "all", "include_num_input_tokens_seen": "non_padding", "data_seed": 7}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, _, err := ParseTrainingArgumentsJSON(data, "fuzz")
		if err != nil {
			var ae *ArgumentsError
			if errors.As(err, &ae) && len(ae.Fields) == 0 {
				t.Fatal("an ArgumentsError without fields")
			}
			return
		}
		out := a.ToJSON()
		b, _, err := ParseTrainingArgumentsJSON(out, "rewritten")
		if err != nil {
			t.Fatalf("ToJSON output refused: %v\n%s", err, out)
		}
		if out2 := b.ToJSON(); !bytes.Equal(out, out2) {
			t.Fatalf("ToJSON not stable:\n%s\n%s", out, out2)
		}
	})
}

// fixedTime is the clock Finalize sees in tests.
var fixedTime = time.Date(2024, time.November, 11, 15, 8, 45, 0, time.UTC)
