package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gotpu/gotpu/data/sft"
	"github.com/gotpu/gotpu/data/tokenizer"
)

// savedTokenizer reads the run's tokenizer (--tokenizer_name, else --model_name_or_path's) for
// trainer.Options.Tokenizer: run_clm.py and TRL hand the tokenizer to the Trainer as
// processing_class, which saves it into output_dir and every checkpoint-N. The files are copied
// as the source has them (the chat template in tokenizer_config.json or chat_template.jinja,
// whichever it used). An SFT run's --chat_template_path replaces the template, as TRL sets
// processing_class.chat_template from it.
//
// A model without a tokenizer (pre-tokenized data, no --tokenizer_name) saves none: none says
// why, for the warning the caller logs once the model is saved; a --tokenizer_name that cannot
// be read is an error.
func (r *runArgs) savedTokenizer(ctx context.Context) (files *tokenizer.Files, none error, err error) {
	path := stringOr(r.md.TokenizerName, "")
	explicit := path != ""
	if !explicit {
		path = stringOr(r.md.ModelNameOrPath, "")
	}
	if path == "" {
		return nil, errors.New("no model or tokenizer named"), nil
	}
	files, err = r.readTokenizerFiles(ctx, path)
	if err != nil {
		if explicit {
			return nil, nil, fmt.Errorf("--tokenizer_name %s: saving the tokenizer with the model: %w", path, err)
		}
		return nil, err, nil
	}
	if r.sft == nil || r.sft.cfg.ChatTemplatePath == "" {
		return files, nil, nil
	}
	src, err := chatTemplateSource(r.sft.cfg.ChatTemplatePath)
	if err != nil {
		return nil, nil, fmt.Errorf("--chat_template_path: saving the template with the tokenizer: %w", err)
	}
	return files.WithChatTemplate(src), nil, nil
}

// readTokenizerFiles reads a local tokenizer (file or directory), or fetches a Hub one's files
// into the cache and reads them there (--model_revision applies, as in run_clm).
func (r *runArgs) readTokenizerFiles(ctx context.Context, path string) (*tokenizer.Files, error) {
	opts := tokenizer.HubOptions{Revision: stringOr(r.md.ModelRevision, "")}
	if !isLocal(path) {
		c, err := r.hub()
		if err != nil {
			return nil, err
		}
		opts.Hub = c
	}
	return tokenizer.FilesFromPretrained(ctx, path, opts)
}

// chatTemplateSource is the template source a chat_template_path names, as TRL reads it: a
// .jinja/.j2 file's content, else the tokenizer's (a directory or its tokenizer_config.json): its
// chat_template.jinja, else tokenizer_config.json's "chat_template" (a string, or the "default"
// of a list of named templates).
func chatTemplateSource(path string) (string, error) {
	if sft.IsJinja(path) {
		b, err := readBounded(path, tokenizer.MaxFileSize)
		return string(b), err
	}
	dir, cfg := path, filepath.Join(path, "tokenizer_config.json")
	if st, err := os.Stat(path); err != nil {
		return "", err
	} else if !st.IsDir() {
		dir, cfg = filepath.Dir(path), path
	}
	if p := filepath.Join(dir, tokenizer.ChatTemplateFile); fileExists(p) {
		b, err := readBounded(p, tokenizer.MaxFileSize)
		return string(b), err
	}
	b, err := readBounded(cfg, tokenizer.MaxFileSize)
	if err != nil {
		return "", err
	}
	var top struct {
		ChatTemplate json.RawMessage `json:"chat_template"`
	}
	if err := json.Unmarshal(b, &top); err != nil {
		return "", fmt.Errorf("%s: %w", cfg, err)
	}
	var s string
	if json.Unmarshal(top.ChatTemplate, &s) == nil && s != "" {
		return s, nil
	}
	var named []struct{ Name, Template string }
	if json.Unmarshal(top.ChatTemplate, &named) == nil {
		for _, n := range named {
			if n.Name == "default" {
				return n.Template, nil
			}
		}
	}
	return "", fmt.Errorf("%s: field chat_template: no template (a string, or a list holding one named \"default\")", cfg)
}
