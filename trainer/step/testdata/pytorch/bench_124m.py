#!/usr/bin/python3
"""GPT-2 124M training steps in PyTorch on the CPU, float32 or bf16 autocast: `make bench`'s
reference for issue #22 (BenchmarkGPT2Small in bench124m_test.go runs it as a subprocess).

Run with Debian's Python (python3-torch), gpt2_ref.py on PYTHONPATH:
    PYTHONPATH=../../../../testdata/models/reference /usr/bin/python3 bench_124m.py \
        --config ../gpt2_124m_config.json --mode bf16

The model is the HF GPT-2 architecture of gpt2_ref.py built from an HF config.json (GPT-2 124M:
vocab 50257, 12 layers, 12 heads, n_embd 768), HF's initialisation (init_weights_hf), dropout 0;
batch 2 x seq 512 random tokens (labels = inputs), AdamW with HF Trainer's decay groups (lr 1e-4,
weight decay 0.01, betas 0.9/0.999, eps 1e-8), gradient clipping at 1.0 (HF's max_grad_norm).
--mode bf16 wraps the forward and the loss in torch.autocast("cpu", dtype=torch.bfloat16) (oneDNN
bf16 matmuls; weights, gradients and optimizer state stay float32), as HF Trainer's --bf16 does.
One process per mode, so that the peak RSS (ru_maxrss) is the mode's own.

Output, one key=value per line (the Go benchmark parses them): ms_per_step (mean of the timed
steps), tokens_per_s, peak_rss_mib, others_pct (CPU other processes used meanwhile), and loss_N
for every step N (1-based, warm-up included).
"""

import sys

sys.dont_write_bytecode = True

import argparse
import contextlib
import resource
import time

import numpy as np
import torch

from bench_train import CpuMonitor
from gpt2_ref import GPT2Config, GPT2LMHeadModel, hf_param_groups


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True, help="HF config.json of a GPT-2")
    ap.add_argument("--mode", choices=("f32", "bf16"), default="f32")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    cfg = GPT2Config.from_json_file(args.config)
    cfg.resid_pdrop = cfg.embd_pdrop = cfg.attn_pdrop = 0.0
    if args.seq > cfg.n_positions:
        sys.exit(f"--seq {args.seq} > n_positions {cfg.n_positions}")
    model = GPT2LMHeadModel(cfg)
    model.init_weights_hf(args.seed)
    model.train()
    opt = torch.optim.AdamW(hf_param_groups(model, 0.01), lr=args.lr, betas=(0.9, 0.999), eps=1e-8)

    B, T = args.batch, args.seq
    rs = np.random.RandomState(args.seed + 1)
    batches = [torch.from_numpy(rs.randint(0, cfg.vocab_size, size=(B, T))).long()
               for _ in range(args.warmup + args.steps)]

    def autocast():
        if args.mode == "bf16":
            return torch.autocast("cpu", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def step(ids):
        opt.zero_grad(set_to_none=True)
        with autocast():
            _, loss = model(ids, labels=ids)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.item()

    losses = [step(batches[i]) for i in range(args.warmup)]
    times = []
    with CpuMonitor() as mon:
        for i in range(args.steps):
            t0 = time.perf_counter()
            losses.append(step(batches[args.warmup + i]))
            times.append(time.perf_counter() - t0)
    total = sum(times)
    print(f"torch={torch.__version__} threads={torch.get_num_threads()} mode={args.mode} "
          f"batch={B} seq={T} params={sum(p.numel() for p in model.parameters())}")
    for i, l in enumerate(losses):
        print(f"loss_{i + 1}={l:.6f}")
    print(f"others_pct={100 * (mon.foreign + mon.steal):.1f}")
    print(f"peak_rss_mib={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f}")
    print(f"ms_per_step={1000 * total / args.steps:.1f}")
    print(f"tokens_per_s={B * T * args.steps / total:.1f}")


if __name__ == "__main__":
    main()
