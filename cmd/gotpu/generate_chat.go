package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gotpu/gotpu/data/chat"
	"github.com/gotpu/gotpu/data/tokenizer"
	"github.com/gotpu/gotpu/internal/cli"
	"github.com/gotpu/gotpu/models"
)

// chatFlags are the flags of `gotpu generate --chat`.
type chatFlags struct {
	on                                       *bool
	messages, system, templatePath, tmplName *string
	tokenizer                                *string
}

func (c *chatFlags) register(fs *flag.FlagSet) {
	c.on = fs.Bool("chat", false, "render a conversation with the model's chat template (add_generation_prompt) and print the reply")
	c.messages = fs.String("messages", "", `with --chat: JSON file holding the conversation, a list of messages or {"messages": [...]}`)
	c.system = fs.String("system", "", "with --chat: a system message put before the conversation")
	c.templatePath = fs.String("chat_template_path", "", "with --chat: a .jinja template or a tokenizer_config.json (default: the model's or --tokenizer's tokenizer_config.json / chat_template.jinja)")
	c.tmplName = fs.String("chat_template_name", "", `with --chat: template name when chat_template is a list (default "default")`)
	c.tokenizer = fs.String("tokenizer", "", "with --prompt or --chat: tokenizer.json file or directory, or Hub repo id (default: the model's)")
}

// check applies the flags' usage rules, before anything is loaded.
func (c *chatFlags) check(set map[string]bool, prompt string) error {
	if !*c.on {
		for _, f := range []string{"messages", "system", "chat_template_path", "chat_template_name"} {
			if set[f] {
				return cli.UsageError("--%s needs --chat", f)
			}
		}
		if set["tokenizer"] && prompt == "" {
			return cli.UsageError("--tokenizer needs --prompt TEXT or --chat (--prompt_ids are token ids already)")
		}
		if set["prompt_ids"] && prompt != "" {
			return cli.UsageError("--prompt and --prompt_ids: give one (the text, or its token ids)")
		}
		return nil
	}
	switch {
	case set["prompt_ids"]:
		return cli.UsageError("--prompt_ids: not with --chat (the prompt is the rendered conversation); give --messages or --prompt")
	case *c.messages != "" && prompt != "":
		return cli.UsageError("--chat takes --messages FILE or --prompt TEXT, not both")
	case *c.messages == "" && prompt == "":
		return cli.UsageError("--chat needs the conversation: --messages FILE.json or --prompt TEXT (one user message)")
	}
	return nil
}

// chatPrompt is a conversation rendered and tokenized for generation.
type chatPrompt struct {
	tok      tokenizer.Tokenizer
	template string // where the template came from
	text     string // the rendered prompt
	ids      []int  // text tokenized without added special tokens
	// stops are the template's stop tokens (chat.Template.StopTokens), added to the model's eos ids.
	stops []int
}

// prepareChat builds the prompt of `generate --chat`: the conversation read and checked, the
// template found, the conversation rendered with add_generation_prompt and tokenized without
// added special tokens (apply_chat_template(tokenize=True) adds none: templates write their
// bos themselves). modelArg is --model as given, dir the model directory it resolved to.
func prepareChat(ctx context.Context, c chatFlags, prompt, modelArg, dir, revision string, stderr io.Writer) (*chatPrompt, error) {
	var msgs []json.RawMessage
	src := "--prompt"
	if *c.messages != "" {
		var err error
		if msgs, err = readMessagesFile(*c.messages); err != nil {
			return nil, err
		}
		src = *c.messages
	} else {
		msgs = []json.RawMessage{chat.TextMessage("user", prompt)}
	}
	if *c.system != "" {
		if len(msgs) > 0 && messageRole(msgs[0]) == "system" {
			return nil, cli.UsageError("--system: %s already starts with a system message", src)
		}
		msgs = append([]json.RawMessage{chat.TextMessage("system", *c.system)}, msgs...)
	}

	tok, filesDir, err := loadGenerateTokenizer(ctx, *c.tokenizer, modelArg, dir, revision, stderr)
	if err != nil {
		return nil, err
	}
	cp := &chatPrompt{tok: tok}
	fail := func(err error) (*chatPrompt, error) {
		tok.Close()
		return nil, err
	}
	tm, err := findTemplate(c, filesDir, modelArg)
	if err != nil {
		return fail(err)
	}
	cp.template = tm.Name()
	r, err := tm.Render(ctx, msgs, chat.RenderOptions{AddGenerationPrompt: true})
	var raised *chat.RaiseError
	switch {
	case errors.As(err, &raised):
		// The template refused the conversation (roles out of order, ...): its message, as
		// transformers would raise it, and which conversation.
		return fail(fmt.Errorf("%s: %w", src, err))
	case err != nil:
		return fail(fmt.Errorf("%s: rendering: %w", src, err))
	}
	cp.text = r.Text
	e, err := tok.Encode(r.Text, false)
	if err != nil {
		return fail(fmt.Errorf("tokenizing the rendered conversation: %w", err))
	}
	if len(e.IDs) == 0 {
		return fail(fmt.Errorf("%s: the template %s rendered the conversation as no tokens", src, cp.template))
	}
	cp.ids = make([]int, len(e.IDs))
	for i, id := range e.IDs {
		cp.ids[i] = int(id)
	}
	if cp.stops, err = tm.StopTokens(ctx, tok); err != nil {
		return fail(err)
	}
	return cp, nil
}

// loadGenerateTokenizer loads the tokenizer of `generate --prompt` / `--chat`: --tokenizer
// (tokFlag: a tokenizer.json file or directory, or a Hub repo id), else the model directory's
// tokenizer.json — which `gotpu train` saves beside the model and in every checkpoint. It
// returns the directory its tokenizer_config.json / chat template would be in ("" for a Hub
// --tokenizer). A Hub model's snapshot holds only what loading the weights fetched, so the
// tokenizer files are fetched next to them.
func loadGenerateTokenizer(ctx context.Context, tokFlag, modelArg, dir, revision string, stderr io.Writer) (*tokenizer.Pipeline, string, error) {
	filesDir := dir
	var tok *tokenizer.Pipeline
	var err error
	switch {
	case tokFlag != "":
		var opts tokenizer.HubOptions
		if !isLocal(tokFlag) {
			if opts.Hub, err = newHubClient(hubFlags{}, stderr); err != nil {
				return nil, "", err
			}
		}
		if tok, err = tokenizer.FromPretrained(ctx, tokFlag, opts); err != nil {
			return nil, "", err
		}
		if st, serr := os.Stat(tokFlag); serr == nil && st.IsDir() {
			filesDir = tokFlag
		} else if serr == nil {
			filesDir = filepath.Dir(tokFlag)
		} else {
			filesDir = "" // a Hub tokenizer: its template must come from --chat_template_path
		}
	case !isLocal(modelArg):
		if filesDir, err = fetchChatFiles(ctx, modelArg, revision, stderr); err != nil {
			return nil, "", err
		}
		fallthrough
	default:
		if tok, err = tokenizer.FromFile(filesDir); err != nil {
			return nil, "", fmt.Errorf("%w (give the model's tokenizer with --tokenizer)", err)
		}
	}
	return tok, filesDir, nil
}

// fetchChatFiles fetches a Hub model's tokenizer.json and, when the repo has them,
// tokenizer_config.json and chat_template.jinja, and returns the snapshot directory holding them.
func fetchChatFiles(ctx context.Context, modelArg, revision string, stderr io.Writer) (string, error) {
	c, err := newHubClient(hubFlags{}, stderr)
	if err != nil {
		return "", err
	}
	repo, c, err := models.HubRepo(modelArg, models.HubOptions{Hub: c, Revision: revision})
	if err != nil {
		return "", err
	}
	p, err := c.Download(ctx, repo, "tokenizer.json")
	if err != nil {
		return "", err
	}
	for _, f := range []string{"tokenizer_config.json", "chat_template.jinja"} {
		if _, err := c.DownloadOptional(ctx, repo, f); err != nil {
			return "", err
		}
	}
	return filepath.Dir(p), nil
}

// findTemplate loads the chat template: --chat_template_path (a tokenizer_config.json is read
// as transformers reads it, a chat_template.jinja beside it winning; any other file is the
// template's source, rendered with the special tokens of dir's tokenizer_config.json, whose
// eos_token the stop rule uses), else the tokenizer_config.json or chat_template.jinja of dir.
func findTemplate(c chatFlags, dir, modelArg string) (*chat.Template, error) {
	cfg := ""
	if dir != "" && fileExists(filepath.Join(dir, "tokenizer_config.json")) {
		cfg = filepath.Join(dir, "tokenizer_config.json")
	}
	p := *c.templatePath
	if p != "" && strings.HasSuffix(p, ".json") {
		tm, err := chat.LoadTemplate(p, *c.tmplName)
		return tm, err
	}
	if p == "" && cfg != "" {
		tm, err := chat.LoadTemplate(cfg, *c.tmplName)
		if err != nil {
			return nil, fmt.Errorf("%w (give a template with --chat_template_path: a .jinja file or a tokenizer_config.json)", err)
		}
		return tm, nil
	}
	if p == "" {
		if dir == "" {
			return nil, cli.UsageError("--chat: the tokenizer %s is a Hub repo id; give the template with --chat_template_path (a .jinja file or a tokenizer_config.json)", *c.tokenizer)
		}
		p = filepath.Join(dir, "chat_template.jinja")
		if !fileExists(p) {
			return nil, fmt.Errorf("%s: no chat template: neither tokenizer_config.json nor chat_template.jinja in %s; give one with --chat_template_path (a .jinja file or a tokenizer_config.json)", modelArg, dir)
		}
	}
	if *c.tmplName != "" && *c.tmplName != "default" {
		return nil, cli.UsageError("--chat_template_name %q: %s holds one template", *c.tmplName, p)
	}
	var specials map[string]string
	if cfg != "" {
		var err error
		if specials, err = chat.ReadSpecialTokens(cfg); err != nil {
			return nil, err
		}
	}
	return chat.ParseFile(p, specials)
}

// chatStops is the stop set of a chat generation: the model's eos ids (generation_config.json's
// eos_token_id, else config.json's) with the template's stop tokens added.
func chatStops(modelEOS, template []int) []int {
	out := slices.Clone(modelEOS)
	if out == nil {
		out = []int{}
	}
	for _, id := range template {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// reply decodes the generated tokens with skip_special_tokens, without the stop token that
// ended them (which is not special when eos_token names an ordinary token).
func reply(tok tokenizer.Tokenizer, out, stops []int) (string, error) {
	if n := len(out); n > 0 && slices.Contains(stops, out[n-1]) {
		out = out[:n-1]
	}
	ids := make([]uint32, len(out))
	for i, id := range out {
		ids[i] = uint32(id)
	}
	return tok.Decode(ids, true)
}

// chatResult is generate --chat --json's output: generate's prompt_ids and generated_ids (the
// stop token included, as HF's generate returns it), plus the rendered prompt, the reply and
// the stop tokens used.
type chatResult struct {
	PromptIDs    []int  `json:"prompt_ids"`
	GeneratedIDs []int  `json:"generated_ids"`
	Prompt       string `json:"prompt"`
	Reply        string `json:"reply"`
	EOSTokenIDs  []int  `json:"eos_token_ids"`
}

// readMessagesFile reads a conversation: a JSON list of messages, or an object whose "messages"
// is one. Each message must be an object with a string "role"; errors name the file and field.
func readMessagesFile(path string) ([]json.RawMessage, error) {
	b, err := readBounded(path, chat.MaxInputBytes)
	if err != nil {
		return nil, err
	}
	b = bytes.TrimSpace(b)
	var msgs []json.RawMessage
	switch {
	case len(b) > 0 && b[0] == '[':
		if err := json.Unmarshal(b, &msgs); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	case len(b) > 0 && b[0] == '{':
		var top struct {
			Messages *[]json.RawMessage `json:"messages"`
		}
		if err := json.Unmarshal(b, &top); err != nil {
			return nil, fmt.Errorf("%s: field messages: %w", path, err)
		}
		if top.Messages == nil {
			return nil, fmt.Errorf("%s: no \"messages\" field (want a JSON list of messages, or an object with \"messages\")", path)
		}
		msgs = *top.Messages
	default:
		return nil, fmt.Errorf("%s: not a JSON list of messages nor an object with \"messages\"", path)
	}
	if len(msgs) == 0 {
		return nil, fmt.Errorf("%s: messages: empty conversation", path)
	}
	for i, m := range msgs {
		if err := chat.CheckMessage(m); err != nil {
			return nil, fmt.Errorf("%s: messages[%d]%s", path, i, messageProblem(err))
		}
	}
	return msgs, nil
}

// messageProblem is a chat.CheckMessage error as it reads after "messages[i]".
func messageProblem(err error) string {
	var me *chat.MessageError
	if errors.As(err, &me) {
		return me.Field + ": " + me.Problem
	}
	return ": " + err.Error()
}

func messageRole(m json.RawMessage) string {
	var v struct {
		Role string `json:"role"`
	}
	_ = json.Unmarshal(m, &v)
	return v.Role
}

// readBounded reads a file of at most limit bytes.
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: more than the limit of %d bytes", path, limit)
	}
	return b, nil
}
