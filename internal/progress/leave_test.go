package progress

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestAboveAndLeave: a line written through Above (or Writer) lands on its own line: the bar is
// erased ("\r\x1b[K"), the line written, the bar redrawn; Leave draws the final count, ends the
// line and writes the note, after which nothing is drawn.
func TestAboveAndLeave(t *testing.T) {
	b, buf, clk := newTestBar(10, true)
	clk.advance(time.Second)
	b.Update(3)
	buf.Reset()
	if _, err := b.Writer(nil).Write([]byte("INFO compiled\n")); err != nil {
		t.Fatal(err)
	}
	want := "\r\x1b[K" + "INFO compiled\n" + "\r 30%|███       | 3/10 [00:01<00:02,  3.00it/s]\x1b[K"
	if got := buf.String(); got != want {
		t.Fatalf("write above the bar\n got %q\nwant %q", got, want)
	}
	buf.Reset()
	b.SetHidden(true)
	b.Update(4)
	if got := buf.String(); got != "\r\x1b[K" {
		t.Fatalf("hidden bar: wrote %q, want only the erase", got)
	}
	buf.Reset()
	if err := b.Above(func() error { return errors.New("x") }); err == nil || buf.Len() != 0 {
		t.Fatalf("Above on a hidden bar: err %v, wrote %q", err, buf.String())
	}
	b.SetHidden(false)
	buf.Reset()
	clk.advance(time.Second)
	if err := b.Leave(10, "note"); err != nil {
		t.Fatal(err)
	}
	want = "\r100%|██████████| 10/10 [00:02<00:00,  5.00it/s]\x1b[K\nnote\n"
	if got := buf.String(); got != want {
		t.Fatalf("Leave\n got %q\nwant %q", got, want)
	}
	buf.Reset()
	b.Update(11)
	b.PrintAbove(nil, "after")
	b.Close()
	if got := buf.String(); got != "after\n" {
		t.Errorf("after Leave: %q, want only the printed line", got)
	}
	// Not a terminal: Leave writes nothing, Above only runs fn.
	nb, nbuf, _ := newTestBar(10, false)
	nb.Update(10)
	nb.Above(func() error { nbuf.WriteString("x\n"); return nil })
	nb.Leave(10, "note")
	if got := nbuf.String(); got != "x\n" || strings.Contains(got, "\r") {
		t.Errorf("not a terminal: %q", got)
	}
}
