package main

import (
	"net/http"
	"time"
)

// writeDeadline gives h's answer a write deadline of Config.WriteTimeout, counted from the
// answer's first byte: a client that stops reading cannot hold the handler (nor, at shutdown,
// the server) for longer. Counting from the first byte rather than from the request leaves the
// time a handler legitimately waits before answering (DELETE waiting for the job's checkpoint,
// generation loading a model) out of it.
func (s *Server) writeDeadline(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&deadlineWriter{ResponseWriter: w, rc: http.NewResponseController(w), d: s.cfg.WriteTimeout}, r)
	})
}

// deadlineWriter sets the connection's write deadline at the first WriteHeader or Write.
// net/http clears it once the handler has returned, before the connection serves its next
// request.
type deadlineWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	d       time.Duration
	started bool
}

func (w *deadlineWriter) start() {
	if !w.started {
		w.started = true
		// An error means the connection cannot take deadlines (not the case for net/http's
		// own): the answer is written without one, as before.
		_ = w.rc.SetWriteDeadline(time.Now().Add(w.d))
	}
}

func (w *deadlineWriter) WriteHeader(code int) {
	w.start()
	w.ResponseWriter.WriteHeader(code)
}

func (w *deadlineWriter) Write(b []byte) (int, error) {
	w.start()
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's own writer (Flush, deadlines).
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// countInFlight counts the handlers running (requestsInFlight, and the
// gotpu_http_requests_in_flight gauge).
func (s *Server) countInFlight(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.inFlight.Add(1)
		defer s.inFlight.Add(-1)
		h.ServeHTTP(w, r)
	})
}

// requestsInFlight returns how many HTTP handlers are running now.
func (s *Server) requestsInFlight() int64 { return s.inFlight.Load() }
