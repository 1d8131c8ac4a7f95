#!/usr/bin/env python3
"""Interop of gotpu's files with the real Hugging Face libraries, for scripts/device-check.sh.

  interop.py models --jobs JOBS.json
      JOBS.json is a list of {"id", "kind": "causal"|"seqcls", "dir", "inputs", "logits"}: a model
      directory saved by gotpu, the JSON lines gotpu scored, and the logits file `gotpu score
      --logits` wrote. Each directory is loaded with transformers' AutoModelForCausalLM or
      AutoModelForSequenceClassification (float32, eager attention, on the CPU, so that the
      comparison is about the files and the modelling code, not about GPU kernels) and its
      logits must equal gotpu's within 1e-4. A weight that transformers reports missing,
      unexpected or mismatched fails the check even if the logits agree, because a missing
      weight is silently initialised at random.

  interop.py tokenize --name NAME --tokenizer tokenizer.json[.gz] --corpus corpus.jsonl
                      --plain GOT.jsonl --special GOT.jsonl
                      [--pairs PAIRS.jsonl --pairs-plain GOT.jsonl --pairs-special GOT.jsonl]
      encodes every corpus string (and pair) with the Python `tokenizers` package, with and
      without special tokens, and compares ids, tokens and offsets with `gotpu tokenize`'s lines.

Each check prints "RESULT<TAB>id<TAB>PASS|FAIL|SKIP<TAB>detail".
"""
import argparse
import gzip
import json
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from compare import SafeTensors, read_lines  # noqa: E402

LOGITS_TOL = 1e-4


def result(id_, status, detail):
    detail = " ".join(str(detail).split())
    print(f"RESULT\t{id_}\t{status}\t{detail}", flush=True)


def load_model(kind, d):
    import torch
    import transformers

    cls = transformers.AutoModelForCausalLM if kind == "causal" else transformers.AutoModelForSequenceClassification
    # transformers 5 calls the dtype argument dtype; 4.x called it torch_dtype.
    try:
        model, info = cls.from_pretrained(d, dtype=torch.float32, attn_implementation="eager", output_loading_info=True)
    except TypeError:
        model, info = cls.from_pretrained(d, torch_dtype=torch.float32, attn_implementation="eager", output_loading_info=True)
    model.eval()
    return model, info


def check_model(job):
    import torch

    model, info = load_model(job["kind"], job["dir"])
    problems = []
    for k in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"):
        v = list(info.get(k) or [])
        if k == "missing_keys":
            # A tied output projection is not stored, by design (save_pretrained leaves it out too).
            v = [n for n in v if not (n == "lm_head.weight" and getattr(model.config, "tie_word_embeddings", False))]
        if v:
            problems.append(f"{k}: {v[:4]}")
    st = SafeTensors(job["logits"])
    shape = st.shape("logits")
    got = torch.tensor(st.values("logits"), dtype=torch.float32).reshape(shape)
    worst = 0.0
    with torch.no_grad():
        for i, line in enumerate(read_lines(job["inputs"])):
            ids = torch.tensor([line["input_ids"]])
            kw = {}
            for k in ("attention_mask", "token_type_ids"):
                if k in line:
                    kw[k] = torch.tensor([line[k]])
            logits = model(input_ids=ids, **kw).logits[0].float()
            want = got[i] if job["kind"] == "seqcls" else got[i, : ids.shape[1]]
            worst = max(worst, (logits - want).abs().max().item())
    if worst > LOGITS_TOL:
        problems.append(f"logits differ by {worst:.3g}")
    detail = (f"{type(model).__name__} from {os.path.basename(job['dir'].rstrip('/'))}: "
              f"logits {list(shape)} max|d| {worst:.2g} vs gotpu score (tol {LOGITS_TOL:g})")
    if problems:
        detail += "; " + "; ".join(problems)
    return ("FAIL" if problems else "PASS"), detail


def cmd_models(a):
    try:
        import torch  # noqa: F401
        import transformers
    except Exception as e:  # noqa: BLE001 - any import failure means the check cannot run here
        with open(a.jobs) as f:
            for job in json.load(f):
                result(job["id"], "SKIP", f"transformers/torch not importable by {sys.executable}: {e}")
        return
    with open(a.jobs) as f:
        jobs = json.load(f)
    for job in jobs:
        try:
            status, detail = check_model(job)
            result(job["id"], status, f"transformers {transformers.__version__}: {detail}")
        except Exception as e:  # noqa: BLE001 - a failure to load is the finding, reported per model
            result(job["id"], "FAIL", f"transformers {transformers.__version__}: {type(e).__name__}: {e}")


def encoding_diff(got, enc):
    want = {"ids": list(enc.ids), "tokens": list(enc.tokens), "offsets": [list(o) for o in enc.offsets]}
    for f in ("ids", "tokens", "offsets"):
        g = got.get(f) or []
        if g != want[f]:
            i = next((k for k, (p, q) in enumerate(zip(g, want[f])) if p != q), min(len(g), len(want[f])))
            return f"{f} differ at {i}"
    return None


def cmd_tokenize(a):
    id_ = f"5-tokenizers-python-{a.name}"
    try:
        import tokenizers
    except Exception as e:  # noqa: BLE001
        result(id_, "SKIP", f"the Python tokenizers package is not importable by {sys.executable}: {e}")
        return
    opener = gzip.open if a.tokenizer.endswith(".gz") else open
    with opener(a.tokenizer, "rt", encoding="utf-8") as f:
        tok = tokenizers.Tokenizer.from_str(f.read())
    texts = [r["text"] for r in read_lines(a.corpus)]
    problems, n = [], 0
    for label, path, special in (("plain", a.plain, False), ("special", a.special, True)):
        got = read_lines(path)
        if len(got) != len(texts):
            problems.append(f"{label}: {len(got)} lines for {len(texts)} strings")
            continue
        for i, (g, t) in enumerate(zip(got, texts)):
            n += 1
            d = encoding_diff(g, tok.encode(t, add_special_tokens=special))
            if d:
                problems.append(f"string {i + 1} {label}: {d}")
    if a.pairs:
        pairs = read_lines(a.pairs)
        for label, path, special in (("pair plain", a.pairs_plain, False), ("pair special", a.pairs_special, True)):
            got = read_lines(path)
            if len(got) != len(pairs):
                problems.append(f"{label}: {len(got)} lines for {len(pairs)} pairs")
                continue
            for i, (g, p) in enumerate(zip(got, pairs)):
                n += 1
                d = encoding_diff(g, tok.encode(p["text"], p["text_pair"], add_special_tokens=special))
                if d:
                    problems.append(f"pair {i + 1} {label}: {d}")
    detail = f"tokenizers {tokenizers.__version__}: {n - len(problems)}/{n} encodings equal to gotpu tokenize (ids, tokens, offsets)"
    if problems:
        detail += "; " + "; ".join(problems[:3])
    result(id_, "FAIL" if problems else "PASS", detail)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("models")
    s.add_argument("--jobs", required=True)
    s = sub.add_parser("tokenize")
    for f in ("--name", "--tokenizer", "--corpus", "--plain", "--special"):
        s.add_argument(f, required=True)
    for f in ("--pairs", "--pairs-plain", "--pairs-special"):
        s.add_argument(f)
    a = p.parse_args()
    {"models": cmd_models, "tokenize": cmd_tokenize}[a.cmd](a)


if __name__ == "__main__":
    main()
