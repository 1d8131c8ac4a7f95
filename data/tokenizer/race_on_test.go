//go:build race

package tokenizer

// raceEnabled shrinks the largest inputs under the race detector, which
// slows this code down about tenfold.
const raceEnabled = true
