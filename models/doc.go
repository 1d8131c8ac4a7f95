// Package models loads, runs, trains-through and saves Hugging Face model directories: config.json
// plus model.safetensors, or shards model-0000i-of-0000N.safetensors with
// model.safetensors.index.json. Pickle weights (pytorch_model.bin) are refused with an error that
// says how to convert them.
//
// # Architectures
//
// One package per architecture, each with its config (parsed from config.json with HF's class
// defaults; unknown fields are kept and written back), its graph (GoMLX, HF's formulas: attention
// scaled by 1/sqrt(head_dim), LayerNorm/RMSNorm epsilons from config.json, RMSNorm and softmax and
// losses in float32) and an explicit table from HF tensor names to variables:
//
//   - gpt2: GPT2LMHeadModel (Conv1D [in, out] weights, fused c_attn, learned positions, tied head).
//   - llama: LlamaForCausalLM, MistralForCausalLM (sliding window), Qwen2ForCausalLM (q/k/v
//     biases): RMSNorm, rotary embeddings (default, linear and llama3 scaling; rope_parameters of
//     transformers 5), grouped-query attention, SiLU-gated MLP, tied or untied head.
//   - bert: BertForSequenceClassification and the bare BertModel (post-LN, erf GELU, token types,
//     padding mask, tanh pooler, classifier with regression / single- / multi-label losses).
//   - qwen3: Qwen3ForCausalLM: Llama's layout plus q_norm/k_norm (one [head_dim] RMSNorm weight
//     shared by all heads, before RoPE), explicit head_dim (Qwen3Config's default 128, not
//     hidden/heads), default or linear rope, sliding-window layers when use_sliding_window.
//   - gemma3: Gemma3ForCausalLM (gemma3_text): embeddings scaled by sqrt(hidden_size) in the
//     weights' dtype, (1 + w) RMSNorm in float32 with four norms per layer plus q_norm/k_norm,
//     scores scaled by query_pre_attn_scalar^-0.5, GeGLU (tanh GELU), interleaved sliding and
//     global layers with their own RoPE bases, final-logit soft-capping, tied head; the text model
//     of a Gemma3ForConditionalGeneration checkpoint loads as a Gemma3ForCausalLM.
//
// Load picks the architecture from model_type and architectures; ParseConfig and New build a
// randomly initialised model from a config (HF's _init_weights distributions, seeded).
//
// # The Model interface
//
// A Model keeps its parameters in a GoMLX context: HF tensor "transformer.h.0.attn.c_attn.weight"
// is variable "weight" in scope "/transformer/h/0/attn/c_attn". Params lists them in HF's
// state-dict order with shapes and HF Trainer's weight-decay groups (NoDecay: biases and
// LayerNorm/RMSNorm weights). Forward builds logits and HF's loss (causal LMs shift labels inside
// and ignore -100; classifiers use cross-entropy, MSE for num_labels == 1) for a Batch of graph
// nodes; Batch.Training turns on dropout with config.json's probabilities. Save writes the same
// directory layout back. CausalLM adds KV-cache decoding, SequenceClassifier the label count.
//
// # Packed sequences
//
// Batch.PositionIDs ([batch, seq], from data.PackBFD and data.CausalLMCollator; TRL's packing and
// padding-free position_ids) holds several examples per row, each restarting at position 0. Every
// causal architecture then embeds each token at its own position (RoPE per token with Llama's,
// Qwen3's and Gemma 3's local and global bases; GPT-2's wpe gathered at the ids) and attends
// block-diagonally: query i sees key j when j <= i, j is not padding and both belong to the same
// example — i - position[i] == j - position[j], constant along an example and distinct between
// examples — with sliding windows applied inside an example; every query also sees itself, so no
// softmax row is empty. Each example's logits, loss and gradients are then those of the example
// alone (TestPackedEqualsAlone: logits equal, loss within 1e-6). BERT refuses position ids (it is
// not a causal LM); KV-cache decoding takes none.
//
// # Naming written
//
// GPT-2 is saved with the "transformer." prefix (what GPT2LMHeadModel.save_pretrained writes);
// the unprefixed hub naming of the original "gpt2" checkpoint is accepted on load. Tied lm_head
// weights are never written. Llama-family and BERT models use their *For* class names.
//
// # Loading policy
//
// Missing tensors, unexpected tensors, shape mismatches with config.json and non-float dtypes are
// errors naming the file and tensor. Known non-parameters are dropped: GPT-2 attn.bias/masked_bias
// mask buffers, Llama rotary inv_freq buffers, BERT position_ids (debug log), and BERT
// pretraining heads cls.* (info log, as HF warns). A tied lm_head.weight present in a file must
// equal the embedding. Weights go from the (memory-mapped) file straight into device buffers,
// converted per tensor; LoadOptions.DType "" gives float32 variables (master weights for bf16/f16
// files), "auto" keeps the file's dtype.
//
// # Saving
//
// Save writes safetensors laid out as the Rust library does (metadata {"format": "pt"}), splits
// above SaveOptions.MaxShardSize with huggingface_hub's rule (a tensor larger than the limit gets
// its own shard), writes the index with total_size, removes stale weight files of an earlier
// save, and round-trips bit-exactly: save, load, save gives identical bytes.
//
// Every file is written with gotpu's one file policy (internal/atomicfile), the same as for
// checkpoints: to a temporary file in the directory, fsynced, renamed over the final name, then
// the directory fsynced (also after stale files are removed), so a crash leaves each file old or
// new, never partial. Files are created with mode 0666 and directories with 0777, less the
// process's umask (umask 022: 0644 and 0755; umask 077: 0600 and 0700), as Python's
// save_pretrained does; nothing is chmod-ed afterwards and there is no mode option.
//
// # LoRA
//
// Every architecture builds its linear layers with core.Proj / core.ConvProj under their HF module
// names and lists them (Adaptable.LinearLayers), so models/peft can attach a PEFT LoRA adapter to
// any of them: the adapter's branch is added inside those layers for every graph the adapted model
// builds. An adapted model is Frozen (the base weights train nothing) and SavedForm (its
// checkpoints hold adapter_model.safetensors + adapter_config.json).
//
// # Scoring and generation
//
// ScoreJSONLines scores JSON-lines examples (HF losses, optional logits file); Generate decodes
// greedily or by sampling (temperature, top-k, top-p, repetition penalty) with a KV cache.
//
// # Resource limits
//
// Every dimension of a config.json has a limit (MaxLayers, MaxWidth, MaxVocab, MaxPositions,
// MaxLabels: far above published models) checked before an architecture parses it, and
// EstimateFootprint computes a config's parameter count, Adafactor state and activation sizes from
// the dimensions alone, in overflow-checked int64 (exact: it equals the built model's Params()).
// New and Load refuse, before anything is mapped or allocated, a model whose parameters do not
// fit in the host's available memory on the pure-Go backend (on a PJRT device, whose free memory
// the plugin does not report, only the host staging of the largest tensor is checked). Errors
// wrap ErrTooLarge and name the file and field.
//
// # Errors and concurrency
//
// Errors wrap the cause with %w and name the file and the tensor or config field. Graph building
// reports errors by panicking (GoMLX's convention); every exported function here recovers them
// with xla.Recover. A Model may be used by one graph build at a time; executing compiled graphs
// concurrently is safe. Nothing here keeps global mutable state.
package models
