// Package data holds gotpu's input side: tokenizers equal to Hugging Face's (subpackage tokenizer),
// and, per the data issue, datasets, collators, per-replica sharding and a pipelined device loader.
package data
