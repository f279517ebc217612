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

Before timing, outputs are compared with SGLang's kernels on the same inputs: greedy bit for bit;
sampling: accept_index / accept_token_num / accepted predicts / draft_probs bit for bit, final draw
agreement reported (it can differ only where u lies within fp32 rounding of a CDF boundary, which is
checked in float64 for every disagreement).

    python benchmark/kernels/bench_verify.py [--sweep] [--quick]
--sweep also times launch-config variants of our kernels and prints the best per shape (used to
write ops/configs/sm90.verify.json). Results: $OUT/verify-h200.json (or benchmark/results/).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import traceback

import torch

sys.path.insert(0, os.path.dirname(__file__))
from harness import Results, copy_bandwidth, graph_time_us, sglang_module  # noqa: E402

from sglang_kimi_eagle3.ops.arch import op_config  # noqa: E402
from sglang_kimi_eagle3.ops.argmax_verify import argmax_verify_greedy  # noqa: E402
from sglang_kimi_eagle3.ops.tree_sampling import tree_speculative_sampling  # noqa: E402
from sglang_kimi_eagle3.ops.verify_greedy import (launch_table, random_tree_parents, tree_from_parents,  # noqa: E402
                                                  verify_tree_greedy)

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


# ------------------------------------------------------------------------------------------ checks


def check_greedy(tree_mod, bs, n, report):
    cand, ridx, nxt, sib, logits, s = greedy_inputs(bs, n, seed=11)
    if bs == 8:  # argmax edge cases on the device: ties, NaN, +-inf, signed zeros
        logits[0, 5] = logits[0, V * 11 // 12] = 1e4
        logits[1, 7] = float("nan")
        logits[1, V // 2] = float("nan")
        logits[2] = float("-inf")
        logits[3, 100] = logits[3, V - 1] = float("inf")
        logits[4] = -1.0
        logits[4, V * 3 // 7] = -0.0
        logits[4, 3] = 0.0
    ref, ours, vonly = outs(bs, n, s), outs(bs, n, s), outs(bs, n, s)
    tp = torch.argmax(logits, -1).view(bs, n)
    tree_mod.verify_tree_greedy(*ref, cand, ridx, nxt, sib, tp)
    argmax_verify_greedy(*ours, cand, ridx, nxt, sib, logits)
    verify_tree_greedy(*vonly, cand, ridx, nxt, sib, tp)
    torch.cuda.synchronize()
    ok_f = all(torch.equal(a, b) for a, b in zip(ref, ours))
    ok_v = all(torch.equal(a, b) for a, b in zip(ref, vonly))
    report.append({"check": "greedy", "bs": bs, "n": n, "fused_equal": ok_f, "verify_equal": ok_v,
                   "mean_accepted": float(ref[2].float().mean())})
    print(f"check greedy bs={bs} n={n}: fused==sglang {ok_f}, verify==sglang {ok_v}, "
          f"accepted/request {float(ref[2].float().mean()):.2f}", flush=True)
    return ok_f and ok_v


def check_sampling(samp_mod, bs, n, hot, report):
    cand, ridx, nxt, sib, coins, final, probs, s = sampling_inputs(bs, n, hot, seed=13)
    ref, ours = outs(bs, n, s), outs(bs, n, s)
    d_ref, d_ours = torch.zeros_like(probs), torch.zeros_like(probs)
    samp_mod.tree_speculative_sampling_target_only(*ref, cand, ridx, nxt, sib, coins, final, probs, d_ref, 1.0, 1.0, True)
    tree_speculative_sampling(*ours, cand, ridx, nxt, sib, coins, final, probs, d_ours, 1.0, 1.0, True)
    torch.cuda.synchronize()
    slots = ref[1].gather(1, ref[2].long().unsqueeze(1)).squeeze(1).long()  # last accepted node's predicts slot
    path_ok = torch.equal(ref[1], ours[1]) and torch.equal(ref[2], ours[2]) and torch.equal(d_ref, d_ours)
    p_ref, p_ours = ref[0].clone(), ours[0].clone()
    p_ref[slots], p_ours[slots] = 0, 0
    path_ok = path_ok and torch.equal(p_ref, p_ours)
    same = ref[0][slots] == ours[0][slots]
    dists = []
    for b in (~same).nonzero().flatten().tolist():  # each disagreement: how close is u to a CDF boundary?
        row = int(slots[b])  # retrive_index is the flat row b*n + i here, as in the probs tensor
        q = probs.view(-1, V)[row].double()
        p = d_ref.view(-1, V)[row].double() if int(ref[2][b]) != s - 1 else torch.zeros_like(q)
        cdf = torch.cumsum((q - p).clamp_min(0), 0)
        u = float(final[b]) * float(cdf[-1])
        lo, hi = sorted((int(ref[0][slots[b]]), int(ours[0][slots[b]])))
        dists.append(float((cdf[lo:hi + 1] - u).abs().min()) / float(cdf[-1]))
    near = sum(d <= 1e-4 for d in dists)
    rate = float(same.float().mean())
    report.append({"check": "sampling", "bs": bs, "n": n, "hot": hot, "path_equal": path_ok,
                   "final_equal_rate": rate, "final_disagreements": int((~same).sum()),
                   "disagreements_at_cdf_boundary": near, "max_boundary_distance": max(dists, default=0.0),
                   "mean_accepted": float(ref[2].float().mean())})
    print(f"check sampling bs={bs} n={n} hot={hot}: path==sglang {path_ok}, final draw equal {rate:.4f} "
          f"({int((~same).sum())} differ, {near} of them with u within 1e-4 of a CDF boundary, max {max(dists, default=0):.1e}), "
          f"accepted/request {float(ref[2].float().mean()):.2f}", flush=True)
    return path_ok


def check_graph_replay(tree_mod, samp_mod, report):
    """Ours captured in a CUDA graph (with its programmatic dependent launches), outputs poisoned,
    replayed: the same results as SGLang's kernels run eagerly."""
    bs, n = 8, 16
    cand, ridx, nxt, sib, logits, s = greedy_inputs(bs, n, seed=21)
    ref, ours = outs(bs, n, s), outs(bs, n, s)
    tree_mod.verify_tree_greedy(*ref, cand, ridx, nxt, sib, torch.argmax(logits, -1).view(bs, n))
    g = torch.cuda.CUDAGraph()
    argmax_verify_greedy(*ours, cand, ridx, nxt, sib, logits)  # warm-up (compiles) outside the capture
    torch.cuda.synchronize()
    with torch.cuda.graph(g):
        argmax_verify_greedy(*ours, cand, ridx, nxt, sib, logits)
    ok = True
    for _ in range(3):
        ours[0].zero_(), ours[1].fill_(-1), ours[2].fill_(-5)  # the initial state SGLang allocates; num poisoned
        g.replay()
        torch.cuda.synchronize()
        ok &= all(torch.equal(a, b) for a, b in zip(ref, ours))
    cand, ridx, nxt, sib, coins, final, probs, s = sampling_inputs(bs, n, seed=23)
    ref, ours = outs(bs, n, s), outs(bs, n, s)
    d_ref, d_ours = torch.zeros_like(probs), torch.zeros_like(probs)
    samp_mod.tree_speculative_sampling_target_only(*ref, cand, ridx, nxt, sib, coins, final, probs, d_ref, 1.0, 1.0, True)
    tree_speculative_sampling(*ours, cand, ridx, nxt, sib, coins, final, probs, d_ours)
    torch.cuda.synchronize()
    g2 = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g2):
        tree_speculative_sampling(*ours, cand, ridx, nxt, sib, coins, final, probs, d_ours)
    ok_s = True
    for _ in range(3):
        ours[0].zero_(), ours[1].fill_(-1), ours[2].fill_(-5)
        d_ours.zero_()
        g2.replay()
        torch.cuda.synchronize()
        ok_s &= torch.equal(ref[1], ours[1]) and torch.equal(ref[2], ours[2]) and torch.equal(d_ref, d_ours)
    report.append({"check": "graph_replay", "greedy_equal": ok, "sampling_path_equal": ok_s})
    print(f"check graph replay: greedy==sglang {ok}, sampling path==sglang {ok_s}", flush=True)
    return ok and ok_s


def pdl_smoke(res):
    """Programmatic dependent launch works with this Triton/driver? Else run without (reported)."""
    from sglang_kimi_eagle3.ops import verify_greedy as vg

    res.meta["pdl"] = vg.pdl_supported(torch.device(DEV, torch.cuda.current_device()))
    if not res.meta["pdl"]:
        return
    try:
        cand, ridx, nxt, sib, logits, s = greedy_inputs(2, 4)
        argmax_verify_greedy(*outs(2, 4, s), cand, ridx, nxt, sib, logits)
        torch.cuda.synchronize()
    except Exception as exc:
        traceback.print_exc()
        vg._PDL[torch.cuda.current_device()] = False
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
        rows[prov] = res.add("argmax+verify", prov, shape, graph_time_us(fn, rep_ms=rep), floor)
    res.add("verify_only", "sglang", shape, graph_time_us(lambda: tree_mod.verify_tree_greedy(*o, cand, ridx, nxt, sib, tp), rep_ms=rep))
    res.add("verify_only", "ours", shape, graph_time_us(lambda: verify_tree_greedy(*o, cand, ridx, nxt, sib, tp), rep_ms=rep))
    if sweep:  # variants of this shape's table entry
        base = op_config("argmax_verify", {"rows": bs * n, "vocab": V, "bs": bs, "n": n}, launch_table(logits.device))
        variants = ([{"pdl": False}, {"num_warps": 4}, {"block": 1024, "min_programs": 1056}] if bs * n <= 256 else
                    [{"chunk": c} for c in (4096, 8192, 32768)] + [{"num_warps": 4}, {"block": 4096}])
        for v in variants:
            cfg = {**base, **v}
            try:
                t = graph_time_us(lambda: argmax_verify_greedy(*o, cand, ridx, nxt, sib, logits, config=cfg),
                                  warmup_ms=10, rep_ms=max(30, rep // 5))
                res.add("argmax+verify", "ours_variant", shape, t, floor, config=v)
            except Exception as exc:  # a variant that fails to compile is reported, not fatal
                print(f"variant {v} failed: {exc}", flush=True)
    return rows


def bench_sampling(res, samp_mod, bs, n, bw, rep, sweep):
    cand, ridx, nxt, sib, coins, final, probs, s = sampling_inputs(bs, n)
    o = outs(bs, n, s)
    d1, d2 = torch.zeros_like(probs), torch.zeros_like(probs)
    shape = {"bs": bs, "n": n, "vocab": V}
    floor = probs.numel() * 4 / bw * 1e6
    min_floor = 2 * bs * V * 4 / bw * 1e6
    res.add("tree_sampling", "sglang", shape, graph_time_us(
        lambda: samp_mod.tree_speculative_sampling_target_only(*o, cand, ridx, nxt, sib, coins, final, probs, d1, 1.0, 1.0, True),
        rep_ms=rep), floor, min_floor_us=min_floor)
    res.add("tree_sampling", "ours", shape, graph_time_us(
        lambda: tree_speculative_sampling(*o, cand, ridx, nxt, sib, coins, final, probs, d2, 1.0, 1.0, True),
        rep_ms=rep), floor, min_floor_us=min_floor)
    if sweep:
        base = op_config("tree_sampling", {"bs": bs, "n": n, "vocab": V}, launch_table(probs.device))
        for v in ({"pdl": False}, {"num_warps": 4}, {"sample_num_warps": 8}, {"tiles_per_program": 2}):
            cfg = {**base, **v}
            try:
                t = graph_time_us(lambda: tree_speculative_sampling(*o, cand, ridx, nxt, sib, coins, final, probs, d2,
                                                                     config=cfg), warmup_ms=10, rep_ms=max(30, rep // 5))
                res.add("tree_sampling", "ours_variant", shape, t, floor, config=v, min_floor_us=min_floor)
            except Exception as exc:
                print(f"variant {v} failed: {exc}", flush=True)


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
    checks, ok = [], True
    try:
        ok &= check_graph_replay(tree_mod, samp_mod, checks)
    except Exception:
        traceback.print_exc()
        ok = False
    for bs, n in ((1, 4), (8, 4), (64, 16), (256, 4)):
        try:
            ok &= check_greedy(tree_mod, bs, n, checks)
        except Exception:
            traceback.print_exc()
            ok = False
    for bs, n, hot in ((1, 4, 13.0), (64, 16, 13.0), (256, 4, 13.0), (256, 4, 0.0)):
        try:
            ok &= check_sampling(samp_mod, bs, n, hot, checks)
        except Exception:
            traceback.print_exc()
            ok = False
    res.meta["checks"] = checks
    res.meta["checks_ok"] = ok
    bss = (1, 128) if args.quick else BS
    for n in TREES:
        for bs in bss:
            for fn, mod in ((bench_greedy, tree_mod), (bench_sampling, samp_mod)):
                try:
                    fn(res, mod, bs, n, bw, args.rep, args.sweep)
                except Exception:
                    traceback.print_exc()
            torch.cuda.empty_cache()
            res.save("verify-h200.json")  # incremental: a run cut short keeps what it measured
    path = res.save("verify-h200.json")
    text = summary(res, bw)
    out = os.environ.get("OUT") or os.path.join(os.path.dirname(__file__), "..", "results")
    with open(os.path.join(out, "verify-summary.md"), "w") as f:
        f.write(text + "\n")
    print(f"\nsaved {path}; all checks passed: {ok}\n")
    print(text)


if __name__ == "__main__":
    main()
