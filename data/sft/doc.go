// Package sft prepares supervised fine-tuning data the way TRL's SFTTrainer does
// (SFTTrainer._prepare_dataset with the functions of trl/data_utils.py), in pure Go: rows of
// JSON objects in, tokenized data.Examples with loss labels out, ready for
// data.CausalLMCollator.
//
// Formats are told apart by a row's keys, as TRL does: language modelling (a string field,
// Config.DatasetTextField, "text" by default), conversational language modelling ("messages": a
// list of {"role", "content", ...}; ShareGPT's "conversations" of {"from", "value"} is converted
// as TRL's maybe_convert_to_chatml does), and prompt–completion ("prompt" and "completion",
// both strings or both message lists). Other keys are ignored, except "tools" and
// "chat_template_kwargs", which TRL passes to the chat template. TRL decides per dataset from
// its first row; Prepare takes the first row's format as the dataset's and refuses a later row
// of another format, and a row that mixes formats, naming the row.
//
// Tokenization follows TRL: text gets the EOS token appended when it does not already end with
// it and is tokenized with the tokenizer's special tokens (tokenizer(text)); a conversation is
// rendered with the chat template and tokenized without added special tokens
// (apply_chat_template(tokenize=True)); prompt–completion data is tokenized twice, the prompt
// alone (conversational: rendered with add_generation_prompt) and prompt+completion, and the
// tokens past the prompt's are the completion (a prompt whose tokens are not a prefix of the
// whole is counted and logged, as TRL warns). Labels are the input ids with data.IgnoreIndex
// outside the completion (completion_only_loss; default: on for prompt–completion data) and
// outside the template's {% generation %} blocks (assistant_only_loss).
//
// Then, as TRL: without packing, examples longer than max_length keep their first max_length
// tokens and examples left with no label to train on are dropped; with packing, the "bfd"
// strategy (data.PackBFDWithStats: whole examples, truncated to max_length, best-fit
// decreasing, positions restarting per example), "bfd_split" (overlong examples split into
// max_length pieces first) or "wrapped" (all tokens concatenated and cut every max_length),
// each over consecutive batches of 1000 examples, as datasets.map hands TRL's packer its rows.
//
// Bounds: rows come from readers that bound a row's size (MaxRowBytes); a conversation's
// render is bounded by data/chat; token counts are checked before a label array is made. Errors
// name the source, the row (1-based line for JSON lines, index for others) and the field.
package sft
