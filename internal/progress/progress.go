package progress

import (
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// DefaultMinInterval is how often, at most, a Bar redraws: tqdm's default mininterval (0.1 s),
// frequent enough to look live, rare enough to cost nothing next to a training step.
const DefaultMinInterval = 100 * time.Millisecond

// DefaultWidth is the line width used when Options.Width is 0 and $COLUMNS is not set.
const DefaultWidth = 80

// Options configure a Bar. The zero value is an unknown total, not drawn.
type Options struct {
	// Total is the expected final count; 0 or less means unknown (no percentage, bar or ETA).
	Total int64
	// Initial is the count the bar starts at (tqdm's initial); the rate counts from it, so a
	// resumed run does not show an inflated it/s.
	Initial int64
	// Terminal says whether to draw at all. New sets it from IsTerminal; tests set it directly.
	Terminal bool
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// MinInterval is the least time between two redraws; 0 means DefaultMinInterval.
	MinInterval time.Duration
	// Width caps the drawn line in columns (a longer line would wrap and defeat the carriage
	// return that redraws it); 0 means $COLUMNS, else DefaultWidth.
	Width int
	// Bytes counts bytes as huggingface_hub's download bars do (tqdm's unit="B",
	// unit_scale=True, unit_divisor=1024): counts as "1.42M/3.15M", the rate as "5.23MB/s".
	Bytes bool
}

// Bar is a progress line. Create it with New or NewWithOptions.
type Bar struct {
	mu       sync.Mutex
	w        io.Writer
	opt      Options
	start    time.Time
	n        int64
	postfix  string
	lastDraw time.Time
	drawn    bool // a bar line is on the terminal now
	hidden   bool // SetHidden: not drawn for now, counts still advance
	closed   bool
	err      error // first terminal write error, returned by Close
}

// New returns a bar counting to total, drawn on w only if w is a terminal.
func New(w io.Writer, total int64) *Bar {
	return NewWithOptions(w, Options{Total: total, Terminal: IsTerminal(w)})
}

// NewWithOptions returns a bar drawn on w as o says. Nothing is drawn until the first Update.
func NewWithOptions(w io.Writer, o Options) *Bar {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MinInterval <= 0 {
		o.MinInterval = DefaultMinInterval
	}
	if o.Width <= 0 {
		o.Width = columnsFromEnv()
	}
	return &Bar{w: w, opt: o, start: o.Now(), n: o.Initial}
}

// IsTerminal reports whether w is an *os.File on a character device (a terminal; /dev/null is
// one too, which is harmless). Pipes, regular files and other writers are not.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || f == nil {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func columnsFromEnv() int {
	if c, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && c > 0 {
		return c
	}
	return DefaultWidth
}

// Update sets the count to n and redraws if MinInterval has passed since the last draw, or if
// n reached Total (so the final count is shown). After Close it does nothing.
func (b *Bar) Update(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.set(n)
}

// Add advances the count by delta, as Update(count+delta).
func (b *Bar) Add(delta int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.set(b.n + delta)
}

func (b *Bar) set(n int64) {
	if b.closed {
		return
	}
	b.n = n
	b.draw(b.opt.Total > 0 && n >= b.opt.Total)
}

// SetPostfix sets the text shown after the rate ("loss=3.21"); it appears at the next draw.
func (b *Bar) SetPostfix(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.postfix = s
}

// PrintAbove writes line and a newline to out (the bar's writer if out is nil) without tearing
// the bar: the bar is erased first and redrawn after, as tqdm.write does. When the bar is not
// drawn (not a terminal) the line is simply written. It returns the error of writing line.
func (b *Bar) PrintAbove(out io.Writer, line string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if out == nil {
		out = b.w
	}
	b.erase()
	_, err := io.WriteString(out, line+"\n")
	if !b.closed && !b.hidden && b.opt.Terminal {
		b.draw(true)
	}
	return err
}

// Close erases the bar and stops all further drawing. It returns the first error writing to
// the terminal, if any. Close is idempotent.
func (b *Bar) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed {
		b.erase()
		b.closed = true
	}
	return b.err
}

// erase removes a drawn bar: carriage return, then ANSI "erase to end of line".
func (b *Bar) erase() {
	if b.drawn {
		b.write("\r\x1b[K")
		b.drawn = false
	}
}

// draw redraws the bar if drawing is enabled and the rate limit allows (or force is set).
func (b *Bar) draw(force bool) {
	if !b.opt.Terminal || b.closed || b.hidden {
		return
	}
	now := b.opt.Now()
	if b.drawn && !force && now.Sub(b.lastDraw) < b.opt.MinInterval {
		return
	}
	line := truncate(b.render(now), b.opt.Width-1) // the last column would make some terminals wrap
	b.write("\r" + line + "\x1b[K")
	b.lastDraw = now
	b.drawn = true
}

func (b *Bar) write(s string) {
	if _, err := io.WriteString(b.w, s); err != nil && b.err == nil {
		b.err = fmt.Errorf("progress: drawing the bar: %w", err)
	}
}

// render formats the line as tqdm's default bar_format does.
func (b *Bar) render(now time.Time) string {
	elapsed := max(now.Sub(b.start).Seconds(), 0)
	var rate float64
	if done := b.n - b.opt.Initial; elapsed > 0 && done > 0 {
		rate = float64(done) / elapsed
	}
	rateText := "?it/s"
	count := func(n int64) string { return strconv.FormatInt(n, 10) }
	switch {
	case b.opt.Bytes:
		// tqdm scales counts by unit_divisor (1024) but its rate by 1000 (format_meter calls
		// format_sizeof(rate) with the default divisor).
		count = func(n int64) string { return formatSizeof(float64(n), 1024) }
		rateText = "?B/s"
		if rate > 0 {
			rateText = formatSizeof(rate, 1000) + "B/s"
		}
	case rate >= 1:
		rateText = fmt.Sprintf("%5.2fit/s", rate)
	case rate > 0:
		rateText = fmt.Sprintf("%5.2fs/it", 1/rate)
	}
	postfix := ""
	if b.postfix != "" {
		postfix = ", " + b.postfix
	}
	total := b.opt.Total
	if total <= 0 {
		unit := "it"
		if b.opt.Bytes {
			unit = "B"
		}
		return fmt.Sprintf("%s%s [%s, %s%s]", count(b.n), unit, FormatInterval(elapsed), rateText, postfix)
	}
	frac := min(max(float64(b.n)/float64(total), 0), 1)
	remaining := "?"
	if rate > 0 {
		remaining = FormatInterval(max(float64(total-b.n), 0) / rate)
	}
	return fmt.Sprintf("%3.0f%%|%s| %s/%s [%s<%s, %s%s]", math.RoundToEven(frac*100), bar(frac),
		count(b.n), count(total), FormatInterval(elapsed), remaining, rateText, postfix)
}

// formatSizeof writes n as tqdm's format_sizeof does: three significant digits and a prefix
// (k, M, G, …) per power of divisor, e.g. 3145728 with 1024 → "3.00M", 1500 → "1.46k".
func formatSizeof(n, divisor float64) string {
	for _, unit := range []string{"", "k", "M", "G", "T", "P", "E", "Z"} {
		if math.Abs(n) < 999.5 {
			switch {
			case math.Abs(n) < 9.995:
				return fmt.Sprintf("%1.2f%s", n, unit)
			case math.Abs(n) < 99.95:
				return fmt.Sprintf("%2.1f%s", n, unit)
			}
			return fmt.Sprintf("%3.0f%s", n, unit)
		}
		n /= divisor
	}
	return fmt.Sprintf("%3.1fY", n)
}

// barCells is the bar's width in cells; barSyms are tqdm's eighth-block symbols, empty to full.
const barCells = 10

const barSyms = " ▏▎▍▌▋▊▉█"

// bar draws frac ∈ [0, 1] as tqdm does: full blocks, one partial block, then spaces.
func bar(frac float64) string {
	syms := []rune(barSyms)
	nsyms := len(syms) - 1
	eighths := int(frac * barCells * float64(nsyms))
	full, part := eighths/nsyms, eighths%nsyms
	var sb strings.Builder
	sb.WriteString(strings.Repeat(string(syms[nsyms]), full))
	if full < barCells {
		sb.WriteRune(syms[part])
		sb.WriteString(strings.Repeat(" ", barCells-full-1))
	}
	return sb.String()
}

// FormatInterval formats seconds as tqdm's format_interval: "mm:ss", or "h:mm:ss" from an hour.
func FormatInterval(seconds float64) string {
	if math.IsNaN(seconds) || seconds < 0 {
		seconds = 0
	}
	if seconds > 1e12 { // an ETA from a near-zero rate; keep the line short
		return "??:??"
	}
	t := int64(seconds)
	h, m, s := t/3600, t/60%60, t%60
	if h > 0 {
		return fmt.Sprintf("%d:%02d:%02d", h, m, s)
	}
	return fmt.Sprintf("%02d:%02d", m, s)
}

// truncate cuts s to at most n runes (a rune is one column for everything the bar draws).
func truncate(s string, n int) string {
	if n <= 0 || utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n])
}
