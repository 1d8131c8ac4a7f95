package regex

import (
	"fmt"
	"strings"
	"testing"
)

var fastPatterns = []string{patGPT2, patQwen, patLlama3}

// fastSamples mixes every character class the fast matchers distinguish.
var fastSamples = []string{
	"Hello world", "  a", "a  ", " \t\n  x", "I'm 'S 'LL 'Ve 'ſ 'x '", "1234567 ١٢٣ Ⅷ½",
	"!!abc ,x  !! \n\n", "a\r\n\r\nb", "\u00a0\u3000x\u2028\u0085", "😀😀 e\u0301", "__init__(self):\n\treturn",
	"", " ", "\n", "'", "x'", "café 日本語", "   \r\n  \r  y", "'LL'll'RE're", "a1b2 33 444 5555",
}

func TestFastMatchersAgree(t *testing.T) {
	for _, p := range fastPatterns {
		re := MustCompile(p)
		if re.fast == nil {
			t.Fatalf("no fast matcher for %q", p)
		}
		for _, s := range fastSamples {
			if err := compareFast(re, s); err != nil {
				t.Error(err)
			}
		}
	}
}

func compareFast(re *Regexp, s string) error {
	for from := 0; from <= len(s); from++ {
		if from < len(s) && s[from]&0xC0 == 0x80 {
			continue // not a character boundary
		}
		a1, b1, ok1 := re.fast(s, from)
		a2, b2, ok2 := re.findNFA(s, from)
		if a1 != a2 || b1 != b2 || ok1 != ok2 {
			return fmt.Errorf("pattern %q on %q from %d: fast (%d,%d,%v), NFA (%d,%d,%v)", re.expr, s, from, a1, b1, ok1, a2, b2, ok2)
		}
	}
	return nil
}

// FuzzFastMatchers checks the hand-written matchers against the Pike VM.
func FuzzFastMatchers(f *testing.F) {
	for _, s := range fastSamples {
		f.Add(s)
	}
	res := make([]*Regexp, len(fastPatterns))
	for i, p := range fastPatterns {
		res[i] = MustCompile(p)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 512 {
			return
		}
		s = strings.ToValidUTF8(s, "\uFFFD")
		for _, re := range res {
			if err := compareFast(re, s); err != nil {
				t.Fatal(err)
			}
		}
	})
}
