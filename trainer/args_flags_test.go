package trainer

import (
	"errors"
	"flag"
	"reflect"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/internal/cli"
)

// parseFlags registers the flags on fresh defaults and parses args the way gotpu's commands do.
func parseFlags(t *testing.T, args ...string) (*TrainingArguments, *ModelDataArguments, *flag.FlagSet, error) {
	t.Helper()
	a := DefaultTrainingArguments()
	var md ModelDataArguments
	fs := flag.NewFlagSet("train", flag.ContinueOnError)
	a.RegisterFlags(fs)
	a.RegisterUnsupportedFlags(fs)
	md.RegisterFlags(fs)
	err := cli.Parse(fs, args)
	return &a, &md, fs, err
}

func TestRegisterFlagsCoversEveryField(t *testing.T) {
	_, _, fs, err := parseFlags(t)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range trainingArgsMeta.fields {
		fl := fs.Lookup(f.name)
		if fl == nil {
			t.Errorf("no flag --%s", f.name)
			continue
		}
		if fl.Usage == "" {
			t.Errorf("--%s has no usage", f.name)
		}
	}
	for _, f := range modelDataArgsMeta.fields {
		if fs.Lookup(f.name) == nil {
			t.Errorf("no flag --%s", f.name)
		}
	}
	for _, name := range []string{"evaluation_strategy", "dtype", "fp16", "deepspeed", "fsdp", "local_rank", "push_to_hub"} {
		if fs.Lookup(name) == nil {
			t.Errorf("no flag --%s", name)
		}
	}
	if got := fs.Lookup("learning_rate").DefValue; got != "5e-05" {
		t.Errorf("--learning_rate default shown as %q", got)
	}
}

func TestFlagsHFCommandLine(t *testing.T) {
	a, md, _, err := parseFlags(t,
		"--model_name_or_path", "gpt2", "--block-size", "128", "--dtype", "bfloat16",
		"--learning-rate", "1e-4", "--per_device_train_batch_size", "16", "--bf16", "True",
		"--do_train", "--report_to", "tensorboard,none", "--report_to", "all",
		"--evaluation_strategy", "steps", "--eval_steps", "0.25", "--greater_is_better", "false",
		"--resume_from_checkpoint", "true", "--lr_scheduler_type", "cosine",
		"--lr_scheduler_kwargs", `{"num_cycles": "1.5"}`, "--include_num_input_tokens_seen",
		"--label_names", "labels", "--label_names", "start_positions,end_positions",
		"--max_steps", "010", "--warmup_steps", "0.1", "--data_seed", "None", "--num_devices", "8",
		"--fp16", "False", "--local_rank", "3", "--hub_token", "secret",
	)
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultTrainingArguments()
	want.LearningRate, want.PerDeviceTrainBatchSize, want.BF16, want.DoTrain = 1e-4, 16, true, true
	want.ReportTo, want.EvalStrategy, want.EvalSteps, want.GreaterIsBetter = []string{"tensorboard", "none", "all"}, "steps", f64p(0.25), boolp(false)
	want.ResumeFromCheckpoint, want.LRSchedulerType = "true", "cosine"
	want.LRSchedulerKwargs, want.IncludeNumInputTokensSeen = map[string]any{"num_cycles": 1.5}, "all"
	want.LabelNames, want.MaxSteps, want.WarmupSteps, want.NumDevices = []string{"labels", "start_positions", "end_positions"}, 10, 0.1, 8
	assertArgs(t, a, &want)
	if len(a.Unsupported) != 0 {
		t.Errorf("unsupported: %v", a.Unsupported)
	}
	if _, latest := a.ResumeCheckpoint(); !latest {
		t.Error("--resume_from_checkpoint true is not 'latest'")
	}
	if *md.ModelNameOrPath != "gpt2" || *md.BlockSize != 128 || *md.TorchDtype != "bfloat16" || md.MaxSeqLength != nil {
		t.Errorf("model/data = %+v", md)
	}

	a, _, _, err = parseFlags(t, "--include_num_input_tokens_seen=non_padding", "--resume_from_checkpoint", "out/checkpoint-500")
	if err != nil || a.IncludeNumInputTokensSeen != "non_padding" {
		t.Errorf("tokens seen: %v %q", err, a.IncludeNumInputTokensSeen)
	}
	if dir, latest := a.ResumeCheckpoint(); dir != "out/checkpoint-500" || latest {
		t.Errorf("resume = %q %v", dir, latest)
	}
}

func TestFlagsUnsupported(t *testing.T) {
	a, _, _, err := parseFlags(t, "--fp16", "--deepspeed", "ds_config.json", "--fsdp_transformer_layer_cls_to_wrap", "LlamaDecoderLayer",
		"--push_to_hub", "True", "--debug", "", "--tf32", "None", "--half_precision_backend", "auto")
	if err != nil {
		t.Fatal(err)
	}
	err = a.Validate()
	var ae *ArgumentsError
	if !errors.As(err, &ae) || !reflect.DeepEqual(ae.FieldNames(), []string{"fp16", "deepspeed", "fsdp_transformer_layer_cls_to_wrap", "push_to_hub"}) {
		t.Fatalf("err = %v", err)
	}
	for _, want := range []string{
		"fp16: true — TPUs have no fp16 autocast; use bf16",
		"deepspeed: ds_config.json — gotpu shards over --num_devices with data parallelism or fsdp (full_shard, hybrid_shard); DeepSpeed is not supported",
		"fsdp_transformer_layer_cls_to_wrap: LlamaDecoderLayer — deprecated by HF; give transformer_layer_cls_to_wrap in fsdp_config",
		"push_to_hub: true — gotpu does not upload",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v lacks %q", err, want)
		}
	}
}

func TestFlagsBadValues(t *testing.T) {
	for _, args := range [][]string{
		{"--per_device_train_batch_size", "8.5"},
		{"--bf16=maybe"},
		{"--learning_rate", "fast"},
		{"--learning_rate", "0x1p-3"},
		{"--lr_scheduler_kwargs", "num_cycles=2"},
		{"--eval_steps", "often"},
		{"--no_such_flag", "1"},
	} {
		if _, _, _, err := parseFlags(t, args...); err == nil || !errors.Is(err, cli.ErrUsage) {
			t.Errorf("%v: err = %v", args, err)
		}
	}
}

// TestMergeFlags layers flags over an argument file: only the flags given override.
func TestMergeFlags(t *testing.T) {
	file, fileMD, err := ParseTrainingArgumentsJSON([]byte(`{"learning_rate": 1e-4, "per_device_train_batch_size": 4,
		"report_to": ["tensorboard"], "evaluation_strategy": "epoch", "block_size": 256, "model_name_or_path": "gpt2"}`), "args.json")
	if err != nil {
		t.Fatal(err)
	}
	flagged, flaggedMD, fs, err := parseFlags(t, "--learning_rate", "2e-4", "--evaluation_strategy", "steps",
		"--label_names", "labels", "--fp16", "--block_size", "512", "--lr_scheduler_kwargs", `{"num_cycles": 1}`)
	if err != nil {
		t.Fatal(err)
	}
	file.MergeFlags(flagged, fs)
	fileMD.MergeFlags(flaggedMD, fs)
	if file.LearningRate != 2e-4 || file.PerDeviceTrainBatchSize != 4 || file.EvalStrategy != "steps" ||
		!reflect.DeepEqual(file.ReportTo, []string{"tensorboard"}) || !reflect.DeepEqual(file.LabelNames, []string{"labels"}) {
		t.Errorf("merged = %+v", file)
	}
	if *fileMD.BlockSize != 512 || *fileMD.ModelNameOrPath != "gpt2" {
		t.Errorf("merged model/data = %+v", fileMD)
	}
	if len(file.Unsupported) != 1 || file.Unsupported[0].Name != "fp16" {
		t.Errorf("unsupported = %v", file.Unsupported)
	}
	// The merged struct shares no storage with the flagged one.
	flagged.LabelNames[0] = "changed"
	flagged.LRSchedulerKwargs["num_cycles"] = 9
	if file.LabelNames[0] != "labels" || file.LRSchedulerKwargs["num_cycles"] != int64(1) {
		t.Errorf("merge aliased storage: %v %v", file.LabelNames, file.LRSchedulerKwargs)
	}
}

// FuzzFlagValues: setting any registered flag to any string never panics, and a value a
// numeric or list flag accepts reads back through String.
func FuzzFlagValues(f *testing.F) {
	f.Add(uint16(0), "1e-4")
	f.Add(uint16(3), "True")
	f.Add(uint16(20), `{"num_cycles": "2"}`)
	f.Add(uint16(40), "a,b,,c")
	f.Add(uint16(7), "None")
	f.Fuzz(func(t *testing.T, which uint16, value string) {
		a := DefaultTrainingArguments()
		var md ModelDataArguments
		fs := flag.NewFlagSet("fuzz", flag.ContinueOnError)
		a.RegisterFlags(fs)
		a.RegisterUnsupportedFlags(fs)
		md.RegisterFlags(fs)
		var all []*flag.Flag
		fs.VisitAll(func(fl *flag.Flag) { all = append(all, fl) })
		fl := all[int(which)%len(all)]
		if err := fl.Value.Set(value); err != nil {
			return
		}
		_ = fl.Value.String()
		_ = a.Validate()
		_ = a.ToJSON()
	})
}
