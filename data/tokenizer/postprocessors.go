package tokenizer

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// postProcessor adds special tokens around encoded sequences
// (PostProcessor::process_encodings).
type postProcessor interface {
	addedTokens(pair bool) int
	processEncodings(encs []*Encoding, addSpecial bool) ([]*Encoding, error)
}

func specialEncoding(ids []uint32, toks []string, typeID uint32) *Encoding {
	n := len(ids)
	e := &Encoding{
		IDs:               append([]uint32(nil), ids...),
		Tokens:            append([]string(nil), toks...),
		Offsets:           make([]Offset, n),
		ByteOffsets:       make([]Offset, n),
		WordIDs:           make([]int, n),
		TypeIDs:           make([]uint32, n),
		SpecialTokensMask: make([]uint32, n),
		AttentionMask:     make([]uint32, n),
	}
	for i := 0; i < n; i++ {
		e.WordIDs[i], e.TypeIDs[i], e.SpecialTokensMask[i], e.AttentionMask[i] = -1, typeID, 1, 1
	}
	return e
}

// templatePiece is $A / $B (seq 0 / 1) or a special token.
type templatePiece struct {
	isSeq   bool
	seq     int
	special string
	typeID  uint32
}

type specialTokenDef struct {
	ids    []uint32
	tokens []string
}

type templateProcessor struct {
	single, pair []templatePiece
	hasPair      bool
	special      map[string]specialTokenDef
}

func (t *templateProcessor) addedTokens(pair bool) int {
	tpl := t.single
	if pair {
		tpl = t.pair
	}
	n := 0
	for _, p := range tpl {
		if !p.isSeq {
			n += len(t.special[p.special].ids)
		}
	}
	return n
}

func (t *templateProcessor) processEncodings(encs []*Encoding, addSpecial bool) ([]*Encoding, error) {
	tpl := t.single
	if len(encs) == 2 {
		if !t.hasPair {
			return nil, fmt.Errorf("TemplateProcessing has no pair template")
		}
		tpl = t.pair
	}
	var out []*Encoding
	for _, p := range tpl {
		if p.isSeq {
			if p.seq >= len(encs) {
				return nil, fmt.Errorf("template refers to $B but only one sequence was given")
			}
			e := encs[p.seq]
			e.setTypeIDs(p.typeID)
			e.setSequenceID(p.seq)
			out = append(out, e.clone())
			continue
		}
		if addSpecial {
			d := t.special[p.special]
			out = append(out, specialEncoding(d.ids, d.tokens, p.typeID))
		}
	}
	return out, nil
}

type bertProcessor struct {
	sep, cls   string
	sepID, cID uint32
}

func (b *bertProcessor) addedTokens(pair bool) int {
	if pair {
		return 3
	}
	return 2
}

func (b *bertProcessor) processEncodings(encs []*Encoding, addSpecial bool) ([]*Encoding, error) {
	if !addSpecial {
		return encs, nil
	}
	out := make([]*Encoding, len(encs))
	for i, e := range encs {
		out[i] = b.wrap(e, i)
		// Overflowing pieces get the special tokens too (not recursively).
		for _, o := range e.Overflowing {
			out[i].Overflowing = append(out[i].Overflowing, b.wrap(o, i))
		}
	}
	return out, nil
}

// wrap builds "[CLS] A [SEP]" (first sequence) or "B [SEP]" (second).
func (b *bertProcessor) wrap(e *Encoding, i int) *Encoding {
	r := &Encoding{}
	if i == 0 {
		r.appendEncoding(specialEncoding([]uint32{b.cID}, []string{b.cls}, 0))
		r.appendEncoding(e)
		r.appendEncoding(specialEncoding([]uint32{b.sepID}, []string{b.sep}, 0))
		r.seqRanges = []seqRange{{0, 1, r.Len() - 1}}
	} else {
		r.appendEncoding(e)
		r.appendEncoding(specialEncoding([]uint32{b.sepID}, []string{b.sep}, 1))
		r.seqRanges = []seqRange{{1, 0, r.Len() - 1}}
	}
	return r
}

type robertaProcessor struct {
	sep, cls       string
	sepID, cID     uint32
	trimOffsets    bool
	addPrefixSpace bool
}

func (r *robertaProcessor) addedTokens(pair bool) int {
	if pair {
		return 4
	}
	return 2
}

func (r *robertaProcessor) processEncodings(encs []*Encoding, addSpecial bool) ([]*Encoding, error) {
	if r.trimOffsets {
		for _, e := range encs {
			trimOffsets(e, r.addPrefixSpace)
			for _, o := range e.Overflowing {
				trimOffsets(o, r.addPrefixSpace)
			}
		}
	}
	for _, e := range encs {
		e.setTypeIDs(0) // RoBERTa has a single segment type
	}
	if !addSpecial {
		return encs, nil
	}
	out := make([]*Encoding, len(encs))
	for i, e := range encs {
		out[i] = r.wrap(e, i)
		for _, o := range e.Overflowing {
			out[i].Overflowing = append(out[i].Overflowing, r.wrap(o, i))
		}
	}
	return out, nil
}

// wrap builds "<s> A </s>" (first sequence) or "</s> B </s>" (second), all
// of type 0.
func (r *robertaProcessor) wrap(e *Encoding, i int) *Encoding {
	x := &Encoding{}
	if i == 0 {
		x.appendEncoding(specialEncoding([]uint32{r.cID}, []string{r.cls}, 0))
	} else {
		x.appendEncoding(specialEncoding([]uint32{r.sepID}, []string{r.sep}, 0))
	}
	x.appendEncoding(e)
	x.appendEncoding(specialEncoding([]uint32{r.sepID}, []string{r.sep}, 0))
	x.setTypeIDs(0)
	x.seqRanges = []seqRange{{min(i, 1), 1, x.Len() - 1}}
	return x
}

type byteLevelProcessor struct {
	trimOffsets    bool
	addPrefixSpace bool
}

func (b *byteLevelProcessor) addedTokens(bool) int { return 0 }

func (b *byteLevelProcessor) processEncodings(encs []*Encoding, _ bool) ([]*Encoding, error) {
	if b.trimOffsets {
		for _, e := range encs {
			trimOffsets(e, b.addPrefixSpace)
			for _, o := range e.Overflowing {
				trimOffsets(o, b.addPrefixSpace)
			}
		}
	}
	for i, e := range encs {
		e.setSequenceID(i)
	}
	return encs, nil
}

// trimOffsets is tokenizers' process_offsets: the offsets of tokens that
// start or end with spaces (byte-level 'Ġ' or whitespace) are narrowed to
// exclude them.
func trimOffsets(e *Encoding, addPrefixSpace bool) {
	space := byteToRune[' ']
	isSp := func(r rune) bool { return r == space || isWhitespace(r) }
	// Byte-level characters stand for one input byte each.
	bytesOf := func(r rune) int {
		if _, ok := runeToByte[r]; ok {
			return 1
		}
		return utf8.RuneLen(r)
	}
	for i, tok := range e.Tokens {
		lead, leadBytes := 0, 0
		for _, r := range tok {
			if !isSp(r) {
				break
			}
			lead++
			leadBytes += bytesOf(r)
		}
		trail, trailBytes := 0, 0
		for j := len(tok); j > 0; {
			r, size := utf8.DecodeLastRuneInString(tok[:j])
			if !isSp(r) {
				break
			}
			trail++
			trailBytes += bytesOf(r)
			j -= size
		}
		if lead == 0 && trail == 0 {
			continue
		}
		o, bo := &e.Offsets[i], &e.ByteOffsets[i]
		if lead > 0 {
			isFirst := i == 0 || o[0] == 0
			if !(isFirst && addPrefixSpace && lead == 1) {
				o[0] = min(o[0]+lead, o[1])
				bo[0] = min(bo[0]+leadBytes, bo[1])
			}
		}
		if trail > 0 && o[1] >= trail {
			o[1] = max(o[1]-trail, o[0])
		}
		if trail > 0 && bo[1] >= trailBytes {
			bo[1] = max(bo[1]-trailBytes, bo[0])
		}
	}
}

type sequenceProcessor []postProcessor

func (s sequenceProcessor) addedTokens(pair bool) int {
	n := 0
	for _, p := range s {
		n += p.addedTokens(pair)
	}
	return n
}

func (s sequenceProcessor) processEncodings(encs []*Encoding, addSpecial bool) ([]*Encoding, error) {
	var err error
	for _, p := range s {
		if encs, err = p.processEncodings(encs, addSpecial); err != nil {
			return nil, err
		}
	}
	return encs, nil
}

// parseTokenIDPair reads ["[SEP]", 102].
func parseTokenIDPair(v jval) (string, uint32, error) {
	items, err := v.array()
	if err != nil {
		return "", 0, err
	}
	if len(items) != 2 {
		return "", 0, errAt(v.path, "expected [token, id], got %d elements", len(items))
	}
	s, err := items[0].str()
	if err != nil {
		return "", 0, err
	}
	id, err := items[1].uint(math.MaxUint32)
	return s, uint32(id), err
}

func parsePostProcessor(v jval) (postProcessor, error) {
	if v.null() {
		return nil, nil
	}
	o, err := v.object()
	if err != nil {
		return nil, err
	}
	typ, err := o.typeName()
	if err != nil {
		return nil, err
	}
	switch typ {
	case "TemplateProcessing":
		return parseTemplate(o)
	case "BertProcessing":
		b := &bertProcessor{}
		if b.sep, b.sepID, err = parseTokenIDPair(o.get("sep")); err != nil {
			return nil, err
		}
		if b.cls, b.cID, err = parseTokenIDPair(o.get("cls")); err != nil {
			return nil, err
		}
		return b, nil
	case "RobertaProcessing":
		r := &robertaProcessor{}
		if r.sep, r.sepID, err = parseTokenIDPair(o.get("sep")); err != nil {
			return nil, err
		}
		if r.cls, r.cID, err = parseTokenIDPair(o.get("cls")); err != nil {
			return nil, err
		}
		if r.trimOffsets, err = o.boolean("trim_offsets", true); err != nil {
			return nil, err
		}
		if r.addPrefixSpace, err = o.boolean("add_prefix_space", true); err != nil {
			return nil, err
		}
		return r, nil
	case "ByteLevel":
		b := &byteLevelProcessor{}
		if b.trimOffsets, err = o.boolean("trim_offsets", true); err != nil {
			return nil, err
		}
		if b.addPrefixSpace, err = o.boolean("add_prefix_space", true); err != nil {
			return nil, err
		}
		return b, nil
	case "Sequence":
		items, err := o.get("processors").array()
		if err != nil {
			return nil, err
		}
		var seq sequenceProcessor
		for _, it := range items {
			if it.null() {
				return nil, errAt(it.path, "expected a post-processor object, got null")
			}
			p, err := parsePostProcessor(it)
			if err != nil {
				return nil, err
			}
			seq = append(seq, p)
		}
		return seq, nil
	}
	return nil, errAt(childPath(o.path, "type"), "unknown post-processor type %q", typ)
}

func parseTemplate(o jobj) (postProcessor, error) {
	t := &templateProcessor{special: map[string]specialTokenDef{}}
	if o.has("special_tokens") {
		so, err := o.get("special_tokens").object()
		if err != nil {
			return nil, err
		}
		for key := range so.m {
			to, err := so.get(key).object()
			if err != nil {
				return nil, err
			}
			var d specialTokenDef
			idsV, err := to.get("ids").array()
			if err != nil {
				return nil, err
			}
			for _, x := range idsV {
				id, err := x.uint(math.MaxUint32)
				if err != nil {
					return nil, err
				}
				d.ids = append(d.ids, uint32(id))
			}
			toksV, err := to.get("tokens").array()
			if err != nil {
				return nil, err
			}
			for _, x := range toksV {
				s, err := x.str()
				if err != nil {
					return nil, err
				}
				d.tokens = append(d.tokens, s)
			}
			if len(d.ids) != len(d.tokens) {
				return nil, errAt(to.path, "ids and tokens must have the same length (%d and %d)", len(d.ids), len(d.tokens))
			}
			t.special[key] = d
		}
	}
	var err error
	if !o.has("single") {
		return nil, errAt(childPath(o.path, "single"), "missing")
	}
	if t.single, err = parseTemplatePieces(o.get("single")); err != nil {
		return nil, err
	}
	if o.has("pair") {
		if t.pair, err = parseTemplatePieces(o.get("pair")); err != nil {
			return nil, err
		}
		t.hasPair = true
	}
	var missing []string
	for _, tpl := range [][]templatePiece{t.single, t.pair} {
		for _, p := range tpl {
			if _, ok := t.special[p.special]; !p.isSeq && !ok {
				missing = append(missing, strconv.Quote(p.special))
			}
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, errAt(childPath(o.path, "special_tokens"), "missing special token(s) used by the templates: %s", strings.Join(missing, ", "))
	}
	return t, nil
}

// parseTemplatePieces reads the serialized form of a template: a list of
// {"Sequence": {"id": "A"|"B", "type_id": n}} and {"SpecialToken": {"id":
// name, "type_id": n}}. The "[CLS] $A [SEP]" string form of the Python API
// is rejected, as the reference rejects it in tokenizer.json.
func parseTemplatePieces(v jval) ([]templatePiece, error) {
	if _, err := v.str(); err == nil {
		return nil, errAt(v.path, `expected a list of {"Sequence": ...} and {"SpecialToken": ...} objects; the string form is not valid in tokenizer.json`)
	}
	items, err := v.array()
	if err != nil {
		return nil, err
	}
	var out []templatePiece
	for _, it := range items {
		o, err := it.object()
		if err != nil {
			return nil, err
		}
		switch {
		case o.has("Sequence"):
			so, err := o.get("Sequence").object()
			if err != nil {
				return nil, err
			}
			id, err := so.reqStr("id")
			if err != nil {
				return nil, err
			}
			p := templatePiece{isSeq: true}
			switch id {
			case "A":
			case "B":
				p.seq = 1
			default:
				return nil, errAt(childPath(so.path, "id"), "sequence id must be \"A\" or \"B\", got %q", id)
			}
			tid, err := so.uint("type_id", 0, math.MaxUint32)
			if err != nil {
				return nil, err
			}
			p.typeID = uint32(tid)
			out = append(out, p)
		case o.has("SpecialToken"):
			so, err := o.get("SpecialToken").object()
			if err != nil {
				return nil, err
			}
			id, err := so.reqStr("id")
			if err != nil {
				return nil, err
			}
			tid, err := so.uint("type_id", 0, math.MaxUint32)
			if err != nil {
				return nil, err
			}
			out = append(out, templatePiece{special: id, typeID: uint32(tid)})
		default:
			return nil, errAt(it.path, `expected {"Sequence": ...} or {"SpecialToken": ...}`)
		}
	}
	return out, nil
}
