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
// (leftmost-first, greedy and lazy quantifiers honoured). Lookahead is
// supported with any body, lookbehind when its body has a fixed length made of
// single characters. Constructs a Pike VM cannot honour exactly
// (backreferences, atomic groups, possessive quantifiers, \K, \G,
// conditionals, absent operators) are rejected at compile time with an error,
// never silently approximated.
//
// # Complexity
//
// With m the number of instructions of the compiled pattern (at most 200000)
// and n the length of the text in bytes:
//
//   - One search (FindAt) costs O(m × n), lookarounds included. A lookaround
//     whose body is a fixed sequence of at most 64 characters (the common
//     `(?!\S)`) is checked where it stands, in O(length of the body). Any
//     other lookahead body is decided for every position at once by one
//     right-to-left pass of the reversed body over the text, made as far left
//     as the search asks and resumed, not restarted, when it asks further: its
//     cost is part of the O(m × n), never a scan of the rest of the text per
//     position (which made `(?=(a*)*b)` quadratic before).
//   - FindAll shares those passes between its searches, so lookarounds cost
//     O(m × n) for the whole iteration. The searches themselves are linear
//     each, and each starts where the previous match ended, but one may read
//     past the end of the match it returns while a higher-priority
//     alternative is still alive (`a*c|a` on a run of a's reads to the end of
//     the run for every one-character match). Iterating is therefore
//     O(m × n²) in the worst case, like the iterators of Go's regexp and
//     Rust's regex crate, and O(m × n) whenever matches are decided near their
//     end, as with the pre-tokenizer patterns of real tokenizer.json files.
//   - Memory is O(m) per search, plus 2 bits per text byte for each lookahead
//     decided by a pass.
//
// FindAllContext checks a context every few thousand steps, so a caller can
// stop any search, however long the text or large the pattern.
//
// A *Regexp is safe for concurrent use; per-search scratch space comes from a
// sync.Pool owned by the Regexp.
package regex
