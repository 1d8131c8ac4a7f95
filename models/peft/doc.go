// Package peft is LoRA with Hugging Face PEFT's semantics and files: an adapter attached to a
// base model (New for a fresh one, Load for one PEFT or gotpu saved), trained while the base stays
// frozen, saved as adapter_config.json plus adapter_model.safetensors, and folded into the base
// weights by Merge (PEFT's merge_and_unload). The semantics follow huggingface/peft at commit
// 5d602fd (0.20.1.dev0), read from its source:
//
//   - Branch: y = base(x) + lora_B(lora_A(dropout(x))) · scaling, scaling = lora_alpha / r, or
//     lora_alpha / sqrt(r) with use_rslora; dropout on the branch's input only, in training.
//     lora_A is [r, in] and lora_B [out, r] for nn.Linear and GPT-2's Conv1D alike: the forward
//     never transposes; fan_in_fan_out (forced to the layer kind, as PEFT does) only transposes
//     the merged delta.
//   - Targets: target_modules as a list (a module matches an entry equal to its name or to a
//     dot-separated suffix of it), a string (a regular expression matching the whole name, as
//     re.fullmatch; RE2 syntax, at most MaxRegexBytes long and MaxRegexProgram instructions
//     compiled, and checked as it is matched, anchored),
//     the string "all-linear" in any case (every linear layer but the output head, and the
//     classifier for SEQ_CLS; saved expanded), or none (PEFT's per-architecture default: c_attn
//     for GPT-2, q_proj and v_proj for Llama-family models, query and value for BERT);
//     exclude_modules likewise. An entry that matches no linear layer is an error, not a
//     silently smaller adapter, and so is a list holding "all-linear", which PEFT reads as a
//     module's name (and fails on). A --lora_target_modules naming only all-linear is the string
//     form, as TRL passes it (CommandLineTargets).
//   - Hub adapters (ResolveAdapter, Load): adapter_config.json is fetched first, within
//     MaxConfigBytes, and adapter_model.safetensors only within what it implies on the base
//     (MaxWeightsBytes: r·(in+out) elements of 8 bytes per targeted matrix, and the header),
//     checked against the size the Hub announces before any byte is written.
//   - Names: tensors are saved as base_model.model.<module>.lora_A.weight (the adapter name
//     removed, as PEFT saves), float32, metadata {"format": "pt"}; the model's Params carry these
//     names, so checkpoints and optimizer state use them too.
//   - Init (init_lora_weights): true gives A Kaiming-uniform U(±1/sqrt(in)) and B = 0 (a no-op
//     at the start), false both uniform (B: U(±1/sqrt(r))), "gaussian" A ~ N(0, 1/r).
//   - Training: only the adapter is trained (models.Frozen): the step takes no gradients of the
//     base weights, keeps no optimizer state for them and checkpoints leave them out. Every
//     lora_A/lora_B tensor is in HF Trainer's weight-decay group. The base may be stored in
//     bfloat16 while the adapter stays float32: the branch computes in the adapter's dtype (or the
//     bf16 compute dtype under mixed precision) and is cast to the layer's output dtype.
//
// The branch is added inside the architectures' linear layers (core.Proj / core.ConvProj) through
// a graph parameter, so every graph the model builds — training, evaluation, KV-cache
// generation — sees the adapter, and every architecture of models supports it.
//
// Refused, with the field named: peft_type other than LORA, r ≤ 0, bias other than "none", DoRA,
// lora_bias, modules_to_save, layers_to_transform, rank/alpha patterns, and PEFT features that
// change the math (target_parameters, trainable tokens, ...). An adapter whose tensors do not fit
// the base model — an unknown layer, a wrong shape, a missing tensor — is an error naming the
// file and tensor. A pickled adapter_model.bin is refused with the conversion to use.
//
// Concurrency: a Model is used by one goroutine at a time, like the base model it wraps.
package peft
