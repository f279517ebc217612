"""`sglang-kimi-eagle3 plan`: predict the speedup per batch size and write SGLang's adaptive config."""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys

from ..errors import UserError
from . import adaptive, costs, profiles, sources
from .model import search, settings

EPILOG = """examples:
  sglang-kimi-eagle3 plan                                   # bundled default profile + its published acceptance
  sglang-kimi-eagle3 plan --profile kimi-k2.5_8xh200_tp8 --acceptance 0.8,0.65,0.55
  sglang-kimi-eagle3 plan --bench run.json                  # measured acceptance and (with a baseline) measured costs
  sglang-kimi-eagle3 plan --list-profiles
The model and its assumptions: docs/planner.md."""


def _ints(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if "-" in part:
            lo, hi = part.split("-", 1)
            out += list(range(int(lo), int(hi) + 1))
        elif part:
            out.append(int(part))
    if not out or any(v < 1 for v in out):
        raise UserError(f"expected positive integers like '1,2,4' or '1-7', got {text!r}")
    return sorted(set(out))


def _floats(text: str) -> list[float]:
    try:
        return [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UserError(f"--acceptance wants comma-separated numbers like 0.8,0.7,0.6, got {text!r}") from None


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sglang-kimi-eagle3 plan", description=__doc__, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_argument_group("acceptance (one of; default: the profile's published preset)")
    src.add_argument("--acceptance", help="per-position acceptance alpha_1,alpha_2,... (topk 1)")
    src.add_argument("--alpha", type=float, help="one i.i.d. acceptance rate for every position")
    src.add_argument("--preset", help=f"published acceptance: {', '.join(sources.PRESETS)}")
    src.add_argument("--bench", help="a bench JSON: measured acceptance; with its baseline also measured costs")
    cst = p.add_argument_group("costs (default: --profile)")
    cst.add_argument("--profile", default=profiles.DEFAULT_PROFILE, help=f"bundled name or JSON path (default {profiles.DEFAULT_PROFILE})")
    cst.add_argument("--costs", help="measured cost table or kernel-benchmark JSON (docs/planner.md, 'Cost inputs')")
    cst.add_argument("--draft-cost-ratio", type=float, help="Leviathan's c: draft pass / target pass, constant")
    cst.add_argument("--context", type=int, help="context tokens per request for the profile model")
    sp = p.add_argument_group("search space")
    sp.add_argument("--steps", default="1-7", help="speculative steps to try (default 1-7)")
    sp.add_argument("--topk", default="1", help="topk values (>1 needs acceptance measured for that tree)")
    sp.add_argument("--draft-tokens", help="draft-token counts for topk > 1")
    sp.add_argument("--batch-sizes", default="1,2,4,8,16,32,64,128", help="batch sizes (adaptive-config keys)")
    sp.add_argument("--tolerance", type=float, default=0.97, help="keep steps within this fraction of the best (default 0.97)")
    out = p.add_argument_group("output")
    out.add_argument("-o", "--output", default="speculative-adaptive-config.json", help="adaptive config path")
    out.add_argument("--json", help="also write every prediction here")
    out.add_argument("--plot", help="PNG of predicted speedup vs batch size (needs the 'plot' extra)")
    out.add_argument("--explain", action="store_true", help="list the profile's numbers with their sources")
    p.add_argument("--list-profiles", action="store_true", help="list bundled hardware profiles and exit")
    return p


def _acceptance(a, profile, bench_doc):
    given = [x for x in ("acceptance", "alpha", "preset", "bench") if getattr(a, x) is not None]
    if len(given) > 1:
        raise UserError(f"give one acceptance source, got --{' and --'.join(given)}")
    if a.acceptance:
        return sources.from_numbers(_floats(a.acceptance))
    if a.alpha is not None:
        return sources.from_numbers([a.alpha])
    if bench_doc is not None:
        return sources.from_bench(bench_doc, a.bench)
    name = a.preset or (profile.acceptance_preset if profile else None)
    if not name:
        raise UserError("no acceptance given: pass --acceptance, --alpha, --preset or --bench")
    return sources.from_preset(name)


def _cost(a, profile, bench_doc):
    if a.draft_cost_ratio is not None:
        return costs.leviathan(a.draft_cost_ratio)
    if a.costs:
        try:
            with open(a.costs) as f:
                return costs.from_table(json.load(f), a.costs)
        except (OSError, json.JSONDecodeError) as exc:
            raise UserError(f"--costs {a.costs}: cannot read ({exc})") from None
    if bench_doc is not None and any(lv.get("baseline") for lv in bench_doc["levels"]):
        return costs.from_bench(bench_doc["levels"], sources.bench_setting(bench_doc)[0], a.bench)
    return costs.from_profile(profile, a.context)


def main(argv: list[str]) -> int:
    a = parser().parse_args(argv)
    if a.list_profiles:
        for n in profiles.names():
            print(f"{n:32s} {profiles.load(n).title}")
        return 0
    profile = profiles.load(a.profile)
    bench_doc = sources.load_bench(a.bench) if a.bench else None
    acc = _acceptance(a, profile, bench_doc)
    cost = _cost(a, profile, bench_doc)
    bss = _ints(a.batch_sizes)
    space = settings(_ints(a.steps), _ints(a.topk), _ints(a.draft_tokens) if a.draft_tokens else None)
    plan, skipped = search(acc, cost, bss, space)
    prov = {"command": "sglang-kimi-eagle3 plan " + " ".join(argv), "date": _dt.date.today().isoformat(),
            "acceptance": acc.source, "costs": cost.name, "tolerance": a.tolerance,
            "note": "predictions, not measurements; see docs/planner.md"}
    cfg = adaptive.adaptive_config(plan, a.tolerance, prov)
    path = adaptive.write(cfg, a.output)
    from .report import print_plan

    print_plan(plan, cfg, acc, cost, profile if cost.name.startswith("profile") else None, skipped, a.explain)
    print(f"\nwrote {path}\nlaunch flags: {adaptive.launch_flags(cfg, path)}")
    if a.json:
        doc = {**prov, "batch_sizes": {str(bs): {"best": best.as_dict(), "all": [p.as_dict() for p in preds]}
                                       for bs, (preds, best) in plan.items()}, "adaptive_config": cfg}
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=1)
        print(f"wrote {a.json}")
    if a.plot:
        from .plot import plot_plan

        msg = plot_plan(plan, a.plot, f"{cost.name}\n{acc.source[:110]}")
        print(msg, file=sys.stderr if msg.startswith("skipped") else sys.stdout)
    return 0
