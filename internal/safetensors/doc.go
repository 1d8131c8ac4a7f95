// Package safetensors reads and writes the safetensors format that Hugging Face model directories use
// (model.safetensors and its shards).
//
// A file is: an unsigned 64-bit little-endian header length N, N bytes of UTF-8 JSON, and the data
// buffer. The JSON maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets
// relative to the data buffer, row-major little-endian data) and may hold a "__metadata__" object of
// string to string.
//
// # Reading
//
// Open maps the file into memory (mmap on Unix, a positioned-read fallback elsewhere) and validates
// the header before returning. The reader is deliberately stricter than Hugging Face's Rust reader,
// which it otherwise follows: it rejects a header over MaxHeaderSize or with more than MaxTensors
// tensors (counted before the header is decoded, so a maximal header is parsed in memory
// proportional to its size), a header that is not valid
// UTF-8 or not a JSON object (including `null`), duplicate keys (tensor names or metadata keys,
// which encoding/json would silently collapse), empty names, unknown dtypes, unknown fields in a
// tensor entry, negative or fractional numbers, shapes whose byte size overflows or does not match
// the offsets, and offsets that leave gaps, overlap, or do not end exactly at the end of the file.
// Tensor names are data, never file paths: nothing in this package opens a file named after one.
//
// Tensor bytes returned by File.Bytes alias the mapping when the file is mapped and stay valid until
// Close; callers copy what they keep. Truncating a mapped file while it is open is undefined (the
// kernel may deliver SIGBUS), as with any mmap-based reader.
//
// # Writing
//
// Write produces the bytes the Rust library's serialize produces: "__metadata__" first, tensors in
// descending dtype alignment then ascending name, compact JSON with serde_json's string escaping, the
// header padded with spaces to a multiple of 8 bytes. Metadata keys are written sorted (the Rust
// library writes its HashMap in arbitrary order), so output is deterministic. Tensor data can be
// supplied lazily (Tensor.Load) so a large checkpoint is written one tensor at a time.
//
// # Errors
//
// Errors name the file (when known) and the tensor or field at fault and wrap ErrInvalid,
// ErrUnknownDType or ErrTruncated, so callers can classify them with errors.Is.
//
// # Concurrency
//
// A File is safe for concurrent reads (Bytes, Info, Names) but Close must not race with them.
// Write and WriteFile have no shared state.
package safetensors
