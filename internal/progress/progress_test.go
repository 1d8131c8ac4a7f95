package progress

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// clock is a manual clock for tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newTestBar(total int64, terminal bool) (*Bar, *bytes.Buffer, *clock) {
	var buf bytes.Buffer
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	b := NewWithOptions(&buf, Options{Total: total, Terminal: terminal, Now: clk.Now, Width: 200})
	return b, &buf, clk
}

// lastLine returns what the terminal shows after the writes: the text after the last "\r",
// without the erase-to-end-of-line sequence.
func lastLine(s string) string {
	if i := strings.LastIndex(s, "\r"); i >= 0 {
		s = s[i+1:]
	}
	return strings.TrimSuffix(s, "\x1b[K")
}

func TestRenderLikeTqdm(t *testing.T) {
	b, buf, clk := newTestBar(100, true)
	clk.advance(5 * time.Second)
	b.SetPostfix("loss=3.21")
	b.Update(12)
	// 12 it in 5 s: 2.40 it/s, 88 left: 36.7 s. The bar is tqdm's: one full cell, one 1/8 cell.
	want := " 12%|█▏        | 12/100 [00:05<00:36,  2.40it/s, loss=3.21]"
	if got := lastLine(buf.String()); got != want {
		t.Fatalf("bar line\n got %q\nwant %q", got, want)
	}
	if !strings.HasPrefix(buf.String(), "\r") {
		t.Errorf("a draw must start with a carriage return: %q", buf.String())
	}
}

func TestRenderSlowAndUnknown(t *testing.T) {
	b, buf, clk := newTestBar(10, true)
	clk.advance(7 * time.Second)
	b.Update(2) // 0.2857 it/s, shown inverted as tqdm does below 1 it/s
	if got, want := lastLine(buf.String()), " 20%|██        | 2/10 [00:07<00:28,  3.50s/it]"; got != want {
		t.Errorf("slow rate\n got %q\nwant %q", got, want)
	}

	b, buf, clk = newTestBar(0, true)
	b.Update(0)
	if got, want := lastLine(buf.String()), "0it [00:00, ?it/s]"; got != want {
		t.Errorf("unknown total, no progress\n got %q\nwant %q", got, want)
	}
	clk.advance(2 * time.Second)
	b.Update(5)
	if got, want := lastLine(buf.String()), "5it [00:02,  2.50it/s]"; got != want {
		t.Errorf("unknown total\n got %q\nwant %q", got, want)
	}
}

func TestInitialDoesNotInflateRate(t *testing.T) {
	var buf bytes.Buffer
	clk := &clock{t: time.Unix(0, 0)}
	b := NewWithOptions(&buf, Options{Total: 2000, Initial: 1000, Terminal: true, Now: clk.Now, Width: 200})
	clk.advance(10 * time.Second)
	b.Update(1010)
	if got, want := lastLine(buf.String()), " 50%|█████     | 1010/2000 [00:10<16:30,  1.00it/s]"; got != want {
		t.Errorf("resumed bar\n got %q\nwant %q", got, want)
	}
}

func TestRateLimited(t *testing.T) {
	b, buf, clk := newTestBar(1000, true)
	b.Update(1)
	draws := func() int { return strings.Count(buf.String(), "\r") }
	if draws() != 1 {
		t.Fatalf("first update must draw; output %q", buf.String())
	}
	for i := int64(2); i < 10; i++ {
		clk.advance(10 * time.Millisecond)
		b.Update(i)
	}
	if draws() != 1 {
		t.Fatalf("updates within 100 ms redrew: %d draws", draws())
	}
	clk.advance(30 * time.Millisecond) // 110 ms since the first draw
	b.Update(10)
	if draws() != 2 {
		t.Fatalf("an update after 100 ms must redraw: %d draws", draws())
	}
	clk.advance(time.Millisecond)
	b.Update(1000) // the final count is always drawn
	if draws() != 3 || !strings.Contains(lastLine(buf.String()), "1000/1000") {
		t.Fatalf("final count not drawn: %q", lastLine(buf.String()))
	}
}

func TestCloseErasesAndStops(t *testing.T) {
	b, buf, clk := newTestBar(10, true)
	b.Update(3)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(buf.String(), "\r\x1b[K") {
		t.Fatalf("Close did not erase the line: %q", buf.String())
	}
	n := buf.Len()
	clk.advance(time.Second)
	b.Update(4)
	b.Add(1)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if buf.Len() != n {
		t.Fatalf("wrote after Close: %q", buf.String()[n:])
	}
}

func TestNotATerminalPrintsNothing(t *testing.T) {
	b, buf, clk := newTestBar(10, false)
	for i := int64(1); i <= 10; i++ {
		clk.advance(time.Second)
		b.Update(i)
	}
	b.SetPostfix("loss=1")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if buf.Len() != 0 {
		t.Fatalf("non-terminal bar wrote %q", buf.String())
	}
	// New decides by itself: a bytes.Buffer is no terminal.
	var out bytes.Buffer
	b = New(&out, 5)
	b.Update(5)
	b.Close()
	if out.Len() != 0 {
		t.Fatalf("New on a buffer wrote %q", out.String())
	}
}

func TestPrintAbove(t *testing.T) {
	b, buf, _ := newTestBar(10, true)
	b.Update(1)
	var logs bytes.Buffer
	if err := b.PrintAbove(&logs, "{'loss': '2.5'}"); err != nil {
		t.Fatal(err)
	}
	if logs.String() != "{'loss': '2.5'}\n" {
		t.Errorf("line written %q", logs.String())
	}
	// The bar was erased before the line and drawn again after it.
	s := buf.String()
	if i := strings.Index(s, "\r\x1b[K"); i < 0 || !strings.Contains(s[i+4:], "1/10") {
		t.Errorf("bar not erased then redrawn: %q", s)
	}
	// Same writer: the line lands between the erase and the redraw.
	b, buf, _ = newTestBar(10, true)
	b.Update(1)
	b.PrintAbove(nil, "hello")
	if !strings.Contains(buf.String(), "\r\x1b[Khello\n\r") {
		t.Errorf("line not between erase and redraw: %q", buf.String())
	}
	// Not a terminal: just the line.
	b, buf, _ = newTestBar(10, false)
	b.Update(1)
	b.PrintAbove(nil, "hello")
	if buf.String() != "hello\n" {
		t.Errorf("non-terminal PrintAbove wrote %q", buf.String())
	}
}

func TestTruncatesToWidth(t *testing.T) {
	var buf bytes.Buffer
	clk := &clock{t: time.Unix(0, 0)}
	b := NewWithOptions(&buf, Options{Total: 10, Terminal: true, Now: clk.Now, Width: 30})
	b.SetPostfix(strings.Repeat("x", 100))
	b.Update(1)
	if got := []rune(lastLine(buf.String())); len(got) != 29 {
		t.Fatalf("line of %d columns with Width 30: %q", len(got), string(got))
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk on fire") }

func TestWriteErrorReportedByClose(t *testing.T) {
	b := NewWithOptions(failWriter{}, Options{Total: 3, Terminal: true})
	b.Update(1) // must not panic or block
	if err := b.Close(); err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("Close error = %v, want the write error", err)
	}
}

func TestFormatInterval(t *testing.T) {
	for _, c := range []struct {
		s    float64
		want string
	}{{0, "00:00"}, {59.9, "00:59"}, {61, "01:01"}, {3599, "59:59"}, {3600, "1:00:00"}, {3725, "1:02:05"},
		{100 * 3600, "100:00:00"}, {-1, "00:00"}, {1e15, "??:??"}} {
		if got := FormatInterval(c.s); got != c.want {
			t.Errorf("FormatInterval(%v) = %q, want %q", c.s, got, c.want)
		}
	}
}

func TestBarCells(t *testing.T) {
	for _, c := range []struct {
		frac float64
		want string
	}{{0, "          "}, {0.05, "▌         "}, {0.5, "█████     "}, {0.99, "█████████▉"}, {1, "██████████"}} {
		if got := bar(c.frac); got != c.want {
			t.Errorf("bar(%v) = %q, want %q", c.frac, got, c.want)
		}
	}
}

func TestIsTerminal(t *testing.T) {
	if IsTerminal(&bytes.Buffer{}) {
		t.Error("bytes.Buffer is not a terminal")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if IsTerminal(w) {
		t.Error("a pipe is not a terminal")
	}
	f, err := os.CreateTemp(t.TempDir(), "log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if IsTerminal(f) {
		t.Error("a regular file is not a terminal")
	}
	var nilFile *os.File
	if IsTerminal(nilFile) {
		t.Error("a nil *os.File is not a terminal")
	}
	if null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0); err == nil {
		defer null.Close()
		if !IsTerminal(null) {
			t.Errorf("%s is a character device", os.DevNull)
		}
	}
}

// TestConcurrentUpdateClose runs Update on one goroutine while another closes the bar; the
// race detector checks the locking.
func TestConcurrentUpdateClose(t *testing.T) {
	var buf syncBuffer
	b := NewWithOptions(&buf, Options{Total: 1 << 20, Terminal: true, MinInterval: time.Nanosecond})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := int64(0); i < 2000; i++ {
			b.Update(i)
			b.SetPostfix("loss=1")
		}
	}()
	go func() {
		defer wg.Done()
		time.Sleep(time.Millisecond)
		b.Close()
	}()
	wg.Wait()
	n := buf.Len()
	b.Update(5)
	if buf.Len() != n {
		t.Fatal("drew after Close returned")
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Len()
}
