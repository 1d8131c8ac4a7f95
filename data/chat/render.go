package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/gotpu/gotpu/internal/jinja"
)

// RenderOptions are apply_chat_template's arguments besides the messages.
type RenderOptions struct {
	// AddGenerationPrompt appends the template's assistant header.
	AddGenerationPrompt bool
	// Now is the clock of strftime_now; the zero time means time.Now().
	Now time.Time
	// Tools and Documents are the tools and documents lists (JSON values); nil passes None.
	Tools     []json.RawMessage
	Documents []json.RawMessage
	// Extra are further keyword arguments passed to the template (transformers'
	// **kwargs); they override special tokens of the same name.
	Extra map[string]json.RawMessage
}

// Rendered is a rendered conversation.
type Rendered struct {
	Text string
	// Generation holds the byte offsets [start, end) in Text of each
	// {% generation %} ... {% endgeneration %} block, in the order they end.
	Generation [][2]int
}

// RaiseError is the template calling raise_exception(message).
type RaiseError struct {
	Template string // the template's name
	Message  string // the template's message, exactly
}

func (e *RaiseError) Error() string {
	return fmt.Sprintf("chat template %s: raise_exception: %s", e.Template, e.Message)
}

// renderLimits bounds one render of size bytes of input: the engine's defaults, raised for large
// inputs so that any template that prints each message a few times still fits.
func renderLimits(size int) jinja.Limits {
	lim := jinja.DefaultLimits()
	if n := 4 * int64(size); n > lim.MaxOutputBytes {
		lim.MaxOutputBytes = n
	}
	if n := 16 * int64(size); n > lim.MaxBytes {
		lim.MaxBytes = n
	}
	return lim
}

// Render renders messages (each a JSON object with at least "role") as transformers'
// apply_chat_template(messages, tokenize=False) does. A raise_exception of the template is a
// *RaiseError; a template that exceeds the render limits is a *jinja.LimitError (wrapped). The
// render stops with ctx's error (wrapped) soon after ctx is done: a template is input, and one
// can take seconds to reach its limits, which a request whose client has gone, or a command
// interrupted, must not wait for.
func (t *Template) Render(ctx context.Context, messages []json.RawMessage, opts RenderOptions) (Rendered, error) {
	size := 0
	for _, m := range messages {
		size += len(m)
	}
	for _, m := range opts.Tools {
		size += len(m)
	}
	for _, m := range opts.Documents {
		size += len(m)
	}
	for _, m := range opts.Extra {
		size += len(m)
	}
	if size > MaxInputBytes {
		return Rendered{}, fmt.Errorf("chat template %s: input of %d bytes is more than the limit of %d", t.name, size, MaxInputBytes)
	}
	msgs := make([]jinja.Value, len(messages))
	for i, m := range messages {
		v, err := jinja.FromJSON(m)
		if err != nil {
			return Rendered{}, fmt.Errorf("message %d: %w", i, err)
		}
		obj, ok := v.AsDict()
		if !ok {
			return Rendered{}, fmt.Errorf("message %d: not a JSON object", i)
		}
		if _, ok := obj.GetString("role"); !ok {
			return Rendered{}, fmt.Errorf("message %d: no \"role\"", i)
		}
		msgs[i] = v
	}
	vals := map[string]jinja.Value{}
	for k, v := range t.specials {
		vals[k] = jinja.String(v)
	}
	if t.additional != nil {
		l := make([]jinja.Value, len(t.additional))
		for i, s := range t.additional {
			l[i] = jinja.String(s)
		}
		vals["additional_special_tokens"] = jinja.List(l...)
	}
	for k, raw := range opts.Extra {
		switch k {
		case "messages", "tools", "documents", "add_generation_prompt", "raise_exception", "strftime_now":
			return Rendered{}, fmt.Errorf("extra argument %q: reserved name", k)
		}
		v, err := jinja.FromJSON(raw)
		if err != nil {
			return Rendered{}, fmt.Errorf("extra argument %q: %w", k, err)
		}
		vals[k] = v
	}
	for _, l := range []struct {
		name string
		list []json.RawMessage
	}{{"tools", opts.Tools}, {"documents", opts.Documents}} {
		if l.list == nil {
			vals[l.name] = jinja.None()
			continue
		}
		items := make([]jinja.Value, len(l.list))
		for i, raw := range l.list {
			v, err := jinja.FromJSON(raw)
			if err != nil {
				return Rendered{}, fmt.Errorf("%s[%d]: %w", l.name, i, err)
			}
			items[i] = v
		}
		vals[l.name] = jinja.List(items...)
	}
	vals["messages"] = jinja.List(msgs...)
	vals["add_generation_prompt"] = jinja.Bool(opts.AddGenerationPrompt)

	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	vals["raise_exception"] = jinja.Func("raise_exception", func(c *jinja.Call) (jinja.Value, error) {
		msg := ""
		if len(c.Args) > 0 {
			// str() of the message under the render's limits: a value the template built
			// can be a DAG whose text is exponentially long
			var err error
			if msg, err = c.Str(c.Args[0]); err != nil {
				return jinja.None(), err
			}
		}
		return jinja.None(), &RaiseError{Template: t.name, Message: msg}
	})
	vals["strftime_now"] = jinja.Func("strftime_now", func(c *jinja.Call) (jinja.Value, error) {
		f, ok := jinja.String(""), false
		if len(c.Args) == 1 {
			f = c.Args[0]
			_, ok = f.AsString()
		}
		if !ok {
			return jinja.None(), errors.New("strftime_now takes one format string")
		}
		s, _ := f.AsString()
		// The text is at most strftimeGrowth times the format's length: charged before it is
		// made, since a template can pass a format as long as its byte limit.
		if err := c.Alloc(strftimeGrowth * int64(len(s))); err != nil {
			return jinja.None(), err
		}
		return jinja.String(strftime(now, s)), nil
	})
	vals["range"] = jinja.Func("range", sandboxRange)

	if ctx == nil {
		ctx = context.Background()
	}
	res, err := t.tmpl.Render(ctx, vals, renderLimits(size))
	if err != nil {
		var raised *RaiseError
		if errors.As(err, &raised) {
			return Rendered{}, raised
		}
		return Rendered{}, fmt.Errorf("chat template %s: %w", t.name, err)
	}
	if !t.generation {
		return Rendered{Text: res.Text}, nil
	}
	return Rendered{Text: res.Text, Generation: res.Generation}, nil
}

// AssistantMask gives one value per token: 1 iff the token's byte span [start, end) in r.Text
// overlaps a generation span of r, which is what transformers' return_assistant_tokens_mask
// gives (tokens char_to_token(start) ... char_to_token(end-1)) when every character is covered
// by a token. offsets are the tokens' byte offsets into r.Text (tokenizer.Encoding.ByteOffsets).
func AssistantMask(r Rendered, offsets [][2]int) []int {
	mask := make([]int, len(offsets))
	for i, o := range offsets {
		for _, g := range r.Generation {
			if o[0] < g[1] && o[1] > g[0] {
				mask[i] = 1
				break
			}
		}
	}
	return mask
}

// MaxRange is Jinja2's sandbox limit on range() (jinja2.sandbox.MAX_RANGE), which transformers'
// ImmutableSandboxedEnvironment applies: a template cannot make a list of more items.
const MaxRange = jinja.MaxRange

// sandboxRange is Python's range under Jinja2's sandbox: 1 to 3 integer arguments, a non-zero
// step, at most MaxRange items (OverflowError's message otherwise).
func sandboxRange(c *jinja.Call) (jinja.Value, error) {
	if len(c.Kwargs) > 0 {
		return jinja.None(), errors.New("range() takes no keyword arguments")
	}
	return jinja.Range(c.Args)
}
