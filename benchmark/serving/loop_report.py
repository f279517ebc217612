"""The never-slower loop's table: predicted vs measured speedup per drafter acceptance and concurrency.

    python benchmark/serving/loop_report.py --plan-dir DIR_A --e2e DIR_C/loop-e2e.json [--md out.md] [--plot out.png]

DIR_A holds what `device_loop.sh phase1` wrote (loop-bench-q<Q>.json, loop-plan-q<Q>.json, loop-adaptive-q<Q>.json);
the e2e JSON is `device_loop.sh phase2`'s alternating rounds (servers plain, fixed-q<Q>, adaptive-q<Q>). Per q and
concurrency c it prints:
  - fixed 3/1/4 / plain: the bench's speedup (phase 1, the planner's input) and the rounds' median [min-max]
  - the adaptive slot the server used at c (the largest batch-size key <= c) and its candidate steps
  - predicted: the plan's speedup for fixed 3 steps and for the adaptive slot (its best candidate)
  - adaptive / plain and adaptive / best fixed (max of plain and fixed 3/1/4), measured, median [min-max]
  - the planner's error, (predicted - measured) / measured, for fixed and for adaptive
  - what the plan recommends (its JSON's `recommendation`: none, a fixed chain, or the adaptive file), that
    setting's measured ratio over plain and over the best fixed one, and whether the floor holds for it:
    >= 0.95 x plain and >= 0.95 x the best fixed setting (no verdict while the recommendation is unmeasured)
A q whose plan said "no speculation" has no adaptive server: its adaptive column is the plain server (ratio 1).
A recommended fixed chain is the fixed-q<Q> server when the steps agree, else a planned-q<Q> server.
Pure: reads JSON, writes markdown and JSON atomically (and a PNG with matplotlib when --plot is given).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from sglang_kimi_eagle3.validate import atomic_write_text

FLOOR = 0.95


def _load(p: Path):
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return None


def _slot(cfg: dict, c: int):
    keys = sorted(int(k) for k in cfg if k.isdigit())
    below = [k for k in keys if k <= c]
    return (below[-1] if below else keys[0]) if keys else None


def _pred(plan: dict, bs: int, steps: set[int]):
    """Best predicted speedup among `steps` at the plan's batch size bs (None if not planned)."""
    row = (plan or {}).get("batch_sizes", {}).get(str(bs))
    if not row:
        return None
    got = [p["speedup"] for p in row["all"] if p["topk"] == 1 and p["steps"] in steps]
    return max(got) if got else None


def _ratio(rep: dict, c: int, a: str, b: str):
    for lv in rep.get("levels", []):
        if lv["concurrency"] == c and lv["temperature"] == 0:
            r = lv["ratios"].get(f"{a}/{b}")
            if r and r["aggregate"]:
                return r["aggregate"]
            r = lv["ratios"].get(f"{b}/{a}")  # the other order: invert
            if r and r["aggregate"]:
                x = r["aggregate"]
                return {"median": 1 / x["median"], "min": 1 / x["max"], "max": 1 / x["min"], "n": x["n"]}
    return None


def _f(x, fmt=".2f"):
    return "-" if x is None else f"{x:{fmt}}"


def _pct(x):
    return "-" if x is None else f"{x:+.0f} %"


def _sp(s):
    return "-" if not s else f"{s['median']:.2f} [{s['min']:.2f}-{s['max']:.2f}]"


def _err(pred, meas):
    return None if pred is None or not meas else 100.0 * (pred - meas) / meas


def rows(plan_dir: Path, e2e: dict) -> list[dict]:
    rep = e2e.get("report", {})
    servers = set(e2e.get("config", {}).get("servers", []))
    prefix = "loop-" if any(plan_dir.glob("loop-plan-q*.json")) else ""  # device_loop.sh's names, or plain ones
    qs = sorted({m.group(1) for p in plan_dir.glob(f"{prefix}plan-q*.json") if (m := re.search(r"-q([0-9.]+)\.json$", p.name))},
                key=float, reverse=True)
    out = []
    for q in qs:
        bench = _load(plan_dir / f"{prefix}bench-q{q}.json") or {}
        plan = _load(plan_dir / f"{prefix}plan-q{q}.json")
        cfg = _load(plan_dir / f"{prefix}adaptive-q{q}.json") or {}
        bench_sp = {lv["concurrency"]: (lv.get("speedup") or {}).get("aggregate") for lv in bench.get("levels", [])}
        taus = {lv["concurrency"]: (lv.get("spec") or {}).get("tau") for lv in bench.get("levels", [])}
        for c in sorted({lv["concurrency"] for lv in rep.get("levels", [])} | set(bench_sp)):
            fixed = _ratio(rep, c, f"fixed-q{q}", "plain")
            has_adaptive = f"adaptive-q{q}" in servers
            no_spec = bool(cfg) and all(v["candidate_steps"] == [0] for k, v in cfg.items() if k.isdigit())
            adaptive = _ratio(rep, c, f"adaptive-q{q}", "plain") if has_adaptive else \
                ({"median": 1.0, "min": 1.0, "max": 1.0, "n": 0} if no_spec else None)  # the plan is plain decoding
            slot = _slot(cfg, c) if cfg else None
            cands = set(cfg[str(slot)]["candidate_steps"]) if slot is not None else {0}
            pred_fixed, pred_adaptive = _pred(plan, c, {3}), _pred(plan, c, cands)
            best_fixed = max(1.0, fixed["median"]) if fixed else None
            vs_best = adaptive["median"] / best_fixed if adaptive and best_fixed else None
            rec = (plan or {}).get("recommendation") or {"kind": "adaptive"}  # plans before the field: the file
            if rec["kind"] == "none":
                planned = {"median": 1.0, "min": 1.0, "max": 1.0, "n": 0}  # plain decoding is the plain server
            elif rec["kind"] == "fixed":
                fixed_steps = ((e2e.get("servers", {}).get(f"fixed-q{q}") or {}).get("server_info") or {}).get(
                    "speculative_num_steps", 3)
                planned = fixed if rec["steps"] == fixed_steps else (
                    _ratio(rep, c, f"planned-q{q}", "plain") if f"planned-q{q}" in servers else None)
            else:
                planned = adaptive
            planned_vs_best = planned["median"] / best_fixed if planned and best_fixed else None
            out.append({
                "q": float(q), "c": c, "tau_phase1": taus.get(c), "fixed_phase1": bench_sp.get(c), "fixed": fixed,
                "slot": slot, "candidates": sorted(cands), "pred_fixed": pred_fixed, "pred_adaptive": pred_adaptive,
                "adaptive": adaptive, "adaptive_vs_best_fixed": vs_best,
                "err_fixed_pct": _err(pred_fixed, fixed and fixed["median"]),
                "err_adaptive_pct": _err(pred_adaptive, adaptive and adaptive["median"]),
                "adaptive_floor_ok": None if not adaptive or vs_best is None else
                adaptive["median"] >= FLOOR and vs_best >= FLOOR,
                "recommended": rec["kind"] if rec["kind"] != "fixed" else f"fixed {rec['steps']}/1/{rec['steps'] + 1}",
                "planned": planned, "planned_vs_best_fixed": planned_vs_best,
                "floor_ok": None if not planned or planned_vs_best is None else
                planned["median"] >= FLOOR and planned_vs_best >= FLOOR,
            })
    return out


def markdown(rs: list[dict]) -> str:
    head = ("| q | c | τ (phase 1) | fixed/plain, bench | fixed/plain, rounds | predicted fixed | error | slot: candidates | "
            "predicted adaptive | adaptive/plain, rounds | error | adaptive / best fixed | plan recommends | "
            "recommended / plain, rounds | recommended / best fixed | floor 0.95 |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rs:
        lines.append(f"| {r['q']:g} | {r['c']} | {_f(r['tau_phase1'])} | {_f(r['fixed_phase1'])} | {_sp(r['fixed'])} | "
                     f"{_f(r['pred_fixed'])} | {_pct(r['err_fixed_pct'])} | "
                     f"{r['slot'] if r['slot'] is not None else '-'}: {r['candidates']} | {_f(r['pred_adaptive'])} | "
                     f"{_sp(r['adaptive'])} | {_pct(r['err_adaptive_pct'])} | {_f(r['adaptive_vs_best_fixed'])} | "
                     f"{r['recommended']} | {_sp(r['planned'])} | {_f(r['planned_vs_best_fixed'])} | "
                     f"{'-' if r['floor_ok'] is None else ('yes' if r['floor_ok'] else '**no**')} |")
    return "\n".join(lines) + "\n"


def plot(rs: list[dict], path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    qs = sorted({r["q"] for r in rs}, reverse=True)
    fig, axes = plt.subplots(1, len(qs), figsize=(4.2 * len(qs), 3.6), sharey=True, squeeze=False)
    for ax, q in zip(axes[0], qs):
        here = [r for r in rs if r["q"] == q]
        cs = [r["c"] for r in here]
        for key, label, style in (("fixed", "fixed 3/1/4, measured", "s-"), ("adaptive", "adaptive, measured", "o-")):
            ys = [r[key]["median"] if r[key] else float("nan") for r in here]
            lo = [r[key]["median"] - r[key]["min"] if r[key] else 0 for r in here]
            hi = [r[key]["max"] - r[key]["median"] if r[key] else 0 for r in here]
            ax.errorbar(cs, ys, yerr=[lo, hi], fmt=style, capsize=3, label=label, zorder=3)
        ax.plot(cs, [r["pred_fixed"] or float("nan") for r in here], "s--", mfc="none", label="fixed, predicted")
        ax.plot(cs, [r["pred_adaptive"] or float("nan") for r in here], "o--", mfc="none", label="adaptive, predicted")
        ax.axhline(1.0, color="k", lw=0.8)
        ax.axhline(FLOOR, color="r", lw=0.8, ls=":", label="floor 0.95x plain")
        ax.set_xscale("log", base=2)
        ax.set_xticks(cs, [str(c) for c in cs])
        ax.set_title(f"drafter agreement q {q:g}")
        ax.set_xlabel("concurrency")
    axes[0][0].set_ylabel("speedup vs plain (aggregate tok/s)")
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    from sglang_kimi_eagle3.bench.plots import _save

    _save(fig, path)  # one atomic write of the PNG bytes


def bench_docs(e2e: dict) -> dict[str, dict]:
    """q -> a bench-format document (`sglang-kimi-eagle3 bench --url fixed --baseline-url plain`) made of the
    alternating rounds: per concurrency the median PAIRED round, the alternation i whose fixed-q<Q> / plain
    aggregate ratio is the median of the rounds' ratios (the number the report prints), both servers taken from
    that same alternation, with step_costs from their per-request tok/s (plain step = 1 / tok/s per request;
    speculative round = tau / tok/s per request). Pairing keeps the drift between alternations out of the costs:
    on the H200 of 2026-12-01 plain at c 1 went 542 -> 401 tok/s per request between rounds, and medians taken
    per server apart gave 1.07x where every paired round said 1.03-1.46x. `plan --bench` plans from it as from a
    bench run. For when the loop's own phase-1 bench is missing (the H200 run of 2026-12-01)."""
    rows = [r for r in e2e.get("rows", []) if r["phase"] == "steady" and r["temperature"] == 0 and r["summary"]]

    def median_pair(server, c):
        by = {}
        for r in rows:
            if r["concurrency"] == c and r["server"] in (server, "plain"):
                by.setdefault(r["index"], {})[r["server"]] = r["summary"]
        pairs = sorted((p[server]["agg_tok_s"] / p["plain"]["agg_tok_s"], i, p) for i, p in by.items()
                       if len(p) == 2 and p[server]["agg_tok_s"] and p["plain"]["agg_tok_s"])
        if not pairs:
            return None, None
        p = pairs[(len(pairs) - 1) // 2][2]  # the lower median of an even count: never the better half
        return p[server], p["plain"]

    out = {}
    for name in e2e.get("config", {}).get("servers", []):
        m = re.fullmatch(r"fixed-q([0-9.]+)", name)
        if not m:
            continue
        levels = []
        for c in sorted({r["concurrency"] for r in rows}):
            s, b = median_pair(name, c)
            if not s or not b or not s["tok_s_per_req_median"] or not b["tok_s_per_req_median"]:
                continue
            info = e2e["servers"][name].get("server_info") or {}
            levels.append({"concurrency": c, "requests": s["requests"], "spec": s, "baseline": b,
                           "speedup": {"aggregate": s["agg_tok_s"] / b["agg_tok_s"],
                                       "per_request": s["tok_s_per_req_median"] / b["tok_s_per_req_median"]},
                           "step_costs": {"plain_step_us": 1e6 / b["tok_s_per_req_median"],
                                          "spec_round_us": 1e6 * s["tau"] / s["tok_s_per_req_median"],
                                          "steps": info.get("speculative_num_steps"),
                                          "verify_tokens": info.get("speculative_num_draft_tokens"), "tau": s["tau"],
                                          "plain_requests": b["ok"], "spec_requests": s["ok"], "prefill": "included"}})
        out[m.group(1)] = {"schema": "sglang-kimi-eagle3-bench/1", "date": e2e.get("date"), "status": "complete",
                           "interrupted": None, "levels": levels, "overall": None, "overall_baseline": None,
                           "requests": {}, "in_progress": None,
                           "config": {"command": "benchmark/serving/loop_report.py --bench-out: per level the median "
                                                 f"paired round of {name} and plain in {e2e.get('command', 'an e2e run')}"},
                           "servers": {"spec": e2e["servers"][name].get("server_info") or {},
                                       "baseline": e2e["servers"]["plain"].get("server_info") or {}}}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--plan-dir", required=True)
    ap.add_argument("--e2e", required=True)
    ap.add_argument("--md")
    ap.add_argument("--json")
    ap.add_argument("--plot")
    ap.add_argument("--bench-out", help="also write bench-q<Q>.json per fixed server (bench_docs) into this folder")
    a = ap.parse_args(argv)
    e2e = _load(Path(a.e2e))
    if e2e is None:
        print(f"--e2e {a.e2e}: not a readable JSON file", file=sys.stderr)
        return 2
    if a.bench_out:
        Path(a.bench_out).mkdir(parents=True, exist_ok=True)
        for q, doc in bench_docs(e2e).items():
            atomic_write_text(Path(a.bench_out, f"bench-q{q}.json"), json.dumps(doc, indent=1) + "\n", "--bench-out")
    rs = rows(Path(a.plan_dir), e2e)
    md = markdown(rs)
    print(md)
    if a.md:
        atomic_write_text(a.md, md, "--md")
    if a.json:
        atomic_write_text(a.json, json.dumps(rs, indent=1) + "\n", "--json")
    if a.plot:
        plot(rs, a.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
