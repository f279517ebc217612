"""Measure the local GPU and write its draft-head launch table: ops/configs/<DEVICE>.draft_head.json.

    python benchmark/tune_draft_head.py [--out DIR] [--quick]

For each Kimi drafter shape (lm_head shard R 4000 = TP 8, R 32000 = TP 1; H 7168; bs 1, 8, 32, 64,
128) it times a small grid of launch configs of every draft-head kernel under CUDA-graph replay,
keeps the fastest as a table rule, and lists as `wins` the shapes where ours beats the upstream
equivalent in the same run (lm_head_gemv: torch.matmul, SGLang's lm_head; draft_topk k=1: SGLang's
Triton draft_topk1_postprocess when importable, k>1: torch.topk, what SGLang's fast_topk runs;
lm_head_topk: SGLang's whole tail, for the record: nothing hooks it). A win needs >= 3% (for the
GEMV in both its fp32 and its bf16 output form). Weights rotate over copies that exceed the L2, as in decoding, where the
draft's other layers evict the lm_head between steps.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import sys
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parent / "kernels"))
from harness import graph_time_us, sglang_module  # noqa: E402

from sglang_kimi_eagle3.ops import draft_topk as dt  # noqa: E402
from sglang_kimi_eagle3.ops import lm_head_gemv as gemv  # noqa: E402
from sglang_kimi_eagle3.ops import lm_head_topk as lt  # noqa: E402
from sglang_kimi_eagle3.ops.arch import CONFIG_DIR, device_file_name, load_table  # noqa: E402

DEV = "cuda"
H = 7168
ROWS = (4000, 32000)
BS = (1, 8, 32, 64, 128)
WIN_MARGIN = 0.97
SMEM_BUDGET = 200 << 10  # cp.async stages of W and hidden tiles, below the 227 KB per block of SM90
SMEM_PER_SM = 228 << 10
L2_ROTATE_BYTES = 160 << 20


def weights(R: int, seed: int = 0) -> list[torch.Tensor]:
    """Enough [R, H] bf16 copies to exceed the L2 when cycled (one when one copy already does)."""
    g = torch.Generator(device=DEV).manual_seed(seed)
    n = max(1, -(-L2_ROTATE_BYTES // (R * H * 2)))
    return [(torch.randn(R, H, device=DEV, generator=g) * 0.02).bfloat16() for _ in range(n)]


def rotating(fn, ws):
    """fn(w) over every copy in one graph; timing / len(ws) is the per-call time."""
    def run():
        for w in ws:
            fn(w)
    return run, len(ws)


def timed(fn, ws, quick: bool) -> float:
    run, n = rotating(fn, ws)
    t = graph_time_us(run, warmup_ms=10 if quick else 25, rep_ms=40 if quick else 100)
    return t["us"] / n


def gemv_grid(bs: int, R: int, sms: int) -> list[dict]:
    """Tiles x stream-K programs worth trying: 1..4 resident CTAs per SM (as shared memory allows),
    and grids of whole or evenly split row blocks."""
    block_bs = {1: [16], 8: [16], 32: [32, 16], 64: [64, 32], 128: [64, 128]}[bs]
    tiles = [(64, 128, 4), (64, 128, 3), (64, 64, 6), (64, 256, 3), (128, 128, 3)]
    out = []
    for bb in block_bs:
        for br, bk, st in tiles:
            if br * bb > 8192:
                continue
            while st > 2 and (br + bb) * bk * 2 * st > SMEM_BUDGET:
                st -= 1
            smem = (br + bb) * bk * 2 * st
            if smem > SMEM_BUDGET:
                continue
            nw = 8 if br * bb >= 8192 else 4  # 64 fp32 accumulators per thread at most (no spills)
            base = {"BLOCK_R": br, "BLOCK_B": bb, "BLOCK_K": bk, "num_warps": nw, "num_stages": st}
            slots = min(4, SMEM_PER_SM // smem)
            for ctas in range(1, slots + 1):
                out.append({**base, "CTAS_PER_SM": ctas})
            # row-block-aligned grids: every program works on one row block only (no second segment,
            # no pipeline refill); c programs share a row block
            n_rb = triton.cdiv(R, br)
            for c in (1, 2, 4):
                if sms // 2 <= n_rb * c <= slots * sms:
                    out.append({**base, "PROGRAMS": n_rb * c})
    return out


def fused_config(c: dict) -> dict:
    """The fused kernel on a GEMV tile: 8 warps from 64 x 64 up (its top-k epilogue needs the registers)."""
    return {**c, **FUSED_REGS, "num_warps": 8 if c["BLOCK_R"] * c["BLOCK_B"] >= 4096 else c["num_warps"]}


def sglang_tail(h, w, k, hot, pos, sg_topk1):
    """SGLang 0.5.23's draft tail per step: bf16 lm_head, .float(), top-1 (its Triton kernel) or
    softmax + torch.topk, then the d2t gather (as ../shared/tools/baseline_sglang_spec_ops.py)."""
    logits = (h @ w.t()).float()
    if k == 1:
        if sg_topk1 is None:
            return hot[logits.argmax(-1, keepdim=True)]
        return hot[sg_topk1(logits, pos)[1]]
    p, i = torch.softmax(logits, -1).topk(k, dim=-1)
    return p, hot[i]


def topk_grid(V: int) -> list[dict]:
    return [{"BLOCK": b, "num_warps": w} for b in (1024, 2048, 4096, 8192) for w in (4, 8) if b <= 2 * V or b == 1024]


def compile_jobs(worker: int, workers: int) -> int:
    """Launch (and so compile) this worker's share of every kernel variant tune() will time; the
    Triton disk cache then serves the timing process. Returns the number of launches."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    n = 0
    job = 0
    for R in ROWS:
        w = torch.randn(R, H, device=DEV).bfloat16()
        hot = torch.randint(0, 163840, (R,), device=DEV)
        for bs in BS:
            h = torch.randn(bs, H, device=DEV).bfloat16()
            pos = torch.zeros(bs, dtype=torch.long, device=DEV)
            logits = torch.randn(bs, R, device=DEV)
            calls = []
            for c in gemv_grid(bs, R, sms):
                if c.get("CTAS_PER_SM", 1) > 1 or "PROGRAMS" in c:
                    continue  # the grid size is a run-time argument: one compile per tile
                calls.append(lambda c=c: gemv.lm_head_gemv(h, w, out_dtype=torch.float32, round_to=torch.bfloat16, config=c))
                calls.append(lambda c=c: lt.lm_head_topk(h, w, 1, probs="one", hot_token_id=hot, positions=pos,
                                                         config=fused_config(c)))
                calls.append(lambda c=c: lt.lm_head_topk(h, w, 4, hot_token_id=hot, config=fused_config(c)))
            for c in topk_grid(R):
                calls.append(lambda c=c: dt.draft_topk1(logits, pos, config=c))
                calls.append(lambda c=c: dt.topk_rows(logits, 4, config=c))
            for call in calls:
                if job % workers == worker:
                    try:
                        call()
                        n += 1
                    except Exception as exc:
                        print(f"compile job {job}: {type(exc).__name__}: {str(exc)[:160]}", flush=True)
                job += 1
    torch.cuda.synchronize()
    return n


def precompile(workers: int) -> None:
    """Run compile_jobs in `workers` processes at once (Triton compiles one kernel at a time)."""
    import subprocess

    procs = [subprocess.Popen([sys.executable, __file__, "--compile-only", str(i), str(workers)]) for i in range(workers)]
    bad = [p.wait() for p in procs]
    if any(bad):
        print(f"precompile: worker exit codes {bad} (timing compiles what is missing)", flush=True)


def _best(cands, time_fn):
    timings = []
    for cfg in cands:
        try:
            timings.append((time_fn(cfg), cfg))
        except Exception as exc:  # a config that does not compile or fit: skip it, say so
            print(f"  skip {cfg}: {type(exc).__name__}: {str(exc)[:120]}", flush=True)
    timings.sort(key=lambda t: t[0])
    return timings


def _rules(best: dict, dim: str = "rows") -> list[dict]:
    """{(R, bs): cfg} -> ordered rules: rows split at the geometric mean of the tuned R, bs ascending."""
    rules = []
    rows = sorted({r for r, _ in best})
    for i, r in enumerate(rows):
        cut = {} if i == len(rows) - 1 else {f"max_{dim}": int((r * rows[i + 1]) ** 0.5)}
        for b in sorted(b for rr, b in best if rr == r):
            rules.append({**cut, "max_bs": b, "config": best[(r, b)]})
    return rules


def tune(quick: bool = False, log=print) -> dict:
    """Measure; return the table (not written)."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    try:
        sg_topk1 = sglang_module("kernels.ops.speculative.topk1").draft_topk1_postprocess
        topk1_baseline = "SGLang draft_topk1_postprocess"
    except Exception as exc:
        log(f"SGLang's topk1 not importable ({exc}); k=1 wins measured against torch.argmax")
        sg_topk1, topk1_baseline = None, "torch.argmax"
    ops = {op: {"default": {}, "rules": [], "wins": [], "measured": {}} for op in (gemv.OP, lt.OP, dt.OP)}
    best_gemv, best_fused, best_topk = {}, {}, {}
    for R in ROWS:
        ws = weights(R)
        hot = torch.randint(0, 163840, (R,), device=DEV)
        for bs in BS:
            h = torch.randn(bs, H, device=DEV).bfloat16()
            # lm_head_gemv (fp32 out, bf16-rounded: what the hook writes) vs torch.matmul + .float()
            ranked = _best(gemv_grid(bs, R, sms), lambda c: timed(
                lambda w: gemv.lm_head_gemv(h, w, out_dtype=torch.float32, round_to=torch.bfloat16, config=c), ws, quick))
            best = best_gemv[(R, bs)] = ranked[0][1]
            ours = ranked[0][0]
            ref = timed(lambda w: (h @ w.t()).float(), ws, quick)
            # the hook writes bf16 when a TP gather follows (R 4000 is a TP-8 shard): both must win
            ours16 = timed(lambda w: gemv.lm_head_gemv(h, w, config=best), ws, quick)
            ref16 = timed(lambda w: h @ w.t(), ws, quick)
            key = gemv.shape_key(bs, R, H)
            ops[gemv.OP]["measured"][key] = {"ours_us": round(ours, 2), "upstream_us": round(ref, 2),
                                             "upstream": "torch.matmul + .float()", "ours_bf16_us": round(ours16, 2),
                                             "upstream_bf16_us": round(ref16, 2)}
            if ours < WIN_MARGIN * ref and ours16 < WIN_MARGIN * ref16:
                ops[gemv.OP]["wins"].append(key)
            log(f"lm_head_gemv R{R} bs{bs}: {ours:7.2f} us ({best}) vs matmul+float {ref:7.2f}; bf16 {ours16:7.2f} vs {ref16:7.2f}")
            # fused lm_head + top-k: the gemv's three best tiles, k = 1 (top-1 contract) and 4 (softmax)
            for k in (1, 4):
                pos = torch.zeros(bs, dtype=torch.long, device=DEV)
                kw = {"probs": "one", "positions": pos} if k == 1 else {"probs": "softmax"}
                fr = _best([c for _, c in ranked[:3]], lambda c: timed(
                    lambda w: lt.lm_head_topk(h, w, k, hot_token_id=hot, config=fused_config(c), **kw), ws, quick))
                best_fused[(R, bs, k)] = fused_config(fr[0][1])
                key = lt.shape_key(bs, R, H, k)
                up = timed(lambda w: sglang_tail(h, w, k, hot, pos, sg_topk1), ws, quick)
                ops[lt.OP]["measured"][key] = {"ours_us": round(fr[0][0], 2), "upstream_us": round(up, 2)}
                if fr[0][0] < WIN_MARGIN * up:
                    ops[lt.OP]["wins"].append(key)
                log(f"lm_head_topk R{R} bs{bs} k{k}: {fr[0][0]:7.2f} us vs SGLang path {up:7.2f}")
            # top-k over the draft vocab: k=1 (SGLang's top-1 contract) and k=4 (fast_topk over probs)
            logits = torch.randn(bs, R, device=DEV) * 3
            probs = torch.softmax(logits, -1)
            for k in (1, 4):
                grid = topk_grid(R)
                if k == 1:
                    pos = torch.zeros(bs, dtype=torch.long, device=DEV)
                    tr = _best(grid, lambda c: timed(lambda _w: dt.draft_topk1(logits, pos, config=c), [0], quick))
                    up = timed(lambda _w: sg_topk1(logits, pos) if sg_topk1 else logits.argmax(-1), [0], quick)
                else:
                    tr = _best(grid, lambda c: timed(lambda _w: dt.topk_rows(probs, k, config=c), [0], quick))
                    up = timed(lambda _w: torch.topk(probs, k, dim=-1), [0], quick)
                best_topk[(R, bs, k)] = tr[0][1]
                key = dt.shape_key(bs, R, k)
                ops[dt.OP]["measured"][key] = {"ours_us": round(tr[0][0], 2), "upstream_us": round(up, 2),
                                               "upstream": topk1_baseline if k == 1 else "torch.topk"}
                if tr[0][0] < WIN_MARGIN * up:
                    ops[dt.OP]["wins"].append(key)
                log(f"draft_topk V{R} bs{bs} k{k}: {tr[0][0]:7.2f} us ({tr[0][1]}) vs {up:7.2f}")
        del ws
        torch.cuda.empty_cache()
    ops[gemv.OP]["rules"] = _rules(best_gemv)
    ops[gemv.OP]["default"] = best_gemv[(ROWS[0], BS[-1])]
    ops[lt.OP]["rules"] = ([{"k": 1, **r} for r in _rules({(R, b): c for (R, b, k), c in best_fused.items() if k == 1})]
                           + _rules({(R, b): c for (R, b, k), c in best_fused.items() if k == 4}))
    ops[lt.OP]["default"] = best_fused[(ROWS[0], BS[-1], 4)]
    ops[dt.OP]["rules"] = [{"k": 1, **r} for r in _rules({(R, b): c for (R, b, k), c in best_topk.items() if k == 1},
                                                         "vocab")] \
        + _rules({(R, b): c for (R, b, k), c in best_topk.items() if k == 4}, "vocab")
    ops[dt.OP]["default"] = dt.DEFAULT
    name = torch.cuda.get_device_name(0)
    cc = torch.cuda.get_device_capability(0)
    return {"arch": f"sm{cc[0]}{cc[1]}", "device": name,
            "source": f"benchmark/tune_draft_head.py{' --quick' if quick else ''} on {name}, "
                      f"{_dt.date.today().isoformat()}, torch {torch.__version__}, triton {triton.__version__}; "
                      f"wins: ours < {WIN_MARGIN} x upstream in the same run",
            "ops": ops}


FUSED_REGS: dict = {}  # e.g. {"maxnreg": 255} where ptxas needs it (see the sm120 table)


def write(table: dict, out_dir: Path) -> Path:
    path = Path(out_dir) / f"{device_file_name(table['device'])}.draft_head.json"
    path.write_text(json.dumps(table, indent=1) + "\n")
    load_table.cache_clear()
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT") or str(CONFIG_DIR), help="folder for the table")
    ap.add_argument("--quick", action="store_true", help="shorter timings (same grid)")
    ap.add_argument("--workers", type=int, default=min(12, os.cpu_count() or 1), help="parallel compile processes")
    ap.add_argument("--compile-only", nargs=2, type=int, metavar=("I", "N"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.compile_only:
        compile_jobs(*args.compile_only)
        return
    if args.workers > 1:
        precompile(args.workers)
    print(f"wrote {write(tune(args.quick), Path(args.out))}")


if __name__ == "__main__":
    main()
