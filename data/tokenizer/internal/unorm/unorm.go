// Package unorm implements Unicode normalization (NFD, NFKD, NFC, NFKC) that
// also reports, for every output character, how it relates to the input
// characters, in the form Hugging Face tokenizers' NormalizedString.transform
// consumes: a (rune, change) pair where change 0 replaces one input
// character, +1 inserts a character, and -n replaces one input character and
// removes the n following ones.
//
// The pairs follow the algorithm of the unicode-normalization-alignments Rust
// crate that tokenizers uses (decompose each character, stable-sort runs of
// non-starters by combining class, then recompose pairwise), so that offsets
// computed from them equal the reference implementation's.
package unorm

import (
	"strconv"
	"strings"
	"sync"
)

// Change is one output character and its relation to the input.
type Change struct {
	R     rune
	Delta int
}

// Form selects a normalization form.
type Form uint8

// Normalization forms.
const (
	NFD Form = iota
	NFKD
	NFC
	NFKC
)

type tables struct {
	canon  map[rune][]rune
	compat map[rune][]rune
	ccc    map[rune]uint8
	comp   map[[2]rune]rune
}

var (
	loadOnce sync.Once
	tbl      *tables
)

// data parses the generated tables once; afterwards they are read-only.
func data() *tables {
	loadOnce.Do(func() {
		t := &tables{
			canon:  map[rune][]rune{},
			compat: map[rune][]rune{},
			ccc:    map[rune]uint8{},
			comp:   map[[2]rune]rune{},
		}
		parseDecomp(canonData, t.canon)
		parseDecomp(compatData, t.compat)
		for _, e := range strings.Split(cccData, ";") {
			if e == "" {
				continue
			}
			rngStr, cls, _ := strings.Cut(e, ":")
			loS, hiS, _ := strings.Cut(rngStr, "-")
			lo, hi, k := hexRune(loS), hexRune(hiS), mustAtoi(cls)
			for r := lo; r <= hi; r++ {
				t.ccc[r] = uint8(k)
			}
		}
		for _, e := range strings.Split(compData, ";") {
			if e == "" {
				continue
			}
			pair, c, _ := strings.Cut(e, ">")
			a, b, _ := strings.Cut(pair, ",")
			t.comp[[2]rune{hexRune(a), hexRune(b)}] = hexRune(c)
		}
		tbl = t
	})
	return tbl
}

func parseDecomp(src string, into map[rune][]rune) {
	for _, e := range strings.Split(src, ";") {
		if e == "" {
			continue
		}
		k, v, _ := strings.Cut(e, ">")
		var d []rune
		for _, x := range strings.Split(v, ",") {
			d = append(d, hexRune(x))
		}
		into[hexRune(k)] = d
	}
}

func hexRune(s string) rune {
	v, err := strconv.ParseUint(s, 16, 32)
	if err != nil {
		panic("unorm: corrupt generated table: " + err.Error())
	}
	return rune(v)
}

func mustAtoi(s string) int {
	v, err := strconv.Atoi(s)
	if err != nil {
		panic("unorm: corrupt generated table: " + err.Error())
	}
	return v
}

// CCC returns the canonical combining class of r.
func CCC(r rune) uint8 {
	if r < 0x300 {
		return 0
	}
	return data().ccc[r]
}

const (
	sBase  = 0xAC00
	lBase  = 0x1100
	vBase  = 0x1161
	tBase  = 0x11A7
	lCount = 19
	vCount = 21
	tCount = 28
	nCount = vCount * tCount
	sCount = lCount * nCount
)

func decompose(t *tables, r rune, compat bool, emit func(rune)) {
	if r < 0xC0 && !compat || r < 0xA0 {
		emit(r)
		return
	}
	if s := r - sBase; s >= 0 && s < sCount {
		emit(lBase + s/nCount)
		emit(vBase + (s%nCount)/tCount)
		if ti := s % tCount; ti != 0 {
			emit(tBase + ti)
		}
		return
	}
	if compat {
		if d, ok := t.compat[r]; ok {
			for _, x := range d {
				emit(x)
			}
			return
		}
	}
	if d, ok := t.canon[r]; ok {
		for _, x := range d {
			emit(x)
		}
		return
	}
	emit(r)
}

func compose(t *tables, a, b rune) (rune, bool) {
	if l := a - lBase; l >= 0 && l < lCount {
		if v := b - vBase; v >= 0 && v < vCount {
			return sBase + (l*vCount+v)*tCount, true
		}
	}
	if s := a - sBase; s >= 0 && s < sCount && s%tCount == 0 {
		if ti := b - tBase; ti > 0 && ti < tCount {
			return a + ti, true
		}
	}
	c, ok := t.comp[[2]rune{a, b}]
	return c, ok
}

type item struct {
	ccc   uint8
	r     rune
	delta int
}

// Transform normalizes s and appends the (rune, change) pairs to out.
func Transform(f Form, s string, out []Change) []Change {
	t := data()
	compat := f == NFKD || f == NFKC
	// Decomposition: every character of an input character's decomposition
	// after the first is an insertion (+1); runs of non-starters are then
	// stable-sorted by combining class (canonical ordering).
	dec := make([]item, 0, len(s)+8)
	pending := 0 // start of the run that still needs sorting
	sortPending := func() {
		run := dec[pending:]
		// Insertion sort: runs are short, and it is stable.
		for i := 1; i < len(run); i++ {
			for j := i; j > 0 && run[j].ccc < run[j-1].ccc; j-- {
				run[j], run[j-1] = run[j-1], run[j]
			}
		}
		pending = len(dec)
	}
	for _, r := range s {
		first := true
		decompose(t, r, compat, func(d rune) {
			k := CCC(d)
			if k == 0 {
				sortPending()
			}
			delta := 1
			if first {
				delta = 0
			}
			first = false
			dec = append(dec, item{k, d, delta})
		})
	}
	sortPending()
	if f == NFD || f == NFKD {
		for _, it := range dec {
			out = append(out, Change{it.r, it.delta})
		}
		return out
	}
	return recompose(t, dec, out)
}

// recompose follows the Recompositions iterator of the Rust crate: a composed
// character's change is the sum of its parts' changes minus one per merge.
func recompose(t *tables, dec []item, out []Change) []Change {
	var buffer []Change
	var composee *Change
	var comp Change
	lastCCC := -1 // -1: none
	for _, it := range dec {
		ch, change, cls := it.r, it.delta, int(it.ccc)
		if composee == nil {
			if cls != 0 {
				out = append(out, Change{ch, change})
				continue
			}
			comp = Change{ch, change}
			composee = &comp
			continue
		}
		k := *composee
		if lastCCC < 0 {
			if r, ok := compose(t, k.R, ch); ok {
				comp = Change{r, k.Delta + change - 1}
				continue
			}
			if cls == 0 {
				out = append(out, k)
				comp = Change{ch, change}
				continue
			}
			buffer = append(buffer, Change{ch, change})
			lastCCC = cls
			continue
		}
		if lastCCC >= cls {
			// ch is blocked from the composee.
			if cls == 0 {
				out = append(out, k)
				out = append(out, buffer...)
				buffer = buffer[:0]
				comp = Change{ch, change}
				lastCCC = -1
				continue
			}
			buffer = append(buffer, Change{ch, change})
			lastCCC = cls
			continue
		}
		if r, ok := compose(t, k.R, ch); ok {
			comp = Change{r, k.Delta + change - 1}
			continue
		}
		buffer = append(buffer, Change{ch, change})
		lastCCC = cls
	}
	if composee != nil {
		out = append(out, *composee)
	}
	return append(out, buffer...)
}
