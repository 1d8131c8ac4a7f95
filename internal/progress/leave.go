package progress

import "io"

// Above runs fn with the bar erased and redraws the bar after it, so whatever fn writes to the
// terminal (a log record, a message) lands on its own line above the bar instead of being
// appended to the bar's line: the effect of tqdm.write and of tqdm's logging_redirect_tqdm.
// When the bar is not drawn (not a terminal, hidden or closed) fn simply runs. fn must not call
// the bar's methods (the bar is locked while it runs). It returns fn's error.
func (b *Bar) Above(fn func() error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.erase()
	err := fn()
	if !b.closed && !b.hidden && b.opt.Terminal {
		b.draw(true)
	}
	return err
}

// SetHidden erases the bar and stops drawing it (true), or draws it again at once (false).
// A second bar that takes the line for a while — an evaluation's during training — hides the
// first one rather than tearing it; counts still advance while hidden.
func (b *Bar) SetHidden(hidden bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.hidden = hidden
	if hidden {
		b.erase()
		return
	}
	if !b.closed && b.opt.Terminal {
		b.draw(true)
	}
}

// Leave sets the count to n, draws the bar one last time whatever the rate limit, ends its
// line with a newline and stops all further drawing, so the final count stays on the screen
// (tqdm's close with leave=True, which Hugging Face's training bar uses). If note is not
// empty it is written on the next line (e.g. why the run stopped short of Total). When the bar
// is not drawn nothing is written. It returns the first terminal write error, as Close does.
func (b *Bar) Leave(n int64, note string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return b.err
	}
	b.n = n
	if b.opt.Terminal {
		b.hidden = false
		b.draw(true)
		b.write("\n")
		b.drawn = false
		if note != "" {
			b.write(note + "\n")
		}
	}
	b.closed = true
	return b.err
}

// Count is the bar's current count.
func (b *Bar) Count() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n
}

// Drawn reports whether drawing is enabled (the writer is a terminal) and the bar not closed:
// callers pick plain output when it is false.
func (b *Bar) Drawn() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.opt.Terminal && !b.closed
}

var _ io.Writer = (*lineWriter)(nil)

// lineWriter is Writer's io.Writer.
type lineWriter struct {
	b   *Bar
	out io.Writer
}

// Writer returns an io.Writer that writes to out (the bar's writer if nil) with the bar erased
// and redrawn around each write (see Above), for a logger that shares the bar's terminal: give
// it whole lines, as log/slog's handlers do.
func (b *Bar) Writer(out io.Writer) io.Writer {
	if out == nil {
		out = b.w
	}
	return &lineWriter{b: b, out: out}
}

func (w *lineWriter) Write(p []byte) (int, error) {
	var n int
	err := w.b.Above(func() error {
		var err error
		n, err = w.out.Write(p)
		return err
	})
	return n, err
}
