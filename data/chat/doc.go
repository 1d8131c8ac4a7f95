// Package chat renders Hugging Face chat templates (the Jinja chat_template of a
// tokenizer_config.json) exactly as transformers' apply_chat_template(tokenize=False) does, and
// builds assistant-only loss masks from {% generation %} blocks.
//
// The reference is Python Jinja2 configured the way transformers configures it:
// trim_blocks and lstrip_blocks, one trailing newline of the template dropped
// (keep_trailing_newline=False), loop controls, tojson as json.dumps(ensure_ascii=False), the
// globals raise_exception and strftime_now, and AssistantTracker for
// {% generation %}...{% endgeneration %}. Templates are compiled and rendered by
// internal/jinja, a Jinja2 engine written for this (standard library only) that bounds every
// render; this package adds the globals (strftime_now on an injectable clock, RenderOptions.Now,
// with C-locale names, and raise_exception) and the sandbox's range. Generation spans are the
// engine's: what AssistantTracker records, as byte offsets into Rendered.Text (a block is
// recorded only once something was output before it, as in transformers). The golden data in
// testdata/chat (13 template families, 25 conversations, each with and without the generation
// prompt; rendered by Python Jinja2 3.1.6, token ids by Hugging Face tokenizers) is reproduced
// exactly: text, raise_exception messages, generation spans, ids and masks.
//
// LoadTemplate follows transformers' loading rules: a chat_template.jinja beside
// tokenizer_config.json wins over the config's chat_template field (transformers >= 4.49
// overwrites the field with the file), and a chat_template that is a list of {"name",
// "template"} is picked from by name ("" is "default"). The special tokens passed to the
// template (bos_token, eos_token, unk_token, sep_token, pad_token, cls_token, mask_token,
// additional_special_tokens, as transformers' special_tokens_map) come from the config, as
// strings or {"content": ...} objects; unset or null ones stay undefined in the template.
//
// Errors: a template that does not parse names its file and line; a message without "role"
// names the message's index; raise_exception is a *RaiseError carrying the template's message
// exactly. Template sources are limited to MaxTemplateBytes, configs to MaxConfigBytes, and the
// JSON of one render's inputs to MaxInputBytes. A render is bounded by jinja.Limits (the
// engine's defaults, raised for large inputs: output 4x and built bytes 16x the input's size),
// so a template that loops or allocates without bound stops with a *jinja.LimitError.
//
// AssistantMask marks the tokens whose byte span overlaps a generation span, which equals
// transformers' return_assistant_tokens_mask (tokens char_to_token(start) through
// char_to_token(end-1) of each span) for tokenizers that cover every character; HasGeneration
// tells whether a template has generation blocks at all (TRL refuses assistant_only_loss
// without them).
package chat
