"""Draft-head tail on the GPU: ours vs SGLang 0.5.23's path vs torch, CUDA-graph replay, one run.

Shapes: Kimi drafter lm_head shard R 4000 (TP 8) and 32000 (TP 1), H 7168; bs 1, 8, 32, 64, 128; k 1, 4.
Providers per draft step (hidden [bs, H] bf16 -> draft tokens, d2t remap included):
  sglang       bf16 matmul, .float(), k=1: SGLang's Triton draft_topk1_postprocess / k=4: softmax +
               torch.topk, then hot_token_id[...] (as SGLang's eagle_worker_v2 runs them)
  ours_fused   ops.lm_head_topk: one launch, logits never written, d2t and positions folded in
  ours_hooked  what SGLang runs with our hooks: lm_head_gemv (fp32 out) + draft_topk1 / torch.softmax +
               topk_rows, then SGLang's own d2t gather
  torch        matmul, .float(), argmax / softmax + topk, gather
Components (the hook boundaries): lm_head alone (torch.matmul vs lm_head_gemv), top-1 alone (SGLang's
kernel vs draft_topk1), top-4 over probabilities (torch.topk vs topk_rows).
Weights rotate over copies that exceed the L2 (decode evicts the lm_head between draft steps);
SGLang's path gets the same rotation. Floor = weight bytes / measured copy bandwidth.

Exactness against SGLang's path at these shapes (lm_head within bf16 rounding, top-1 ids except
near-ties, TP-8 combine == one GPU) is asserted by test/gpu_kernels/test_vs_sglang.py; this file
only times.

    python -m benchmark.kernels.bench_draft_head [--tune] [--quick]      (from the repository root)
--tune first runs benchmark/tune_draft_head.py's sweep and installs the table it measures (written
to $OUT/<DEVICE>.draft_head.json too). Results: $OUT/draft_head-<device>.json, $OUT/draft_head-summary.md.
"""

from __future__ import annotations

import argparse
import os
import traceback
from pathlib import Path

import torch

from benchmark import tune_draft_head as tune
from sglang_kimi_eagle3.ops import draft_topk as dt
from sglang_kimi_eagle3.ops import lm_head_gemv as gemv
from sglang_kimi_eagle3.ops import lm_head_topk as lt
from sglang_kimi_eagle3.ops.tables import CONFIG_DIR, clear_cache, current_device, load_table

from .harness import Results, copy_bandwidth, graph_time_us, sglang_module

H, ROWS, BS, KS = tune.H, tune.ROWS, tune.BS, (1, 4)
DEV = "cuda"


def timed(fn, ws, rep_ms):
    run, n = tune.rotating(fn, ws)
    t = graph_time_us(run, warmup_ms=25, rep_ms=rep_ms)
    return {k: v / n for k, v in t.items()}


def tails(h, hot, pos, k, sg_topk1):
    """provider -> fn(w) for one draft step."""
    def fused(w):
        if k == 1:
            return lt.lm_head_topk(h, w, 1, probs="one", hot_token_id=hot, positions=pos)
        return lt.lm_head_topk(h, w, k, hot_token_id=hot)

    def hooked(w):
        logits = gemv.lm_head_gemv(h, w, out_dtype=torch.float32, round_to=torch.bfloat16)
        if k == 1:
            return hot[dt.draft_topk1(logits, pos)[1]]
        p, i = dt.topk_rows(torch.softmax(logits, -1), k)
        return p, hot[i]

    def torch_path(w):
        logits = (h @ w.t()).float()
        if k == 1:
            return hot[logits.argmax(-1, keepdim=True)]
        p, i = torch.softmax(logits, -1).topk(k, dim=-1)
        return p, hot[i]

    return {"sglang": lambda w: tune.sglang_tail(h, w, k, hot, pos, sg_topk1), "ours_fused": fused,
            "ours_hooked": hooked, "torch": torch_path}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tune", action="store_true", help="run the launch-config sweep first and use its table")
    ap.add_argument("--quick", action="store_true", help="shorter timings")
    args = ap.parse_args()
    res = Results("draft_head")
    bw = copy_bandwidth()
    res.meta["copy_bw_TBps"] = bw / 1e12
    print(f"copy bandwidth {bw / 1e12:.2f} TB/s", flush=True)
    try:
        sg_topk1 = sglang_module("kernels.ops.speculative.topk1").draft_topk1_postprocess
    except Exception:
        traceback.print_exc()
        sg_topk1 = None
    if args.tune:
        tune.precompile(min(12, os.cpu_count() or 1))
        table = tune.tune(quick=args.quick)
        path = tune.write(table, CONFIG_DIR)  # the package copy on this machine: launchers read it
        if os.environ.get("OUT"):
            tune.write(table, Path(os.environ["OUT"]))
        print(f"tuned table -> {path}", flush=True)
    clear_cache()
    res.meta["table"] = load_table(*current_device())
    rep = 60 if args.quick else 200
    summary = []
    for R in ROWS:
        ws = tune.weights(R, seed=3)
        floor = R * H * 2 / bw * 1e6
        hot = torch.randint(0, 163840, (R,), device=DEV)
        for bs in BS:
            h = torch.randn(bs, H, device=DEV).bfloat16()
            pos = torch.zeros(bs, dtype=torch.long, device=DEV)
            for k in KS:
                row = {"R": R, "bs": bs, "k": k, "floor": floor}
                for name, fn in tails(h, hot, pos, k, sg_topk1).items():
                    if name == "sglang" and sg_topk1 is None and k == 1:
                        continue
                    t = timed(fn, ws, rep)
                    res.add(f"draft_tail_k{k}", name, {"R": R, "H": H, "bs": bs, "k": k}, t, floor)
                    row[name] = t["us"]
                summary.append(row)
            # components at the hook boundaries
            t_mm = timed(lambda w: h @ w.t(), ws, rep)
            t_g = timed(lambda w: gemv.lm_head_gemv(h, w), ws, rep)
            res.add("lm_head", "torch_matmul", {"R": R, "H": H, "bs": bs}, t_mm, floor)
            res.add("lm_head", "ours_gemv", {"R": R, "H": H, "bs": bs}, t_g, floor, speedup=t_mm["us"] / t_g["us"])
            logits = torch.randn(bs, R, device=DEV) * 3
            probs = torch.softmax(logits, -1)
            tfloor = bs * R * 4 / bw * 1e6
            if sg_topk1 is not None:
                t_s = timed(lambda _w: sg_topk1(logits, pos), [0], rep)
                res.add("topk1", "sglang", {"V": R, "bs": bs}, t_s, tfloor)
            t_o = timed(lambda _w: dt.draft_topk1(logits, pos), [0], rep)
            res.add("topk1", "ours", {"V": R, "bs": bs}, t_o, tfloor)
            t_t = timed(lambda _w: torch.topk(probs, 4, dim=-1), [0], rep)
            t_r = timed(lambda _w: dt.topk_rows(probs, 4), [0], rep)
            res.add("topk4_probs", "torch_topk", {"V": R, "bs": bs}, t_t, tfloor)
            res.add("topk4_probs", "ours", {"V": R, "bs": bs}, t_r, tfloor, speedup=t_t["us"] / t_r["us"])
        del ws
        torch.cuda.empty_cache()
    path = res.save()
    md = summary_md(res, summary, bw)
    (Path(res.out_dir()) / "draft_head-summary.md").write_text(md)
    print(md)
    print(f"saved {path}")


def summary_md(res, rows, bw) -> str:
    m = res.meta
    lines = [f"Device: {m['device']['name']} ({m['device']['sms']} SMs), {m['date']}, torch {m['versions']['torch']}, "
             f"triton {m['versions']['triton']}, CUDA {m['versions']['cuda']}; copy bandwidth {bw / 1e12:.2f} TB/s.",
             f"Command: `{m['command']}`", "",
             "| R | bs | k | floor µs | SGLang µs | ours fused µs | × floor | speedup | ours hooked µs | speedup | torch µs |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        sg = r.get("sglang")
        f, hk = r["ours_fused"], r["ours_hooked"]
        lines.append(f"| {r['R']} | {r['bs']} | {r['k']} | {r['floor']:.1f} | {sg:.1f} | {f:.1f} | {f / r['floor']:.2f} | "
                     f"{sg / f:.2f} | {hk:.1f} | {sg / hk:.2f} | {r['torch']:.1f} |" if sg else
                     f"| {r['R']} | {r['bs']} | {r['k']} | {r['floor']:.1f} | n/a | {f:.1f} | {f / r['floor']:.2f} | n/a | "
                     f"{hk:.1f} | n/a | {r['torch']:.1f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
