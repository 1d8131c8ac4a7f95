package tokenizer

// token is what a model produces for one piece: an id, its string, and a
// byte range of the piece's normalized text.
type token struct {
	id         uint32
	value      string
	start, end int
}

// piece is one split of the input (Hugging Face's Split): a normalized
// piece and, once tokenized (or when it is an added token), its tokens.
type piece struct {
	n      *normalized
	tokens []token
	done   bool
}

// pretokenized is Hugging Face's PreTokenizedString: the input cut into
// pieces that normalizers, pre-tokenizers and the model refine in turn.
// Pieces that are already tokenized (added tokens) are left alone by every
// later step.
type pretokenized struct {
	pieces []piece
}

// splitPieces replaces every untokenized piece by the pieces f returns,
// dropping empty ones (PreTokenizedString::split).
func (p *pretokenized) splitPieces(f func(idx int, n *normalized) ([]piece, error)) error {
	out := make([]piece, 0, len(p.pieces))
	for i, pc := range p.pieces {
		if pc.done {
			out = append(out, pc)
			continue
		}
		parts, err := f(i, pc.n)
		if err != nil {
			return err
		}
		for _, q := range parts {
			if q.n.text != "" {
				out = append(out, q)
			}
		}
	}
	p.pieces = out
	return nil
}

// splitWith is splitPieces for the common case of a function that only
// cuts normalized text.
func (p *pretokenized) splitWith(f func(n *normalized) []*normalized) {
	_ = p.splitPieces(func(_ int, n *normalized) ([]piece, error) {
		ns := f(n)
		out := make([]piece, len(ns))
		for i, x := range ns {
			out[i] = piece{n: x}
		}
		return out, nil
	})
}

// normalizeEach applies f to every untokenized piece.
func (p *pretokenized) normalizeEach(f func(n *normalized)) {
	for i := range p.pieces {
		if !p.pieces[i].done {
			f(p.pieces[i].n)
		}
	}
}
