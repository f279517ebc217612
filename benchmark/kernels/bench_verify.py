"""Tree verification on the GPU: ours vs SGLang 0.5.23's JIT CUDA kernels vs torch, CUDA-graph replay.

Ops (Kimi-K2.5 target vocab 163840; N = 4 chain (topk 1, S 4) and N = 16 tree (topk 4, depth 4, S 5);
bs 1, 8, 32, 64, 128, 256):
  greedy      ours: argmax_verify_greedy(logits)     sglang: torch.argmax + JIT verify_tree_greedy
              torch_argmax: torch.argmax alone (a lower bound of SGLang's path)
  verify      ours: verify_tree_greedy(target_predict) vs SGLang's JIT verify_tree_greedy
  sampling    ours: tree_speculative_sampling         sglang: JIT tree_speculative_sampling_target_only
Floors (bytes / measured copy bandwidth): greedy reads the fp32 logits once; sampling as in
docs/benchmarks.md's baseline reads target_probs once ("floor"), the least it must read is one target
and one draft row per request ("min_floor").

Exactness against SGLang's kernels on these shapes (greedy bit for bit, sampling paths and side
effects, final draws up to fp32 rounding of a CDF boundary, graph replay) is asserted by
test/gpu_kernels/test_vs_sglang.py; this file only times.

    python -m benchmark.kernels.bench_verify [--sweep] [--quick]      (from the repository root)
--sweep also times launch-config variants of our kernels and prints the best per shape (used to
write ops/configs/NVIDIA_H200.verify.json). Results: $OUT/verify-<device>.json (or benchmark/results/).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import traceback

import torch

from sglang_kimi_eagle3.ops.arch import op_config
from sglang_kimi_eagle3.ops.tables import launch_table
from sglang_kimi_eagle3.ops.argmax_verify import argmax_verify_greedy
from sglang_kimi_eagle3.ops.tree_sampling import tree_speculative_sampling
from sglang_kimi_eagle3.ops.verify_greedy import random_tree_parents, tree_from_parents, verify_tree_greedy

from .harness import Results, copy_bandwidth, sglang_module

V = 163840
BS = (1, 8, 32, 64, 128, 256)
TREES = {4: (1, 3), 16: (4, 4)}  # N -> (topk, depth); S = depth + 1
DEV = "cuda"


def tree(bs, n, seed=0):
    topk, depth = TREES[n]
    rng = random.Random(seed * 7919 + bs * 31 + n)
    parents = [random_tree_parents(rng, n, topk, depth) for _ in range(bs)]
    ridx, nxt, sib = tree_from_parents(parents, device=DEV)
    par = torch.tensor(parents, device=DEV).clamp_min(0)
    return ridx, nxt, sib, par, depth + 1


def follow(choice_of_parent, par, p_follow, seed):
    """Candidates: with p_follow the token chosen at the parent's row, else random."""
    g = torch.Generator(device=DEV).manual_seed(seed)
    bs, n = par.shape
    rnd = torch.randint(0, V, (bs, n), device=DEV, generator=g)
    pick = torch.gather(choice_of_parent, 1, par)
    keep = torch.rand((bs, n), device=DEV, generator=g) < p_follow
    return torch.where(keep, pick, rnd)


def greedy_inputs(bs, n, seed=0):
    ridx, nxt, sib, par, s = tree(bs, n, seed)
    g = torch.Generator(device=DEV).manual_seed(seed + 1)
    logits = torch.randn(bs * n, V, device=DEV, generator=g)
    cand = follow(torch.argmax(logits, -1).view(bs, n), par, 0.7, seed + 2)
    return cand, ridx, nxt, sib, logits, s


def sampling_inputs(bs, n, hot=13.0, seed=0):
    """Target probs: softmax of N(0, 1) logits with +hot on two tokens per row (hot 13: those two
    hold ~0.4 each, like a confident LM; hot 0: a flat distribution, the worst case for rounding)."""
    ridx, nxt, sib, par, s = tree(bs, n, seed)
    g = torch.Generator(device=DEV).manual_seed(seed + 3)
    logits = torch.randn(bs, n, V, device=DEV, generator=g)
    logits.scatter_add_(2, torch.randint(0, V, (bs, n, 2), device=DEV, generator=g),
                        torch.full((bs, n, 2), hot, device=DEV))
    probs = torch.softmax(logits, -1)
    top = probs.topk(3, -1).indices  # [bs, n, 3]: draft tokens the target likes
    which = torch.randint(0, 3, (bs, n, 1), device=DEV, generator=g)
    cand = follow(torch.gather(top, 2, which).squeeze(2), par, 0.6, seed + 4)
    coins = torch.rand(bs, n, device=DEV, generator=g)
    final = torch.rand(bs, device=DEV, generator=g)
    return cand, ridx, nxt, sib, coins, final, probs, s


def outs(bs, n, s):
    return (torch.zeros(bs * n, dtype=torch.int32, device=DEV), torch.full((bs, s), -1, dtype=torch.int32, device=DEV),
            torch.zeros(bs, dtype=torch.int32, device=DEV))


def pdl_smoke(res):
    """Programmatic dependent launch works with this Triton/driver? Else run without (reported)."""
    from sglang_kimi_eagle3.ops import arch

    dev = torch.device(DEV, torch.cuda.current_device())
    res.meta["pdl"] = arch.pdl_supported(dev)
    if not res.meta["pdl"]:
        return
    try:
        cand, ridx, nxt, sib, logits, s = greedy_inputs(2, 4)
        argmax_verify_greedy(*outs(2, 4, s), cand, ridx, nxt, sib, logits)
        torch.cuda.synchronize()
    except Exception as exc:
        traceback.print_exc()
        arch.disable_pdl(dev)
        res.meta["pdl"] = f"failed, disabled: {type(exc).__name__}: {exc}"
    print(f"programmatic dependent launch: {res.meta['pdl']}", flush=True)


# ------------------------------------------------------------------------------------------ timing


def bench_greedy(res, tree_mod, bs, n, bw, rep, sweep):
    cand, ridx, nxt, sib, logits, s = greedy_inputs(bs, n)
    o = outs(bs, n, s)
    tp = torch.argmax(logits, -1).view(bs, n)
    floor = logits.numel() * 4 / bw * 1e6
    shape = {"bs": bs, "n": n, "vocab": V}

    def sglang():
        tree_mod.verify_tree_greedy(*o, cand, ridx, nxt, sib, torch.argmax(logits, -1).view(bs, n))

    rows = {}
    for prov, fn in (("sglang", sglang), ("ours", lambda: argmax_verify_greedy(*o, cand, ridx, nxt, sib, logits)),
                     ("torch_argmax", lambda: torch.argmax(logits, -1))):
        rows[prov] = res.time("argmax+verify", prov, shape, fn, floor, rep_ms=rep)
    res.time("verify_only", "sglang", shape, lambda: tree_mod.verify_tree_greedy(*o, cand, ridx, nxt, sib, tp), rep_ms=rep)
    res.time("verify_only", "ours", shape, lambda: verify_tree_greedy(*o, cand, ridx, nxt, sib, tp), rep_ms=rep)
    if sweep:  # variants of this shape's table entry
        base = op_config("argmax_verify", {"rows": bs * n, "vocab": V, "bs": bs, "n": n}, launch_table(logits.device))
        variants = ([{"pdl": False}, {"num_warps": 4}, {"block": 1024, "min_programs": 1056}] if bs * n <= 256 else
                    [{"chunk": c} for c in (4096, 8192, 32768)] + [{"num_warps": 4}, {"block": 4096}])
        for v in variants:
            cfg = {**base, **v}
            res.time("argmax+verify", "ours_variant", shape,  # a variant that fails is reported, not fatal
                     lambda: argmax_verify_greedy(*o, cand, ridx, nxt, sib, logits, config=cfg), floor,
                     warmup_ms=10, rep_ms=max(30, rep // 5), config=v)
    return rows


def bench_sampling(res, samp_mod, bs, n, bw, rep, sweep):
    cand, ridx, nxt, sib, coins, final, probs, s = sampling_inputs(bs, n)
    o = outs(bs, n, s)
    d1, d2 = torch.zeros_like(probs), torch.zeros_like(probs)
    shape = {"bs": bs, "n": n, "vocab": V}
    floor = probs.numel() * 4 / bw * 1e6
    min_floor = 2 * bs * V * 4 / bw * 1e6
    res.time("tree_sampling", "sglang", shape,
             lambda: samp_mod.tree_speculative_sampling_target_only(*o, cand, ridx, nxt, sib, coins, final, probs, d1,
                                                                   1.0, 1.0, True), floor, rep_ms=rep, min_floor_us=min_floor)
    res.time("tree_sampling", "ours", shape,
             lambda: tree_speculative_sampling(*o, cand, ridx, nxt, sib, coins, final, probs, d2, 1.0, 1.0, True),
             floor, rep_ms=rep, min_floor_us=min_floor)
    if sweep:
        base = op_config("tree_sampling", {"bs": bs, "n": n, "vocab": V}, launch_table(probs.device))
        for v in ({"pdl": False}, {"num_warps": 4}, {"sample_num_warps": 8}, {"tiles_per_program": 2}):
            cfg = {**base, **v}
            res.time("tree_sampling", "ours_variant", shape,
                     lambda: tree_speculative_sampling(*o, cand, ridx, nxt, sib, coins, final, probs, d2, config=cfg),
                     floor, warmup_ms=10, rep_ms=max(30, rep // 5), config=v, min_floor_us=min_floor)


def summary(res, bw) -> str:
    lines = [f"device {res.meta['device']['name']} ({res.meta['device']['sms']} SMs), copy bandwidth {bw / 1e12:.2f} TB/s, "
             f"date {res.meta['date']}, versions {json.dumps(res.meta['versions'])}",
             f"command: {res.meta['command']}", "",
             "| op | N | bs | sglang µs | ours µs | speedup | floor µs | ours × floor |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    by = {}
    for r in res.rows:
        if r["provider"] in ("sglang", "ours", "torch_argmax"):
            by[(r["op"], r["shape"]["n"], r["shape"]["bs"], r["provider"])] = r
    for op in ("argmax+verify", "verify_only", "tree_sampling"):
        for n in TREES:
            for bs in BS:
                a, b = by.get((op, n, bs, "sglang")), by.get((op, n, bs, "ours"))
                if not (a and b):
                    continue
                fl = b.get("floor_us")
                lines.append(f"| {op} | {n} | {bs} | {a['us']:.1f} | {b['us']:.1f} | {a['us'] / b['us']:.2f}× | "
                             + (f"{fl:.1f} | {b['us'] / fl:.2f} |" if fl else "– | – |"))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sweep", action="store_true", help="also time launch-config variants of ours")
    ap.add_argument("--quick", action="store_true", help="bs 1 and 128 only")
    ap.add_argument("--rep", type=int, default=150, help="ms of graph replays per measurement")
    args = ap.parse_args()
    torch.manual_seed(0)
    res = Results("verify")
    bw = copy_bandwidth()
    res.meta["copy_bandwidth_TBps"] = bw / 1e12
    print(f"copy bandwidth {bw / 1e12:.2f} TB/s", flush=True)
    tree_mod = sglang_module("kernels.ops.speculative.tree")
    samp_mod = sglang_module("kernels.ops.speculative.sampling")
    pdl_smoke(res)
    bss = (1, 128) if args.quick else BS
    for n in TREES:
        for bs in bss:
            for fn, mod in ((bench_greedy, tree_mod), (bench_sampling, samp_mod)):
                try:
                    fn(res, mod, bs, n, bw, args.rep, args.sweep)
                except Exception:
                    traceback.print_exc()
            torch.cuda.empty_cache()
            res.save()  # incremental: a run cut short keeps what it measured
    path = res.save()
    text = summary(res, bw)
    with open(os.path.join(res.out_dir(), "verify-summary.md"), "w") as f:
        f.write(text + "\n")
    print(f"\nsaved {path}\n")
    print(text)


if __name__ == "__main__":
    main()
