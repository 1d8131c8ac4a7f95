// Package data is gotpu's input side: datasets, collators, deterministic sampling and sharding,
// and the pipelined loader that keeps devices fed (torch_xla's MpDeviceLoader). Tokenizers equal
// to Hugging Face's live in the subpackage tokenizer.
//
// Datasets are random access (Dataset); large JSON-lines files are indexed once (8 bytes a line)
// and read line by line, never loaded whole. A line (a document, an example) may not exceed 256
// MiB, found while streaming, before it is held; OpenJSONLWith also counts each line's
// input_ids, attention_mask, token_type_ids and labels while indexing and refuses one longer
// than the model takes (JSONLOptions.MaxSeqLength: n_positions), naming the file, line and
// field, before the line is decoded. Examples use HF's column names (input_ids,
// attention_mask, token_type_ids, labels).
//
// Datasets larger than RAM live on disk, as HF datasets keeps its Arrow cache. A TokenStore is
// written once by a TokenStoreBuilder (rows streamed from data/table's Parquet, Arrow, CSV or
// JSON scans, or from anything else) into one file of versioned, checksummed little-endian
// records, and keeps only where each record starts (8 bytes an example); Get reads one record
// with one ReadAt, so memory is bounded by the batches in flight, not the dataset. GroupTexts'
// TokenBlocks hold up to GroupOptions.MaxMemoryTokens (8 Mi by default) in memory and spill the
// whole token stream to a file past that, with the same blocks bit for bit. Both files are
// unlinked as soon as they are created where the OS allows (a crash leaves nothing behind) and
// removed by Close. Bad rows (empty, longer than StoreOptions.MaxSeqLength, arrays of unequal
// lengths) are refused as they are added, naming the source, the row and the field; a truncated
// or altered file is an error naming the row, found from the record's length and checksum before
// anything is allocated from it. Get on either is safe from any number of goroutines.
//
// Sampling is deterministic: the order of an epoch depends only on the seed and the epoch, and
// global batch b of epoch e is the same on any number of devices and hosts; each replica takes a
// contiguous, disjoint shard of it (Shard). A last incomplete batch is completed from the start of
// the epoch's order (accelerate's even_batches) unless DropLast, so every step has one shape.
// Collators pad to a declared set of shapes and ShapeBudget refuses any other: a new shape is a
// new compiled program, never a silent one.
//
// Packing (TRL's packing=True, packing_strategy="bfd"): PackBFD puts whole examples into rows of at
// most max_length tokens, best-fit decreasing with TRL's order and tie-breaking, truncating longer
// examples and skipping empty ones as TRL does (PackStats counts both). A row's position_ids
// restart at 0 per example; CausalLMCollator keeps them and ignores the label where each example
// after the first starts, and the causal models attend block-diagonally from them, so packed
// examples never see each other. Position ids travel through ParseExample (position_ids) and the
// TokenStore. A packed run packs every row (PackBFD gives every row position ids): a batch without
// them is another program.
//
// Loader prepares up to PrefetchFactor global batches ahead on its own worker goroutines (reading
// and collating) while the step runs; with LoaderConfig.Transfer a device stage, one goroutine
// taking the workers' batches in order, moves each to the devices and keeps up to DevicePrefetch
// of them waiting there (torch_xla's device_prefetch_size), so batch n+1 is on the device before
// step n ends; Close releases (LoaderConfig.Release) those never returned. The package knows
// nothing of devices: Transfer and Release are the caller's.
// Its position (State) is saved with checkpoints and restores exactly. Errors in preparing a batch
// are returned by the Next that would have returned that batch. Concurrency: Next from one
// goroutine; Close stops and waits for all the loader's goroutines; Stats and State may be read
// at any time.
package data
