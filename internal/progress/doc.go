// Package progress draws a one-line terminal progress bar in the style of tqdm, which Hugging
// Face's Trainer shows during training:
//
//	12%|█▏        | 12/100 [00:05<00:37,  2.31it/s, loss=3.21]
//
// The bar is drawn only when its writer is a terminal (IsTerminal: an *os.File whose mode has
// os.ModeCharDevice), so logs redirected to a file or a pipe get no carriage-return noise — the
// effect of HF's disable_tqdm. It is redrawn at most every MinInterval (100 ms by default), so
// a fast loop does not spend its time writing to the terminal, and it is erased by Close.
// PrintAbove writes a line (a log entry) without tearing the bar, like tqdm.write.
//
// # Errors
//
// Drawing is best-effort: a failed terminal write is remembered and returned by Close, never by
// Update, because a broken progress display must not stop training.
//
// # Concurrency
//
// A Bar is safe for concurrent use: typically one goroutine calls Update and another may call
// Close (after which Update does nothing). It starts no goroutine; it draws only inside its
// method calls, so it never redraws a stalled run's elapsed time on its own. The package has no
// global state.
package progress
