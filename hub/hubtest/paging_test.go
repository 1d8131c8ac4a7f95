package hubtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// nextLink is the rel="next" URL of a Link header as @huggingface/hub's parseLinkHeader reads
// it: an absolute http(s) URL in angle brackets.
var nextLink = regexp.MustCompile(`<(https?://[^>]+)>;\s+rel="next"`)

// TestTreePagination: with a page size, the tree API answers in pages chained by Link headers,
// which together list exactly what one unpaged answer lists; a bad cursor is a 400.
func TestTreePagination(t *testing.T) {
	s := New(t)
	files := map[string][]byte{}
	for i := range 7 {
		files[fmt.Sprintf("d%d/f%d.txt", i%2, i)] = []byte(fmt.Sprint(i))
	}
	s.AddRepo("model", "org/many", files, RepoOptions{})
	first := s.URL() + "/api/models/org/many/tree/main?recursive=true&expand=false"
	resp, whole := do(t, http.DefaultClient, "GET", first, nil, nil)
	if resp.Header.Get("Link") != "" {
		t.Fatalf("unpaged answer has a Link header %q", resp.Header.Get("Link"))
	}
	var want []entry
	if err := json.Unmarshal(whole, &want); err != nil || len(want) != 9 { // 7 files, 2 directories
		t.Fatalf("unpaged tree (%v): %s", err, whole)
	}

	s.SetTreePageSize(2)
	var got []entry
	pages := 0
	for u := first; u != ""; pages++ {
		if pages > 10 {
			t.Fatal("pagination does not end")
		}
		resp, body := do(t, http.DefaultClient, "GET", u, nil, nil)
		var page []entry
		if err := json.Unmarshal(body, &page); err != nil || len(page) == 0 || len(page) > 2 {
			t.Fatalf("page %d (%v): %s", pages, err, body)
		}
		got = append(got, page...)
		u = ""
		if m := nextLink.FindStringSubmatch(resp.Header.Get("Link")); m != nil {
			u = m[1]
			if !strings.Contains(u, "recursive=true") {
				t.Errorf("next link %q drops the query", u)
			}
		} else if link := resp.Header.Get("Link"); link != "" {
			t.Fatalf("Link header %q has no absolute rel=next URL", link)
		}
	}
	if pages != 5 {
		t.Errorf("%d pages of 2 for 9 entries, want 5", pages)
	}
	gotJSON, _ := json.Marshal(got)
	wantJSON, _ := json.Marshal(want)
	if !bytes.Equal(gotJSON, wantJSON) {
		t.Errorf("paged tree\n%s\nunpaged\n%s", gotJSON, wantJSON)
	}
	for _, bad := range []string{"x", "-1", "10"} {
		if resp, _ := do(t, http.DefaultClient, "GET", first+"&cursor="+bad, nil, nil); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("cursor %q: status %d, want 400", bad, resp.StatusCode)
		}
	}
	s.SetTreePageSize(0)
	if resp, body := do(t, http.DefaultClient, "GET", first, nil, nil); resp.Header.Get("Link") != "" || !bytes.Equal(body, whole) {
		t.Errorf("page size 0 does not restore one page: Link %q", resp.Header.Get("Link"))
	}
}

// TestSlowNext: the next download arrives whole, in pieces, taking about the time asked; the
// one after it is immediate, and a range is slowed too.
func TestSlowNext(t *testing.T) {
	s := New(t)
	content := bytes.Repeat([]byte("0123456789abcdef"), 4096)
	s.AddRepo("model", "org/m", map[string][]byte{"w.bin": content}, RepoOptions{})
	u := s.URL() + "/org/m/resolve/main/w.bin"
	const d = 320 * time.Millisecond

	s.SlowNext("w.bin", d)
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var reads int
	var body []byte
	buf := make([]byte, len(content))
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			reads++
			body = append(body, buf[:n]...)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	resp.Body.Close()
	took := time.Since(start)
	if !bytes.Equal(body, content) {
		t.Fatalf("slow download: %d bytes, not the file's %d", len(body), len(content))
	}
	if took < d*3/4 || reads < slowChunks/2 {
		t.Errorf("slow download took %v in %d reads; want about %v in about %d", took, reads, d, slowChunks)
	}
	start = time.Now()
	if _, body := do(t, http.DefaultClient, "GET", u, nil, nil); !bytes.Equal(body, content) || time.Since(start) > d/2 {
		t.Errorf("the download after the slow one took %v", time.Since(start))
	}
	s.SlowNext("w.bin", d)
	start = time.Now()
	resp, body = do(t, http.DefaultClient, "GET", u, map[string]string{"Range": "bytes=100-"}, nil)
	if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(body, content[100:]) || time.Since(start) < d*3/4 {
		t.Errorf("slow range: status %d, %d bytes, %v", resp.StatusCode, len(body), time.Since(start))
	}
}
