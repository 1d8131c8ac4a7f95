package tokenizer

import (
	"strings"
	"testing"
	"time"
)

// TestPathologicalInputs encodes a million repetitions of single characters
// (one giant word, one giant whitespace run, ...) with every reference
// tokenizer. Everything must finish; the deadline is generous and only
// turns a hang into a failure, it is not a speed assertion.
func TestPathologicalInputs(t *testing.T) {
	n := 1_000_000
	if testing.Short() || raceEnabled {
		n = 50_000
	}
	for _, name := range tokenizerNames {
		tok := loadTestTokenizer(t, name)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			pathological(t, name, tok, n)
		})
	}
}

// pathological encodes n repetitions of each unit. The encode runs in its
// own goroutine only so that a hang becomes a failure; if that ever
// happens the goroutine is abandoned with the failing test binary.
func pathological(t *testing.T, name string, tok *Pipeline, n int) {
	for _, unit := range []string{"a", " ", "1", "\n", "!", "é"} {
		text := strings.Repeat(unit, n/len(unit))
		start := time.Now()
		type result struct {
			e   *Encoding
			err error
		}
		done := make(chan result, 1)
		go func() {
			e, err := tok.Encode(text, true)
			done <- result{e, err}
		}()
		select {
		case r := <-done:
			if r.err != nil {
				t.Fatalf("%s: %d × %q: %v", name, n, unit, r.err)
			}
			t.Logf("%s %q: %d tokens in %v", name, unit, r.e.Len(), time.Since(start).Round(time.Millisecond))
			checkOffsets(t, name, text, r.e, true)
		case <-time.After(3 * time.Minute):
			t.Fatalf("%s: %d × %q did not finish", name, n, unit)
		}
	}
}
