// Package bert implements Hugging Face's BertForSequenceClassification and the bare BertModel:
// word + token-type + absolute position embeddings, post-LN encoder layers with exact (erf) GELU,
// the padding attention mask, the tanh pooler and the classifier with HF's loss by problem_type
// (MSE for one label, cross-entropy for integer labels, BCE for multi-label). num_labels is
// len(id2label), else num_labels/_num_labels, else 2, as PretrainedConfig has it.
//
// On load, TF-era LayerNorm gamma/beta names are renamed, the position_ids buffer is dropped and
// pretraining heads (cls.*) are dropped with a log line. Errors name the file and tensor or field;
// graph building panics and the exported functions recover. No package state.
package bert
