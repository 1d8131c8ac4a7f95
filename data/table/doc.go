// Package table reads the dataset files the Hugging Face Hub serves, as the datasets library's
// loaders read them, streaming: Parquet (by row group), Arrow (the IPC file format, the IPC
// stream format that datasets writes in its cache, and save_to_disk directories of a Dataset or
// a DatasetDict), CSV, JSON (JSON lines, or one top-level array of objects) and text (one row a
// line). Open reads a file's schema (and, for Parquet and Arrow, its row count from the metadata
// alone); ScanStrings and ScanIntLists stream one string column or a few integer-list columns
// (input_ids, attention_mask, labels, ...) in row order, one row group / record batch / record
// at a time, so memory is about one batch, never the file. Parquet batches aim at 2 MiB decoded,
// sized from the rows already decoded (the metadata's sizes are those of the encoded pages, which
// dictionaries, DELTA_BYTE_ARRAY prefixes and run-length levels can make thousands of times
// smaller), each held to a budget charged before arrow-go allocates; dictionary-encoded string
// columns are read as dictionaries. The package stands apart from data (which imports it) and
// knows nothing of tokenizers.
//
// Semantics follow datasets: a CSV header names the columns, an empty cell is null (pandas'
// other spellings of missing values, "NA" and the like, are not honoured: cells are read as they
// are) and int lists are cells like "[1, 2, 3]" as to_csv writes them; JSON columns are the keys
// of the first object; text rows are lines with "\n", "\r\n" or "\r" stripped, empty lines
// included; save_to_disk shards are read in the order of state.json's _data_files.
//
// Errors: every error names the file (the shard of a save_to_disk directory), and the row and
// column where one applies; errors.Is tells the kinds apart: ErrNoColumn (the message lists the
// columns there are), ErrType, ErrRange (a token id outside int32), ErrTooLarge (a cell beyond
// Options.MaxCellBytes, a record beyond MaxRecordBytes or MaxRecordFields, JSON nested deeper than
// 1,000 levels, or a size the file claims beyond what it could hold), ErrCorrupt, ErrSplit (the
// message lists the splits). Corrupt input never crashes the process or allocates without bound:
// IPC flatbuffers are verified before arrow-go reads them (arrow-go trusts their vector lengths),
// Parquet pages and IPC bodies are bounded by the file, every buffer arrow-go allocates goes
// through an allocator that refuses one beyond the limits, Parquet's snappy and zstd pages decode
// only into their declared size (the package registers bounded versions of arrow-go's two codecs at
// init: codecs.go says why), a CSV record or JSON line is refused while it is read (its bytes and
// its fields), and a panic inside arrow-go on corrupt data is recovered at this package's edge and
// returned as an ErrCorrupt error naming the file. A panic of the caller's callback is not this
// package's: it propagates unchanged.
//
// Concurrency: a Table is immutable after Open; any number of scans may run on it at once, from
// any goroutines, each opening its own file handles. Scans start no goroutines; they stop at the
// first error, when the callback returns one, or when the context is done (checked every 64
// rows and every batch). Close makes later scans fail; it does not wait for running ones.
package table
