package unorm

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func runes(cs []Change) string {
	var b strings.Builder
	for _, c := range cs {
		b.WriteRune(c.R)
	}
	return b.String()
}

// consumed is how many input characters a change sequence accounts for;
// NormalizedString::transform needs it to equal the input length.
func consumed(cs []Change) int {
	n := 0
	for _, c := range cs {
		if c.Delta <= 0 {
			n += 1 - c.Delta
		}
	}
	return n
}

var samples = []string{
	"", "abc", "é", "e\u0301", "a\u0301\u0323", "ﬁ ﬀ", "한국어", "\u1100\u1161\u11a8", "Å Å Å",
	"Ω K ḗ ǖ", "ｶﾞ ㌀", "\u0344\u0301", "q\u0307\u0323", "x\u0300\u0300\u0315\u0301", "ﷺ", "①⁵₂",
	"\u0f73\u0f75\u0f81", "Äffin ﬃ ǅ", "\u0301start", "😀 e\u0301\u0301",
}

func TestKnownForms(t *testing.T) {
	cases := []struct {
		f    Form
		in   string
		want []Change
	}{
		{NFD, "é", []Change{{'e', 0}, {0x301, 1}}},
		{NFC, "e\u0301", []Change{{'é', -1}}},
		{NFC, "é", []Change{{'é', 0}}},
		{NFKC, "ﬁ", []Change{{'f', 0}, {'i', 1}}},
		{NFD, "한", []Change{{0x1112, 0}, {0x1161, 1}, {0x11AB, 1}}},
		{NFC, "\u1112\u1161\u11ab", []Change{{'한', -2}}},
		// Canonical ordering moves the dot below (ccc 220) before the acute (230).
		{NFD, "a\u0301\u0323", []Change{{'a', 0}, {0x323, 0}, {0x301, 0}}},
		{NFC, "a\u0301\u0323", []Change{{'ạ', -1}, {0x301, 0}}},
	}
	for _, c := range cases {
		got := Transform(c.f, c.in, nil)
		if len(got) != len(c.want) {
			t.Errorf("form %d of %q: %v, want %v", c.f, c.in, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("form %d of %q: %v, want %v", c.f, c.in, got, c.want)
				break
			}
		}
	}
}

func TestFormProperties(t *testing.T) {
	for _, s := range samples {
		n := utf8.RuneCountInString(s)
		forms := map[Form]string{}
		for _, f := range []Form{NFD, NFKD, NFC, NFKC} {
			cs := Transform(f, s, nil)
			if got := consumed(cs); got != n {
				t.Errorf("form %d of %q accounts for %d input characters, want %d", f, s, got, n)
			}
			forms[f] = runes(cs)
		}
		// Idempotence and the relations between the forms.
		for f, out := range forms {
			if again := runes(Transform(f, out, nil)); again != out {
				t.Errorf("form %d is not idempotent on %q: %q then %q", f, s, out, again)
			}
		}
		if d := runes(Transform(NFD, forms[NFC], nil)); d != forms[NFD] {
			t.Errorf("NFD(NFC(%q)) = %q, NFD = %q", s, d, forms[NFD])
		}
		if d := runes(Transform(NFKD, forms[NFKC], nil)); d != forms[NFKD] {
			t.Errorf("NFKD(NFKC(%q)) = %q, NFKD = %q", s, d, forms[NFKD])
		}
		// Decomposed forms are canonically ordered.
		for _, f := range []Form{NFD, NFKD} {
			prev := uint8(0)
			for _, r := range forms[f] {
				k := CCC(r)
				if k != 0 && k < prev {
					t.Errorf("form %d of %q is not canonically ordered", f, s)
				}
				prev = k
			}
		}
	}
}
