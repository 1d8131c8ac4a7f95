package models

import (
	"github.com/gotpu/gotpu/models/bert"
	"github.com/gotpu/gotpu/models/gpt2"
	"github.com/gotpu/gotpu/models/llama"
)

// Compile-time checks that every architecture satisfies the interfaces.
var (
	_ CausalLM           = (*gpt2.Model)(nil)
	_ CausalLM           = (*llama.Model)(nil)
	_ SequenceClassifier = (*bert.Model)(nil)
)
