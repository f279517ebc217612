"""`sglang-kimi-eagle3 plan`: predict the speedup per batch size and write SGLang's adaptive config."""

from __future__ import annotations

import datetime as _dt
import sys

from ..documents import read_document
from ..errors import UserError
from ..planner import adaptive, capacity, costs, measured, profiles, sources
from ..planner.acceptance import expected_tokens
from ..planner.model import search, settings
from ..terminal import HelpFormatter, echo, fill, shell
from ..validate import (
    ArgParser,
    atomic_write_text,
    check_output_file,
    expand_path,
    float_flag,
    float_list_flag,
    int_flag,
    int_list_flag,
    read_json_object,
    refuse_empty,
)

EPILOG = """examples:
  sglang-kimi-eagle3 plan                                   # bundled default profile + its published acceptance
  sglang-kimi-eagle3 plan --profile kimi-k2.5_8xh200_tp8 --acceptance-conditional 0.8,0.65,0.55
  sglang-kimi-eagle3 plan --acceptance-cumulative 0.645,0.393,0.240   # vLLM's per-position rates
  sglang-kimi-eagle3 plan --bench run.json                  # measured acceptance and (with a baseline) measured costs
  sglang-kimi-eagle3 plan --list-profiles
The model and its assumptions: docs/planner.md."""


# Bounds of plan's own flags (what the speedup model accepts), not kernel limits: our tree kernels take at
# most ops/_tree.py MAX_DRAFT_TOKENS = 64 draft tokens per request.
MAX_STEPS, MAX_TOPK, MAX_DRAFT_TOKENS_FLAG, MAX_BS = 64, 64, 1024, 1 << 20
MAX_BATCH_SIZES = 1024  # adaptive-config slots
# With this plugin, a chain launch (topk 1) is served with adaptive steps by default (integration/adaptive_default.py):
# the written file, passed as --speculative-adaptive-config, would replace that table and its controller with SGLang's
# own slot logic, which on an H200 sat in its off-state at 0.41x of plain and switched 532 times in 3 minutes.
PLUGIN_ADAPTIVE = ("recommended: adaptive steps (the best steps differ by batch size, or drafting loses at some). With "
                   "this plugin a chain launch is served that way by default: a table of candidate steps for the "
                   "launch and a controller that measures each state's cost, dropping to SGLang's off-state where "
                   "drafting does not pay (docs/adaptive.md; `check` on the launch says whether that table fits its "
                   "memory budget); launch the chain:")
PLUGIN_FIXED = ("(with this plugin the chain is served with adaptive steps around it by default, which keep it where it "
                "pays; SGLANG_KIMI_EAGLE3_ADAPTIVE=off keeps it fixed)")
OFF_NOTE = ("off: no speculation, priced at 1.00. An adaptive server runs SGLang's steps-0 off-state there, which is "
            "not free: on an H200 its decode step measured 0.95-1.15x of a plain one with this plugin's off-state hook "
            "(1.24-3.0x without). Where off holds at the load you serve, a launch without EAGLE is the faster one.")
MAX_EVALUATIONS = 2_000_000  # batch sizes x settings


def _write_json(doc: dict, path: str) -> None:
    import json

    atomic_write_text(path, json.dumps(doc, indent=1, allow_nan=False) + "\n", "--json")


def parser() -> ArgParser:
    p = ArgParser(prog="sglang-kimi-eagle3 plan", description=__doc__, epilog=EPILOG, formatter_class=HelpFormatter)
    src = p.add_argument_group("acceptance (one of; default: the profile's published preset)")
    src.add_argument("--acceptance-conditional", metavar="A1,A2,...",
                     help="per-position acceptance, conditional: alpha_i = P(draft i accepted | 1..i-1 accepted) (topk 1)")
    src.add_argument("--acceptance-cumulative", metavar="P1,P2,...",
                     help="per-position acceptance, cumulative: p_i = P(drafts 1..i all accepted), as vLLM reports it")
    src.add_argument("--acceptance", metavar="A1,A2,...", help="same as --acceptance-conditional (prints both readings)")
    src.add_argument("--alpha", help="one i.i.d. acceptance rate for every position")
    src.add_argument("--preset", help=f"published acceptance: {', '.join(sources.PRESETS)}")
    src.add_argument("--bench", help="a bench JSON: measured acceptance; with its baseline also measured costs")
    cst = p.add_argument_group("costs (default: --profile)")
    cst.add_argument("--profile", default=profiles.DEFAULT_PROFILE, help=f"bundled name or JSON path (default {profiles.DEFAULT_PROFILE})")
    cst.add_argument("--costs", help="measured cost table or kernel-benchmark JSON (docs/planner.md, 'Costs')")
    cst.add_argument("--draft-cost-ratio", help="Leviathan's c: draft pass / target pass, constant")
    cst.add_argument("--context", help="context tokens per request for the profile model")
    sp = p.add_argument_group("search space")
    sp.add_argument("--steps", default="1-7", help=f"speculative steps to try (default 1-7, at most {MAX_STEPS})")
    sp.add_argument("--topk", default="1", help="topk values (>1 needs acceptance measured for that tree)")
    sp.add_argument("--draft-tokens", help="draft-token counts for topk > 1")
    sp.add_argument("--batch-sizes", default="1,2,4,8,16,32,64,128", help="batch sizes (adaptive-config keys)")
    sp.add_argument("--tolerance", default="0.97", help="keep steps within this fraction of the best, in (0, 1] (default 0.97)")
    capacity.add_arguments(sp)
    out = p.add_argument_group("output")
    out.add_argument("-o", "--output", default="speculative-adaptive-config.json", help="adaptive config path")
    out.add_argument("--json", help="also write every prediction here")
    out.add_argument("--plot", help="PNG of predicted speedup vs batch size (needs the 'plot' extra)")
    out.add_argument("--explain", action="store_true", help="list the profile's numbers with their sources")
    out.add_argument("--force", action="store_true", help="replace an existing -o, --json or --plot file that `plan` did not write")
    out.add_argument("--no-sglang-check", action="store_true",
                     help="skip confirming -o with SGLang's own loader (saves importing SGLang; the same rules are "
                          "always checked)")
    p.add_argument("--list-profiles", action="store_true", help="list bundled hardware profiles and exit")
    return p


def _acceptance(a, profile, bench_doc):
    names = {"acceptance": "--acceptance", "acceptance_conditional": "--acceptance-conditional",
             "acceptance_cumulative": "--acceptance-cumulative", "alpha": "--alpha", "preset": "--preset",
             "bench": "--bench"}
    given = [f for x, f in names.items() if getattr(a, x) is not None]
    if len(given) > 1:
        raise UserError(f"give one acceptance source, got {' and '.join(given)}")
    if a.acceptance_cumulative is not None:
        return sources.from_cumulative(float_list_flag(a.acceptance_cumulative, "--acceptance-cumulative", 0, 1))
    for flag in ("acceptance_conditional", "acceptance"):
        text = getattr(a, flag)
        if text is not None:
            vals = float_list_flag(text, names[flag], 0, 1)
            acc = sources.from_numbers(vals, names[flag])
            if flag == "acceptance":
                cum = 1.0 + sum(vals) if all(b <= a_ + 1e-12 for a_, b in zip(vals, vals[1:])) else None
                print(f"note: --acceptance read as CONDITIONAL rates (tau {expected_tokens(vals):.2f})"
                      + (f"; if they are cumulative per-position rates (vLLM's convention), "
                         f"--acceptance-cumulative gives tau {cum:.2f}" if cum is not None else ""), file=sys.stderr)
            return acc
    if a.alpha is not None:
        return sources.from_numbers([float_flag(a.alpha, "--alpha", 0, 1)], "--alpha")
    if bench_doc is not None:
        return sources.from_bench(bench_doc, a.bench)
    name = a.preset or (profile.acceptance_preset if profile else None)
    if not name:
        raise UserError("no acceptance given: pass --acceptance-conditional, --acceptance-cumulative, --alpha, "
                        "--preset or --bench")
    return sources.from_preset(name)


def _cost(a, profile, bench_doc):
    if a.draft_cost_ratio is not None:
        return costs.leviathan(float_flag(a.draft_cost_ratio, "--draft-cost-ratio", 0))
    if a.costs:
        return read_document(a.costs, "cost table", costs.from_table, flag="--costs",
                             hint="give a cost table (docs/planner.md, 'Costs')")
    if bench_doc is not None and measured.usable(bench_doc, a.bench):
        steps, _, n = sources.bench_setting(bench_doc)
        return measured.from_bench_steps(bench_doc, steps, n, a.bench)
    if bench_doc is not None and any(lv.get("baseline") for lv in bench_doc["levels"]):
        return costs.from_bench(bench_doc["levels"], sources.bench_setting(bench_doc)[0], a.bench)
    ctx = int_flag(a.context, "--context", 0, 10_000_000) if a.context is not None else None
    return costs.from_profile(profile, ctx)


def _measured_chain(bench_doc: dict | None) -> int | None:
    """The steps of the fixed topk-1 chain a bench document's speculative server ran (None: no bench, a tree, or an
    adaptive server): `plan` prefers it to a chain it only predicts to be as good."""
    if not bench_doc or (((bench_doc.get("servers") or {}).get("spec") or {}).get("speculative_adaptive")):
        return None
    steps, topk, _n = sources.bench_setting(bench_doc)
    return steps if topk == 1 else None


def _check_distinct(*flags: tuple[str, str | None]) -> None:
    """-o, --json and --plot (the first three) are three different files, none of them an input of this run."""
    import os

    def real(flag, path):
        if not path or (flag == "--profile" and not os.path.exists(path)):  # a bundled profile name
            return None
        return os.path.realpath(expand_path(path, flag))

    outputs, inputs = flags[:3], flags[3:]
    for i, (flag, path) in enumerate(outputs):
        mine = real(flag, path)
        if mine is None:
            continue
        for other, opath in outputs[:i] + inputs:
            if real(other, opath) == mine:
                what = "another output" if (other, opath) in outputs else "an input of this run"
                raise UserError(f"{flag} {path} is the {other} file ({what}): writing it would replace that; give "
                                "each output its own path")


def _written_by_plan(p, flag: str) -> bool:
    """-o holds `_generated_by`, --json plan's own "command", --plot the PNG text planner/plot.py writes."""
    if flag == "--plot":
        from ..planner.plot import MARK

        try:
            with open(p, "rb") as fh:
                return MARK.encode() in fh.read(1 << 16)
        except OSError:
            return False
    try:
        old = read_json_object(p)
    except UserError:
        return False
    if flag == "-o":
        return "_generated_by" in old
    return str(old.get("command", "")).startswith("sglang-kimi-eagle3 plan") and "batch_sizes" in old


def _check_output(path: str, force: bool, flag: str = "-o") -> None:
    """-o, --json and --plot must be writable; an existing file is replaced only if `plan` wrote it (or with --force)."""
    p = check_output_file(path, flag)
    if not p.exists() or force:
        return
    if not _written_by_plan(p, flag):
        raise UserError(f"{flag} {path}: exists and was not written by `plan`; pass --force to replace it, or choose "
                        f"another {flag}")


def main(argv: list[str]) -> int:
    a = parser().parse_args(argv)
    if a.list_profiles:
        for n in profiles.names():
            echo(f"{n:32s}  {profiles.load(n).title}")
        return 0
    # every input checked before any computing
    refuse_empty(a, bench="--bench", costs="--costs", profile="--profile", preset="--preset", json="--json",
                 plot="--plot")  # -o '' is check_output_file's
    tolerance = float_flag(a.tolerance, "--tolerance", 0, 1, lo_open=True)
    bss = int_list_flag(a.batch_sizes, "--batch-sizes", 1, MAX_BS, max_items=MAX_BATCH_SIZES)
    steps = int_list_flag(a.steps, "--steps", 1, MAX_STEPS, max_items=MAX_STEPS)
    topks = int_list_flag(a.topk, "--topk", 1, MAX_TOPK, max_items=MAX_TOPK)
    dts = int_list_flag(a.draft_tokens, "--draft-tokens", 2, MAX_DRAFT_TOKENS_FLAG, max_items=256) if a.draft_tokens else None
    space = settings(steps, topks, dts)
    if not space:
        raise UserError(f"no (steps, topk, draft tokens) setting is possible: --draft-tokens must lie in (steps, "
                        f"topk + (steps - 1) x topk^2 + 1] for --steps {a.steps} --topk {a.topk}")
    if len(bss) * len(space) > MAX_EVALUATIONS:
        raise UserError(f"{len(bss)} batch sizes x {len(space)} settings is more than the planner searches "
                        f"({MAX_EVALUATIONS}); narrow --batch-sizes, --steps, --topk or --draft-tokens")
    _check_distinct(("-o", a.output), ("--json", a.json), ("--plot", a.plot), ("--bench", a.bench),
                    ("--profile", a.profile), ("--costs", a.costs))
    _check_output(a.output, a.force)
    if a.json:
        _check_output(a.json, a.force, "--json")
    if a.plot:
        _check_output(a.plot, a.force, "--plot")
    profile = profiles.load(a.profile, "--profile")
    bench_doc = sources.load_bench(a.bench) if a.bench else None
    acc = _acceptance(a, profile, bench_doc)
    cost = _cost(a, profile, bench_doc)
    foreign = None  # costs measured elsewhere than the profile's deployment: its KV pool says nothing about them
    if a.draft_cost_ratio is not None or a.costs or (bench_doc is not None and (
            measured.usable(bench_doc, a.bench) or any(lv.get("baseline") for lv in bench_doc["levels"]))):
        foreign = "--costs" if a.costs else "--draft-cost-ratio" if a.draft_cost_ratio is not None else "--bench"
    cap = capacity.resolve(a, profile, int_flag(a.context, "--context", 0, 10_000_000) if a.context is not None
                           else profile.context_tokens, costs_from=foreign)
    plan, skipped = search(acc, cost, bss, space)
    if not any(p.steps for preds, _ in plan.values() for p in preds):
        have = (f"a chain (topk 1) up to {len(acc.chain)} steps" if acc.chain else
                "the trees " + ", ".join(f"steps {s}/topk {k}/{n} tokens" for s, k, n in sorted(acc.trees)))
        # a tree plan can search (a bench of topk 100 has acceptance plan's own bounds refuse to search)
        want = next((t for t in sorted(acc.trees) if t[0] <= MAX_STEPS and t[1] <= MAX_TOPK
                     and 2 <= t[2] <= MAX_DRAFT_TOKENS_FLAG), None)
        fix = (f"search that with --steps {want[0]} --topk {want[1]} --draft-tokens {want[2]}" if want else
               "search that with --topk 1" if acc.chain else
               f"plan searches steps <= {MAX_STEPS}, topk <= {MAX_TOPK} and draft tokens <= {MAX_DRAFT_TOKENS_FLAG}: "
               "bench a chain (topk 1) or a tree within those")
        raise UserError(f"nothing could be evaluated: no setting searched ({len(skipped)}, e.g. steps {skipped[0][0]}/"
                        f"topk {skipped[0][1]}/{skipped[0][2]} tokens) has acceptance; the acceptance covers {have}; "
                        f"{fix}")
    note = costs.clamped_note(cost, bss)
    if note:
        cost.notes.append(note)
    prov = {"command": "sglang-kimi-eagle3 plan " + " ".join(argv), "date": _dt.date.today().isoformat(),
            "acceptance": acc.source, "costs": cost.name, "tolerance": tolerance,
            "note": "predictions, not measurements; see docs/planner.md"}
    full_plan, plan = plan, capacity.split(plan, cap)  # levels whose batch does not fit the KV pool: not planned
    cfg = adaptive.adaptive_config(plan, tolerance, prov)
    loader = None
    if not a.no_sglang_check:
        from ..integration.adaptive_check import sglang_loader  # the only SGLang import, lazy

        loader = sglang_loader()
    path = adaptive.write(cfg, a.output, loader)
    from ..planner.report import print_plan

    print_plan(plan, cfg, acc, cost, profile if cost.name.startswith("profile") else None, skipped, a.explain)
    echo("\n".join(capacity.lines(cap)))
    checked = "SGLang's own _load_adaptive_config accepts it" if loader else "checked against SGLang's rules"
    flags = adaptive.launch_flags(cfg, path)
    rec = adaptive.recommend(plan, tolerance, _measured_chain(bench_doc))
    from ..base import ENV_ADAPTIVE, env_choice

    plugin_default = env_choice(ENV_ADAPTIVE) != "off"  # off: a chain launch stays fixed, the file is the adaptive way
    echo(f"\nwrote {path} ({checked})")
    if rec["kind"] == "fixed":
        what = "the chain the bench measured, " if rec.get("measured") else ""
        echo(fill(f"recommended: fixed steps {rec['steps']} / topk 1 / {rec['draft_tokens']} draft tokens, {what}predicted "
                  f"within {100 * (1 - tolerance):.0f} % of the best topk-1 setting at every batch size (worst "
                  f"{rec['worst_vs_best']:.3f} of it): an adaptive file would gain less than SGLang's adaptive mode "
                  "costs per round (docs/planner.md)"))
        print(shell("launch flags: ", adaptive.fixed_flags(rec["steps"])))
        if plugin_default:
            echo(fill(PLUGIN_FIXED))
        print(shell("the adaptive file instead: ", flags))
        rec["file_flags"] = flags
    elif rec["kind"] == "tree":
        echo(fill(f"recommended: the tree steps {rec['steps']} / topk {rec['topk']} / {rec['draft_tokens']} draft "
                  f"tokens, predicted above plain decoding at every batch size and within {100 * (1 - tolerance):.0f} % "
                  f"of the best tree (worst {rec['worst_vs_best']:.3f} of it), where no chain beats plain decoding "
                  "anywhere (adaptive steps are chain-only, so the written file turns speculation off)"))
        print(shell("launch flags: ", adaptive.tree_flags(rec["steps"], rec["topk"], rec["draft_tokens"])))
    elif rec["kind"] == "adaptive" and flags.startswith("--") and plugin_default:
        rec["steps"] = adaptive.start_steps(cfg)
        echo(fill(PLUGIN_ADAPTIVE))
        print(shell("launch flags: ", adaptive.fixed_flags(rec["steps"])))
        print(shell("the file instead (SGLang's own slot logic): ", flags))
        rec["file_flags"] = flags
    else:
        print(shell("launch flags: ", flags) if flags.startswith("--") else fill(f"launch flags: {flags}"))
    if any(best.steps == 0 for _, best in plan.values()) and rec["kind"] != "none":
        echo(fill(OFF_NOTE))
    rec["launch_flags"] = adaptive.recommended_flags(rec, cfg, path)
    if a.json:
        doc = {**prov, "batch_sizes": {str(bs): {"best": best.as_dict(), "all": [p.as_dict() for p in preds],
                                                 "fits_kv_pool": bs not in cap.excluded}
                                       for bs, (preds, best) in full_plan.items()},
               "kv_capacity": cap.as_dict(), "adaptive_config": cfg, "recommendation": rec}
        _write_json(doc, a.json)
        echo(f"wrote {a.json}")
    if a.plot:
        from ..planner.plot import plot_plan

        msg = plot_plan(plan, a.plot, f"{cost.name}\n{acc.source}")
        echo(msg, file=sys.stderr if msg.startswith("skipped") else sys.stdout)
    return 0
