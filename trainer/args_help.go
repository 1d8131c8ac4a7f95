package trainer

// modelDataHelp is the one-line meaning of each model/data argument of HF's example scripts
// (run_clm.py, run_glue.py) and TRL's ModelConfig, for --help. Whether gotpu implements, refuses
// or ignores one is ArgumentPolicies' business (a refused one says so when given); these say what
// the argument means. TRL's SFT data arguments are in sftHelp.
var modelDataHelp = map[string]string{
	"model_name_or_path":          "model to load: a Hugging Face model directory or Hub repo id",
	"model_type":                  "train a new model of this type from scratch (gpt2, llama, mistral, qwen2, qwen3, gemma3_text), with --config_overrides",
	"config_overrides":            `config settings for a model trained from scratch, e.g. "n_embd=10,resid_pdrop=0.2"`,
	"config_name":                 "config.json (or its directory or repo) of a model trained from scratch (random weights from --seed)",
	"tokenizer_name":              "tokenizer (tokenizer.json, its directory or a repo) to use instead of the model's",
	"cache_dir":                   "Hugging Face Hub cache for downloaded models and datasets",
	"use_fast_tokenizer":          "use the fast (tokenizer.json) tokenizer (default true)",
	"model_revision":              "Hub branch, tag or commit of the model (default main)",
	"token":                       "Hub token (default $HF_TOKEN, else the saved login)",
	"use_auth_token":              "deprecated: send the saved Hub token (use --token)",
	"trust_remote_code":           "run a Hub repo's own modeling code",
	"torch_dtype":                 "weights' dtype when loading: auto, bfloat16, float16 or float32",
	"low_cpu_mem_usage":           "load the weights without a first random initialization",
	"ignore_mismatched_sizes":     "re-initialize weights whose shape differs from the checkpoint",
	"task_name":                   "GLUE task to download and train on (run_glue.py), e.g. mrpc",
	"dataset_name":                "dataset to train or evaluate on: a Hub dataset repo id or a local dataset directory",
	"dataset_config_name":         "configuration (subset) of --dataset_name",
	"train_split":                 `split of --dataset_name to train on (default "train")`,
	"validation_split":            `split of --dataset_name to evaluate on (default "validation" when there is one)`,
	"train_file":                  "training data: .txt, .jsonl/.json, .csv, .parquet or .arrow",
	"validation_file":             "evaluation data, in the same formats as --train_file",
	"test_file":                   "prediction data (run_glue.py's --do_predict)",
	"max_train_samples":           "use only the first N training examples",
	"max_eval_samples":            "use only the first N evaluation examples",
	"max_predict_samples":         "use only the first N prediction examples",
	"streaming":                   "stream --dataset_name instead of downloading it whole",
	"block_size":                  "causal LM: tokens per training block (default the model's context, at most 1024)",
	"max_seq_length":              "sequence classification: truncate examples to this many tokens (default 128)",
	"pad_to_max_length":           "pad every example to max_seq_length rather than per batch",
	"overwrite_cache":             "redo preprocessing instead of reusing the datasets cache",
	"validation_split_percentage": "percent of the training data held out for evaluation when there is no validation data (run_clm: train[:N%]; default 5 when evaluating)",
	"preprocessing_num_workers":   "processes used to tokenize the data",
	"keep_linebreaks":             "keep line breaks when reading .txt files (default true)",
	"text_column_name":            `column holding the text (default "text"; "sentence" for classifiers)`,
	"text_column_names":           `classifier input columns, comma-separated (e.g. "sentence1,sentence2")`,
	"label_column_name":           `classifier label column (default "label")`,
	"mlm_probability":             "masked-LM: fraction of tokens to mask (run_mlm.py)",
	"line_by_line":                "masked-LM: one example per line instead of grouped blocks (run_mlm.py)",
	"use_peft":                    "train a new LoRA adapter instead of the whole model (TRL)",
	"lora_r":                      "LoRA rank (default 16)",
	"lora_alpha":                  "LoRA alpha; the update is scaled by alpha/r (default 32)",
	"lora_dropout":                "dropout on the LoRA branch (default 0.05)",
	"lora_target_modules":         `modules LoRA wraps, comma-separated, or "all-linear" (default PEFT's for the architecture)`,
	"lora_modules_to_save":        "modules trained in full and saved with the adapter",
	"lora_task_type":              "PEFT task type (default CAUSAL_LM)",
	"use_rslora":                  "rank-stabilized LoRA: scale by alpha/sqrt(r)",
	"use_dora":                    "weight-decomposed LoRA (DoRA)",
	"adapter_name_or_path":        "LoRA adapter directory or Hub repo to load on the model (training continues it)",
}

// FlagNames sorts the flag names RegisterFlags and RegisterUnsupportedFlags define into the
// groups --help shows, each in declaration order.
type FlagNames struct {
	Training  []string // HF TrainingArguments fields gotpu implements (FSDP's apart)
	FSDP      []string
	Extras    []string // gotpu's own TrainingArguments fields
	ModelData []string // model and data arguments of HF's example scripts
	PEFT      []string // TRL ModelConfig's LoRA arguments
	SFT       []string // TRL SFTConfig's data arguments
	Refused   []string // HF fields accepted only at HF's default
	Inert     []string // HF fields accepted with any value and ignored
}

// Flags returns the names of the flags of gotpu train and eval, by group.
func Flags() FlagNames {
	var n FlagNames
	hf := map[string]bool{}
	for _, f := range hfTrainingArgumentFields {
		hf[f.name] = true
		switch f.policy {
		case hfRefuse:
			n.Refused = append(n.Refused, f.name)
		case hfInert:
			n.Inert = append(n.Inert, f.name)
		}
	}
	for _, f := range trainingArgsMeta.fields {
		switch {
		case f.name == "fsdp" || f.name == "fsdp_config":
			n.FSDP = append(n.FSDP, f.name)
		case hf[f.name]:
			n.Training = append(n.Training, f.name)
		default:
			n.Extras = append(n.Extras, f.name)
		}
	}
	for _, f := range modelDataArgsMeta.fields {
		switch {
		case sftHelp[f.name] != "" || f.name == "packing_strategy":
			n.SFT = append(n.SFT, f.name)
		case f.name == "use_peft" || f.name == "adapter_name_or_path" || f.name == "use_rslora" ||
			f.name == "use_dora" || len(f.name) > 5 && f.name[:5] == "lora_":
			n.PEFT = append(n.PEFT, f.name)
		default:
			n.ModelData = append(n.ModelData, f.name)
		}
	}
	return n
}

// modelDataUsage is the usage of a model/data argument's flag: sftHelp's, else modelDataHelp's.
func modelDataUsage(name string) string {
	if u := sftHelp[name]; u != "" {
		return u
	}
	return modelDataHelp[name]
}
