package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"unicode/utf8"
)

// A panic is a bug, or an input no check foresaw (an adapter's regular expression did it once),
// and it must cost one job or one request, never the process: every job and every request that
// was running would go with it, and a service that accepts Hub repo ids runs on input anyone
// may publish. Jobs run on goroutines of their own, where a panic kills the process (net/http
// does not recover them), so each job's work is recovered at its boundary (trainRecovered) and
// ends the job failed. Requests, generation among them, run on net/http's goroutines, which
// recover a panic by dropping the connection without an answer; recoverPanics answers 500
// instead, when nothing was written yet. Both log the stack with slog. The slots (training,
// generation) and the tokenizers a job or request holds are released by their owners' deferred
// calls, which run while the panic unwinds.

// maxPanicText bounds how much of a panic's value goes into a job's error or a log line: a
// panic's message may quote its input whole (a regexp panic quotes the expression).
const maxPanicText = 1 << 10

// panicText is a panic's value as text, cut to maxPanicText bytes on a character boundary.
func panicText(v any) string {
	s := fmt.Sprint(v)
	if len(s) <= maxPanicText {
		return s
	}
	cut := maxPanicText
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", s[:cut], len(s))
}

// trainRecovered runs the job's work (s.trainJob: train) and turns a panic in it into the job's
// error, logged with the stack: the job ends failed and runJob goes on as after any error
// (job.json written, the training slot given back).
func (s *Server) trainRecovered(ctx context.Context, j *Job, log *slog.Logger) (err error) {
	defer func() {
		if v := recover(); v != nil {
			text := panicText(v)
			log.Error("job panicked: it fails, the service goes on", "panic", text, "stack", string(debug.Stack()))
			err = fmt.Errorf("internal error: the job panicked: %s (a bug; the service's log has the stack)", text)
		}
	}()
	return s.trainJob(ctx, j, log)
}

// recoverPanics answers a request whose handler panicked with a 500, and logs the panic with
// the stack. An answer already under way cannot be changed: its connection is dropped instead
// (http.ErrAbortHandler), as net/http does, so the client sees it cut short rather than
// complete. A handler's own http.ErrAbortHandler passes through unlogged.
func (s *Server) recoverPanics(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tw := &writeTracker{ResponseWriter: w}
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler { // net/http compares it the same way
				panic(v)
			}
			s.log.Error("request panicked: it fails, the service goes on", "method", r.Method, "path", r.URL.Path,
				"panic", panicText(v), "stack", string(debug.Stack()))
			if tw.wrote {
				panic(http.ErrAbortHandler)
			}
			writeError(w, http.StatusInternalServerError, "internal error: the request panicked (a bug; the service's log has the stack); the service goes on", nil)
		}()
		h.ServeHTTP(tw, r)
	})
}

// writeTracker records whether a handler has begun its answer.
type writeTracker struct {
	http.ResponseWriter
	wrote bool
}

func (w *writeTracker) WriteHeader(code int) {
	w.wrote = true
	w.ResponseWriter.WriteHeader(code)
}

func (w *writeTracker) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's own writer (Flush, deadlines).
func (w *writeTracker) Unwrap() http.ResponseWriter { return w.ResponseWriter }
