package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/data/chat"
	"github.com/gotpu/gotpu/data/sft"
	"github.com/gotpu/gotpu/data/table"
	"github.com/gotpu/gotpu/hub"
	"github.com/gotpu/gotpu/internal/cli"
	"github.com/gotpu/gotpu/models"
)

// sftRun is what the SFT path learned while preparing a run's splits: the collator's padding
// id and the prepared splits' statistics, logged once both are known.
type sftRun struct {
	cfg    sft.Config
	padID  int32
	splits []sftSplit
}

type sftSplit struct {
	what  string
	stats sft.Stats
}

// useSFT tells whether a split takes TRL's SFT preparation instead of run_clm's: when an
// SFT-only flag is given (--packing, --assistant_only_loss, --completion_only_loss,
// --dataset_text_field, --max_length), or when the data is conversational ("messages" or
// "conversations") or prompt-completion ("prompt" and "completion"), as its first row's keys (a
// table's columns) say. Pre-tokenized data (input_ids) and classifiers never do.
func (r *runArgs) useSFT(s *dataSource, model models.Model) (bool, error) {
	if _, causal := model.(models.CausalLM); !causal || s == nil || len(s.files) == 0 {
		return false, nil
	}
	if len(r.md.SFTRequested()) > 0 {
		return true, nil
	}
	keys, err := sftFirstKeys(s)
	if err != nil {
		return false, fmt.Errorf("%s: %w", s.what, err)
	}
	if slices.Contains(keys, "input_ids") {
		return false, nil
	}
	return slices.Contains(keys, "messages") || slices.Contains(keys, "conversations") ||
		(slices.Contains(keys, "prompt") && slices.Contains(keys, "completion")), nil
}

// sftFirstKeys returns the keys of a source's first row (a table's columns); nil for text files.
func sftFirstKeys(s *dataSource) ([]string, error) {
	path := s.files[0]
	ext := strings.ToLower(filepath.Ext(path))
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if ext == ".txt" || s.format == "text" {
		return nil, nil
	}
	if !st.IsDir() && (ext == ".jsonl" || ext == ".json") {
		arr, err := table.IsJSONArray(path)
		if err != nil {
			return nil, err
		}
		if !arr {
			return data.FirstRecordKeys(path)
		}
		for row, err := range sft.ReadJSONArray(path) {
			if err != nil {
				return nil, err
			}
			if err := table.CheckJSONRecord(row.JSON, 0); err != nil {
				return nil, fmt.Errorf("%s: row 0: %w", path, err)
			}
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(row.JSON, &obj); err != nil {
				return nil, fmt.Errorf("row 0: %w", err)
			}
			keys := make([]string, 0, len(obj))
			for k := range obj {
				keys = append(keys, k)
			}
			return keys, nil
		}
		return nil, nil
	}
	t, err := table.Open(path, table.Options{Format: table.Format(s.format)})
	if err != nil {
		return nil, err
	}
	defer t.Close()
	var keys []string
	for _, c := range t.Columns() {
		keys = append(keys, c.Name)
	}
	return keys, nil
}

// openSFTDataset prepares a split as TRL's SFTTrainer does (package data/sft): the tokenizer of
// --tokenizer_name or the model, the chat template of --chat_template_path or the tokenizer's
// tokenizer_config.json, and the SFT flags. The examples are held in memory.
func (r *runArgs) openSFTDataset(ctx context.Context, s *dataSource, model models.Model) (data.Dataset, error) {
	cfg, err := r.md.SFTConfig()
	if err != nil {
		return nil, cli.UsageError("%v", err)
	}
	tok, err := r.tokenizer(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.what, err)
	}
	tokCfg, err := r.sftTokenizerConfig(ctx)
	if err != nil {
		return nil, err
	}
	tmpl, srcCfg, tmplErr := r.sftTemplate(ctx, cfg, tokCfg)
	if cfg.ChatTemplatePath != "" && tmplErr != nil {
		return nil, fmt.Errorf("--chat_template_path: %w", tmplErr)
	}
	if cfg.AssistantOnlyLoss && tmpl == nil {
		if tmplErr == nil {
			tmplErr = errors.New("no tokenizer_config.json beside the tokenizer")
		}
		return nil, cli.UsageError("--assistant_only_loss: no chat template to mark the assistant's tokens (%v); give --chat_template_path", tmplErr)
	}
	// EOS: --eos_token; else the tokenizer's that --chat_template_path names (TRL's
	// clone_chat_template sets it from there); else the training tokenizer's.
	if cfg.EOSToken == "" {
		cfg.EOSToken = srcCfg.EOSToken()
	}
	if cfg.EOSToken == "" {
		cfg.EOSToken = tokCfg.EOSToken()
	}
	var rows []iter.Seq2[sft.Row, error]
	for _, f := range s.files {
		rows = append(rows, sft.ReadFile(ctx, f, table.Format(s.format), cfg.DatasetTextField))
	}
	exs, st, err := sft.Prepare(ctx, sft.Concat(rows...), tok, tmpl, cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.what, err)
	}
	if st.PrefixMismatches > 0 {
		slog.Warn("sft: mismatch between tokenized prompt and the start of tokenized prompt+completion (TRL warns too)",
			"split", s.what, "rows", st.PrefixMismatches, "first", st.FirstMismatch)
	}
	lm := model.(models.CausalLM)
	for i, ex := range exs {
		for _, id := range ex.InputIDs {
			if int(id) >= lm.VocabSize() {
				return nil, fmt.Errorf("%s: example %d: token id %d is outside the model's vocabulary of %d (wrong tokenizer?)", s.what, i, id, lm.VocabSize())
			}
		}
	}
	_, padID, err := sft.ResolvePad(tok, cfg.PadToken, tokCfg.PadToken(), cfg.EOSToken)
	if err != nil {
		return nil, cli.UsageError("--%v", err)
	}
	if r.sft == nil {
		r.sft = &sftRun{cfg: cfg, padID: padID}
	}
	r.sft.splits = append(r.sft.splits, sftSplit{what: s.what, stats: st})
	return data.SliceDataset(exs), nil
}

// sftTokenizerConfig reads the tokenizer_config.json of the tokenizer in use, downloading a Hub
// tokenizer's; the zero config when there is none.
func (r *runArgs) sftTokenizerConfig(ctx context.Context) (sft.TokenizerConfig, error) {
	path := stringOr(r.md.TokenizerName, stringOr(r.md.ModelNameOrPath, ""))
	if path == "" {
		return sft.TokenizerConfig{}, nil
	}
	var cfgPath string
	if isLocal(path) {
		dir := path
		if st, err := os.Stat(path); err == nil && !st.IsDir() {
			dir = filepath.Dir(path)
		}
		cfgPath = filepath.Join(dir, "tokenizer_config.json")
		if _, err := os.Stat(cfgPath); err != nil {
			return sft.TokenizerConfig{}, nil
		}
	} else {
		repo, err := hub.ParseRepo(path, hub.ModelRepo)
		if err != nil {
			return sft.TokenizerConfig{}, nil
		}
		if repo.Revision == "" {
			repo.Revision = stringOr(r.md.ModelRevision, "")
		}
		c, err := r.hub()
		if err != nil {
			return sft.TokenizerConfig{}, err
		}
		// A tokenizer without one has no template and no specials; any other failure (a gated
		// repo, corrupt bytes, a server error) is reported rather than read as "none".
		if cfgPath, err = c.DownloadOptional(ctx, repo, "tokenizer_config.json"); err != nil {
			return sft.TokenizerConfig{}, fmt.Errorf("tokenizer_config.json of %s: %w", path, err)
		}
		if cfgPath == "" {
			return sft.TokenizerConfig{}, nil
		}
	}
	return sft.ReadTokenizerConfig(cfgPath)
}

// sftTemplate loads the chat template: --chat_template_path (a .jinja file rendered with the
// tokenizer's special tokens, or a tokenizer whose template and specials are taken, whose
// config is returned too), else the tokenizer's own tokenizer_config.json (a
// chat_template.jinja beside it first). The error says why there is none.
func (r *runArgs) sftTemplate(ctx context.Context, cfg sft.Config, tokCfg sft.TokenizerConfig) (*chat.Template, sft.TokenizerConfig, error) {
	if p := cfg.ChatTemplatePath; p != "" {
		if !isLocal(p) {
			return nil, sft.TokenizerConfig{}, fmt.Errorf("%s: not found (gotpu reads a local .jinja file, tokenizer_config.json or directory)", p)
		}
		tm, err := sft.LoadChatTemplate(p, tokCfg.Specials)
		if err != nil || sft.IsJinja(p) {
			return tm, sft.TokenizerConfig{}, err
		}
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			p = filepath.Join(p, "tokenizer_config.json")
		}
		src, err := sft.ReadTokenizerConfig(p)
		return tm, src, err
	}
	if tokCfg.Path == "" {
		return nil, sft.TokenizerConfig{}, errors.New("no tokenizer_config.json beside the tokenizer")
	}
	tm, err := chat.LoadTemplate(tokCfg.Path, "")
	return tm, sft.TokenizerConfig{}, err
}

// sftCollator is the collator of an SFT run (nil when the run is not one): fixed rows of
// --max_length tokens when packing, else of the longest prepared example of the splits, capped
// by the model's positions, padded with the pad token; one compiled shape either way. It logs
// each split's statistics.
func (r *runArgs) sftCollator(model models.Model) (data.Collator, error) {
	if r.sft == nil {
		return nil, nil
	}
	lm := model.(models.CausalLM)
	block := 0
	for _, s := range r.sft.splits {
		block = max(block, s.stats.Longest)
	}
	if r.sft.cfg.Packing {
		block = r.sft.cfg.MaxLength
	}
	if block > lm.MaxPositions() {
		return nil, cli.UsageError("--max_length: rows of %d tokens are longer than the model's %d positions; set --max_length %d or less", block, lm.MaxPositions(), lm.MaxPositions())
	}
	for _, s := range r.sft.splits {
		st := s.stats
		slog.Info("sft: prepared", "split", s.what, "format", st.Format.String(), "examples", st.Examples,
			"tokens", st.Tokens, "trained_tokens", st.TrainedTokens, "truncated", st.Truncated, "dropped", st.Dropped,
			"rows", st.Rows, "block", block, "padding_fraction", fmt.Sprintf("%.3f", st.PaddingFraction(block)))
	}
	return data.CausalLMCollator{BlockSize: block, PadID: r.sft.padID}, nil
}
