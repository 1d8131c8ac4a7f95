// Package tokenizer is a pure-Go implementation of Hugging Face tokenizers:
// it loads a tokenizer.json and encodes and decodes exactly as the Rust
// `tokenizers` library does (ids, tokens, offsets, type ids, masks, word
// ids, decodes), so that a model trained or served with gotpu sees the same
// token ids as with transformers.
//
// # What it covers
//
// The pipeline mirrors Rust's TokenizerImpl: added tokens are extracted,
// the rest is normalized, pre-tokenized into words, each word is tokenized
// by the model, then a post-processor adds special tokens, with truncation
// and padding around it.
//
//   - Models: BPE (byte-level like GPT-2 and Qwen; SentencePiece-style with
//     byte_fallback like Llama and Mistral; ignore_merges,
//     continuing_subword_prefix, end_of_word_suffix, fuse_unk; dropout must
//     be null or 0), WordPiece, WordLevel, Unigram (Viterbi, fused unknown
//     pieces, byte fallback). Files without model.type (written before
//     tokenizers 0.9) are recognised by their fields.
//   - Normalizers: NFC, NFD, NFKC, NFKD, Lowercase, StripAccents,
//     BertNormalizer, Prepend, Replace, Strip, ByteLevel, Sequence.
//   - Pre-tokenizers: ByteLevel (with or without its regex), Split (string or
//     regex pattern, every behavior, invert), Whitespace, WhitespaceSplit,
//     BertPreTokenizer, Metaspace (prepend_scheme first/always/never, split),
//     Digits, Punctuation, CharDelimiterSplit, Sequence.
//   - Post-processors: TemplateProcessing, BertProcessing,
//     RobertaProcessing, ByteLevel, Sequence.
//   - Decoders: ByteLevel, WordPiece, Metaspace, ByteFallback, Fuse, Strip,
//     Replace, BPEDecoder, Sequence.
//   - Added tokens with single_word, lstrip, rstrip, normalized and special,
//     given ids the way the reference does (a token already in the model
//     vocabulary keeps its id; the others are numbered after it).
//
// Unicode data: normalization tables are generated from Unicode 14
// (internal/unorm/gen_tables.py, Python's unicodedata); character classes
// come from Go's unicode package (Unicode 15). The reference uses similar
// versions; characters assigned since could classify differently.
//
// Components this package does not implement (Precompiled and Nmt
// normalizers, UnicodeScripts pre-tokenizer, CTC decoder, BPE dropout) make
// loading fail with an error that wraps ErrUnsupported rather than encode
// differently.
//
// # Offsets
//
// Encoding.Offsets are [start, end) in Unicode code points of the input
// string, which is what the Python and Node bindings return
// (encode_char_offsets); Encoding.ByteOffsets are the same ranges in UTF-8
// bytes. Special tokens and padding have [0, 0]. The quirks of the reference
// are reproduced on purpose: a token covering part of a multi-byte
// character (byte-level BPE) gets the whole character's range, and byte
// fallback tokens of a character all get that character's range.
//
// # Conformance
//
// Two sets of reference outputs of Hugging Face tokenizers (npm
// tokenizers@0.23.2, the official binding of the Rust library) are checked
// by the tests, field by field: the shared vectors for five real tokenizers
// (gpt2, bert-base-uncased, mistral-7b, qwen3, unigram-synthetic; 349
// strings with and without special tokens, decodes, 12 pairs), and variant
// vectors for 29 tokenizers built from them (testdata/tokenizers/variants)
// that exercise every component listed above, added-token options,
// truncation with stride and overflow, and padding.
//
// Behaviours of the reference that the variants pinned down, reproduced
// here: with truncation, each sequence the strategy may cut is first reduced
// to whole pre-tokenized words holding at least max_length tokens (the rest
// is never tokenized, and word ids count from the first word kept); the
// overflowing windows then combine as Encoding::merge_with combines them,
// nested; for an added token matched on normalized text, Decode and
// IDToToken give its normalized content (and skipSpecialTokens compares
// that string with the special tokens' contents); StripAccents removes all
// combining marks while BertNormalizer removes nonspacing ones only. Where
// the reference panics (a stride not below the room left by truncation, a
// Strip decoder on an empty string), this package returns an error or an
// empty string.
//
// # Regular expressions
//
// Split pre-tokenizers and Replace normalizers use Oniguruma patterns, and
// the ones real tokenizers ship need lookahead (GPT-2's `\s+(?!\S)`),
// Unicode classes and case-insensitive groups, which Go's regexp lacks. The
// package uses its own engine (internal/regex): a Pike VM, so every search
// is linear in the text — a pathological pattern such as `(a+)+$` cannot
// hang an encode — that reports the leftmost-first matches a backtracking
// engine reports. github.com/dlclark/regexp2 was considered and rejected:
// it backtracks (exponential on such patterns, only bounded by a timeout
// that would turn into a wrong tokenization), and it would be a new
// dependency. The engine is checked against Go's regexp by a differential
// fuzz test on the syntax both share, and against the reference through the
// conformance vectors.
//
// # Errors
//
// Loading never panics on bad input: FromFile and FromBytes return a
// *LoadError naming the file and the JSON path of the offending field, e.g.
// `tokenizer.json: model.merges[12]: token "xy" is not in model.vocab`.
// Beyond what the reference rejects, a vocabulary id used by two tokens is
// an error here (the reference would keep an arbitrary one for decoding). Encoding returns ErrInvalidUTF8 for text that is not valid UTF-8
// (the reference only accepts Unicode strings), and an error when the model
// cannot represent a character and has no unknown token, as the reference
// does.
//
// # Concurrency
//
// A *Pipeline is immutable after loading and safe for concurrent use; the
// BPE and Unigram word caches are sharded and locked internally.
// WithTruncation and WithPadding return configured copies that share the
// tables. EncodeBatch and DecodeBatch use at most GOMAXPROCS goroutines,
// which they own: they return only once all have stopped, and they stop
// early when the context is cancelled or an element fails (the error says
// which, as a *BatchError). The package has no mutable global state.
//
// # The Rust backend (build tag hftokenizers)
//
// With `-tags hftokenizers`, HFRustFromFile and HFRustFromBytes return an
// *HFRust, the same Tokenizer interface backed by Hugging Face's Rust
// library through github.com/daulet/tokenizers (cgo). It needs that
// project's static library at link time:
//
//	git clone --branch v1.24.0 https://github.com/daulet/tokenizers
//	cd tokenizers && cargo build --release   # produces target/release/libtokenizers.a
//	CGO_ENABLED=1 CGO_LDFLAGS="-L$PWD/target/release" go test -tags hftokenizers ./data/tokenizer/...
//
// (or download libtokenizers.<os>-<arch>.tar.gz from that project's v1.24.0
// release instead of building it). Without the tag nothing of it is
// compiled and the package is pure Go.
//
// # JSON lines
//
// EncodeJSONLines and DecodeJSONLines stream {"text": ...} lines to
// {"ids", "tokens", "offsets"} lines and back, for command-line use.
package tokenizer
