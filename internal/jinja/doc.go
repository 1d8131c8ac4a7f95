// Package jinja is a bounded Jinja2 engine for Hugging Face chat templates: it renders a
// template exactly as Python Jinja2 3.1.6 does in transformers' ImmutableSandboxedEnvironment
// (trim_blocks, lstrip_blocks, the loopcontrols extension, AssistantTracker's
// {% generation %} blocks, transformers' tojson), and no template can make a render allocate
// without bound or run forever. It imports only the standard library.
//
// # Use
//
//	t, err := jinja.Parse(src, jinja.ParseOptions{TrimBlocks: true, LStripBlocks: true})
//	res, err := t.Render(ctx, map[string]jinja.Value{"messages": msgs}, jinja.Limits{})
//
// Values are Python values as Jinja2 sees them (Value: None, Bool, Int, Float, String, List,
// Tuple, DictValue of an insertion-ordered Dict, Func for Go callables; FromJSON decodes JSON
// keeping object key order and integers). Render's variables shadow the engine's globals
// (range, dict, namespace, cycler, joiner); callers add their own, such as transformers'
// raise_exception and strftime_now, as Funcs.
//
// # Language
//
// Statements: if/elif/else, for (tuple targets, filter condition, else, recursive, loop.index
// and the other loop attributes, loop.cycle, loop.changed), break and continue, set (names,
// tuples, namespace attributes, block set with filters), macro (defaults, varargs, kwargs,
// caller), call blocks, filter blocks, with, raw, generation. include, extends, import and
// block are refused at parse time (chat templates are single files). Expressions, filters,
// tests and the methods of str, dict and list follow Python and Jinja2; the sandbox refuses
// mutating methods (list.append, dict.update, ...) and dunder attributes with Jinja2's
// SecurityError message. Generation spans are what AssistantTracker records: [start, end) of
// each block's output, starting at the length of the top-level output so far, and none while
// nothing has been output at the top level yet; Result.Generation gives them as byte offsets.
//
// Known differences from Python, none of which the chat templates in use meet: ints are
// 64-bit (an overflow is an error, where Python has big ints); iterators returned by map,
// select, items ... print as lists, not as "<generator object ...>"; dict.items() and keys()
// are lists (a view prints differently), and so is range() (Python prints range(0, 3));
// str.lower has no final-sigma rule; Markup is only a
// flag (escape, safe, "is escaped"), with no escaping on concatenation; case mappings are Go's
// Unicode tables plus Python's multi-character mappings (casetable.go, generated from Python).
//
// # Bounds
//
// Parsing is linear in the source (whose size is the caller's to bound) and nesting is limited
// to MaxParseDepth, so no source exhausts the stack. A render is bounded by Limits: the output
// (MaxOutputBytes), the bytes of strings and lists built (MaxBytes, charged before allocating:
// 'x' * 10**12 fails without allocating), the steps executed (MaxSteps: statements,
// expressions, loop iterations, calls, and every value a walk of a value visits: printing,
// comparing, sorting and hashing a value shared many times over, a DAG such as [x, x] doubled,
// stop at the limit instead of visiting every path) and the depth of macro, caller and
// recursive-loop calls (MaxDepth); its context is checked every few thousand steps, walks
// included. What a filter or method makes (split pieces, case mappings, padding, ...) is
// charged before it is allocated; a value shown in an error message is cut after 64 KiB. The
// defaults (64 MiB, 256 MiB, 50 million steps, depth 100) leave chat templates orders of
// magnitude of headroom (they take about a hundred steps per message: 3,000 for Qwen3 on 25
// messages, in about 120 µs; their macros nest a few levels), while a hostile template stops
// within about two seconds. Memory allocated by a render stays within about twice MaxBytes plus
// twice MaxOutputBytes (a string is built, then copied once), plus the values' own small
// overhead.
//
// # Errors
//
// A template that does not parse is a *SyntaxError with the line of the offending token. A
// render that fails is a *LimitError (the limit and its value), the context's error, an
// *Error (Python's exception type and message: UndefinedError, TypeError, SecurityError, ...;
// Error.Python says whether the message is claimed to be Python's word for word, which the
// golden tests check), or the error a Func returned, unchanged (errors.As finds it). A panic
// inside Parse or Render is a bug; it is recovered and returned as an error.
//
// # Concurrency
//
// A Template is immutable after Parse and may be rendered by many goroutines at once. Values
// are immutable too (the sandbox has no mutating methods), except namespaces, which a render
// makes for itself; values passed in vars may be shared between concurrent renders.
//
// # Tests
//
// testdata/golden.jsonl holds cases rendered by Python Jinja2 3.1.6 (testdata/gen_golden.py
// makes it; its docstring says how), testdata/probes.jsonl the probes the engine was chosen
// against; both run in TestGolden and TestProbes. data/chat's TestConformance renders the 650
// records of testdata/chat with this engine.
package jinja
