package gocorpus

import (
	"fmt"

	"github.com/gotpu/gotpu/models"
)

// CheckModel tells whether a loaded model can take the data: it must be a causal LM with at
// least vocab rows (ModelVocabSize of the data's map) and blockSize positions. name (its
// directory, or the flag that named it) begins the error; a vocabulary too small for the ids
// points at a missing VocabFile, the usual cause.
func CheckModel(name string, m models.Model, vocab, blockSize int) error {
	lm, ok := m.(models.CausalLM)
	switch {
	case !ok:
		return fmt.Errorf("%s: %s is not a causal LM", name, m.Architecture())
	case lm.VocabSize() < vocab:
		return fmt.Errorf("%s: vocab_size %d is smaller than the %d ids the data uses (no %s there to map the tokenizer's ids)",
			name, lm.VocabSize(), vocab, VocabFile)
	case lm.MaxPositions() < blockSize:
		return fmt.Errorf("-block_size %d is longer than the model's %d positions", blockSize, lm.MaxPositions())
	}
	return nil
}
