// Package regex is a small regular-expression engine for the subset of the
// Oniguruma (Ruby syntax) dialect that Hugging Face tokenizer.json files use in
// Split pre-tokenizers, Replace normalizers and Replace decoders.
//
// Why not Go's regexp: it has no lookaround, and the GPT-2 family of
// pre-tokenizer patterns ends with `\s+(?!\S)`; its \s, \d and \w are ASCII
// only where Oniguruma's are Unicode-aware; and its ^ and $ are not line
// anchors by default. Why not a backtracking library (dlclark/regexp2): a
// backtracking engine is exponential on patterns such as `(a+)+$`, and the
// tokenizer must finish on any tokenizer.json and any input.
//
// The engine is a Pike VM (Thompson NFA simulation with thread priorities), so
// it reports exactly the match a backtracking engine would report
// (leftmost-first, greedy and lazy quantifiers honoured), while one search costs
// O(len(pattern) × len(text)). Lookahead is supported with any body (a
// single-character body, the common `(?!\S)`, is checked in O(1)); lookbehind
// is supported when its body has a fixed length made of single characters.
// Constructs a Pike VM cannot honour exactly (backreferences, atomic groups,
// possessive quantifiers, \K, \G, conditionals, absent operators) are rejected
// at compile time with an error, never silently approximated.
//
// A *Regexp is safe for concurrent use; per-search scratch space comes from a
// sync.Pool owned by the Regexp.
package regex
