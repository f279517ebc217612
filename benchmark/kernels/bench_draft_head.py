"""Draft-head tail on the GPU: ours vs SGLang 0.5.23's path vs torch, CUDA-graph replay, one run.

Shapes: Kimi drafter lm_head shard R 4000 (TP 8) and 32000 (TP 1), H 7168; bs 1, 8, 32, 64, 128; k 1, 4.
Providers per draft step (hidden [bs, H] bf16 -> draft tokens, d2t remap included):
  sglang       bf16 matmul, .float(), k=1: SGLang's Triton draft_topk1_postprocess / k=4: softmax +
               torch.topk, then hot_token_id[...] (as ../shared/tools/baseline_sglang_spec_ops.py)
  ours_fused   ops.lm_head_topk: one launch, logits never written, d2t and positions folded in
  ours_hooked  what SGLang runs with our hooks: lm_head_gemv (fp32 out) + draft_topk1 / torch.softmax +
               topk_rows, then SGLang's own d2t gather
  torch        matmul, .float(), argmax / softmax + topk, gather
Components (the hook boundaries): lm_head alone (torch.matmul vs lm_head_gemv), top-1 alone (SGLang's
kernel vs draft_topk1), top-4 over probabilities (torch.topk vs topk_rows).
Weights rotate over copies that exceed the L2 (decode evicts the lm_head between draft steps);
SGLang's path gets the same rotation. Floor = weight bytes / measured copy bandwidth.

Before timing, on-device checks against SGLang's kernels on the same inputs (ids exact where the
contract fixes them; values within bf16 rounding); see `checks()`.

    python benchmark/kernels/bench_draft_head.py [--tune] [--quick]
--tune first runs benchmark/tune_draft_head.py's sweep and installs the table it measures (written
to $OUT/<DEVICE>.draft_head.json too). Results: $OUT/draft_head-h200.json, $OUT/draft_head-summary.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
from harness import Results, copy_bandwidth, graph_time_us, sglang_module  # noqa: E402

import tune_draft_head as tune  # noqa: E402
from sglang_kimi_eagle3.ops import draft_topk as dt  # noqa: E402
from sglang_kimi_eagle3.ops import lm_head_gemv as gemv  # noqa: E402
from sglang_kimi_eagle3.ops import lm_head_topk as lt  # noqa: E402
from sglang_kimi_eagle3.ops.arch import CONFIG_DIR, load_table  # noqa: E402

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


def _bf16_ulp(x):
    e = torch.frexp(x.abs().clamp_min(1e-30))[1]
    return torch.ldexp(torch.ones_like(x), e - 8)


def checks(sg_topk1) -> dict:
    """Exactness against SGLang's kernels / torch on the same inputs; returns a summary dict."""
    out = {}
    g = torch.Generator(device=DEV).manual_seed(1)
    for R in ROWS:
        w = (torch.randn(R, H, device=DEV, generator=g) * 0.02).bfloat16()
        hot = torch.randint(0, 163840, (R,), device=DEV, generator=g)
        for bs in (1, 32, 128):
            h = torch.randn(bs, H, device=DEV, generator=g).bfloat16()
            key = f"R{R}_bs{bs}"
            ref16 = h @ w.t()
            ours16 = gemv.lm_head_gemv(h, w)
            exact = (h.double() @ w.double().t())
            d = (ours16.double() - ref16.double()).abs()
            c = {"gemv_bf16_equal_frac": float((ours16 == ref16).float().mean()),
                 "gemv_max_diff_in_ulps": float((d / _bf16_ulp(exact).double()).max()),
                 "gemv_rel_err_vs_fp64": float((ours16.double() - exact).norm() / exact.norm()),
                 "matmul_rel_err_vs_fp64": float((ref16.double() - exact).norm() / exact.norm())}
            fp32 = gemv.lm_head_gemv(h, w, out_dtype=torch.float32, round_to=torch.bfloat16)
            c["gemv_fp32_rounded_equals_bf16_out"] = bool(torch.equal(fp32, ours16.float()))
            logits = ref16.float()
            logits[0, 5] = float("nan")
            if bs > 1:
                logits[1] = float("nan")
            pos_a = torch.arange(bs, device=DEV)
            pos_b = pos_a.clone()
            tok_a = torch.zeros(bs, 3, dtype=torch.long, device=DEV)
            tok_b = tok_a.clone()
            if sg_topk1 is not None:
                pa, ia = dt.draft_topk1(logits, pos_a, tok_a, 1)
                pb, ib = sg_topk1(logits, pos_b, tok_b, 1)
                c["topk1_ids_equal_sglang"] = bool(torch.equal(ia, ib) and torch.equal(pa, pb))
                c["topk1_side_effects_equal"] = bool(torch.equal(pos_a, pos_b) and torch.equal(tok_a, tok_b))
            # top-k over probabilities: bf16 logits tie often, and torch.topk orders ties as it likes,
            # so: same values, every returned id holds its value, and how often the ids are identical
            probs = torch.softmax(ref16.float(), -1)
            v, i = dt.topk_rows(probs, 4)
            tv, ti = torch.topk(probs, 4, dim=-1)
            c["topk_rows_values_equal_torch"] = bool(torch.equal(v, tv) and torch.equal(probs.gather(1, i), v))
            c["topk_rows_ids_identical_frac"] = float((i == ti).float().mean())
            p, i = dt.draft_softmax_topk(ref16.float(), 4)
            c["softmax_topk_probs_max_rel_vs_torch"] = float(((p - tv).abs() / tv).max())
            c["softmax_topk_ids_hold_their_probs"] = bool(torch.allclose(probs.gather(1, i), p, rtol=1e-5, atol=0))
            c["softmax_topk_ids_identical_frac"] = float((i == ti).float().mean())
            # fused vs SGLang's whole path (different accumulation order -> a bf16 logit can round
            # differently): ids may differ only between near-ties (exact logits within 2 bf16 ulps)
            pos = torch.zeros(bs, dtype=torch.long, device=DEV)
            f1 = lt.lm_head_topk(h, w, 1, probs="one", hot_token_id=hot, positions=pos)
            s1 = tune.sglang_tail(h, w, 1, hot, torch.zeros(bs, dtype=torch.long, device=DEV), sg_topk1)
            c["fused_k1_ids_identical_sglang_frac"] = float((f1.ids == s1).float().mean())
            c["fused_k1_positions_advanced"] = bool((pos == 1).all())
            for k in (1, 4):
                ours_ids = lt.lm_head_topk(h, w, k, probs="one" if k == 1 else "softmax").ids
                sg_ids = ref16.float().topk(k, dim=-1).indices
                eo, es = exact.gather(1, ours_ids), exact.gather(1, sg_ids)
                ulp = _bf16_ulp(es.float()).double()
                c[f"fused_k{k}_near_tie_consistent"] = bool(((eo - es).abs() <= 2 * ulp).all())
            f4 = lt.lm_head_topk(h, w, 4, hot_token_id=hot)
            s4p, s4i = tune.sglang_tail(h, w, 4, hot, None, sg_topk1)
            c["fused_k4_ids_identical_sglang_frac"] = float((f4.ids == s4i).float().mean())
            c["fused_k4_probs_max_abs_diff"] = float((f4.probs - s4p).abs().max())
            if R == ROWS[-1]:  # TP 8 emulation on the GPU: 8 shards of R/8 rows, combine == single GPU
                n = R // 8
                shards = [lt.lm_head_topk(h, w[s * n:(s + 1) * n], 4, probs=None, id_offset=s * n) for s in range(8)]
                cp, ci = lt.combine(shards, 4, hot_token_id=hot)
                c["tp8_combine_ids_equal_single"] = bool(torch.equal(ci, f4.ids))
                c["tp8_combine_probs_max_abs_diff"] = float((cp - f4.probs).abs().max())
            out[key] = c
            print(key, json.dumps(c), flush=True)
    torch.cuda.synchronize()
    out["semaphores_zero_after_all"] = bool((gemv.semaphores(torch.device(DEV), 1) == 0).all())
    return out


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
    load_table.cache_clear()
    res.meta["table"] = load_table(*__import__("sglang_kimi_eagle3.ops.arch", fromlist=["x"]).current_device())
    try:
        res.meta["checks"] = checks(sg_topk1)
    except Exception:
        traceback.print_exc()
        res.meta["checks"] = {"error": traceback.format_exc()[-2000:]}
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
    path = res.save("draft_head-h200.json")
    md = summary_md(res, summary, bw)
    out_dir = Path(os.environ.get("OUT") or HERE.parent / "results")
    (out_dir / "draft_head-summary.md").write_text(md)
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
