#!/usr/bin/env python3
"""Fits trainer/plan_xla.go's coefficients (xlaFit) on XLA's compiled memory figures.

Input: llama3.1-8b-cuts.json, written by
  GOTPU_PLAN_FIT_OUT=$PWD/testdata/plan/fit/llama3.1-8b-cuts.json make plan-fit
(Llama-3.1-8B's widths and vocabulary cut to 1, 2 and 4 layers, compiled without running on 8
XLA CPU devices). Output: the xlaFit map literal and each variant's temp against the model.

The model of a class's temp bytes (plan_xla.go documents the features):
  head*V*H*4 + logits*T*V*4 + (L-1)*(layerW*W*4 + layerTok*T*(H+I+heads*block)*4)
A class with two token counts fits all four by least squares; a class with one token count takes
logits and layerTok from the sibling named in TIED and fits head and layerW. A per-layer
coefficient that comes out negative is fixed at zero and the rest refitted.
"""
import json, os, sys
import numpy as np

path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "llama3.1-8b-cuts.json")
recs = json.load(open(path))
H, I, V, NH, HKV = 4096, 14336, 128256, 32, 1024
W = H * H + 2 * HKV * H + H * H + 3 * H * I + 2 * H  # one decoder layer's elements
G = 2 ** 30


def cls(r):
    lora = r["LoRA"]
    return (r["FSDP"], lora, r["Checkpointing"], r["DType"] == "bfloat16" and not lora)


def feats(r):
    T, L = r["Batch"] * r["Block"], r["Layers"]
    return dict(head=V * H * 4, logits=T * V * 4, layerW=(L - 1) * W * 4, layerTok=(L - 1) * T * (H + I + NH * r["Block"]) * 4)


FULL, FULL_CK = (True, False, False, False), (True, False, True, False)
LORA, LORA_CK = (True, True, False, False), (True, True, True, False)
TIED = {
    (True, False, False, True): FULL,
    (True, False, True, True): FULL_CK,
    (False, True, False, False): LORA,
    (False, True, True, False): LORA_CK,
}
ORDER = [FULL, FULL_CK, LORA, LORA_CK] + list(TIED)
by = {}
for r in recs:
    by.setdefault(cls(r), []).append(r)
coef = {}
for c in ORDER:
    rs = by.get(c)
    if not rs:
        continue
    y = np.array([r["Temp"] for r in rs], float)
    if c in TIED:
        s = coef[TIED[c]]
        fixed = {"logits": s["logits"], "layerTok": s["layerTok"]}
        y = y - np.array([sum(fixed[k] * feats(r)[k] for k in fixed) for r in rs])
        names = ["head", "layerW"]
    else:
        fixed, names = {}, ["head", "logits", "layerW", "layerTok"]
    while True:
        X = np.array([[feats(r)[n] for n in names] for r in rs], float)
        sol = dict(zip(names, map(float, np.linalg.lstsq(X, y, rcond=None)[0])))
        # A per-layer term below zero would shrink deeper models' figures: fix it at zero, refit.
        neg = [n for n in ("layerW", "layerTok") if sol.get(n, 0) < 0]
        if not neg:
            break
        fixed[neg[0]], names = 0.0, [n for n in names if n != neg[0]]
    coef[c] = dict(fixed, **sol)
    for r in rs:
        p = sum(coef[c][k] * feats(r)[k] for k in coef[c])
        print("# %-38s temp %7.3f GiB, model %7.3f" % (r["Variant"], r["Temp"] / G, p / G))


def key(c):
    f = [n for n, on in zip(("fsdp", "lora", "ckpt", "lowBase"), c) if on]
    return "{" + ", ".join(n + ": true" for n in f) + "}"


print("var xlaFit = map[xlaClass]xlaCoef{")
for c in ORDER:
    if c in coef:
        k = coef[c]
        print("\t%s: {head: %.4f, logits: %.4f, layerW: %.4f, layerTok: %.4f}," % (key(c), k["head"], k["logits"], k["layerW"], k["layerTok"]))
print("}")
