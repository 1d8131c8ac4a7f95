package models

// layerClasses maps config.json's model_type to the class name of the model's repeated
// transformer layer in Hugging Face transformers: what fsdp_config's transformer_layer_cls_to_wrap
// names (accelerate looks it up by that name in the model).
var layerClasses = map[string]string{
	"gpt2":        "GPT2Block",
	"llama":       "LlamaDecoderLayer",
	"bert":        "BertLayer",
	"qwen3":       "Qwen3DecoderLayer",
	"gemma3_text": "Gemma3DecoderLayer",
	"gemma3":      "Gemma3DecoderLayer",
}

// LayerClass returns the HF class name of cfg's transformer layer ("GPT2Block",
// "LlamaDecoderLayer", …), or "" for a model type gotpu does not know.
func LayerClass(cfg Config) string {
	if cfg == nil {
		return ""
	}
	return layerClasses[cfg.ModelType()]
}
