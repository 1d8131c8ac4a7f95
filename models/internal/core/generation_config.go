package core

// GenerationConfig returns generation_config.json as the model was loaded with it (nil if it had
// none), the bytes Save writes back: the trainer writes them into checkpoints too, as
// save_pretrained does in HF's Trainer._save_checkpoint.
func (b *Base) GenerationConfig() []byte { return b.Generation }
