package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// keepAlive is how often an idle event stream gets a comment line, so proxies and clients do not
// time it out while a long step runs.
const keepAlive = 15 * time.Second

// handleEvents streams the job's progress as server-sent events: one `data: {...}` (the
// GET /jobs/{id} JSON, with the progress version as the event id) per update — each step, log
// entry, save and state change — starting with the current state. The stream ends after the
// event of a final state, or when the client goes away. A slow client skips to the newest
// progress instead of queueing old events, so it can never hold the training loop back; a
// client that does not take an event (or keep-alive) within Config.WriteTimeout is dropped, so
// it cannot hold the handler either. The stream as a whole has no deadline: it lasts as long
// as its job.
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	j, ok := s.job(w, r)
	if !ok {
		return
	}
	s.met.streams.Inc()
	defer s.met.streams.Dec()
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	// An error means the connection takes no deadlines (not so for net/http's own): the
	// stream then runs without them.
	deadline := func() { _ = rc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout)) }
	deadline()
	w.WriteHeader(http.StatusOK)
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	sent, first := uint64(0), true
	for {
		p, v, changed := j.Snapshot()
		if first || v != sent {
			b, err := json.Marshal(p)
			if err != nil {
				s.log.Error("event stream: encoding progress", "job", j.ID, "error", err)
				return
			}
			deadline()
			if _, err := fmt.Fprintf(w, "id: %d\ndata: %s\n\n", v, b); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
			sent, first = v, false
		}
		if p.State.Done() {
			return
		}
		select {
		case <-changed:
		case <-tick.C:
			deadline()
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
		case <-r.Context().Done():
			return
		}
	}
}
