package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"

	"github.com/gotpu/gotpu/internal/membudget"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/gemma3"
	"github.com/gotpu/gotpu/models/gpt2"
	"github.com/gotpu/gotpu/models/llama"
	"github.com/gotpu/gotpu/models/peft"
	"github.com/gotpu/gotpu/models/qwen3"
	"github.com/gotpu/gotpu/xla"
)

// handleGenerateModel is GET /generate?model=<dir or repo id>&prompt=...: generation from a
// pretrained model rather than a job's checkpoint. model is a model directory under the
// service's directories or, on a service with a Hub client, a Hub repo id ("org/name", "@rev",
// or revision=); tokenizer= names another tokenizer (default: the model's tokenizer.json);
// adapter= a PEFT LoRA adapter to attach to the model (a directory, or a Hub repo id with "@rev"
// or adapter_revision=), under the same rules as model. The
// request is checked first, fetching only config.json (and tokenizer.json) within HubTimeout;
// the weights are fetched once a generation slot is held, while the client waits.
func (s *Server) handleGenerateModel(w http.ResponseWriter, r *http.Request) {
	q, ok := s.generateQuery(w, r)
	if !ok {
		return
	}
	g, re := parseGenerateParams(q)
	name := strings.TrimSpace(q.Get("model"))
	if name == "" {
		if re == nil {
			re = &requestError{}
		}
		re.add("model", "required: a model directory (config.json and model.safetensors) or, on a service started with -hub, a Hugging Face repo id")
	}
	if re != nil {
		s.met.gens.WithLabelValues("bad_request").Inc()
		writeError(w, http.StatusBadRequest, re.Error(), re.Fields)
		return
	}
	src, re := s.pretrainedSource(r.Context(), name, q.Get("tokenizer"), revision{value: q.Get("revision"), field: "revision"}, g.messages != nil)
	if re == nil && strings.TrimSpace(q.Get("adapter")) != "" {
		re = s.adapterSource(r.Context(), &src, strings.TrimSpace(q.Get("adapter")), revision{value: q.Get("adapter_revision"), field: "adapter_revision"})
	}
	if re != nil {
		if r.Context().Err() != nil {
			return
		}
		s.met.gens.WithLabelValues("bad_request").Inc()
		writeError(w, http.StatusBadRequest, re.Error(), re.Fields)
		return
	}
	s.generate(w, r, src, g)
}

// pretrainedSource checks the model (and tokenizer) of a GET /generate request: where it is, that
// it is a causal LM, and that its weights fit in memory — all before any weight is fetched. For
// a chat request (chat) a Hub tokenizer's tokenizer_config.json and chat_template.jinja are
// fetched beside its tokenizer.json, where renderChat looks for the template.
func (s *Server) pretrainedSource(ctx context.Context, name, tokName string, rev revision, chat bool) (genSource, *requestError) {
	fail := func(field, msg string) (genSource, *requestError) {
		re := &requestError{}
		re.add(field, "%s", msg)
		return genSource{}, re
	}
	ms, ferr := resolveName(ctx, s.paths, s.hub, "model", name, rev, "config.json")
	if ferr != nil {
		return fail(ferr.field, ferr.msg)
	}
	src := genSource{dir: ms.path, label: name, what: "model", resp: generateResponse{Model: name}}
	if ms.repo != nil {
		src.dir = filepath.Dir(ms.path)
		src.resp.Revision = ms.repo.Revision
	}
	cfg, err := parseConfig(filepath.Join(src.dir, "config.json"))
	if err != nil {
		return fail("model", relabel(err, src.dir, name))
	}
	if _, _, ok := causalDims(cfg); !ok {
		return fail("model", fmt.Sprintf("%s is not a causal language model; generation takes GPT-2, Llama, Mistral, Qwen2, Qwen3 or Gemma 3", cfg.Architecture()))
	}
	src.cfg = cfg
	if err := checkWeightsFit(s.rt, cfg); err != nil {
		return fail("model", fmt.Sprintf("%q: %v", name, err))
	}
	tokRepo, tokField, tokGiven := ms.repo, "model", name
	switch tokName = strings.TrimSpace(tokName); {
	case tokName != "":
		ts, ferr := resolveName(ctx, s.paths, s.hub, "tokenizer", tokName, rev, "tokenizer.json")
		if ferr != nil {
			return fail(ferr.field, ferr.msg)
		}
		src.tokPath = ts.path
		tokRepo, tokField, tokGiven = ts.repo, "tokenizer", tokName
	default:
		p, err := modelTokenizer(ctx, s.hub, src.dir, ms.repo)
		if err != nil { // only a Hub model's fetch fails; a local directory is looked at
			return fail("model", s.hub.describe(err, name, *ms.repo, "tokenizer.json"))
		}
		src.tokPath = p
	}
	if chat && tokRepo != nil && src.tokPath != "" {
		for _, f := range []string{"tokenizer_config.json", "chat_template.jinja"} {
			if _, err := s.hub.fetchOptional(ctx, *tokRepo, f); err != nil {
				return fail(tokField, s.hub.describe(err, tokGiven, *tokRepo, f))
			}
		}
	}
	if ms.repo != nil {
		repo, want, hf := *ms.repo, src.dir, s.hub
		src.fetch = func(ctx context.Context) error {
			_, err := fetchWeights(ctx, hf.c, repo, want)
			if err == nil || isUpstreamFailure(err) || ctx.Err() != nil {
				return err
			}
			// The repo's own doing (no safetensors, a missing shard, gated weights): the
			// request's to change.
			re := &requestError{cause: err}
			re.add("model", "%q: %s", name, strings.ReplaceAll(err.Error(), hf.c.CacheDir(), hubCacheLabel))
			return re
		}
	}
	return src, nil
}

// causalDims returns the vocabulary size and positions of a causal LM config, and false for any
// other architecture.
func causalDims(cfg models.Config) (vocab, maxPos int, ok bool) {
	switch c := cfg.(type) {
	case *gpt2.Config:
		return c.VocabSize, c.NPositions, true
	case *llama.Config:
		return c.VocabSize, c.MaxPositionEmbeddings, true
	case *qwen3.Config:
		return c.VocabSize, c.MaxPositionEmbeddings, true
	case *gemma3.Config:
		return c.VocabSize, c.MaxPositionEmbeddings, true
	}
	return 0, 0, false
}

// checkWeightsFit refuses a model whose float32 weights cannot fit in the host's available
// memory on the pure-Go backend, from its config alone: generation must not fetch gigabytes of
// weights to then fail loading them (models.Load checks again, with the same estimate). On an
// accelerator only the config's dimensions are checked; device memory is the plugin's to refuse.
func checkWeightsFit(rt *xla.Runtime, cfg models.Config) error {
	fp, err := models.EstimateFootprint(cfg)
	if errors.Is(err, models.ErrUnsupported) {
		return nil
	}
	if err != nil {
		return err
	}
	if rt.Kind() != xla.DeviceGo {
		return nil
	}
	host := membudget.Probe()
	var a membudget.Acc
	// float32 weights, plus staging of the largest tensor while it is read (models.Load's rule).
	need := a.Add(a.Mul(fp.Params, 4), a.Mul(fp.LargestParam, 8))
	if host.Known && (a.Overflowed() || need > host.Available) {
		return fmt.Errorf("%w: this %s needs about %s for its %d parameters, but %s is available on the host",
			models.ErrTooLarge, cfg.Architecture(), membudget.GiB(need), fp.Params, host)
	}
	return nil
}

// adapterSource adds the LoRA adapter a GET /generate request names to src: a directory under
// the service's directories or, with -hub, a Hub repo id whose adapter_config.json is fetched
// now and adapter_model.safetensors once a generation slot is held. Its config is checked
// before the request is accepted; whether its tensors fit the model is checked when it is
// attached (a 400 naming the adapter if not).
func (s *Server) adapterSource(ctx context.Context, src *genSource, name string, rev revision) *requestError {
	re := &requestError{}
	as, ferr := resolveName(ctx, s.paths, s.hub, "adapter", name, rev, peft.ConfigFile)
	if ferr != nil {
		re.add(ferr.field, "%s", ferr.msg)
		return re
	}
	dir := as.path
	if as.repo != nil {
		dir = filepath.Dir(as.path)
	}
	lc, msg := checkAdapterDir(dir, name, as.repo == nil)
	if msg != "" {
		re.add("adapter", "%s", msg)
		return re
	}
	// A Hub adapter's weights are bounded by what its config implies on the model
	// (fetchAdapterWeights); a config that cannot be bounded — its targets match no module of the
	// model — is refused now, before a slot is waited for. A local adapter is checked exactly
	// when it is attached.
	if as.repo != nil {
		if _, err := peft.MaxWeightsBytes(src.cfg, lc); err != nil {
			re.add("adapter", "%q: %s: %v", name, peft.ConfigFile, err)
			return re
		}
	}
	src.adapterDir, src.adapterLabel, src.resp.Adapter = dir, name, name
	if as.repo != nil {
		repo, hf, model, base := *as.repo, s.hub, src.fetch, src.cfg
		src.fetch = func(ctx context.Context) error {
			if model != nil {
				if err := model(ctx); err != nil {
					return err
				}
			}
			err := fetchAdapterWeights(ctx, hf.c, repo, dir, base)
			if err == nil || isUpstreamFailure(err) || ctx.Err() != nil {
				return err
			}
			re := &requestError{cause: err}
			re.add("adapter", "%q: %s", name, strings.ReplaceAll(err.Error(), hf.c.CacheDir(), hubCacheLabel))
			return re
		}
	}
	return nil
}
