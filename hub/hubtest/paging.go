package hubtest

import (
	"net/http"
	"strconv"
)

// SetTreePageSize makes the tree API answer at most n entries at a time, with the rest reached
// through a `Link: <url>; rel="next"` header as the Hub paginates (its cursor is opaque to
// clients; here it is the index of the page's first entry). n ≤ 0 restores one page with no
// Link header, the default.
func (s *Server) SetTreePageSize(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.treePage = max(n, 0)
}

// writeTree answers a tree request with the page of entries its cursor asks for.
func (s *Server) writeTree(w http.ResponseWriter, r *http.Request, entries []entry) {
	s.mu.Lock()
	size := s.treePage
	s.mu.Unlock()
	if size == 0 {
		writeJSON(w, entries)
		return
	}
	q := r.URL.Query()
	start := 0
	if c := q.Get("cursor"); c != "" {
		n, err := strconv.Atoi(c)
		if err != nil || n < 0 || n > len(entries) {
			hubError(w, http.StatusBadRequest, "", "Invalid cursor")
			return
		}
		start = n
	}
	end := min(start+size, len(entries))
	if end < len(entries) {
		q.Set("cursor", strconv.Itoa(end))
		// Absolute, as the Hub sends it: @huggingface/hub only follows http(s) URLs.
		next := s.hub.URL + r.URL.EscapedPath() + "?" + q.Encode()
		w.Header().Set("Link", "<"+next+`>; rel="next"`)
	}
	writeJSON(w, entries[start:end])
}
