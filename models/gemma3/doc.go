// Package gemma3 implements Hugging Face's Gemma3ForCausalLM (model_type "gemma3_text"), the text
// model of Gemma 3, with the semantics of transformers 4.57 and 5.x:
//
//   - embeddings scaled by sqrt(hidden_size), the scale rounded to the weights' dtype (EmbedScale);
//     the tied lm_head is not scaled; the padding_idx (pad_token_id) row gets no gradient from the
//     lookup, only from the tied head;
//   - Gemma RMSNorm x * rsqrt(mean(x^2) + eps) * (1 + w), computed in float32 and cast back;
//     four norms per layer (input, post_attention, pre_feedforward, post_feedforward) and
//     per-head q_norm / k_norm (one [head_dim] weight) before RoPE;
//   - grouped-query attention with scores scaled by query_pre_attn_scalar^-0.5 (not head_dim);
//   - interleaved layer types: layer_types when given, else sliding_window_pattern read from that
//     key only (default 6; layer i is full_attention iff (i + 1) % pattern == 0 —
//     _sliding_window_pattern, which save_pretrained writes, does not set it); sliding_attention
//     layers see keys q - sliding_window < k <= q and use rope_local_base_freq unscaled,
//     full_attention layers rope_theta with rope_scaling (default or linear); transformers 5's
//     per-layer-type rope_parameters are read and written back in that form;
//   - GeGLU MLP down(gelu_pytorch_tanh(gate(x)) * up(x));
//   - final_logit_softcapping (tanh(logits / c) * c) before the loss when set;
//     attn_logit_softcapping is kept in the config but not applied, as HF's Gemma 3 does not;
//   - HF's shifted causal-LM loss; a KV cache whose sliding layers mask by absolute position, so
//     generation past the window equals a full recomputation.
//
// Table lists the parameters in HF's state-dict order with HF Trainer's decay groups: no weight
// decay on biases or on any norm weight (q_norm/k_norm included). A directory of
// Gemma3ForConditionalGeneration (model_type "gemma3") loads as the Gemma3ForCausalLM of its
// text_config: the language model's tensor names map one to one (prefix "language_model.model."
// before transformers 4.52, "model.language_model." since), the vision tower and the projector
// are dropped with a log line, and Save writes a text-only Gemma3ForCausalLM directory.
//
// Unsupported settings (use_bidirectional_attention, rope types other than default/linear,
// partial rotary factors, unknown layer types, non-positive soft-caps, a missing head_dim where
// Gemma3TextConfig's default 256 differs from hidden_size / num_attention_heads) are errors
// naming the config file and field; missing, unexpected or misshapen tensors are errors naming
// the weights file and tensor. Graph building panics and the exported functions recover. No
// package state.
package gemma3
