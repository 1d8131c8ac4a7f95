package trainer

import (
	"fmt"
	"strings"

	"github.com/gotpu/gotpu/data/sft"
)

// sftHelp is the usage text of the model/data arguments that have one: TRL SFTConfig's data
// arguments, with TRL's defaults.
var sftHelp = map[string]string{
	"dataset_text_field": `TRL SFT: column of language-modeling text (default "text"); selects TRL's SFT data preparation (else run_clm's)`,
	"max_length": "TRL SFT: truncate examples to this many tokens, keeping the start; the packed row length with --packing " +
		"(default 1024; 0 = no truncation, TRL's None); selects TRL's SFT data preparation (else run_clm's)",
	"packing":          "TRL SFT: pack whole examples into rows of --max_length tokens (positions restart per example); selects TRL's SFT data preparation (else run_clm's)",
	"packing_strategy": "TRL SFT: bfd (best-fit decreasing, overlong examples truncated), bfd_split (overlong examples split) or wrapped (cut every max_length tokens); default bfd",
	"padding_free":     "TRL SFT: padding-free batches; gotpu supports it with --packing only (bfd implies it)",
	"completion_only_loss": "TRL SFT: train only on the completion of prompt-completion data " +
		"(default: true for prompt-completion data, false otherwise); selects TRL's SFT data preparation (else run_clm's)",
	"assistant_only_loss": "TRL SFT: train only on the assistant's tokens, the chat template's {% generation %} blocks " +
		"(conversational data; the template must have them); selects TRL's SFT data preparation (else run_clm's)",
	"eos_token":          "TRL SFT: token appended to text and string completions (default: the tokenizer's eos_token)",
	"pad_token":          "TRL SFT: padding token (default: the tokenizer's pad_token, else its eos_token)",
	"chat_template_path": "TRL SFT: chat template: a .jinja/.j2 file, or a tokenizer (tokenizer_config.json or its directory) to take it from (default: the tokenizer's)",
}

// SFTOnlyFlags are the SFT arguments whose presence alone asks for TRL's SFT data preparation
// (gotpu train uses run_clm's otherwise, unless the data is conversational or
// prompt-completion).
var SFTOnlyFlags = []string{"packing", "assistant_only_loss", "completion_only_loss", "dataset_text_field", "max_length"}

// SFTRequested lists the SFT-only arguments that are set (SFTOnlyFlags, in that order).
func (m *ModelDataArguments) SFTRequested() []string {
	var set []string
	for _, f := range []struct {
		name string
		on   bool
	}{
		{"packing", m.Packing != nil}, {"assistant_only_loss", m.AssistantOnlyLoss != nil},
		{"completion_only_loss", m.CompletionOnlyLoss != nil}, {"dataset_text_field", m.DatasetTextField != nil},
		{"max_length", m.MaxLength != nil},
	} {
		if f.on {
			set = append(set, f.name)
		}
	}
	return set
}

// SFTConfig converts the SFT arguments to an sft.Config over TRL's defaults and validates it;
// an error names the flag. EOSToken and PadToken stay "" when not given (the tokenizer's,
// resolved by the caller).
func (m *ModelDataArguments) SFTConfig() (sft.Config, error) {
	c := sft.DefaultConfig()
	if m.DatasetTextField != nil {
		c.DatasetTextField = *m.DatasetTextField
	}
	if m.MaxLength != nil {
		c.MaxLength = *m.MaxLength
	}
	if m.Packing != nil {
		c.Packing = *m.Packing
	}
	if m.PackingStrategy != nil {
		c.PackingStrategy = *m.PackingStrategy
		if c.PackingStrategy == "bfd-requeue" {
			c.PackingStrategy = sft.StrategyBFDSplit // TRL's deprecated name for it
		}
	}
	if m.PaddingFree != nil {
		c.PaddingFree = *m.PaddingFree
	}
	if m.CompletionOnlyLoss != nil {
		v := *m.CompletionOnlyLoss
		c.CompletionOnlyLoss = &v
	}
	if m.AssistantOnlyLoss != nil {
		c.AssistantOnlyLoss = *m.AssistantOnlyLoss
	}
	if m.EOSToken != nil {
		c.EOSToken = *m.EOSToken
	}
	if m.PadToken != nil {
		c.PadToken = *m.PadToken
	}
	if m.ChatTemplatePath != nil {
		c.ChatTemplatePath = *m.ChatTemplatePath
	}
	if err := c.Validate(); err != nil {
		return sft.Config{}, fmt.Errorf("--%w", err)
	}
	return c, nil
}

// SFTOnlyArgs refuses the SFT arguments that would be ignored by a run that does not take the
// SFT path (run_clm's data: plain text without an SFT-only flag), naming them.
func (m *ModelDataArguments) SFTOnlyArgs() error {
	var set []string
	for _, f := range []struct {
		name string
		on   bool
	}{
		{"packing_strategy", m.PackingStrategy != nil}, {"padding_free", m.PaddingFree != nil}, {"eos_token", m.EOSToken != nil},
		{"pad_token", m.PadToken != nil}, {"chat_template_path", m.ChatTemplatePath != nil},
	} {
		if f.on {
			set = append(set, "--"+f.name)
		}
	}
	if set == nil {
		return nil
	}
	return fmt.Errorf("%s: SFT data preparation arguments, and this data takes run_clm's (plain text); "+
		"conversational or prompt-completion data, or one of --%s, selects SFT", strings.Join(set, ", "), strings.Join(SFTOnlyFlags, ", --"))
}
