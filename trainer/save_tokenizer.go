package trainer

import (
	"fmt"

	"github.com/gotpu/gotpu/checkpoint"
)

// generationConfigFile is save_pretrained's generation_config.json.
const generationConfigFile = "generation_config.json"

// generationConfigSource is a model that knows the generation_config.json it was loaded with
// (every architecture of package models; a PEFT adapter does not, and PEFT's save_pretrained
// writes none either).
type generationConfigSource interface{ GenerationConfig() []byte }

// saveTokenizer writes Options.Tokenizer into dir, beside the model SaveModel wrote (HF's
// Trainer._save: processing_class.save_pretrained(output_dir)); also beside a LoRA adapter.
func (t *Trainer) saveTokenizer(dir string) error {
	if t.tokenizer == nil {
		return nil
	}
	if err := t.tokenizer.Save(dir); err != nil {
		return fmt.Errorf("trainer: %s: %w", dir, err)
	}
	return nil
}

// checkpointExtras are the files a checkpoint holds beside the model, optimizer and state, as
// HF's _save_checkpoint writes them through save_pretrained: the tokenizer's files and the
// model's generation_config.json when it came with one. Resuming reads none of them;
// load_best_model_at_end loads the best checkpoint as a model directory, generation config
// included.
func (t *Trainer) checkpointExtras() []checkpoint.File {
	var out []checkpoint.File
	if g, ok := t.model.(generationConfigSource); ok && g.GenerationConfig() != nil {
		out = append(out, checkpoint.File{Name: generationConfigFile, Data: g.GenerationConfig()})
	}
	for _, f := range t.tokenizer.List() {
		out = append(out, checkpoint.File{Name: f.Name, Data: f.Data})
	}
	return out
}
