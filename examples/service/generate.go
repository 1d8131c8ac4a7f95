package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gotpu/gotpu/checkpoint"
	"github.com/gotpu/gotpu/data/chat"
	"github.com/gotpu/gotpu/data/tokenizer"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/peft"
)

// maxNewTokensLimit bounds one request's generation (the model's positions bound it too).
const maxNewTokensLimit = 1024

// generateResponse is the answer of GET /jobs/{id}/generate (job, checkpoint, step) and of
// GET /generate (model, as the request named it, and for a Hub model the commit; step 0; adapter,
// as the request named it, when one was attached).
type generateResponse struct {
	Job        string  `json:"job,omitempty"`
	Checkpoint string  `json:"checkpoint,omitempty"`
	Model      string  `json:"model,omitempty"`
	Revision   string  `json:"revision,omitempty"`
	Adapter    string  `json:"adapter,omitempty"`
	Step       int     `json:"step"`
	Prompt     string  `json:"prompt,omitempty"` // for a chat request, the rendered conversation
	PromptIDs  []int   `json:"prompt_ids"`
	TokenIDs   []int   `json:"token_ids"`
	Text       *string `json:"text"` // null when the job has no tokenizer
	// Reply (chat requests only) is token_ids without the stop token that ended them, decoded
	// with skip_special_tokens; EOSTokenIDs are the stop tokens generation used (chatStops).
	Reply       *string `json:"reply,omitempty"`
	EOSTokenIDs []int   `json:"eos_token_ids,omitempty"`
	Seconds     float64 `json:"seconds"`
}

// generateParams are the query parameters of a generation request.
type generateParams struct {
	prompt    string
	promptIDs []int
	opts      models.GenerateOptions
	// messages, when not nil, is a chat request's conversation (system message included): it is
	// rendered with the tokenizer's chat template and add_generation_prompt.
	messages []json.RawMessage
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
	if g.prompt == "" && q.Get("prompt_ids") == "" && !q.Has("messages") {
		re.add("prompt", "required (or prompt_ids: comma-separated token ids; or messages: a JSON list of chat messages)")
	}
	if g.prompt != "" && q.Get("prompt_ids") != "" {
		re.add("prompt_ids", "give prompt or prompt_ids, not both")
	}
	parseChatParams(q, &g, re)
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
	q, ok := s.generateQuery(w, r)
	if !ok {
		return
	}
	g, re := parseGenerateParams(q)
	if q.Get("adapter") != "" {
		// A job generates with its own weights: a LoRA job's are its adapter on its base.
		if re == nil {
			re = &requestError{}
		}
		re.add("adapter", "not taken by a job's generation (a LoRA job generates with the adapter it trains); to attach an adapter to a model, use GET /generate?model=...&adapter=...")
	}
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
	src := genSource{resp: generateResponse{Job: j.ID, Checkpoint: dir, Step: step}, dir: dir, label: dir,
		tokPath: j.tokPath, what: "job"}
	if j.baseDir != "" {
		// A LoRA job's checkpoints hold the adapter only; it is attached to the job's base.
		src.dir, src.label = j.baseDir, "the job's model_name_or_path"
		src.adapterDir, src.adapterLabel = dir, dir
	}
	s.generate(w, r, src, g)
}

// genSource is what a generation request generates with.
type genSource struct {
	// resp holds the answer's fields naming the source (job, checkpoint, step; or model).
	resp generateResponse
	// dir is the model directory; label is how messages name it.
	dir, label string
	// adapterDir, when set, is a PEFT LoRA adapter directory attached to the model of dir;
	// adapterLabel is how messages name it.
	adapterDir, adapterLabel string
	// cfg is the model's config (pretrainedSource), which bounds a Hub adapter's weights.
	cfg models.Config
	// fetch, when set, brings the weights (the model's, an adapter's) into place: it runs once a
	// generation slot is held, so MaxGenerating bounds the downloads too. A *requestError from it
	// is the client's (400).
	fetch func(ctx context.Context) error
	// tokPath is the tokenizer file or directory ("": none).
	tokPath string
	// what names the source in messages: "job" or "model".
	what string
}

// generate serves a generation request from src once its parameters are checked: the weights
// fetched if need be, the tokenizer borrowed, the model loaded, the prompt continued.
func (s *Server) generate(w http.ResponseWriter, r *http.Request, src genSource, g generateParams) {
	// The slot bounds the tokenizers and models that generation holds at once.
	select {
	case s.genSlot <- struct{}{}:
		defer func() { <-s.genSlot }()
	case <-r.Context().Done():
		return
	}
	if src.fetch != nil {
		if err := src.fetch(r.Context()); err != nil {
			var re *requestError
			switch {
			case errors.As(err, &re):
				s.met.gens.WithLabelValues("bad_request").Inc()
				writeError(w, http.StatusBadRequest, re.Error(), re.Fields)
			case r.Context().Err() != nil:
				// The client is gone; a partial download stays in the cache, to be resumed.
			default:
				s.met.gens.WithLabelValues("error").Inc()
				writeError(w, http.StatusBadGateway, err.Error(), nil)
			}
			return
		}
	}
	dir := src.dir
	// The tokenizer is borrowed for this request only: shared with the job while it runs (or
	// other requests), loaded again after the last holder let it go.
	var tok tokenizer.Tokenizer
	if src.tokPath != "" {
		t, release, err := s.toks.acquire(r.Context(), src.tokPath)
		if err != nil {
			s.met.gens.WithLabelValues("error").Inc()
			writeError(w, http.StatusInternalServerError, fmt.Sprintf("loading the %s's tokenizer: %s", src.what, relabel(err, dir, src.label)), nil)
			return
		}
		defer release()
		tok = t
	}
	resp := src.resp
	resp.Prompt, resp.PromptIDs = g.prompt, g.promptIDs
	var cp *chatPrompt
	if g.messages != nil {
		var re *requestError
		if cp, re = s.renderChat(r.Context(), src, tok, g.messages); re != nil {
			if r.Context().Err() != nil {
				return // the client is gone: the render stopped with its request
			}
			s.met.gens.WithLabelValues("bad_request").Inc()
			writeError(w, http.StatusBadRequest, re.Error(), re.Fields)
			return
		}
		resp.Prompt, resp.PromptIDs = cp.text, cp.ids
	} else if g.prompt != "" {
		if tok == nil {
			s.met.gens.WithLabelValues("bad_request").Inc()
			msg := "this job was trained on token ids without a tokenizer; pass prompt_ids"
			if src.what != "job" {
				msg = "the model has no tokenizer.json (name one with tokenizer=), or pass prompt_ids"
			}
			writeError(w, http.StatusBadRequest, "prompt: "+msg, []fieldError{{Field: "prompt", Message: "prompt: " + msg}})
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
	if err != nil && src.what == "model" && r.Context().Err() == nil {
		// A model the request named (a directory, a Hub repo) whose files do not load is the
		// request's to change, as an adapter's are below: 400 naming the file, not a 500.
		s.met.gens.WithLabelValues("bad_request").Inc()
		msg := "model: " + relabel(err, dir, src.label)
		writeError(w, http.StatusBadRequest, msg, []fieldError{{Field: "model", Message: msg}})
		return
	}
	if err != nil {
		s.met.gens.WithLabelValues("error").Inc()
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("loading %s: %s", src.label, relabel(err, dir, src.label)), nil)
		return
	}
	if src.adapterDir != "" {
		adapted, err := peft.Load(r.Context(), s.rt, m, src.adapterDir, peft.Options{Log: s.log})
		switch {
		case err == nil:
			m = adapted
		case r.Context().Err() != nil:
			return
		case src.what == "job":
			s.met.gens.WithLabelValues("error").Inc()
			writeError(w, http.StatusInternalServerError, fmt.Sprintf("loading the job's adapter %s: %s", src.adapterLabel, relabel(err, dir, src.label)), nil)
			return
		default:
			// An adapter that does not fit the model (another architecture, another rank, a
			// tensor missing) is the request's to change.
			s.met.gens.WithLabelValues("bad_request").Inc()
			msg := "adapter: " + strings.ReplaceAll(relabel(err, src.adapterDir, src.adapterLabel), dir, src.label)
			writeError(w, http.StatusBadRequest, msg, []fieldError{{Field: "adapter", Message: msg}})
			return
		}
	}
	lm, ok := m.(models.CausalLM)
	if !ok {
		s.met.gens.WithLabelValues("error").Inc()
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("%s holds a %s, not a causal LM", src.label, m.Architecture()), nil)
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
	if cp != nil {
		g.opts.EOSTokenIDs = chatStops(dir, lm, cp.stops)
		resp.EOSTokenIDs = g.opts.EOSTokenIDs
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
		if cp != nil {
			n := len(ids)
			if n > 0 && slices.Contains(g.opts.EOSTokenIDs, out[n-1]) {
				n--
			}
			rep, err := tok.Decode(ids[:n], true)
			if err != nil {
				s.met.gens.WithLabelValues("error").Inc()
				writeError(w, http.StatusInternalServerError, fmt.Sprintf("decoding the reply: %v", err), nil)
				return
			}
			resp.Reply = &rep
		}
	}
	resp.Seconds = time.Since(start).Seconds()
	s.met.gens.WithLabelValues("ok").Inc()
	writeJSON(w, http.StatusOK, resp)
}

// modelSource picks the weights to generate with: the latest committed checkpoint, verified; or,
// for a completed job that saved none (save_strategy "no"), its final model in output_dir. A
// LoRA job's weights are its adapter's (adapter_model.safetensors, adapter_config.json).
func (s *Server) modelSource(j *Job) (dir string, step int, err error) {
	weights, config := "model.safetensors", "config.json"
	if j.baseDir != "" {
		weights, config = peft.WeightsFile, peft.ConfigFile
	}
	e, err := checkpoint.Latest(j.Dir)
	if errors.Is(err, checkpoint.ErrNoCheckpoint) {
		p, _, _ := j.Snapshot()
		if p.State == StateCompleted {
			if _, serr := os.Stat(filepath.Join(j.Dir, config)); serr == nil {
				return j.Dir, p.Step, nil
			}
		}
		return "", 0, fmt.Errorf("%w yet: job %s is %s at step %d", checkpoint.ErrNoCheckpoint, j.ID, p.State, p.Step)
	}
	if err != nil {
		return "", 0, err
	}
	if _, err := checkpoint.Open(e.Dir, weights, config); err != nil {
		return "", 0, err
	}
	return e.Dir, e.Step, nil
}

// generateQuery returns a generation request's parameters: a GET's query, or the JSON object
// body of a POST (at most maxBodyBytes), whose keys are the query's names and whose values are
// strings, numbers or booleans, "messages" a list of messages. A POST lets a conversation be
// sent without URL-encoding it; both forms are checked by the same parseGenerateParams.
func (s *Server) generateQuery(w http.ResponseWriter, r *http.Request) (url.Values, bool) {
	if r.Method != http.MethodPost {
		return r.URL.Query(), true
	}
	fail := func(field, format string, args ...any) (url.Values, bool) {
		s.met.gens.WithLabelValues("bad_request").Inc()
		re := &requestError{}
		re.add(field, format, args...)
		writeError(w, http.StatusBadRequest, re.Error(), re.Fields)
		return nil, false
	}
	if r.URL.RawQuery != "" {
		return fail("query", "a POST takes its parameters in the JSON body, not in the query")
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		return fail("body", "reading it: %v", err)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil || obj == nil {
		return fail("body", "want a JSON object of generation parameters%s", jsonProblem(err))
	}
	q := url.Values{}
	for k, v := range obj {
		switch {
		case k == "messages":
			q.Set(k, string(v))
		case string(v) == "null":
		case v[0] == '"':
			var str string
			if err := json.Unmarshal(v, &str); err != nil {
				return fail(k, "%v", err)
			}
			q.Set(k, str)
		case v[0] == '[' || v[0] == '{':
			return fail(k, "want a string, number or boolean")
		default: // a number or a boolean, as its JSON text
			q.Set(k, string(v))
		}
	}
	return q, true
}

// parseChatParams reads the chat parameters into g: messages (a JSON list of messages, each an
// object with a string "role"), or chat=true with prompt (one user message); system puts a
// system message first.
func parseChatParams(q url.Values, g *generateParams, re *requestError) {
	chatOn := false
	if s := q.Get("chat"); s != "" {
		v, err := strconv.ParseBool(s)
		if err != nil {
			re.add("chat", "%q: want true or false", s)
			return
		}
		chatOn = v
	}
	switch {
	case q.Has("messages"):
		if g.prompt != "" {
			re.add("messages", "give messages or prompt, not both")
			return
		}
		if err := json.Unmarshal([]byte(q.Get("messages")), &g.messages); err != nil || g.messages == nil {
			re.add("messages", "want a JSON list of messages%s", jsonProblem(err))
			return
		}
		if len(g.messages) == 0 {
			re.add("messages", "empty conversation")
			return
		}
		for i, m := range g.messages {
			var me *chat.MessageError
			if err := chat.CheckMessage(m); errors.As(err, &me) {
				re.add(fmt.Sprintf("messages[%d]%s", i, me.Field), "%s", me.Problem)
				return
			}
		}
	case chatOn && g.prompt != "":
		g.messages = []json.RawMessage{chat.TextMessage("user", g.prompt)}
	case chatOn:
		re.add("chat", "chat=true needs prompt= (one user message); or give messages=")
		return
	case q.Get("system") != "":
		re.add("system", "only for a chat request (messages=, or chat=true with prompt=)")
		return
	default:
		return
	}
	if q.Get("prompt_ids") != "" {
		re.add("prompt_ids", "not with a chat request: the prompt is the rendered conversation")
		return
	}
	if sys := q.Get("system"); sys != "" {
		var first struct{ Role string }
		_ = json.Unmarshal(g.messages[0], &first)
		if first.Role == "system" {
			re.add("system", "messages already start with a system message")
			return
		}
		g.messages = append([]json.RawMessage{chat.TextMessage("system", sys)}, g.messages...)
	}
}

// jsonProblem is what a JSON decoding error adds to "want ...": nothing when the JSON was
// well formed but of another type (the Go type it names means nothing to a client).
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	if err == nil || errors.As(err, &te) {
		return ""
	}
	return ": " + err.Error()
}

// chatPrompt is a chat request's conversation rendered and tokenized.
type chatPrompt struct {
	text  string
	ids   []int
	stops []int // the template's stop tokens (chat.Template.StopTokens)
}

// renderChat renders a chat request's conversation as `gotpu generate --chat` does: with the
// template beside the tokenizer (its directory's tokenizer_config.json, a chat_template.jinja
// there winning, as transformers loads them; or a chat_template.jinja alone) and
// add_generation_prompt, tokenized without added special tokens (templates write their bos).
// Every failure is the request's: another tokenizer, or other messages; a template that
// reaches its render limits too. The render runs under ctx, the request's: a template is
// input, and one that takes seconds to reach its limits stops when its client leaves.
func (s *Server) renderChat(ctx context.Context, src genSource, tok tokenizer.Tokenizer, msgs []json.RawMessage) (*chatPrompt, *requestError) {
	re := &requestError{}
	label := func(err error) string {
		msg := err.Error()
		if s.hub != nil {
			msg = strings.ReplaceAll(msg, s.hub.c.CacheDir(), hubCacheLabel)
		}
		return msg
	}
	if tok == nil {
		re.add("messages", "the %s has no tokenizer, and a chat request needs one with a chat template (tokenizer=)", src.what)
		return nil, re
	}
	dir := src.tokPath
	if st, err := os.Stat(dir); err == nil && !st.IsDir() {
		dir = filepath.Dir(dir)
	}
	var tm *chat.Template
	var err error
	cfg := filepath.Join(dir, "tokenizer_config.json")
	jinja := filepath.Join(dir, "chat_template.jinja")
	switch {
	case regularFile(cfg):
		tm, err = chat.LoadTemplate(cfg, "")
	case regularFile(jinja):
		tm, err = chat.ParseFile(jinja, nil) // read within chat.MaxTemplateBytes
		cfg = ""
	default:
		re.add("messages", "the %s's tokenizer has no chat template (a tokenizer_config.json with chat_template, or a chat_template.jinja, beside its tokenizer.json)", src.what)
		return nil, re
	}
	if err != nil {
		re.add("messages", "the %s's chat template: %s", src.what, label(err))
		return nil, re
	}
	r, err := tm.Render(ctx, msgs, chat.RenderOptions{AddGenerationPrompt: true})
	var raised *chat.RaiseError
	switch {
	case errors.As(err, &raised):
		re.add("messages", "the chat template refused the conversation: %s", raised.Message)
		return nil, re
	case err != nil:
		re.add("messages", "%s", label(err))
		return nil, re
	}
	e, err := tok.Encode(r.Text, false)
	if err != nil {
		re.add("messages", "tokenizing the rendered conversation: %v", err)
		return nil, re
	}
	cp := &chatPrompt{text: r.Text, ids: make([]int, len(e.IDs))}
	for i, id := range e.IDs {
		cp.ids[i] = int(id)
	}
	if cp.stops, err = tm.StopTokens(ctx, tok); err != nil {
		re.add("messages", "the chat template's stop tokens: %v", err) // ctx is done: nobody reads it
		return nil, re
	}
	return cp, nil
}

func regularFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// chatStops is a chat request's stop set: the model's eos ids (generation_config.json's
// eos_token_id when dir has a readable one, else config.json's) with the template's added.
func chatStops(dir string, lm models.CausalLM, template []int) []int {
	base := lm.EOSTokenIDs()
	if o, err := models.ReadGenerationConfig(models.GenerationConfigPath(dir), 0); err == nil && o.EOSTokenIDs != nil {
		base = o.EOSTokenIDs
	}
	out := slices.Clone(base)
	for _, id := range template {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}
