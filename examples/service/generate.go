package main

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gotpu/gotpu/checkpoint"
	"github.com/gotpu/gotpu/data/tokenizer"
	"github.com/gotpu/gotpu/models"
)

// maxNewTokensLimit bounds one request's generation (the model's positions bound it too).
const maxNewTokensLimit = 1024

// generateResponse is GET /jobs/{id}/generate's answer.
type generateResponse struct {
	Job        string  `json:"job"`
	Checkpoint string  `json:"checkpoint"`
	Step       int     `json:"step"`
	Prompt     string  `json:"prompt,omitempty"`
	PromptIDs  []int   `json:"prompt_ids"`
	TokenIDs   []int   `json:"token_ids"`
	Text       *string `json:"text"` // null when the job has no tokenizer
	Seconds    float64 `json:"seconds"`
}

// generateParams are the query parameters of a generation request.
type generateParams struct {
	prompt    string
	promptIDs []int
	opts      models.GenerateOptions
}

func parseGenerateParams(q url.Values) (generateParams, *requestError) {
	re := &requestError{}
	g := generateParams{prompt: q.Get("prompt"), opts: models.DefaultGenerateOptions()}
	if s := q.Get("prompt_ids"); s != "" {
		for _, f := range strings.Split(s, ",") {
			id, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				re.add("prompt_ids", "%q is not a token id (want comma-separated integers)", f)
				break
			}
			g.promptIDs = append(g.promptIDs, id)
		}
	}
	if g.prompt == "" && q.Get("prompt_ids") == "" {
		re.add("prompt", "required (or prompt_ids: comma-separated token ids)")
	}
	if g.prompt != "" && q.Get("prompt_ids") != "" {
		re.add("prompt_ids", "give prompt or prompt_ids, not both")
	}
	intParam := func(name string, dst *int, lo, hi int) {
		if s := q.Get(name); s != "" {
			v, err := strconv.Atoi(s)
			if err != nil || v < lo || v > hi {
				re.add(name, "%q: want an integer in [%d, %d]", s, lo, hi)
				return
			}
			*dst = v
		}
	}
	floatParam := func(name string, dst *float64, lo, hi float64) {
		if s := q.Get(name); s != "" {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil || v < lo || v > hi {
				re.add(name, "%q: want a number in [%g, %g]", s, lo, hi)
				return
			}
			*dst = v
		}
	}
	intParam("max_new_tokens", &g.opts.MaxNewTokens, 1, maxNewTokensLimit)
	intParam("top_k", &g.opts.TopK, 0, 1<<20)
	floatParam("temperature", &g.opts.Temperature, 0, 100)
	floatParam("top_p", &g.opts.TopP, 0, 1)
	floatParam("repetition_penalty", &g.opts.RepetitionPenalty, 0, 100)
	if s := q.Get("do_sample"); s != "" {
		v, err := strconv.ParseBool(s)
		if err != nil {
			re.add("do_sample", "%q: want true or false", s)
		}
		g.opts.DoSample = v
	}
	if s := q.Get("seed"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			re.add("seed", "%q: want a non-negative integer", s)
		}
		g.opts.Seed = v
	}
	if len(re.Fields) == 0 {
		// The library's own rules (temperature and top_p above 0 when sampling, …): a request
		// they refuse is the client's mistake, answered 400 naming the field, never a 500 later.
		if err := g.opts.Validate(); err != nil {
			var oe *models.GenerateOptionError
			if errors.As(err, &oe) {
				re.add(oe.Field, "%v: %s", oe.Value, oe.Reason)
			} else {
				re.add("generation", "%v", err)
			}
		}
	}
	if len(re.Fields) > 0 {
		return g, re
	}
	return g, nil
}

// handleGenerate continues a prompt with the job's latest committed checkpoint (verified by
// checkpoint.Open, loaded with models.Load), or with the final model of a completed job that
// saved no checkpoint. The model is loaded per request: a running job commits new checkpoints
// all the time, and generation compiles its program per call anyway; MaxGenerating bounds how
// many models are in memory for it at once.
func (s *Server) handleGenerate(w http.ResponseWriter, r *http.Request) {
	j, ok := s.job(w, r)
	if !ok {
		return
	}
	g, re := parseGenerateParams(r.URL.Query())
	if re != nil {
		s.met.gens.WithLabelValues("bad_request").Inc()
		writeError(w, http.StatusBadRequest, re.Error(), re.Fields)
		return
	}
	dir, step, err := s.modelSource(j)
	if errors.Is(err, checkpoint.ErrNoCheckpoint) {
		s.met.gens.WithLabelValues("no_checkpoint").Inc()
		writeError(w, http.StatusConflict, err.Error(), nil)
		return
	}
	if err != nil {
		s.met.gens.WithLabelValues("error").Inc()
		writeError(w, http.StatusInternalServerError, err.Error(), nil)
		return
	}
	// The slot bounds the tokenizers and models that generation holds at once.
	select {
	case s.genSlot <- struct{}{}:
		defer func() { <-s.genSlot }()
	case <-r.Context().Done():
		return
	}
	// The tokenizer is borrowed for this request only: shared with the job while it runs (or
	// other requests), loaded again after the last holder let it go.
	var tok tokenizer.Tokenizer
	if j.tokPath != "" {
		t, release, err := s.toks.acquire(r.Context(), j.tokPath)
		if err != nil {
			s.met.gens.WithLabelValues("error").Inc()
			writeError(w, http.StatusInternalServerError, fmt.Sprintf("loading the job's tokenizer: %v", err), nil)
			return
		}
		defer release()
		tok = t
	}
	resp := generateResponse{Job: j.ID, Checkpoint: dir, Step: step, Prompt: g.prompt, PromptIDs: g.promptIDs}
	if g.prompt != "" {
		if tok == nil {
			s.met.gens.WithLabelValues("bad_request").Inc()
			writeError(w, http.StatusBadRequest, "prompt: this job was trained on token ids without a tokenizer; pass prompt_ids", []fieldError{{Field: "prompt", Message: "the job has no tokenizer; pass prompt_ids"}})
			return
		}
		enc, err := tok.Encode(g.prompt, false)
		if err != nil {
			s.met.gens.WithLabelValues("bad_request").Inc()
			writeError(w, http.StatusBadRequest, fmt.Sprintf("prompt: %v", err), nil)
			return
		}
		for _, id := range enc.IDs {
			resp.PromptIDs = append(resp.PromptIDs, int(id))
		}
	}

	start := time.Now()
	m, err := models.Load(r.Context(), s.rt, dir, models.LoadOptions{})
	if err != nil {
		s.met.gens.WithLabelValues("error").Inc()
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("loading %s: %v", dir, err), nil)
		return
	}
	lm, ok := m.(models.CausalLM)
	if !ok {
		s.met.gens.WithLabelValues("error").Inc()
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("%s holds a %s, not a causal LM", dir, m.Architecture()), nil)
		return
	}
	for i, id := range resp.PromptIDs {
		if id < 0 || id >= lm.VocabSize() {
			s.met.gens.WithLabelValues("bad_request").Inc()
			writeError(w, http.StatusBadRequest, fmt.Sprintf("prompt_ids[%d]: %d is outside the model's vocabulary [0, %d)", i, id, lm.VocabSize()), nil)
			return
		}
	}
	if len(resp.PromptIDs) == 0 || len(resp.PromptIDs) >= lm.MaxPositions() {
		s.met.gens.WithLabelValues("bad_request").Inc()
		writeError(w, http.StatusBadRequest, fmt.Sprintf("prompt: %d tokens; the model takes 1 to %d (its positions, less one to generate)", len(resp.PromptIDs), lm.MaxPositions()-1), nil)
		return
	}
	out, err := models.Generate(r.Context(), s.rt, lm, resp.PromptIDs, g.opts)
	if err != nil {
		s.met.gens.WithLabelValues("error").Inc()
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("generating: %v", err), nil)
		return
	}
	resp.TokenIDs = out
	if resp.TokenIDs == nil {
		resp.TokenIDs = []int{}
	}
	if tok != nil {
		ids := make([]uint32, len(out))
		for i, id := range out {
			ids[i] = uint32(id)
		}
		text, err := tok.Decode(ids, false)
		if err != nil {
			s.met.gens.WithLabelValues("error").Inc()
			writeError(w, http.StatusInternalServerError, fmt.Sprintf("decoding: %v", err), nil)
			return
		}
		resp.Text = &text
	}
	resp.Seconds = time.Since(start).Seconds()
	s.met.gens.WithLabelValues("ok").Inc()
	writeJSON(w, http.StatusOK, resp)
}

// modelSource picks the weights to generate with: the latest committed checkpoint, verified; or,
// for a completed job that saved none (save_strategy "no"), its final model in output_dir.
func (s *Server) modelSource(j *Job) (dir string, step int, err error) {
	e, err := checkpoint.Latest(j.Dir)
	if errors.Is(err, checkpoint.ErrNoCheckpoint) {
		p, _, _ := j.Snapshot()
		if p.State == StateCompleted {
			if _, serr := os.Stat(filepath.Join(j.Dir, "config.json")); serr == nil {
				return j.Dir, p.Step, nil
			}
		}
		return "", 0, fmt.Errorf("%w yet: job %s is %s at step %d", checkpoint.ErrNoCheckpoint, j.ID, p.State, p.Step)
	}
	if err != nil {
		return "", 0, err
	}
	if _, err := checkpoint.Open(e.Dir, "model.safetensors", "config.json"); err != nil {
		return "", 0, err
	}
	return e.Dir, e.Step, nil
}
