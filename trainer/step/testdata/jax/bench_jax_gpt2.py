"""GPT-2 training steps in JAX on its own CPU backend (XLA CPU), float32: `make bench`'s reference
for issue #37, "benchmark against the same compiler" (BenchmarkXLACPUVsJAX in
../../xlacpu_bench_test.go runs it as a subprocess, in the venv that scripts/setup-jax-bench.sh
makes: jax/jaxlib 0.8.1, the release nearest the XLA build of gotpu's CPU PJRT plugin).

    ~/.cache/gotpu/jax-venv/bin/python bench_jax_gpt2.py --config ../gpt2_124m_config.json

The model is HF's GPT2LMHeadModel written out here in jax.numpy from an HF config.json (GPT-2
124M: vocab 50257, 12 layers, 12 heads, n_embd 768): token and position embeddings, pre-LN blocks
(ln_1, causal self-attention with 1/sqrt(head_dim) scaling and a fused c_attn, ln_2, MLP with
gelu_new), ln_f, the LM head tied to wte, and the shifted mean cross-entropy (labels = inputs).
Conv1D weights are (in, out) as HF stores them. HF's initialisation distributions
(_init_weights: N(0, initializer_range), every c_proj.weight N(0, initializer_range /
sqrt(2 n_layer)), biases 0, LayerNorm 1/0), drawn from numpy (not HF's stream), dropout 0.

The step is one jax.jit: forward, backward (jax.value_and_grad), global-norm clipping at 1.0
(torch.nn.utils.clip_grad_norm_: coef = min(1, max_norm / (norm + 1e-6))), and AdamW written by
hand with torch.optim.AdamW's semantics (decoupled decay p *= 1 - lr·wd, bias corrections,
denom = sqrt(v)/sqrt(1-β2^t) + eps) and HF Trainer's decay groups (no decay on biases and
LayerNorm weights): lr 1e-4, betas 0.9/0.999, eps 1e-8, weight decay 0.01. Parameters and
optimizer state are donated, so the update is in place, as gotpu's step does it.

Timing: the jit is lowered (trace_s) and compiled (compile_s) ahead of time and separately from
the steps, then --warmup untimed steps and --steps timed ones, each ended by reading the loss to
the host (block_until_ready), as gotpu's Step returns its loss. first_step_s is the first step's
wall time including trace and compile (what gotpu's first Step costs).

Output, one key=value per line (the Go benchmark parses them): jax/jaxlib versions, trace_s,
compile_s, first_step_s, step_ms (each timed step), ms_per_step (median of the timed steps; the
mean is mean_ms_per_step), tokens_per_s (from the median), cpu_s_per_step (this process's user +
system CPU seconds per timed step), minflt_per_step (minor page faults per timed step), peak_rss_mib (ru_maxrss), others_pct (CPU other processes
used during the timed steps) and loss_N for every step N (1-based, the
warm-up included). --tokens FILE reads the batch (little-endian int32, batch*seq of them) that
every step trains on; without it a batch is drawn from numpy's RandomState(seed + 1).
--dump-hlo DIR additionally writes the optimized HLO text of the step there. --no-donate compiles
the step without donation (no input/output aliasing), an ablation of one difference from gotpu.
"""

import sys

sys.dont_write_bytecode = True

import argparse
import json
import math
import os
import resource
import statistics
import time

import numpy as np


class CpuMonitor:
    """CPU used by other processes (and the hypervisor, as steal) while we ran, from /proc/stat
    (the same as ../pytorch/bench_train.py's, which imports torch)."""

    def __init__(self):
        self.hz = os.sysconf("SC_CLK_TCK")
        self.ncpu = os.cpu_count() or 1

    @staticmethod
    def _stat():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        idle = v[3] + v[4]
        steal = v[7] if len(v) > 7 else 0
        return sum(v[:8]) - idle - steal, steal

    def __enter__(self):
        self.t0 = time.perf_counter()
        self.busy0, self.steal0 = self._stat()
        self.own0 = sum(os.times()[:2])
        return self

    def __exit__(self, *exc):
        wall = time.perf_counter() - self.t0
        busy1, steal1 = self._stat()
        own = sum(os.times()[:2]) - self.own0
        cap = wall * self.ncpu
        self.foreign = max(0.0, (busy1 - self.busy0) / self.hz - own) / cap
        self.steal = (steal1 - self.steal0) / self.hz / cap
        return False


def init_params(cfg, seed):
    """HF GPT2PreTrainedModel._init_weights' distributions, float32, numpy's PCG64 stream."""
    rng = np.random.default_rng(seed)
    d, v, p, L = cfg["n_embd"], cfg["vocab_size"], cfg["n_positions"], cfg["n_layer"]
    inner = cfg.get("n_inner") or 4 * d
    std = cfg["initializer_range"]
    std_proj = std / math.sqrt(2 * L)

    def normal(shape, s):
        return (rng.standard_normal(shape, dtype=np.float32) * np.float32(s)).astype(np.float32)

    def zeros(*shape):
        return np.zeros(shape, np.float32)

    def ones(*shape):
        return np.ones(shape, np.float32)

    params = {"wte": normal((v, d), std), "wpe": normal((p, d), std), "ln_f": {"g": ones(d), "b": zeros(d)}, "h": []}
    for _ in range(L):
        params["h"].append({
            "ln_1": {"g": ones(d), "b": zeros(d)},
            "attn": {"c_attn": {"w": normal((d, 3 * d), std), "b": zeros(3 * d)},
                     "c_proj": {"w": normal((d, d), std_proj), "b": zeros(d)}},
            "ln_2": {"g": ones(d), "b": zeros(d)},
            "mlp": {"c_fc": {"w": normal((d, inner), std), "b": zeros(inner)},
                    "c_proj": {"w": normal((inner, d), std_proj), "b": zeros(d)}},
        })
    return params


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True, help="HF config.json of a GPT-2")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--warmup", type=int, default=1, help="untimed steps, the first (compiling) one included")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tokens", help="file of batch*seq little-endian int32 token ids, the batch of every step")
    ap.add_argument("--no-donate", action="store_true",
                    help="do not donate parameters and optimizer state (as gotpu's program, whose outputs alias no input)")
    ap.add_argument("--dump-hlo", help="directory to write the step's optimized HLO text to")
    args = ap.parse_args()
    if args.warmup < 1:
        sys.exit("--warmup must be >= 1 (the first step compiles)")

    import jax
    import jax.numpy as jnp
    import jaxlib

    with open(args.config) as f:
        cfg = json.load(f)
    B, T = args.batch, args.seq
    if T > cfg["n_positions"]:
        sys.exit(f"--seq {T} > n_positions {cfg['n_positions']}")
    d, H, eps_ln = cfg["n_embd"], cfg["n_head"], cfg["layer_norm_epsilon"]
    hd = d // H
    if cfg.get("activation_function", "gelu_new") != "gelu_new":
        sys.exit(f"activation_function {cfg['activation_function']!r}: only gelu_new is written here")

    def layer_norm(x, p):
        mu = jnp.mean(x, axis=-1, keepdims=True)
        var = jnp.mean(jnp.square(x - mu), axis=-1, keepdims=True)
        return (x - mu) * jax.lax.rsqrt(var + eps_ln) * p["g"] + p["b"]

    def gelu_new(x):
        return 0.5 * x * (1.0 + jnp.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))

    causal = jnp.tril(jnp.ones((T, T), bool))

    def attention(x, p):
        qkv = x @ p["c_attn"]["w"] + p["c_attn"]["b"]  # (B, T, 3d)
        q, k, v = jnp.split(qkv, 3, axis=-1)
        heads = lambda t: t.reshape(B, T, H, hd).transpose(0, 2, 1, 3)  # (B, H, T, hd)
        q, k, v = heads(q), heads(k), heads(v)
        s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(hd)
        s = jnp.where(causal, s, jnp.finfo(jnp.float32).min)
        a = jax.nn.softmax(s, axis=-1)
        o = jnp.einsum("bhqk,bhkd->bhqd", a, v).transpose(0, 2, 1, 3).reshape(B, T, d)
        return o @ p["c_proj"]["w"] + p["c_proj"]["b"]

    def mlp(x, p):
        return gelu_new(x @ p["c_fc"]["w"] + p["c_fc"]["b"]) @ p["c_proj"]["w"] + p["c_proj"]["b"]

    def loss_fn(params, ids):
        x = params["wte"][ids] + params["wpe"][:T][None]
        for blk in params["h"]:
            x = x + attention(layer_norm(x, blk["ln_1"]), blk["attn"])
            x = x + mlp(layer_norm(x, blk["ln_2"]), blk["mlp"])
        x = layer_norm(x, params["ln_f"])
        logits = x[:, :-1] @ params["wte"].T  # (B, T-1, V); the last position has no label
        labels = ids[:, 1:]
        logp = jax.nn.log_softmax(logits, axis=-1)
        return -jnp.mean(jnp.take_along_axis(logp, labels[..., None], axis=-1))

    params = jax.tree.map(jnp.asarray, init_params(cfg, args.seed))
    n_params = sum(x.size for x in jax.tree.leaves(params))

    # HF Trainer's decay groups: everything but biases and LayerNorm weights decays (wte and wpe do).
    def decays(path):
        keys = [getattr(k, "key", getattr(k, "idx", None)) for k in path]
        return not (keys[-1] == "b" or any(isinstance(k, str) and k.startswith("ln_") for k in keys))

    decay_mask = jax.tree_util.tree_map_with_path(lambda path, _: decays(path), params)
    b1, b2, eps, wd, max_norm = 0.9, 0.999, 1e-8, args.weight_decay, 1.0

    def train_step(params, m, v, t, lr, ids):
        loss, g = jax.value_and_grad(loss_fn)(params, ids)
        norm = jnp.sqrt(sum(jnp.sum(jnp.square(x)) for x in jax.tree.leaves(g)))
        coef = jnp.minimum(1.0, max_norm / (norm + 1e-6))
        t = t + 1
        tf = t.astype(jnp.float32)
        bc1, bc2 = 1 - b1 ** tf, 1 - b2 ** tf

        def upd(p, g, m, v, dec):
            g = g * coef
            if dec:
                p = p * (1 - lr * wd)
            m = b1 * m + (1 - b1) * g
            v = b2 * v + (1 - b2) * g * g
            denom = jnp.sqrt(v) / jnp.sqrt(bc2) + eps
            return p - (lr / bc1) * m / denom, m, v

        out = jax.tree.map(upd, params, g, m, v, decay_mask)
        treedef = jax.tree.structure(params)
        leaves = treedef.flatten_up_to(out)
        p2 = treedef.unflatten([o[0] for o in leaves])
        m2 = treedef.unflatten([o[1] for o in leaves])
        v2 = treedef.unflatten([o[2] for o in leaves])
        return p2, m2, v2, t, loss, norm

    m = jax.tree.map(jnp.zeros_like, params)
    v = jax.tree.map(jnp.zeros_like, params)
    t = jnp.zeros((), jnp.int32)
    lr = jnp.float32(args.lr)
    if args.tokens:
        raw = np.fromfile(args.tokens, dtype="<i4")
        if raw.size != B * T:
            sys.exit(f"{args.tokens}: {raw.size} token ids, want {B}*{T}")
        ids_np = raw.reshape(B, T)
    else:
        ids_np = np.random.RandomState(args.seed + 1).randint(0, cfg["vocab_size"], size=(B, T)).astype(np.int32)
    ids = jnp.asarray(ids_np, jnp.int32)

    step = jax.jit(train_step, donate_argnums=() if args.no_donate else (0, 1, 2, 3))
    t0 = time.perf_counter()
    lowered = step.lower(params, m, v, t, lr, ids)
    t1 = time.perf_counter()
    compiled = lowered.compile()
    t2 = time.perf_counter()
    trace_s, compile_s = t1 - t0, t2 - t1
    if args.dump_hlo:
        os.makedirs(args.dump_hlo, exist_ok=True)
        with open(os.path.join(args.dump_hlo, "jax_train_step.optimized.hlo.txt"), "w") as f:
            f.write(compiled.as_text())

    losses, times = [], []

    def run():
        nonlocal params, m, v, t
        params, m, v, t, loss, _ = compiled(params, m, v, t, lr, ids)
        losses.append(float(loss))  # a host read, which waits for the step

    run()
    first_step_s = time.perf_counter() - t0
    for _ in range(args.warmup - 1):
        run()
    cpu0 = sum(os.times()[:2])
    flt0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    with CpuMonitor() as mon:
        for _ in range(args.steps):
            s0 = time.perf_counter()
            run()
            times.append(time.perf_counter() - s0)
    cpu_s = sum(os.times()[:2]) - cpu0
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - flt0
    med = statistics.median(times)
    print(f"jax={jax.__version__} jaxlib={jaxlib.__version__} backend={jax.default_backend()} "
          f"devices={len(jax.devices())} batch={B} seq={T} params={n_params}")
    print(f"trace_s={trace_s:.3f}")
    print(f"compile_s={compile_s:.3f}")
    print(f"first_step_s={first_step_s:.3f}")
    print("step_ms=" + ",".join(f"{1000 * x:.0f}" for x in times))
    for i, l in enumerate(losses):
        print(f"loss_{i + 1}={l:.6f}")
    print(f"others_pct={100 * (mon.foreign + mon.steal):.1f}")
    print(f"cpu_s_per_step={cpu_s / args.steps:.2f}")
    print(f"minflt_per_step={faults / args.steps:.0f}")
    print(f"peak_rss_mib={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f}")
    print(f"mean_ms_per_step={1000 * sum(times) / len(times):.1f}")
    print(f"ms_per_step={1000 * med:.1f}")
    print(f"tokens_per_s={B * T / med:.1f}")


if __name__ == "__main__":
    main()
