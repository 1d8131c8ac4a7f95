package sft

import (
	"fmt"
	"slices"
	"strings"
)

// Packing strategies, TRL's SFTConfig.packing_strategy values.
const (
	StrategyBFD      = "bfd"
	StrategyBFDSplit = "bfd_split"
	StrategyWrapped  = "wrapped"
)

// Strategies lists the packing strategies Prepare implements.
var Strategies = []string{StrategyBFD, StrategyBFDSplit, StrategyWrapped}

// DefaultMaxLength is TRL's SFTConfig.max_length default.
const DefaultMaxLength = 1024

// Config holds the data arguments of TRL's SFTConfig, with its names and defaults.
type Config struct {
	// DatasetTextField is the column of language-modelling text (dataset_text_field, "text").
	DatasetTextField string
	// MaxLength truncates examples (keeping the start) when not packing, and is the packed row
	// length when packing (max_length, 1024). 0 is TRL's None: no truncation.
	MaxLength int
	// Packing packs examples into rows of MaxLength tokens with PackingStrategy ("bfd").
	Packing         bool
	PackingStrategy string
	// PaddingFree is TRL's padding_free. gotpu batches always have one static shape, so it takes
	// effect only with packing (where "bfd" implies it anyway: positions restart per example and
	// the label where an example starts is not trained).
	PaddingFree bool
	// CompletionOnlyLoss trains only on the completion of prompt–completion data; nil is TRL's
	// default: true for prompt–completion data, false otherwise (where it cannot apply and is
	// ignored, as in TRL).
	CompletionOnlyLoss *bool
	// AssistantOnlyLoss trains only on the tokens of the chat template's {% generation %}
	// blocks; conversational data only, with a template that has them.
	AssistantOnlyLoss bool
	// EOSToken is appended to text and string completions that do not end with it; "" means
	// the tokenizer's (the caller resolves it: TokenizerConfig.EOSToken).
	EOSToken string
	// PadToken pads batches; "" means the tokenizer's pad token, else its EOS (ResolvePad).
	PadToken string
	// ChatTemplatePath is where the chat template comes from (read by LoadChatTemplate): a
	// .jinja/.j2 file, a tokenizer_config.json, or a directory holding one; "" means the
	// tokenizer's own.
	ChatTemplatePath string
}

// DefaultConfig returns TRL's SFTConfig defaults.
func DefaultConfig() Config {
	return Config{DatasetTextField: "text", MaxLength: DefaultMaxLength, PackingStrategy: StrategyBFD}
}

// Validate checks the configuration as SFTConfig and SFTTrainer.__init__ do, naming the field.
func (c Config) Validate() error {
	if c.DatasetTextField == "" {
		return fmt.Errorf("dataset_text_field: empty: name the column that holds the text")
	}
	if c.MaxLength < 0 {
		return fmt.Errorf("max_length: %d is negative (0 means no truncation)", c.MaxLength)
	}
	if !slices.Contains(Strategies, c.PackingStrategy) {
		return fmt.Errorf("packing_strategy: %q is not one of %s", c.PackingStrategy, strings.Join(Strategies, ", "))
	}
	if c.Packing && c.MaxLength == 0 {
		// TRL: "When packing is enabled, `max_length` can't be `None`."
		return fmt.Errorf("max_length: packing needs a row length; set max_length above 0")
	}
	if c.PaddingFree && !c.Packing {
		if c.MaxLength > 0 {
			// TRL's own refusal, word for word in substance.
			return fmt.Errorf("padding_free: without packing, max_length (%d) is not enforced; enable packing, or set max_length to 0 (None)", c.MaxLength)
		}
		// TRL would flatten each batch into one sequence of whatever length it has: a new
		// compiled program per distinct length here, which gotpu never does silently.
		return fmt.Errorf("padding_free: without packing is not supported by gotpu (a flattened batch has a data-dependent length, a new compiled program each time); use packing (bfd implies padding-free)")
	}
	return nil
}

// completionOnly is TRL's resolution of completion_only_loss for a dataset whose first row is
// (or is not) prompt–completion.
func (c Config) completionOnly(promptCompletion bool) bool {
	if c.CompletionOnlyLoss == nil {
		return promptCompletion
	}
	return *c.CompletionOnlyLoss
}
