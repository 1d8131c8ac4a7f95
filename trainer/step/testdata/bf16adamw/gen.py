"""PyTorch reference for gotpu's bf16 weights (bf16_state_test.go): torch.optim.AdamW on bfloat16
parameters, whose exp_avg / exp_avg_sq are bfloat16 too (zeros_like(p)), with HF Trainer's decay
groups and clip_grad_norm_ — on the llama-tiny fixture (testdata/models/llama-tiny).

Run from the repository root with Debian's torch 1.13 (the reference runtime):

    /usr/bin/python3 trainer/step/testdata/bf16adamw/gen.py > trainer/step/testdata/bf16adamw/reference.json

Two runs:

"optimizer": the update alone, exactly. llama-tiny's weights rounded to bf16 (to nearest even, as
model.to(torch.bfloat16) does) take 5 AdamW steps (lr 1e-2, weight decay 0.5 — large enough that
1 - lr*wd is not 1.0 in bf16, so decoupled decay happens — clipping at 1.0) whose gradients are
not computed but made up, bf16 values from an integer hash of (parameter name, element, step)
that bf16_state_test.go computes identically (gradBits below). Some steps' norms are above 1 (then
clipped), some below. Written: every step's total norm (bf16), every parameter's sum and L2 after
the steps, and for a few tensors ("exact") the bits of the parameter, exp_avg and exp_avg_sq, to
compare element by element. Also how many of those elements two other update rules would get
wrong (the same in gotpu would fail the test's tolerance): "f32_state" (the state in float32, the
parameter updated in float32 and rounded once: gotpu before bf16 state) and "lerp" (torch >= 2.0's
exp_avg.lerp_, one rounding instead of mul_ + add_).

"train": 5 real training steps of the bf16 model on the fixture's batch (reference.json's
input_ids, labels = input_ids), lr 3e-3, weight decay 0.01 (a no-op in bf16: 1 - 3e-5 rounds to
1.0, as it does in torch), clipping at 1.0. Written: losses, pre-clip total norms, per-parameter
sum and L2 after, the bits of a few tensors after, and the same tensors after a float32-master
run of the same steps from the same bf16-rounded weights, rounded to bf16 at the end (mixed
precision's answer), to show how far apart two legitimately different runs are.
"""

import json
import math
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "testdata", "models", "reference"))

from llama_ref import LlamaForCausalLM  # noqa: E402

FIXTURE = os.path.join(ROOT, "testdata", "models", "llama-tiny")
EXACT = ["model.layers.0.input_layernorm.weight", "model.layers.1.self_attn.k_proj.weight", "model.norm.weight"]
M32 = 0xFFFFFFFF
# Exponent offset of each step's made-up gradients: +8 makes the total norm ~100s (clipped),
# -4 ~0.07 (not clipped).
GRAD_EXP = [8, -4, 4, -4, 0]


def fnv1a(s):
    h = 2166136261
    for b in s.encode():
        h = ((h ^ b) * 16777619) & M32
    return h


def fmix(h):
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & M32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & M32
    return h ^ (h >> 16)


def grad_bits(name, n, step):
    """bf16 bits of the made-up gradient of parameter name (n elements) at step (1-based)."""
    j = np.arange(n, dtype=np.uint64)
    x = (np.uint64(fnv1a(name)) ^ ((j * np.uint64(0x9E3779B1)) & np.uint64(M32)) ^ np.uint64((step * 0x27D4EB2F) & M32))
    x ^= x >> np.uint64(16)
    x = (x * np.uint64(0x85EBCA6B)) & np.uint64(M32)
    x ^= x >> np.uint64(13)
    x = (x * np.uint64(0xC2B2AE35)) & np.uint64(M32)
    x ^= x >> np.uint64(16)
    sign = x >> np.uint64(31)
    exp = np.uint64(127 - 14 + GRAD_EXP[step - 1]) + ((x >> np.uint64(24)) & np.uint64(7))
    mant = (x >> np.uint64(16)) & np.uint64(0x7F)
    bits = (sign << np.uint64(15)) | (exp << np.uint64(7)) | mant
    bits[(x & np.uint64(0xFF)) == 0] = 0  # some exact zeros: denom = eps there
    return bits.astype(np.uint16)


def bf16_from_bits(bits, shape):
    f = (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)
    return torch.from_numpy(f.reshape(shape).copy()).bfloat16()


def bits_of(t):
    return (t.detach().float().numpy().reshape(-1).view(np.uint32) >> np.uint32(16)).astype(np.uint16)


def stats(t):
    x = t.detach().double()
    return {"sum": float(x.sum()), "l2": float(x.norm())}


def groups(model, lr, wd):
    decay = [p for n, p in model.named_parameters() if "norm" not in n]
    no_decay = [p for n, p in model.named_parameters() if "norm" in n]
    return torch.optim.AdamW([{"params": decay, "weight_decay": wd}, {"params": no_decay, "weight_decay": 0.0}],
                             lr=lr, betas=(0.9, 0.999), eps=1e-8)


def bf(x):
    return x.bfloat16().float()


def r32(x):
    return float(np.float32(x))


def rb(x):
    return float(torch.tensor(r32(x)).bfloat16().float())


def variant_update(p, m, v, g, t, lr, wd, kind):
    """One AdamW step of another rule (float32 tensors holding bf16 values): kind "f32_state"
    (state float32, the parameter updated in float32 and rounded once) or "lerp"."""
    ss = r32(lr / (1 - 0.9 ** t))
    bc = r32(math.sqrt(1 - 0.999 ** t))
    if kind == "f32_state":
        m = m + (g - m) * r32(0.1)
        v = v * r32(0.999) + g * g * r32(1 - 0.999)
        p = bf(p * r32(1 - lr * wd) - ss * (m / (v.sqrt() / bc + 1e-8)))
        return p, m, v
    p = bf(p * rb(1 - lr * wd))
    m = bf(m + (g - m) * r32(0.1))  # lerp_(g, 0.1): weight < 0.5
    v = bf(bf(v * rb(0.999)) + g * r32(1 - 0.999) * g)
    d = bf(bf(bf(v.sqrt()) / rb(bc)) + rb(1e-8))
    return bf(p - ss * (m / d)), m, v


def optimizer_run():
    lr, wd, steps = 1e-2, 0.5, 5
    model = LlamaForCausalLM.from_pretrained(FIXTURE, torch.bfloat16)
    opt = groups(model, lr, wd)
    named = dict(model.named_parameters())
    var = {k: {n: [bf(named[n].detach().float()), torch.zeros(named[n].shape), torch.zeros(named[n].shape)]
               for n in EXACT} for k in ("f32_state", "lerp")}
    norms = []
    for t in range(1, steps + 1):
        grads = {}
        for n, p in model.named_parameters():
            grads[n] = bf16_from_bits(grad_bits(n, p.numel(), t), p.shape)
            p.grad = grads[n].clone()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        norms.append(float(norm))
        for kind in var:
            for n in EXACT:
                g = named[n].grad.float()  # clipped, as each variant's update would receive it
                var[kind][n] = list(variant_update(*var[kind][n], g, t, lr, wd, kind))
        opt.step()
    exact, wrong = {}, {k: 0 for k in var}
    for n in EXACT:
        p = named[n]
        st = opt.state[p]
        assert st["exp_avg"].dtype == torch.bfloat16 and st["exp_avg_sq"].dtype == torch.bfloat16
        exact[n] = {"param": bits_of(p).tolist(), "exp_avg": bits_of(st["exp_avg"]).tolist(),
                    "exp_avg_sq": bits_of(st["exp_avg_sq"]).tolist()}
        for kind in var:
            wrong[kind] += int((bf(var[kind][n][0]) != p.detach().float()).sum())
    return {"lr": lr, "weight_decay": wd, "max_grad_norm": 1.0, "steps": steps, "grad_exponent_offsets": GRAD_EXP,
            "grad_norms": norms, "params_after": {n: stats(p) for n, p in model.named_parameters()},
            "exact": exact, "exact_elements": sum(named[n].numel() for n in EXACT),
            "param_mismatches_of_other_rules": wrong}


def train(dtype, weights):
    lr, wd, steps = 3e-3, 0.01, 5
    model = LlamaForCausalLM.from_pretrained(FIXTURE, dtype)
    with torch.no_grad():
        for n, p in model.named_parameters():
            p.copy_(weights[n])
    opt = groups(model, lr, wd)
    with open(os.path.join(FIXTURE, "reference.json")) as f:
        ids = torch.tensor(json.load(f)["input_ids"])
    losses, norms = [], []
    for _ in range(steps):
        _, loss = model(ids, labels=ids)
        loss.backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)))
        opt.step()
        opt.zero_grad()
        losses.append(float(loss))
    return model, {"lr": lr, "weight_decay": wd, "max_grad_norm": 1.0, "steps": steps, "losses": losses, "grad_norms": norms}


def train_run():
    init = LlamaForCausalLM.from_pretrained(FIXTURE, torch.bfloat16)
    weights = {n: p.detach().clone() for n, p in init.named_parameters()}
    model, out = train(torch.bfloat16, weights)
    for p in model.parameters():
        assert p.dtype == torch.bfloat16
    named = dict(model.named_parameters())
    out["params_after"] = {n: stats(p) for n, p in model.named_parameters()}
    out["exact"] = {n: bits_of(named[n]).tolist() for n in EXACT}
    master, mout = train(torch.float32, {n: w.float() for n, w in weights.items()})
    mnamed = dict(master.named_parameters())
    out["float32_master"] = {"losses": mout["losses"], "grad_norms": mout["grad_norms"],
                             "exact": {n: bits_of(mnamed[n].bfloat16()).tolist() for n in EXACT}}
    return out


def main():
    torch.manual_seed(0)
    torch.set_num_threads(1)  # reductions in one order
    ref = {
        "description": "torch.optim.AdamW on bfloat16 parameters (bf16 state), llama-tiny; see gen.py",
        "generator": {"script": "trainer/step/testdata/bf16adamw/gen.py", "torch": torch.__version__,
                      "numpy": np.__version__, "python": sys.version.split()[0]},
        "exact_tensors": EXACT,
        "optimizer": optimizer_run(),
        "train": train_run(),
    }
    json.dump(ref, sys.stdout, separators=(",", ":"))
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
