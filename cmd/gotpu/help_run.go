package main

import (
	"slices"

	"github.com/gotpu/gotpu/internal/cli"
	"github.com/gotpu/gotpu/trainer"
)

// The --help of gotpu train and eval: a few hundred flags (every HF TrainingArguments field, the
// example scripts' model/data arguments, TRL's) are readable only in groups, with what most runs
// set first.

// trainCommonFlags are listed first in gotpu train --help.
var trainCommonFlags = []string{
	"model_name_or_path", "dataset_name", "train_file", "validation_file", "output_dir",
	"per_device_train_batch_size", "gradient_accumulation_steps", "learning_rate", "num_train_epochs", "max_steps",
	"logging_steps", "eval_strategy", "eval_steps", "save_strategy", "save_steps", "bf16", "device", "num_devices", "args",
}

func trainHelpGroups() []cli.HelpGroup {
	n := trainer.Flags()
	// Arguments gotpu refuses (unless at their default) or ignores are named in two compact
	// paragraphs rather than one line each: their meaning is HF's, and what gotpu does with
	// them is the same for all (ArgumentPolicies; a refusal names the argument and what to do).
	effect := map[string]trainer.ArgumentEffect{}
	for _, p := range trainer.ArgumentPolicies() {
		effect[p.Name] = p.Effect
	}
	refused, inert := slices.Clone(n.Refused), slices.Clone(n.Inert)
	implemented := func(names []string) []string {
		var out []string
		for _, name := range names {
			switch effect[name] {
			case trainer.EffectRefused:
				refused = append(refused, name)
			case trainer.EffectInert:
				inert = append(inert, name)
			default:
				out = append(out, name)
			}
		}
		return out
	}
	training, modelData, peft := implemented(n.Training), implemented(n.ModelData), implemented(n.PEFT)
	return []cli.HelpGroup{
		{Title: "Common flags", Names: trainCommonFlags},
		{Title: "Training arguments (Hugging Face TrainingArguments)", Names: training},
		{Title: "Model and data arguments (run_clm.py, run_glue.py)", Names: modelData},
		{Title: "PEFT / LoRA (TRL ModelConfig)", Names: peft},
		{Title: "Supervised fine-tuning data (TRL SFTConfig)", Names: n.SFT},
		{Title: "FSDP", Names: n.FSDP},
		{Title: "gotpu", Names: append(slices.Clone(n.Extras), "plugin_path", "go_backend", "compilation_cache_dir",
			"compilation_cache_max_bytes")},
		{Title: "HF arguments gotpu does not implement", Compact: true, Names: refused,
			Note: "accepted at HF's default; any other value is refused, saying what to do instead"},
		{Title: "HF arguments accepted and ignored", Compact: true, Names: inert,
			Note: "they cannot change what gotpu computes or writes"},
	}
}

func evalHelpGroups() []cli.HelpGroup {
	n := trainer.Flags()
	return []cli.HelpGroup{
		{Title: "Model", Names: []string{"model_name_or_path", "torch_dtype", "model_revision", "config_name",
			"tokenizer_name", "cache_dir", "token", "adapter_name_or_path"}},
		{Title: "Data", Names: []string{"validation_file", "dataset_name", "dataset_config_name", "validation_split",
			"validation_split_percentage", "max_eval_samples", "block_size", "keep_linebreaks", "text_column_name",
			"text_column_names", "label_column_name", "max_seq_length"}},
		{Title: "Evaluation", Names: []string{"output_dir", "per_device_eval_batch_size", "bf16", "seed", "fsdp",
			"fsdp_config", "args"}},
		{Title: "Device", Names: []string{"device", "num_devices", "plugin_path", "go_backend",
			"compilation_cache_dir", "compilation_cache_max_bytes"}},
		{Title: "Supervised fine-tuning data (TRL SFTConfig)", Names: n.SFT},
	}
}

const evalHelpRest = "Every other gotpu train flag (learning rate, epochs, saving, PEFT training, …) is accepted and\n" +
	"ignored by eval, so one --args file or command line serves both: see 'gotpu train --help'."
