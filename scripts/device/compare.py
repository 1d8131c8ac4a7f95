#!/usr/bin/env python3
"""Comparisons for scripts/device-check.sh, in the Python standard library only.

The device machine has numpy, but the dry run must work with whatever python3 a developer or CI
has (often none with numpy), so safetensors files are read here directly: an 8-byte
little-endian header length, a JSON header, then the raw tensors.

Every check prints one line, "PASS <detail>" or "FAIL <detail>", and exits 0 or 1 (2 for bad
input); device-check.sh records that line as the step's result. The tolerances are the Go tests'
on the CPU backends:

  score   mean per-line loss within 1e-5 of reference.json's loss, every logit within 1e-4
          (models/score_test.go, models/*/..._test.go)
  train   logged losses rounded to 4 decimals (HF's round(loss, 4)) and within 5e-5 + 1e-5 of
          the reference; each saved parameter's sum and L2 norm within 1e-4 relative, except
          tensors whose true gradient is exactly zero (attention key biases), bounded by three
          AdamW steps of lr 1e-3 per element (cmd/gotpu/train_test.go)

usage:
  compare.py score    --ref REF.json --scores SCORES.jsonl --logits LOGITS.safetensors
  compare.py train    --ref REF.json --variant NAME --state trainer_state.json --model model.safetensors
  compare.py tensors  --a A.safetensors --b B.safetensors [--state-a S --state-b S]
  compare.py tokenize --plain GOT.jsonl --special GOT.jsonl --expected EXP.jsonl[.gz]
                      [--pairs-plain GOT.jsonl --pairs-special GOT.jsonl --pairs-expected EXP.jsonl]
  compare.py bench    --state trainer_state.json --batch B --seq T --params N --layers L
                      --hidden H [--peak 989e12] [--smi SAMPLES.csv] [--warmup STEPS] --out OUT.json
  compare.py async    --state trainer_state.json
  compare.py report   RESULT.json...   (a markdown table of throughput ratios)
  compare.py exports  SYMBOL < PATHS   (prints the ELF shared objects among PATHS whose dynamic
                                        symbol table defines SYMBOL, as `nm -D --defined-only` would)
"""
import argparse
import array
import gzip
import json
import math
import statistics
import struct
import sys

sys.dont_write_bytecode = True

LOGITS_TOL = 1e-4
LOSS_TOL = 1e-5
LOGGED_LOSS_TOL = 5e-5 + 1e-5
PARAM_REL_TOL = 1e-4
ZERO_GRAD_STEP = 3e-3  # three AdamW steps of lr 1e-3, per element


def done(ok, detail):
    print(("PASS " if ok else "FAIL ") + detail)
    sys.exit(0 if ok else 1)


def read_lines(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


class SafeTensors:
    """A safetensors file read whole: names, dtypes, shapes, and values as float arrays."""

    def __init__(self, path):
        with open(path, "rb") as f:
            raw = f.read()
        (n,) = struct.unpack("<Q", raw[:8])
        header = json.loads(raw[8:8 + n])
        header.pop("__metadata__", None)
        self.path = path
        self.header = header
        self.data = memoryview(raw)[8 + n:]

    def names(self):
        return sorted(self.header)

    def shape(self, name):
        return self.header[name]["shape"]

    def dtype(self, name):
        return self.header[name]["dtype"]

    def values(self, name):
        """The tensor as an array('f') or array('d'), row-major."""
        info = self.header[name]
        start, end = info["data_offsets"]
        b = self.data[start:end]
        dt = info["dtype"]
        if dt == "F32":
            out = array.array("f")
            out.frombytes(b)
        elif dt == "F64":
            out = array.array("d")
            out.frombytes(b)
        elif dt == "BF16":
            # bfloat16 is the high half of a float32: widen each 16-bit word.
            half = array.array("H")
            half.frombytes(b)
            if sys.byteorder == "big":
                half.byteswap()
            wide = array.array("I", (h << 16 for h in half))
            out = array.array("f")
            out.frombytes(wide.tobytes())
            return out
        elif dt == "F16":
            return array.array("f", (v[0] for v in struct.iter_unpack("<e", b)))
        else:
            raise SystemExit(f"{self.path}: tensor {name}: dtype {dt} is not a float type")
        if sys.byteorder == "big":
            out.byteswap()
        return out


def flatten(v):
    if isinstance(v, list):
        out = []
        for x in v:
            out.extend(flatten(x))
        return out
    return [float(v)]


def max_abs_diff(a, b):
    if len(a) != len(b):
        return math.inf
    return max((abs(x - y) for x, y in zip(a, b)), default=0.0)


def cmd_score(a):
    ref = read_json(a.ref)
    lines = read_lines(a.scores)
    if len(lines) != len(ref["input_ids"]):
        done(False, f"{len(lines)} score lines for {len(ref['input_ids'])} examples")
    losses = [line.get("loss") for line in lines]
    if any(l is None for l in losses):
        done(False, f"a score line has no loss: {lines}")
    mean = sum(losses) / len(losses)
    dloss = abs(mean - ref["loss"])
    st = SafeTensors(a.logits)
    want_shape = ref["logits"]["shape"]
    if st.names() != ["logits"] or st.shape("logits") != want_shape or st.dtype("logits") != "F32":
        done(False, f"logits file has {[(n, st.dtype(n), st.shape(n)) for n in st.names()]}, want F32 logits {want_shape}")
    dlogits = max_abs_diff(st.values("logits"), flatten(ref["logits"]["values"]))
    ok = dloss <= LOSS_TOL and dlogits <= LOGITS_TOL
    done(ok, f"mean loss {mean:.8f} vs {ref['loss']:.8f} (|d| {dloss:.2g}, tol {LOSS_TOL:g}); "
             f"logits {want_shape} max|d| {dlogits:.2g} (tol {LOGITS_TOL:g})")


def logged_losses(state):
    return [e["loss"] for e in state.get("log_history", []) if "loss" in e]


def zero_gradient_elements(name, n):
    # Mirrors cmd/gotpu/train_test.go: the key biases' true gradient is exactly zero (softmax is
    # invariant to them), so AdamW turns rounding noise into steps of up to lr.
    if name.endswith("attention.self.key.bias"):
        return n
    if name.endswith("attn.c_attn.bias"):
        return n // 3
    return 0


def tensor_stats(vals):
    s = math.fsum(vals)
    l2 = math.sqrt(math.fsum(float(v) * float(v) for v in vals))
    return s, l2


def cmd_train(a):
    ref = read_json(a.ref)
    if a.variant not in ref:
        done(False, f"{a.ref} has no variant {a.variant}")
    want = ref[a.variant]
    state = read_json(a.state)
    got = logged_losses(state)
    problems = []
    if len(got) != len(want["losses"]) or state.get("global_step") != len(want["losses"]):
        problems.append(f"{len(got)} logged losses at global_step {state.get('global_step')}, want {len(want['losses'])}")
    worst_loss = 0.0
    for i, (g, w) in enumerate(zip(got, want["losses"])):
        d = abs(g - w)
        worst_loss = max(worst_loss, d)
        if round(g, 4) != g or d > LOGGED_LOSS_TOL:
            problems.append(f"step {i + 1}: logged loss {g} vs {w:.8f}")
    st = SafeTensors(a.model)
    checked, worst_rel = 0, 0.0
    for name in st.names():
        w = want["params_after"].get(name[len("transformer."):] if name.startswith("transformer.") else name)
        if w is None:
            continue
        vals = st.values(name)
        s, l2 = tensor_stats(vals)
        checked += 1
        n = zero_gradient_elements(name, len(vals))
        if n > 0:
            if abs(s - w["sum"]) > ZERO_GRAD_STEP * n or abs(l2 - w["l2"]) > ZERO_GRAD_STEP * math.sqrt(n):
                problems.append(f"{name}: sum {s:.8g} l2 {l2:.8g}, want {w['sum']:.8g} {w['l2']:.8g} within the zero-gradient bound")
            continue
        scale = max(abs(w["sum"]), w["l2"])
        rel = max(abs(s - w["sum"]) / scale if scale else abs(s - w["sum"]),
                  abs(l2 - w["l2"]) / w["l2"] if w["l2"] else abs(l2))
        worst_rel = max(worst_rel, rel)
        if rel > PARAM_REL_TOL:
            problems.append(f"{name}: sum {s:.8g} l2 {l2:.8g}, want {w['sum']:.8g} {w['l2']:.8g} (rel {rel:.2g})")
    if checked < len(want["params_after"]) - 1:
        problems.append(f"checked {checked} parameters of {len(want['params_after'])} in the reference")
    detail = (f"{a.variant}: losses {got} (worst |d| {worst_loss:.2g}, tol {LOGGED_LOSS_TOL:g}); "
              f"{checked} params, worst sum/L2 rel {worst_rel:.2g} (tol {PARAM_REL_TOL:g})")
    if problems:
        detail += "; " + "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
    done(not problems, detail)


def cmd_tensors(a):
    x, y = SafeTensors(a.a), SafeTensors(a.b)
    problems = []
    if x.names() != y.names():
        done(False, f"tensor names differ: {sorted(set(x.names()) ^ set(y.names()))[:5]}")
    worst_abs, worst_rel = 0.0, 0.0
    for name in x.names():
        if x.shape(name) != y.shape(name):
            problems.append(f"{name}: shape {x.shape(name)} vs {y.shape(name)}")
            continue
        vx, vy = x.values(name), y.values(name)
        worst_abs = max(worst_abs, max_abs_diff(vx, vy))
        sx, lx = tensor_stats(vx)
        sy, ly = tensor_stats(vy)
        n = zero_gradient_elements(name, len(vx))
        if n > 0:
            if abs(sx - sy) > ZERO_GRAD_STEP * n or abs(lx - ly) > ZERO_GRAD_STEP * math.sqrt(n):
                problems.append(f"{name}: sum/l2 {sx:.8g}/{lx:.8g} vs {sy:.8g}/{ly:.8g} beyond the zero-gradient bound")
            continue
        scale = max(abs(sy), ly)
        rel = max(abs(sx - sy) / scale if scale else abs(sx - sy), abs(lx - ly) / ly if ly else abs(lx))
        worst_rel = max(worst_rel, rel)
        if rel > PARAM_REL_TOL:
            problems.append(f"{name}: sum/l2 {sx:.8g}/{lx:.8g} vs {sy:.8g}/{ly:.8g} (rel {rel:.2g})")
    detail = f"{len(x.names())} tensors, max|d| {worst_abs:.2g}, worst sum/L2 rel {worst_rel:.2g} (tol {PARAM_REL_TOL:g})"
    if a.state_a and a.state_b:
        la, lb = logged_losses(read_json(a.state_a)), logged_losses(read_json(a.state_b))
        d = max_abs_diff(la, lb)
        detail += f"; logged losses {la} vs {lb} (max|d| {d:.2g}, tol {LOGGED_LOSS_TOL:g})"
        if not la or d > LOGGED_LOSS_TOL:
            problems.append("logged losses differ")
    if problems:
        detail += "; " + "; ".join(problems[:5])
    done(not problems, detail)


def encoding_diff(got, want, fields):
    for f in fields:
        if f not in want:
            continue
        g, w = got.get(f) or [], want.get(f) or []
        if g != w:
            i = next((k for k, (p, q) in enumerate(zip(g, w)) if p != q), min(len(g), len(w)))
            return f"{f} differ at {i} (len {len(g)} vs {len(w)})"
    return None


def cmd_tokenize(a):
    exp = read_lines(a.expected)
    problems, n = [], 0
    for label, path, key in (("plain", a.plain, "encode"), ("special", a.special, "encode_special")):
        got = read_lines(path)
        if len(got) != len(exp):
            problems.append(f"{label}: {len(got)} lines for {len(exp)} strings")
            continue
        for g, e in zip(got, exp):
            n += 1
            d = encoding_diff(g, e[key], ("ids", "tokens", "offsets"))
            if d:
                problems.append(f"{e.get('id')} {label}: {d}")
    if a.pairs_expected:
        pexp = read_lines(a.pairs_expected)
        for label, path, key in (("pair plain", a.pairs_plain, "encode"), ("pair special", a.pairs_special, "encode_special")):
            got = read_lines(path)
            if len(got) != len(pexp):
                problems.append(f"{label}: {len(got)} lines for {len(pexp)} pairs")
                continue
            for g, e in zip(got, pexp):
                n += 1
                d = encoding_diff(g, e[key], ("ids", "tokens", "offsets"))
                if d:
                    problems.append(f"{e.get('id')} {label}: {d}")
    detail = f"{n - len(problems)}/{n} encodings equal (ids, tokens, offsets)"
    if problems:
        detail += "; " + "; ".join(problems[:3])
    done(not problems, detail)


def flops_per_token(params, layers, hidden, seq):
    # PaLM's model FLOPs (trainer.TrainingFLOPsPerToken): 6N + 12 L H T.
    return 6 * params + 12 * layers * hidden * seq


def cmd_bench(a):
    """Steady-state throughput of a `gotpu train` run from its log_history: the median of the
    log intervals after the first --warmup steps (the first interval holds the compile)."""
    state = read_json(a.state)
    hist = [e for e in state.get("log_history", []) if "loss" in e]
    steady = [e for e in hist if e.get("step", 0) > a.warmup] or hist[-1:]
    out = {"framework": "gotpu", "mode": a.mode, "batch": a.batch, "seq": a.seq, "steps": state.get("global_step")}
    tps = [e["tokens_per_second"] for e in steady if "tokens_per_second" in e]
    secs = [e["step_seconds"] for e in steady if "step_seconds" in e]
    if not tps:
        out["error"] = "log_history has no tokens_per_second"
    else:
        out["tokens_per_second"] = statistics.median(tps)
        fpt = flops_per_token(a.params, a.layers, a.hidden, a.seq)
        out["mfu"] = out["tokens_per_second"] * fpt / a.peak
        if secs:
            out["step_seconds"] = statistics.median(secs)
        mfus = [e["mfu"] for e in steady if "mfu" in e]
        if mfus:
            out["trainer_mfu_6N"] = statistics.median(mfus)
    out["compile_seconds"] = sum(e.get("compile_seconds", 0) for e in hist)
    out["compile_count"] = sum(e.get("compile_count", 0) for e in hist)
    out["losses"] = [e["loss"] for e in hist]
    if a.smi:
        used = []
        try:
            with open(a.smi) as f:
                for line in f:
                    try:
                        used.append(float(line.split(",")[0]))
                    except ValueError:
                        pass
        except OSError:
            pass
        if used:
            out["peak_memory_bytes"] = max(used) * 2**20
            out["peak_memory_source"] = ("nvidia-smi memory.used, sampled: the XLA allocator's pool "
                                         "(it reserves most of the memory up front), not the bytes in use")
    if "peak_memory_bytes" not in out:
        out["peak_memory_source"] = "not reported by gotpu"
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
    ok = "tokens_per_second" in out
    done(ok, fmt_bench(out) if ok else out["error"])


def fmt_bench(r):
    parts = [f"B={r.get('batch')} T={r.get('seq')}"]
    if "tokens_per_second" in r:
        parts.append(f"{r['tokens_per_second']:,.0f} tokens/s")
    if "mfu" in r:
        parts.append(f"MFU {100 * r['mfu']:.1f}%")
    if "compile_seconds" in r:
        parts.append(f"compile {r['compile_seconds']:.1f} s")
    if r.get("peak_memory_bytes"):
        parts.append(f"peak mem {r['peak_memory_bytes'] / 2**30:.1f} GiB")
    return ", ".join(parts)


def cmd_async(a):
    """The async pipeline's figures, if this build's trainer logs them."""
    state = read_json(a.state)
    keys = ("host_syncs", "device_idle_fraction")
    entries = [e for e in state.get("log_history", []) if any(k in e for k in keys)]
    if not entries:
        print("SKIP not available in this build (log_history has no host_syncs / device_idle_fraction)")
        sys.exit(0)
    steps = [e.get("step", 0) for e in entries]
    every = sorted({b - a for a, b in zip(steps, steps[1:])} or {steps[0] if steps else 0})
    parts = [f"logging every {'/'.join(map(str, every))} steps"]
    for k in keys:
        vals = [e[k] for e in entries if k in e]
        if vals:
            parts.append(f"{k}: {', '.join(f'{v:.4g}' for v in vals[:8])} (per log entry, the first includes the compile)")
    done(True, "; ".join(parts))


def cmd_report(a):
    results = []
    for p in a.results:
        try:
            results.append(read_json(p))
        except (OSError, ValueError):
            pass
    base = next((r for r in results if r.get("framework") == "gotpu" and "tokens_per_second" in r), None)
    print("| run | batch | tokens/s | MFU | compile s | peak memory | gotpu ÷ this |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        name = f"{r.get('framework')} {r.get('mode', '')}".strip()
        if "tokens_per_second" not in r:
            print(f"| {name} | {r.get('batch', '')} | — | — | — | — | {r.get('error', 'no result')} |")
            continue
        ratio = f"{base['tokens_per_second'] / r['tokens_per_second']:.2f}" if base else "—"
        mem = f"{r['peak_memory_bytes'] / 2**30:.1f} GiB" if r.get("peak_memory_bytes") else "—"
        print(f"| {name} | {r.get('batch')} | {r['tokens_per_second']:,.0f} | {100 * r.get('mfu', 0):.1f}% | "
              f"{r.get('compile_seconds', 0):.1f} | {mem} | {ratio} |")


def elf_defines(path, symbol):
    """Whether the ELF64 file at path defines symbol in its dynamic symbol table.

    Only the headers and the .dynsym/.dynstr sections are read, so probing every shared object
    of a Python installation (gigabytes of CUDA libraries) takes seconds, and nothing is loaded.
    """
    try:
        with open(path, "rb") as f:
            hdr = f.read(64)
            if len(hdr) < 64 or hdr[:4] != b"\x7fELF" or hdr[4] != 2:
                return False
            e = "<" if hdr[5] == 1 else ">"
            (shoff,) = struct.unpack_from(e + "Q", hdr, 0x28)
            shentsize, shnum = struct.unpack_from(e + "HH", hdr, 0x3A)
            if shoff == 0 or shentsize < 64:
                return False
            f.seek(shoff)
            raw = f.read(shentsize * shnum)
            # (name, type, flags, addr, offset, size, link, info, addralign, entsize)
            secs = [struct.unpack_from(e + "IIQQQQIIQQ", raw, i * shentsize) for i in range(len(raw) // shentsize)]
            want = symbol.encode() + b"\0"
            for sec in secs:
                if sec[1] != 11 or sec[6] >= len(secs):  # SHT_DYNSYM
                    continue
                strtab = secs[sec[6]]
                f.seek(strtab[4])
                strs = f.read(strtab[5])
                if want not in strs:
                    return False
                f.seek(sec[4])
                syms = f.read(sec[5])
                step = sec[9] or 24
                for off in range(0, len(syms) - 23, step):
                    name, _info, _other, shndx = struct.unpack_from(e + "IBBH", syms, off)
                    if shndx != 0 and strs[name:name + len(want)] == want:
                        return True
    except (OSError, struct.error):
        return False
    return False


def cmd_exports(a):
    for line in sys.stdin:
        path = line.rstrip("\n")
        if path and elf_defines(path, a.symbol):
            print(path, flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("score")
    s.add_argument("--ref", required=True)
    s.add_argument("--scores", required=True)
    s.add_argument("--logits", required=True)
    s = sub.add_parser("train")
    s.add_argument("--ref", required=True)
    s.add_argument("--variant", required=True)
    s.add_argument("--state", required=True)
    s.add_argument("--model", required=True)
    s = sub.add_parser("tensors")
    s.add_argument("--a", required=True)
    s.add_argument("--b", required=True)
    s.add_argument("--state-a")
    s.add_argument("--state-b")
    s = sub.add_parser("tokenize")
    s.add_argument("--plain", required=True)
    s.add_argument("--special", required=True)
    s.add_argument("--expected", required=True)
    s.add_argument("--pairs-plain")
    s.add_argument("--pairs-special")
    s.add_argument("--pairs-expected")
    s = sub.add_parser("bench")
    s.add_argument("--state", required=True)
    s.add_argument("--mode", default="")
    s.add_argument("--batch", type=int, required=True)
    s.add_argument("--seq", type=int, required=True)
    s.add_argument("--params", type=int, required=True)
    s.add_argument("--layers", type=int, required=True)
    s.add_argument("--hidden", type=int, required=True)
    s.add_argument("--peak", type=float, default=989e12)
    s.add_argument("--warmup", type=int, default=2)
    s.add_argument("--smi")
    s.add_argument("--out", required=True)
    s = sub.add_parser("async")
    s.add_argument("--state", required=True)
    s = sub.add_parser("report")
    s.add_argument("results", nargs="*")
    s = sub.add_parser("exports")
    s.add_argument("symbol")
    a = p.parse_args()
    {"score": cmd_score, "train": cmd_train, "tensors": cmd_tensors, "tokenize": cmd_tokenize,
     "bench": cmd_bench, "async": cmd_async, "report": cmd_report, "exports": cmd_exports}[a.cmd](a)


if __name__ == "__main__":
    main()
