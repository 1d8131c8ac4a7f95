package tokenizer

import "context"

// Tokenizer is what the rest of gotpu uses to turn text into token ids and
// back. *Pipeline (pure Go) implements it; with the build tag hftokenizers,
// *HFRust (Hugging Face's Rust library through cgo) does too.
//
// Implementations are safe for concurrent use.
type Tokenizer interface {
	// Encode encodes one text. addSpecialTokens applies the post-processor's
	// special tokens (e.g. [CLS] ... [SEP]).
	Encode(text string, addSpecialTokens bool) (*Encoding, error)
	// EncodePair encodes a pair of texts (e.g. question and context).
	EncodePair(text, pair string, addSpecialTokens bool) (*Encoding, error)
	// EncodeBatch encodes inputs concurrently and pads them together when the
	// tokenizer pads to the longest sequence. It stops early, returning
	// ctx.Err(), when ctx is cancelled.
	EncodeBatch(ctx context.Context, inputs []Input, addSpecialTokens bool) ([]*Encoding, error)
	// Decode turns ids back into text; unknown ids are skipped, special
	// tokens too when skipSpecialTokens is set.
	Decode(ids []uint32, skipSpecialTokens bool) (string, error)
	// DecodeBatch decodes several id lists concurrently.
	DecodeBatch(ctx context.Context, ids [][]uint32, skipSpecialTokens bool) ([]string, error)
	// TokenToID looks a token up, added tokens included.
	TokenToID(token string) (uint32, bool)
	// IDToToken is the inverse of TokenToID.
	IDToToken(id uint32) (string, bool)
	// VocabSize is the model's vocabulary size, plus the added tokens that
	// are not in it when withAddedTokens is set.
	VocabSize(withAddedTokens bool) int
	// Close releases resources (a no-op for the pure-Go tokenizer).
	Close() error
}

// Input is one element of a batch: a text, or a pair when Pair is set.
type Input struct {
	Text string
	Pair *string
}

// Single returns the Input for one text.
func Single(text string) Input { return Input{Text: text} }

// PairOf returns the Input for a pair of texts.
func PairOf(text, pair string) Input { return Input{Text: text, Pair: &pair} }
