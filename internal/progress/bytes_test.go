package progress

import (
	"bytes"
	"testing"
	"time"
)

// TestRenderBytesLikeHubDownloads: a byte bar reads as huggingface_hub's download bars (tqdm with
// unit="B", unit_scale=True, unit_divisor=1024). The expected lines and sizes are what tqdm
// 4.64.1 (Debian's python3-tqdm) printed for the same counts and times: format_meter(1<<20,
// 3<<20, 2, unit='B', unit_scale=True, unit_divisor=1024), format_meter(1500, None, 1, ...) and
// format_sizeof(n, divisor=1024) — counts scale by 1024, the rate by 1000, as tqdm does.
func TestRenderBytesLikeHubDownloads(t *testing.T) {
	var buf bytes.Buffer
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	b := NewWithOptions(&buf, Options{Total: 3 << 20, Terminal: true, Now: clk.Now, Width: 200, Bytes: true})
	clk.advance(2 * time.Second)
	b.Update(1 << 20) // 524288 B/s ("524kB/s"), 2 MiB left: 4 s
	if got, want := lastLine(buf.String()), " 33%|███▎      | 1.00M/3.00M [00:02<00:04, 524kB/s]"; got != want {
		t.Errorf("byte bar\n got %q\nwant %q", got, want)
	}
	unknown := NewWithOptions(&buf, Options{Terminal: true, Now: clk.Now, Width: 200, Bytes: true})
	clk.advance(time.Second)
	unknown.Update(1500)
	if got, want := lastLine(buf.String()), "1.46kB [00:01, 1.50kB/s]"; got != want {
		t.Errorf("byte bar, unknown total\n got %q\nwant %q", got, want)
	}
}

func TestFormatSizeof(t *testing.T) {
	for _, c := range []struct {
		n    float64
		want string
	}{{0, "0.00"}, {9.994, "9.99"}, {9.996, "10.0"}, {99.94, "99.9"}, {99.96, "100"}, {999.4, "999"},
		{999.6, "0.98k"}, {1500, "1.46k"}, {3 << 20, "3.00M"}, {124_000_000 * 4, "473M"}, {5 << 30, "5.00G"}} {
		if got := formatSizeof(c.n, 1024); got != c.want {
			t.Errorf("formatSizeof(%v, 1024) = %q, want %q", c.n, got, c.want)
		}
	}
}
