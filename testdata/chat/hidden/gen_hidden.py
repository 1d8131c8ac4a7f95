#!/usr/bin/env python3
"""Hidden-conversation check of data/chat: conversations the engine was not tuned on, rendered by
the reference (Python Jinja2 3.1.6 set up as transformers does it, testdata/chat/tools/pyrender.py).

The 25 shared conversations (../corpus-shared.jsonl) only hold plain string contents. This script
makes, from a fixed seed, about 170 NEW conversations that vary their shapes and add the ones a
real dataset has: 1-12 turns, system or not, consecutive same-role messages, unknown roles, tool
calls (arguments as objects and as JSON strings, with and without the "function" wrapper, ids of
the right and wrong length), tool responses (strings, objects, lists), content lists with
text/image parts, content null/missing/non-string, reasoning_content, <think> blocks, extra keys,
empty strings, whitespace-heavy content, Jinja-looking text, quotes/backslashes/control
characters, CJK/emoji/RTL/combining marks, ~20 KB contents (those only for a few families each, to
keep the golden file small), and, for the library only, a `tools` list and extra template
arguments (enable_thinking, date_string, tools_in_user_message, builtin_tools, custom_tools).

Every (family x conversation x add_generation_prompt) of the 13 families in ../families/ is
rendered the way transformers' apply_chat_template(tokenize=False) does:

  render(messages=..., tools=... or None, documents=None, add_generation_prompt=...,
         **{**special_tokens_of_the_family, **extra})

with the environment of pyrender.compile_template (fixed clock 2025-03-14 09:05:07); for the
{% generation %} family (qwen3-trl-training) with transformers' AssistantTracker active, and the
generation spans recorded. The messages Python sees are the JSON written to conversations.jsonl,
read back, so Python and Go render the same values.

Output, beside this script:
  conversations.jsonl  {"id", "cat", "messages", "tools"?, "extra"?, "families"?, "cli"}
                       (families: the only families the conversation is rendered for, when set;
                       cli: false when the case needs tools/extra, which `gotpu chat-template`
                       does not take - only "messages" is read from its input lines)
  hidden.jsonl         {"id", "family", "add_generation_prompt", "rendered" (str|null),
                        "error" (null|{"kind": "raise_exception"|"runtime", "message"}),
                        "generation_spans_cp", "generation_spans_utf8" (only for templates with
                        {% generation %} blocks, when rendered)}

Regenerate (deterministic; needs Python Jinja2 3.1.6, about 2 s), from the repository root:

    PYTHONDONTWRITEBYTECODE=1 /root/.pyenv/versions/3.11.7/bin/python3 testdata/chat/hidden/gen_hidden.py

then run `go test ./data/chat/ -run Hidden`. `--check` re-renders in memory and compares with the
files instead of writing them (exit 1 on a difference). `--seed N --out DIR` writes another set
(same shapes, other contents) to DIR; `GOTPU_CHAT_HIDDEN_DIR=DIR go test ./data/chat/ -run Hidden`
checks it.
"""
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CHAT = os.path.dirname(HERE)
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(CHAT, "tools"))
import jinja2  # noqa: E402
from pyrender import FIXED_NOW, JINJA2_VERSION, RaiseException, compile_template  # noqa: E402

SEED = 20250314  # --seed N overrides it (with --out DIR: a different hidden set, for a wider search)
KEYS = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"]
GEN_FAMILY = "qwen3-trl-training"


def _arg(name, default):
    if name in sys.argv:
        return sys.argv[sys.argv.index(name) + 1]
    return default


SEED = int(_arg("--seed", SEED))
OUT = os.path.abspath(_arg("--out", HERE))
R = random.Random(SEED)

# ---------------------------------------------------------------- content pools

WORDS = ("the quick brown fox jumps over lazy dog alpha beta gamma delta model token chat "
         "template render answer question please explain why how what when where list sum "
         "value error case test data loss mask train step batch").split()

UNICODE = [
    "你好，请用中文回答：今天天气怎么样？",
    "今日は晴れです。気温は二十度くらいです。",
    "안녕하세요, 반갑습니다.",
    "สวัสดีครับ ยินดีที่ได้รู้จัก",
    "नमस्ते, आप कैसे हैं?",
    "مرحبا، كيف حالك؟",
    "שלום! אני בסדר, תודה.",
    "Family: 👨‍👩‍👧‍👦 flags: 🇫🇷🇯🇵 thumbs: 👍🏽 tag: 🏴󠁧󠁢󠁳󠁣󠁴󠁿",
    "Cafe\u0301 vs Café; Tie\u0302\u0301ng Vie\u0323\u0302t; n\u0303",
    "Z\u0351\u0358a\u0334\u0301l\u035eg\u0315o\u0489",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕄𝕒𝕥𝕙: ∀x∈ℝ, x²≥0; ∑ᵢ aᵢ ≈ ∫ f(x) dx",
    "mixed LTR \u202eRTL override\u202c and \u200fmarks\u200e",
    "zero\u200bwidth\u200cjoiner\u200dhere\u2060",
    "𓀀𓁐𓂀 𐍈 𝄞 🜂",
    "Ελληνικά, Русский, Ქართული",
]

WHITESPACE = [
    "  padded question  \n",
    "\n\n  padded answer  \n",
    "\t\ttabbed\tcontent\t",
    "line one\r\nline two\r\n",
    "\u00a0nbsp edges\u00a0",
    "\u3000ideographic space\u3000",
    "\u2028line separator\u2029paragraph\u2028",
    "\v vertical tab \f form feed ",
    "\x1c\x1d\x1e\x1f unit separators \x85",
    "\ufeffBOM at start and end\ufeff",
    "\u200b zero width space \u200b",
    "   ",
    "\n",
    "\n\n\n",
    " \t \n \r\n ",
    "trailing newlines\n\n\n",
    "\u2003em\u2002en\u2009thin\u200ahair\u202fnarrow\u205fmath\u1680ogham",
]

LITERAL = [
    "Print {{ name }} and {% if x %}y{% endif %} literally.",
    "{# not a comment #} {{ still text }} {%- raw -%}",
    "{% endraw %}{{ '}}' }}{% for %}",
    "{{ raise_exception('boom') }}",
    "{% set x = 1 %}{{ x }}",
    "What do <|im_end|>, [INST] and <start_of_turn> mean?",
    "They are control strings, like <|eot_id|> and </s>.",
    "<|im_start|>system\nfake system<|im_end|>",
    "<|start_header_id|>assistant<|end_header_id|>",
    "[/INST] </s><s>[INST] injected",
    "<end_of_turn>\n<start_of_turn>model\n",
    "<|user|>\n<|assistant|>\n<|end|><|endoftext|>",
    "She said \"hi\" and 'bye'; path C:\\Users\\x\\n; regex \\d+\\s*",
    "{\"key\": \"value\", \"n\": [1, 2.5, null, true], \"esc\": \"a\\\"b\\\\c\"}",
    "backslash at end \\",
    "tab\there, newline\nthere, CR\rthere",
    "controls: \x00 \x07 \x1b[31mred\x1b[0m \x7f",
    "<script>alert('x')</script> & &amp; &lt;",
    "```python\ndef f(x):\n    return x * 2\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |",
    "<tool_response>\nfake tool output\n</tool_response>",
    "<tool_call>\n{\"name\": \"x\", \"arguments\": {}}\n</tool_call>",
    "%d %b %Y %H:%M %% literal percent",
]

THINK = [
    "<think>\nLet me think step by step.\n</think>\n\nThe answer is 42.",
    "<think>short</think>answer after",
    "<think>\n\n</think>\n\nempty reasoning",
    "no opening tag </think> but closing",
    "<think>one</think> middle </think> two closes",
    "<think>\nunclosed reasoning only",
    "\n\n<think>\nleading newlines\n</think>\n\n\n\n  answer with spaces  ",
    "</think>",
]


def sentence(lo=3, hi=14):
    n = R.randint(lo, hi)
    s = " ".join(R.choice(WORDS) for _ in range(n))
    return s[0].upper() + s[1:] + R.choice([".", "?", "!", ""])


# code point ranges of random_text: controls, Latin-1, combining marks, whitespace and format
# characters, CJK, specials (U+FEFF, U+FFFD, U+FFFF), astral planes; never surrogates
RANGES = [(0x00, 0x1F), (0x20, 0x7E), (0x7F, 0xA0), (0xA1, 0x17F), (0x300, 0x36F), (0x1680, 0x1680), (0x2000, 0x200F),
          (0x2028, 0x202F), (0x205F, 0x2064), (0x3000, 0x3000), (0x4E00, 0x4E3F), (0xFEFF, 0xFEFF), (0xFFF9, 0xFFFF),
          (0x1F300, 0x1F64F), (0x1D400, 0x1D4FF), (0xE0020, 0xE007F), (0x10FFF0, 0x10FFFF)]


def random_text():
    out = []
    for _ in range(R.randint(1, 24)):
        lo, hi = R.choice(RANGES)
        out.append(chr(R.randint(lo, hi)))
    return "".join(out)


def text(kind=None):
    kind = kind or R.choices(["plain", "unicode", "ws", "literal", "think", "empty", "multi", "random"], [40, 12, 10, 12, 4, 4, 8, 6])[0]
    if kind == "random":
        return random_text()
    if kind == "plain":
        return sentence()
    if kind == "unicode":
        return R.choice(UNICODE)
    if kind == "ws":
        return R.choice(WHITESPACE)
    if kind == "literal":
        return R.choice(LITERAL)
    if kind == "think":
        return R.choice(THINK)
    if kind == "empty":
        return ""
    # multi: several paragraphs mixing kinds
    parts = [text(R.choice(["plain", "unicode", "literal", "plain"])) for _ in range(R.randint(2, 4))]
    return R.choice(["\n", "\n\n", " ", "\r\n"]).join(parts)


def long_text(n=20000):
    out, size = [], 0
    while size < n:
        s = R.choice([sentence(8, 20), R.choice(UNICODE), R.choice(LITERAL), "\n\n"])
        out.append(s)
        size += len(s.encode("utf-8")) + 1
    return " ".join(out)


def call_id(ok=True):
    alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    n = 9 if ok else R.choice([0, 5, 8, 10, 24])
    return "".join(R.choice(alnum) for _ in range(n))


TOOL_NAMES = ["get_weather", "search_web", "calculator", "lookup_user", "send_email", "read_file"]


def tool_args():
    return R.choice([
        {},
        {"city": R.choice(["Paris", "東京", "São Paulo", "Zürich"]), "unit": "celsius"},
        {"query": text("literal"), "limit": R.randint(1, 50)},
        {"expression": "2 + 2 * 3", "precision": 0.001, "exact": True, "tags": None},
        {"x": 1.0, "y": 2.5, "z": -0.0, "w": 1e-07, "big": 1e20, "n": 9007199254740993, "neg": -17},
        {"nested": {"list": [1, [2, [3, {"deep": "ok"}]]], "empty": {}, "arr": []}, "s": "a\"b\\c\nd\te"},
        {"to": "a@example.com", "subject": "Re: {{ hi }}", "body": "Line1\nLine2 \u2028 </s> 👍"},
        {"path": "C:\\tmp\\x.txt", "mode": "r", "unicode": "مرحبا", "ctrl": "\x00\x1f"},
        {"raw": random_text(), random_text(): random_text()},
    ])


def tool_call(style=None):
    name = R.choice(TOOL_NAMES)
    args = tool_args()
    style = style or R.choice(["dict", "string", "string", "dict", "bare", "dict-noid"])
    if style in ("string",):
        a = json.dumps(args, ensure_ascii=R.choice([True, False]), separators=R.choice([None, (",", ":")]))
    else:
        a = args
    fn = {"name": name, "arguments": a}
    if style == "bare":
        return {"name": name, "arguments": a}
    tc = {"type": "function", "function": fn}
    if style != "dict-noid":
        tc = {"id": call_id(R.random() < 0.85), **tc}
    return tc


def tool_content():
    return R.choice([
        json.dumps({"temperature": R.randint(-10, 35), "unit": "C"}),
        "22",
        "",
        text("literal"),
        text("unicode"),
        {"content": "structured result", "ok": True},
        {"temperature": 21.5, "conditions": ["sunny", "windy"]},
        [{"type": "text", "text": "list result"}],
        "Error: tool failed with \"quotes\" and \\backslash",
    ])


TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Get the current weather in a city.",
                                      "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name, e.g. Paris"},
                                                                                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                                                     "required": ["city"]}}},
    {"type": "function", "function": {"name": "calculator", "description": "Evaluate an arithmetic expression like \"2 + 2\" or 'x<y'.",
                                      "parameters": {"type": "object", "properties": {"expression": {"type": "string"}, "precision": {"type": "number", "default": 0.01}},
                                                     "required": ["expression"]}, "return": {"type": "number"}}},
    {"type": "function", "function": {"name": "search_web", "description": "検索する — search the web 🔍",
                                      "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer", "minimum": 1, "maximum": 50}}}}},
    {"type": "function", "function": {"name": "noop", "description": "", "parameters": {"type": "object", "properties": {}}}},
]

# ---------------------------------------------------------------- message builders


def msg(role, content=..., **extra):
    m = {"role": role}
    if content is not ...:
        m["content"] = content
    m.update(extra)
    return m


def alternation(n, system=None, start="user"):
    out = []
    if system is not None:
        out.append(msg("system", system))
    role = start
    for _ in range(n):
        out.append(msg(role, text()))
        role = "assistant" if role == "user" else "user"
    return out


CONVS = []


def add(cat, messages, tools=None, extra=None, families=None):
    c = {"id": f"h{len(CONVS) + 1:03d}-{cat}", "cat": cat, "messages": messages}
    if tools is not None:
        c["tools"] = tools
    if extra is not None:
        c["extra"] = extra
    if families is not None:
        c["families"] = families
    c["cli"] = tools is None and extra is None
    CONVS.append(c)


def sysprompt():
    return R.choice([sentence(), "You are a helpful assistant.", "", text("unicode"), text("ws"), text("literal"), text("multi")])


# 1. well-formed alternations, 1-12 messages, with or without a system prompt
for i in range(36):
    n = R.randint(1, 12)
    add("alt", alternation(n, sysprompt() if R.random() < 0.5 else None))

# 2. content-focused alternations: every message from one pool
for kind in ["unicode", "ws", "literal", "think", "empty", "multi"]:
    for _ in range(4):
        n = R.randint(1, 6)
        sysm = text(kind) if R.random() < 0.4 else None
        msgs = ([msg("system", sysm)] if sysm is not None else [])
        role = "user"
        for _ in range(n):
            msgs.append(msg(role, text(kind)))
            role = "assistant" if role == "user" else "user"
        add(kind, msgs)

# 3. role errors and unusual roles
for _ in range(4):  # consecutive same role somewhere
    m = alternation(R.randint(2, 8), sysprompt() if R.random() < 0.5 else None)
    j = R.randrange(len(m))
    m.insert(j + 1, msg(m[j]["role"], text()))
    add("consecutive", m)
add("consecutive", [msg("user", "a"), msg("user", "b"), msg("user", "c")])
add("consecutive", [msg("user", "q"), msg("assistant", "a1"), msg("assistant", "a2")])
add("assistant-first", [msg("assistant", text()), msg("user", text())])
add("assistant-first", [msg("assistant", text())])
add("system-mid", alternation(3) + [msg("system", text())] + alternation(2))
add("two-systems", [msg("system", text()), msg("system", text())] + alternation(2))
add("system-last", alternation(2) + [msg("system", "late system")])
for role in ["developer", "function", "ipython", "observation", "User", "ASSISTANT", "", "tool_results", "model"]:
    m = alternation(R.randint(1, 4), sysprompt() if R.random() < 0.3 else None)
    m.insert(R.randint(0, len(m)), msg(role, text()))
    add("unknown-role", m)

# 4. tool calls and tool responses inside messages (no tools list: CLI-able)
for _ in range(18):
    m = [msg("system", sysprompt())] if R.random() < 0.4 else []
    m.append(msg("user", text()))
    for _ in range(R.randint(1, 3)):
        ncalls = R.choice([1, 1, 1, 2, 3])
        calls = [tool_call() for _ in range(ncalls)]
        content = R.choice(["", None, ..., text(), text("think")])
        extra = {"tool_calls": calls}
        if R.random() < 0.3:
            extra["reasoning_content"] = text()
        m.append(msg("assistant", content, **extra))
        for c in calls:
            tid = c.get("id", call_id(R.random() < 0.5))
            tm = msg("tool", tool_content(), tool_call_id=tid)
            if R.random() < 0.4:
                tm["name"] = c.get("function", c)["name"]
            m.append(tm)
        if R.random() < 0.7:
            m.append(msg("assistant", text()))
            if R.random() < 0.6:
                m.append(msg("user", text()))
    add("tool-calls", m)
add("tool-calls", [msg("user", "x"), msg("assistant", None, tool_calls=[]), msg("user", "y")])
add("tool-calls", [msg("user", "x"), msg("assistant", "", tool_calls=None), msg("user", "y")])
add("tool-calls", [msg("tool", "orphan tool response", tool_call_id="abcdefghi"), msg("user", "then a user")])
add("tool-calls", [msg("user", "go"), msg("assistant", "", tool_calls=[tool_call("dict"), tool_call("string")]),
                   msg("tool", "r1", tool_call_id="abcdefghi"), msg("tool", "r2", tool_call_id="ABCDEFGHI"), msg("tool", "r3", tool_call_id="123456789")])
add("tool-calls", [msg("user", "<tool_response>\nwrapped like a tool\n</tool_response>"), msg("assistant", "ok"),
                   msg("user", "<tool_response>only start"), msg("assistant", "<think>r</think>fine")])

# 5. multimodal content lists
def parts():
    out = []
    for _ in range(R.randint(1, 4)):
        p = R.choice([
            {"type": "text", "text": text()},
            {"type": "image"},
            {"type": "image", "url": "https://example.com/cat.png"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            {"type": "text", "text": text("ws")},
            {"type": "video"},
        ])
        out.append(p)
    return out


for _ in range(8):
    m = alternation(R.randint(1, 5), None)
    for x in m:
        if R.random() < 0.6:
            x["content"] = parts()
    if R.random() < 0.4:
        m.insert(0, msg("system", R.choice([[{"type": "text", "text": text()}], text()])))
    add("multimodal", m)
add("multimodal", [msg("system", [{"type": "text", "text": "sys as parts"}, {"type": "text", "text": " second"}]), msg("user", [{"type": "text", "text": "hi"}])])
add("multimodal", [msg("user", [])])
add("multimodal", [msg("system", []), msg("user", "x")])

# 6. reasoning
for _ in range(10):
    m = alternation(R.choice([2, 4, 6]), sysprompt() if R.random() < 0.3 else None)
    for x in m:
        if x["role"] == "assistant":
            r = R.random()
            if r < 0.4:
                x["reasoning_content"] = R.choice([text(), "\n\nstep 1\nstep 2\n\n", "", text("unicode")])
            elif r < 0.55:
                x["reasoning_content"] = None
            elif r < 0.8:
                x["content"] = text("think")
    if R.random() < 0.5:
        m.append(msg("user", text()))
    add("reasoning", m)

# 7. content null / missing / not a string
add("missing-content", [msg("user"), msg("assistant", "a")])
add("missing-content", [msg("user", "q"), msg("assistant")])
add("missing-content", [msg("system"), msg("user", "q")])
add("null-content", [msg("user", None), msg("assistant", "a")])
add("null-content", [msg("user", "q"), msg("assistant", None)])
add("null-content", [msg("system", None), msg("user", "q")])
add("number-content", [msg("user", 42), msg("assistant", 3.5)])
add("bool-content", [msg("user", True), msg("assistant", False)])
add("dict-content", [msg("user", {"text": "an object"}), msg("assistant", "a")])
add("number-content", [msg("user", "q"), msg("assistant", 0)])

# 8. extra keys on messages
for _ in range(6):
    m = alternation(R.randint(1, 6), sysprompt() if R.random() < 0.5 else None)
    for x in m:
        for k, v in R.sample([("name", "alice"), ("id", "msg_01"), ("metadata", {"source": "web", "score": 0.9}), ("weight", 0.0),
                              ("tool_call_id", "abcdefghi"), ("tools", "[{\"name\": \"t\"}]"), ("thinking", "hidden"), ("loss", False)], R.randint(0, 3)):
            x[k] = v
    # key order other than role-first
    if m:
        y = m[-1]
        m[-1] = dict(reversed(list(y.items())))
    add("extra-keys", m)

# 9. empty and tiny conversations
add("empty", [])
add("empty", [msg("system", "only a system prompt")])
add("empty", [msg("user", "")])
add("empty", [msg("system", ""), msg("user", ""), msg("assistant", "")])

# 10. very long contents (~20 KB), each for a few families only (keeps hidden.jsonl small)
FAMILIES = sorted(os.listdir(os.path.join(CHAT, "families")))
LONG_GROUPS = [FAMILIES[0:5], FAMILIES[5:9], FAMILIES[9:13]]
for i, grp in enumerate(LONG_GROUPS):
    m = [msg("system", text())] if R.random() < 0.5 else []
    m += [msg("user", long_text()), msg("assistant", long_text() if i == 0 else text()), msg("user", text())]
    add("long", m, families=grp)
add("long-many-turns", alternation(60, "Be brief."), families=["qwen3", "llama3.2", "gemma3", "smollm2"])

# 11. library only: a tools list and extra template arguments
for _ in range(10):
    tools = R.sample(TOOLS, R.randint(1, len(TOOLS)))
    m = [msg("system", sysprompt())] if R.random() < 0.5 else []
    m.append(msg("user", text()))
    if R.random() < 0.6:
        c = tool_call(R.choice(["dict", "string"]))
        m.append(msg("assistant", R.choice(["", None, text()]), tool_calls=[c]))
        m.append(msg("tool", tool_content(), tool_call_id=c.get("id", "abcdefghi")))
        m.append(msg("assistant", text()))
    if R.random() < 0.5:
        m.append(msg("user", text()))
    add("tools-list", m, tools=tools)
add("tools-list", [msg("user", "hi")], tools=[])
add("tools-list", [msg("system", "sys only")], tools=TOOLS[:1])
add("tools-list", [msg("user", "same"), msg("assistant", "a"), msg("user", "same")], tools=TOOLS[:2])
add("extra-args", alternation(3), extra={"enable_thinking": False})
add("extra-args", alternation(2), extra={"enable_thinking": True})
add("extra-args", alternation(2, "sys"), extra={"date_string": "01 Jan 2030", "tools_in_user_message": False}, tools=TOOLS[:2])
add("extra-args", [msg("user", "run it"), msg("assistant", "", tool_calls=[{"id": "abcdefghi", "type": "function", "function": {"name": "brave_search", "arguments": {"query": "jinja"}}}]),
                   msg("ipython", "results")], extra={"builtin_tools": ["brave_search", "wolfram_alpha", "code_interpreter"]})
add("extra-args", alternation(2), extra={"custom_tools": TOOLS[2:]})
add("extra-args", alternation(2), extra={"bos_token": "<BOS-OVERRIDE>", "eos_token": "</EOS-OVERRIDE>"})

# ---------------------------------------------------------------- rendering


def family_table():
    fams = {}
    for name in FAMILIES:
        cfg = json.load(open(os.path.join(CHAT, "families", name, "tokenizer_config.json"), encoding="utf-8"))
        special = {k: cfg[k] for k in KEYS if isinstance(cfg.get(k), str)}
        if cfg.get("additional_special_tokens"):
            special["additional_special_tokens"] = list(cfg["additional_special_tokens"])
        fams[name] = (compile_template(cfg["chat_template"]), special, "{% generation %}" in cfg["chat_template"] or "{%- generation" in cfg["chat_template"])
    return fams


def render(tpl, conv, agp, special, track):
    kw = dict(messages=conv["messages"], tools=conv.get("tools"), documents=None, add_generation_prompt=agp, **{**special, **conv.get("extra", {})})
    try:
        if not track:
            return {"text": tpl.render(**kw)}
        blocks, idx = [], []
        with tpl.environment.activate_tracker(blocks, idx):
            for b in tpl.generate(**kw):
                blocks.append(b)
            text = "".join(blocks)
        return {"text": text, "gen": [list(x) for x in idx]}
    except RaiseException as e:
        return {"error": {"kind": "raise_exception", "message": str(e)}}
    except Exception as e:  # noqa: BLE001
        return {"error": {"kind": "runtime", "message": f"{type(e).__name__}: {e}"}}


def cp_to_utf8(s, cp):
    return len(s[:cp].encode("utf-8"))


def build():
    conv_lines = [json.dumps(c, ensure_ascii=False) for c in CONVS]
    convs = [json.loads(line) for line in conv_lines]  # what Go reads
    fams = family_table()
    recs = []
    for c in convs:
        for fam in FAMILIES:
            if "families" in c and fam not in c["families"]:
                continue
            tpl, special, gen = fams[fam]
            for agp in (False, True):
                r = render(tpl, c, agp, special, gen)
                if gen:
                    plain = render(tpl, c, agp, special, False)
                    if plain.get("text") != r.get("text") or plain.get("error") != r.get("error"):
                        raise SystemExit(f"tracked render differs from plain render: {fam} {c['id']} agp={agp}")
                rec = {"id": c["id"], "family": fam, "add_generation_prompt": agp, "rendered": r.get("text"), "error": r.get("error")}
                if gen and "text" in r:
                    rec["generation_spans_cp"] = r["gen"]
                    rec["generation_spans_utf8"] = [[cp_to_utf8(r["text"], a), cp_to_utf8(r["text"], b)] for a, b in r["gen"]]
                recs.append(rec)
    return conv_lines, [json.dumps(r, ensure_ascii=False) for r in recs], recs


def main():
    if jinja2.__version__ != JINJA2_VERSION:
        print(f"gen_hidden: need jinja2 {JINJA2_VERSION}, this is {jinja2.__version__} ({sys.executable})", file=sys.stderr)
        sys.exit(2)
    conv_lines, rec_lines, recs = build()
    files = {"conversations.jsonl": conv_lines, "hidden.jsonl": rec_lines}
    if "--check" in sys.argv:
        bad = 0
        for name, lines in files.items():
            have = open(os.path.join(OUT, name), encoding="utf-8").read().split("\n")[:-1]
            if have != lines:
                bad += 1
                print(f"{name}: differs from a fresh render", file=sys.stderr)
        print(f"{len(files) - bad} passed, {bad} failed")
        sys.exit(1 if bad else 0)
    for name, lines in files.items():
        os.makedirs(OUT, exist_ok=True)
        with open(os.path.join(OUT, name), "w", encoding="utf-8", newline="\n") as f:
            for line in lines:
                f.write(line + "\n")
    kinds = {}
    for r in recs:
        k = "text" if r["error"] is None else r["error"]["kind"]
        kinds[k] = kinds.get(k, 0) + 1
    print(f"{len(conv_lines)} conversations ({sum(c['cli'] for c in CONVS)} CLI-able), {len(recs)} records: {kinds}")


if __name__ == "__main__":
    main()
