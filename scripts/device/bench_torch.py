#!/usr/bin/env python3
"""GPT-2 training throughput in PyTorch, the baseline scripts/device-check.sh compares gotpu with.

The model is the one gotpu trains: the config.json of the directory gotpu trained (GPT-2 124M,
dropout 0), randomly initialised, trained with AdamW (decoupled weight decay 0.1, fused on
CUDA), gradient clipping at 1.0 and bf16 autocast, on random tokens of the full sequence length.
With transformers installed it is transformers' GPT2LMHeadModel (attention as transformers
picks it by default, sdpa); --impl own uses the small definition below instead (same
parameters and maths), which also runs where transformers is not installed.

  bench_torch.py --config CONFIG.json --batch B --seq T --steps N [--warmup W]
                 [--modes eager,compile] [--impl auto|hf|own] [--device cuda|cpu]
                 [--peak 989e12] --out-dir DIR

Writes DIR/torch-<mode>.json per mode ({"framework": "torch", "mode", "batch", "seq",
"tokens_per_second", "mfu", "compile_seconds", "peak_memory_bytes", ...} or {"error": ...})
and prints "RESULT<TAB>id<TAB>PASS|FAIL<TAB>detail" per mode. On out-of-memory it halves the
batch and says so.
"""
import argparse
import gc
import json
import math
import os
import sys
import time

sys.dont_write_bytecode = True

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


class Block(nn.Module):
    def __init__(self, c, h, eps):
        super().__init__()
        self.h = h
        self.ln_1 = nn.LayerNorm(c, eps=eps)
        self.c_attn = nn.Linear(c, 3 * c)
        self.attn_proj = nn.Linear(c, c)
        self.ln_2 = nn.LayerNorm(c, eps=eps)
        self.c_fc = nn.Linear(c, 4 * c)
        self.mlp_proj = nn.Linear(4 * c, c)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.h, c // self.h).transpose(1, 2) for z in (q, k, v))
        if hasattr(F, "scaled_dot_product_attention"):
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # torch < 2.0
            s = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.h)
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
            y = s.masked_fill(~mask, float("-inf")).softmax(-1) @ v
        x = x + self.attn_proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class OwnGPT2(nn.Module):
    """GPT-2 with tied embeddings, as GPT2LMHeadModel computes it (dropout 0)."""

    def __init__(self, cfg):
        super().__init__()
        c, eps = cfg["n_embd"], cfg.get("layer_norm_epsilon", 1e-5)
        self.wte = nn.Embedding(cfg["vocab_size"], c)
        self.wpe = nn.Embedding(cfg["n_positions"], c)
        self.h = nn.ModuleList(Block(c, cfg["n_head"], eps) for _ in range(cfg["n_layer"]))
        self.ln_f = nn.LayerNorm(c, eps=eps)
        std = cfg.get("initializer_range", 0.02)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=std)
                if isinstance(m, nn.Linear):
                    nn.init.zeros_(m.bias)

    def forward(self, ids):
        pos = torch.arange(ids.shape[1], device=ids.device)
        x = self.wte(ids) + self.wpe(pos)
        for blk in self.h:
            x = blk(x)
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), ids[:, 1:].flatten())


def build(cfg, impl):
    if impl in ("auto", "hf"):
        try:
            import transformers

            hf_cfg = transformers.GPT2Config.from_dict({k: v for k, v in cfg.items() if not k.startswith("_")})
            for k in ("resid_pdrop", "embd_pdrop", "attn_pdrop"):
                setattr(hf_cfg, k, 0.0)
            m = transformers.GPT2LMHeadModel(hf_cfg)
            attn = getattr(m.config, "_attn_implementation", "?")

            def loss(ids):
                return m(input_ids=ids, labels=ids).loss

            return m, loss, f"transformers {transformers.__version__} GPT2LMHeadModel (attn {attn})"
        except ImportError:
            if impl == "hf":
                raise
    m = OwnGPT2(cfg)
    return m, m, "own GPT-2 definition (sdpa attention)" if hasattr(F, "scaled_dot_product_attention") else "own GPT-2 definition"


def decay_groups(model, wd):
    # HF Trainer's groups: no weight decay for biases and LayerNorm weights.
    decay, no_decay = [], []
    for n, p in model.named_parameters():
        (no_decay if p.ndim < 2 else decay).append(p)
    return [{"params": decay, "weight_decay": wd}, {"params": no_decay, "weight_decay": 0.0}]


def run(cfg, a, mode, batch):
    dev = torch.device(a.device)
    torch.manual_seed(0)
    model, loss_fn, what = build(cfg, a.impl)
    model.to(dev).train()
    n_params = sum(p.numel() for p in model.parameters())
    opt_kw = {"fused": True} if dev.type == "cuda" else {}
    opt = torch.optim.AdamW(decay_groups(model, 0.1), lr=6e-4, betas=(0.9, 0.999), eps=1e-8, **opt_kw)
    step_loss = loss_fn
    if mode == "compile":
        step_loss = torch.compile(loss_fn)
    gen = torch.Generator(device="cpu").manual_seed(1)
    batches = [torch.randint(0, cfg["vocab_size"], (batch, a.seq), generator=gen).to(dev) for _ in range(4)]
    amp = torch.autocast(device_type=dev.type, dtype=torch.bfloat16)

    def step(i):
        with amp:
            loss = step_loss(batches[i % len(batches)])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    warm = []
    for i in range(a.warmup):
        t0 = time.perf_counter()
        step(i)
        sync()
        warm.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    for i in range(a.steps):
        loss = step(i)
    sync()
    elapsed = time.perf_counter() - t0
    per_step = elapsed / a.steps
    tps = batch * a.seq * a.steps / elapsed
    fpt = 6 * n_params + 12 * cfg["n_layer"] * cfg["n_embd"] * a.seq
    out = {"framework": "torch", "mode": mode, "impl": what, "torch": torch.__version__, "batch": batch, "seq": a.seq,
           "steps": a.steps, "params": n_params, "tokens_per_second": tps, "mfu": tps * fpt / a.peak,
           "step_seconds": per_step, "compile_seconds": max(0.0, warm[0] - per_step) if warm else 0.0,
           "first_step_seconds": warm[0] if warm else None, "final_loss": float(loss)}
    if dev.type == "cuda":
        out["peak_memory_bytes"] = torch.cuda.max_memory_allocated()
        out["peak_memory_source"] = "torch.cuda.max_memory_allocated"
        out["device_name"] = torch.cuda.get_device_name()
    return out


def is_oom(e):
    return isinstance(e, getattr(torch, "OutOfMemoryError", ())) or "out of memory" in str(e).lower()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", required=True)
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--seq", type=int, required=True)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--modes", default="eager,compile")
    p.add_argument("--impl", default="auto", choices=("auto", "hf", "own"))
    p.add_argument("--device", default="cuda")
    p.add_argument("--peak", type=float, default=989e12)
    p.add_argument("--out-dir", required=True)
    a = p.parse_args()
    with open(a.config) as f:
        cfg = json.load(f)
    os.makedirs(a.out_dir, exist_ok=True)
    for mode in a.modes.split(","):
        batch, notes, out = a.batch, [], None
        while out is None:
            try:
                out = run(cfg, a, mode, batch)
            except Exception as e:  # noqa: BLE001 - reported per mode; the next mode still runs
                if not (is_oom(e) and batch > 1):
                    out = {"framework": "torch", "mode": mode, "batch": batch, "error": f"{type(e).__name__}: {e}"[:500]}
                    break
                notes.append(f"batch {batch} out of memory")
                batch //= 2
            # Outside the except clause, so that the failed attempt's tensors (held by the
            # exception's traceback until then) are free before the next one allocates.
            if out is None:
                gc.collect()
                if a.device == "cuda":
                    torch.cuda.empty_cache()
        out["notes"] = notes
        with open(os.path.join(a.out_dir, f"torch-{mode}.json"), "w") as f:
            json.dump(out, f, indent=1)
        if "error" in out:
            print(f"RESULT\t3-gpt2-torch-{mode}\tFAIL\t{out['error']}", flush=True)
        else:
            print(f"RESULT\t3-gpt2-torch-{mode}\tPASS\t{out['impl']}, torch {out['torch']}: B={out['batch']} T={out['seq']} "
                  f"{out['tokens_per_second']:,.0f} tokens/s, MFU {100 * out['mfu']:.1f}%, first step {out['first_step_seconds']:.1f} s, "
                  f"peak mem {out.get('peak_memory_bytes', 0) / 2**30:.1f} GiB{'; ' + '; '.join(notes) if notes else ''}", flush=True)
        if a.device == "cuda":
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
