// Package qwen3 is Hugging Face's Qwen3ForCausalLM (model_type "qwen3", the dense Qwen3 models):
// Llama's decoder with a per-head RMSNorm on queries and keys.
//
// # Architecture
//
// Token embeddings (no scale); per layer a pre-norm attention block and a pre-norm SiLU-gated MLP
// (no MLP biases), each added to the residual stream; a final RMSNorm; lm_head, tied to the
// embeddings when tie_word_embeddings. Every RMSNorm normalises in float32 and multiplies by its
// weight w (not 1 + w) after casting back, in HF's order, with rms_norm_eps from config.json.
//
// Attention: q/k/v/o_proj (biases when attention_bias), grouped-query heads (query head j reads
// key/value head j / (heads / kv_heads)), then q_norm and k_norm — RMSNorms with one [head_dim]
// weight shared by all heads, over each head's last axis — applied BEFORE the rotary embedding
// (rotate_half, rope_theta; default or linear scaling), scores scaled by head_dim^-0.5, softmax
// in float32. With use_sliding_window, sliding_attention layers (layer_types, or from
// max_window_layers on) see keys q - sliding_window < k <= q, in the full forward pass and in the
// KV-cache decoding alike.
//
// # Config
//
// ParseConfig reads transformers 4.5x files (rope_theta, rope_scaling, dtype or torch_dtype) and
// transformers 5 files (rope_parameters). Qwen3Config's defaults hold for absent fields, and two
// of them are not what Llama's would be: head_dim defaults to 128 (never hidden_size /
// num_attention_heads) and num_key_value_heads to 32 (an explicit null means the head count).
// sliding_window counts only with use_sliding_window, as HF stores it. Errors name the file and
// field: unknown or mis-sized layer_types, a sliding_attention layer without a window, a null
// head_dim, rope types other than default and linear, partial rotary factors. A head_dim that the
// weights contradict is a shape error naming the tensor and where head_dim came from.
//
// # Weights
//
// Table is the explicit HF name table in state-dict order. Load accepts Qwen3ForCausalLM names and
// bare Qwen3Model files, drops rotary inv_freq buffers, and refuses missing tensors (a Llama or
// Qwen2 file has no q_norm/k_norm) and unexpected ones, naming the file and tensor. HF Trainer's
// decay groups: every norm weight (q_norm/k_norm included) and every bias has NoDecay. The
// pad_token_id embedding row is zeroed at initialisation and gets no gradient from the lookup
// (nn.Embedding's padding_idx).
//
// Errors name the file and tensor or field; graph building panics and the exported functions
// recover. No package state.
package qwen3
