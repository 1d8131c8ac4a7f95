#!/usr/bin/env python3
"""GPT-2 training throughput in JAX: the same model on the same XLA compiler as gotpu's graphs.

gotpu and JAX both hand StableHLO to XLA's CUDA plugin, so the ratio of their tokens/s says how
much of XLA's speed gotpu's graphs keep. This is a small pure-JAX GPT-2 (no flax, no optax),
written to match what gotpu computes in bf16 mixed precision: float32 master weights cast to
bfloat16 for the matrix products, layer norms, softmax and loss in float32, attention as plain
matrix products with a causal mask (no fused attention kernel, as in gotpu), and torch's AdamW
(decoupled weight decay 0.1 on matrices only, bias correction, eps 1e-8) after global-norm
clipping at 1.0, in one jitted step with the parameters and optimizer state donated.

  bench_jax.py --config CONFIG.json --batch B --seq T --steps N [--warmup W] [--peak 989e12]
               --out JAX.json

Prints "RESULT<TAB>3-gpt2-jax<TAB>PASS|FAIL<TAB>detail". On out-of-memory it halves the batch.
"""
import argparse
import gc
import json
import math
import sys
import time

sys.dont_write_bytecode = True

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

COMPUTE = jnp.bfloat16

# jax.tree.* and jax.random.key are the current spellings; the jax.tree_util and PRNGKey ones are
# older, kept as a fallback so that the script runs on whichever JAX the machine has.
_tree = getattr(jax, "tree", None)
tree_map = _tree.map if _tree is not None else jax.tree_util.tree_map
tree_leaves = _tree.leaves if _tree is not None else jax.tree_util.tree_leaves
new_key = getattr(jax.random, "key", None) or jax.random.PRNGKey


def init_params(cfg, key):
    v, p, c, n = cfg["vocab_size"], cfg["n_positions"], cfg["n_embd"], cfg["n_layer"]
    std = cfg.get("initializer_range", 0.02)
    keys = iter(jax.random.split(key, 2 + 4 * n))

    def normal(shape, s=std):
        return s * jax.random.normal(next(keys), shape, jnp.float32)

    def zeros(k):
        return jnp.zeros((k,), jnp.float32)

    def ones(k):
        return jnp.ones((k,), jnp.float32)

    # GPT-2 scales the residual projections' init by 1/sqrt(2 n_layer), as HF does.
    proj_std = std / math.sqrt(2 * n)
    layers = []
    for _ in range(n):
        layers.append({
            "ln1_w": ones(c), "ln1_b": zeros(c),
            "attn_w": normal((c, 3 * c)), "attn_b": zeros(3 * c),
            "proj_w": normal((c, c), proj_std), "proj_b": zeros(c),
            "ln2_w": ones(c), "ln2_b": zeros(c),
            "fc_w": normal((c, 4 * c)), "fc_b": zeros(4 * c),
            "fcproj_w": normal((4 * c, c), proj_std), "fcproj_b": zeros(c),
        })
    return {"wte": normal((v, c)), "wpe": normal((p, c)), "h": layers, "lnf_w": ones(c), "lnf_b": zeros(c)}


def layer_norm(x, w, b, eps):
    x = x.astype(jnp.float32)
    mu = x.mean(-1, keepdims=True)
    var = jnp.square(x - mu).mean(-1, keepdims=True)
    return ((x - mu) * jax.lax.rsqrt(var + eps) * w + b).astype(COMPUTE)


def dense(x, w, b):
    return x @ w.astype(COMPUTE) + b.astype(COMPUTE)


def make_loss(cfg):
    nh, eps = cfg["n_head"], cfg.get("layer_norm_epsilon", 1e-5)

    def loss_fn(params, ids):
        bsz, t = ids.shape
        c = params["wte"].shape[1]
        d = c // nh
        x = (params["wte"][ids] + params["wpe"][:t]).astype(COMPUTE)
        causal = jnp.tril(jnp.ones((t, t), jnp.bool_))
        for p in params["h"]:
            h = layer_norm(x, p["ln1_w"], p["ln1_b"], eps)
            q, k, v = jnp.split(dense(h, p["attn_w"], p["attn_b"]), 3, axis=-1)
            q, k, v = (z.reshape(bsz, t, nh, d).transpose(0, 2, 1, 3) for z in (q, k, v))
            s = jnp.einsum("bhqd,bhkd->bhqk", q, k).astype(jnp.float32) / math.sqrt(d)
            s = jnp.where(causal, s, jnp.finfo(jnp.float32).min)
            a = jax.nn.softmax(s, axis=-1).astype(COMPUTE)
            y = jnp.einsum("bhqk,bhkd->bhqd", a, v).transpose(0, 2, 1, 3).reshape(bsz, t, c)
            x = x + dense(y, p["proj_w"], p["proj_b"])
            h = layer_norm(x, p["ln2_w"], p["ln2_b"], eps)
            x = x + dense(jax.nn.gelu(dense(h, p["fc_w"], p["fc_b"]), approximate=True), p["fcproj_w"], p["fcproj_b"])
        h = layer_norm(x, params["lnf_w"], params["lnf_b"], eps)
        logits = (h @ params["wte"].astype(COMPUTE).T).astype(jnp.float32)
        logp = jax.nn.log_softmax(logits[:, :-1], axis=-1)
        nll = -jnp.take_along_axis(logp, ids[:, 1:, None], axis=-1)[..., 0]
        return nll.mean()

    return loss_fn


def make_step(cfg, params, lr=6e-4, wd=0.1, b1=0.9, b2=0.999, eps=1e-8, clip=1.0):
    loss_fn = make_loss(cfg)
    # HF Trainer's groups: weight decay on matrices and embeddings, not on biases and norms.
    decay = tree_map(lambda x: x.ndim >= 2, params)

    def step(params, opt, ids):
        loss, grads = jax.value_and_grad(loss_fn)(params, ids)
        leaves = tree_leaves(grads)
        norm = jnp.sqrt(sum(jnp.sum(jnp.square(g)) for g in leaves))
        scale = jnp.minimum(1.0, clip / (norm + 1e-6))
        t = opt["t"] + 1
        m = tree_map(lambda m, g: b1 * m + (1 - b1) * (g * scale), opt["m"], grads)
        v = tree_map(lambda v, g: b2 * v + (1 - b2) * jnp.square(g * scale), opt["v"], grads)
        tf = t.astype(jnp.float32)
        bc1, bc2 = 1 - b1 ** tf, 1 - b2 ** tf

        def update(p, m, v, dec):
            if dec:
                p = p * (1 - lr * wd)
            return p - (lr / bc1) * m / (jnp.sqrt(v) / jnp.sqrt(bc2) + eps)

        params = tree_map(update, params, m, v, decay)
        return params, {"t": t, "m": m, "v": v}, loss

    return jax.jit(step, donate_argnums=(0, 1))


def run(cfg, a, batch):
    params = init_params(cfg, new_key(0))
    n_params = sum(x.size for x in tree_leaves(params))
    zeros = tree_map(jnp.zeros_like, params)
    opt = {"t": jnp.zeros((), jnp.int32), "m": zeros, "v": tree_map(jnp.zeros_like, params)}
    keys = jax.random.split(new_key(1), 4)
    batches = [jax.random.randint(k, (batch, a.seq), 0, cfg["vocab_size"], jnp.int32) for k in keys]
    step = make_step(cfg, params)
    t0 = time.perf_counter()
    compiled = step.lower(params, opt, batches[0]).compile()
    compile_s = time.perf_counter() - t0
    for i in range(a.warmup):
        params, opt, loss = compiled(params, opt, batches[i % 4])
        loss.block_until_ready()
    t0 = time.perf_counter()
    for i in range(a.steps):
        params, opt, loss = compiled(params, opt, batches[i % 4])
    loss.block_until_ready()
    elapsed = time.perf_counter() - t0
    tps = batch * a.seq * a.steps / elapsed
    fpt = 6 * n_params + 12 * cfg["n_layer"] * cfg["n_embd"] * a.seq
    dev = jax.devices()[0]
    out = {"framework": "jax", "mode": "jit", "jax": jax.__version__, "device_kind": dev.device_kind, "batch": batch,
           "seq": a.seq, "steps": a.steps, "params": int(n_params), "tokens_per_second": tps, "mfu": tps * fpt / a.peak,
           "step_seconds": elapsed / a.steps, "compile_seconds": compile_s, "final_loss": float(loss)}
    stats = dev.memory_stats() if hasattr(dev, "memory_stats") else None
    if stats and "peak_bytes_in_use" in stats:
        out["peak_memory_bytes"] = stats["peak_bytes_in_use"]
        out["peak_memory_source"] = "jax Device.memory_stats()['peak_bytes_in_use']"
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", required=True)
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--seq", type=int, required=True)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--peak", type=float, default=989e12)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    with open(a.config) as f:
        cfg = json.load(f)
    batch, notes, out = a.batch, [], None
    while out is None:
        try:
            out = run(cfg, a, batch)
        except Exception as e:  # noqa: BLE001 - out-of-memory retries; anything else is the result
            msg = str(e)
            if not (("RESOURCE_EXHAUSTED" in msg or "out of memory" in msg.lower()) and batch > 1):
                out = {"framework": "jax", "mode": "jit", "batch": batch, "error": f"{type(e).__name__}: {msg}"[:500]}
                break
            notes.append(f"batch {batch} out of memory")
            batch //= 2
        # Outside the except clause, so that the failed attempt's arrays (held by the exception's
        # traceback until then) are free before the next one allocates.
        if out is None:
            jax.clear_caches()
            gc.collect()
    out["notes"] = notes
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
    if "error" in out:
        print(f"RESULT\t3-gpt2-jax\tFAIL\t{out['error']}", flush=True)
        sys.exit(1)
    print(f"RESULT\t3-gpt2-jax\tPASS\tjax {out['jax']} on {out['device_kind']}: B={out['batch']} T={out['seq']} "
          f"{out['tokens_per_second']:,.0f} tokens/s, MFU {100 * out['mfu']:.1f}%, compile {out['compile_seconds']:.1f} s, "
          f"peak mem {out.get('peak_memory_bytes', 0) / 2**30:.1f} GiB{'; ' + '; '.join(notes) if notes else ''}", flush=True)


if __name__ == "__main__":
    main()
