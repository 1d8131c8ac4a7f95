// Package llama implements Hugging Face's LlamaForCausalLM, and MistralForCausalLM and
// Qwen2ForCausalLM, which share its architecture: RMSNorm (float32, HF's cast order), rotary
// embeddings with rotate_half and rope_theta (default, linear and llama3 scaling; transformers-5
// rope_parameters), grouped-query attention, sliding windows (Mistral, Qwen2 layer_types),
// SiLU-gated MLP, tied or untied lm_head, and HF's shifted causal-LM loss. Unsupported features
// (rope types yarn/dynamic/longrope, partial rotary factors, unknown layer types) are errors
// naming the config field.
//
// Errors name the file and tensor or field; graph building panics and the exported functions
// recover. No package state.
package llama
