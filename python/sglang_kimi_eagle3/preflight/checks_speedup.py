"""What speedup to expect (pure): for a Kimi deployment with a bundled drafter profile, the planner's predicted
speedup over plain decoding at concurrency 1 / 16 / 64 / 128 and its recommendation (fixed steps, an adaptive
file, or no speculation), as one finding labelled PREDICTION with its sources.

Inputs: the bundled planner profile of (target, GPU) at TP 8, the drafter's published acceptance presets
(planner/sources.py), the launch's steps. The range spans the drafter's presets, widened by the model's mean
error on the published end-to-end points (planner/calibration.py). The recommendation is planned on the
lowest-acceptance preset (chat traffic accepts less than math): no speculation when no setting beats plain
decoding anywhere, an adaptive file when it loses at some concurrency or the best steps differ, else fixed steps.
`check` calls it (commands/check.py); the launch-time preflight does not.
"""

from __future__ import annotations

import dataclasses
import statistics

from ..errors import UserError
from .model import Deployment, Finding

LEVELS = (1, 16, 64, 128)
TOLERANCE = 0.97  # as `plan`: a setting within 3 % of the best counts as the best
# drafter profile -> (names it goes by, presets, target the presets were measured on)
DRAFTERS = {
    "aq-medai/kimi-k25-eagle3": (("aq-medai/kimi-k25-eagle3",), ("aq-medai-k25-gsm8k",), "k2.5"),
    "aq-medai/kimi-k2-eagle3": (("aq-medai/kimi-k2-instruct-eagle3", "aq-medai/kimi-k2-eagle3"),
                                ("aq-medai-k2-mtbench", "aq-medai-k2-gsm8k"), "k2"),
    "lightseekorg/kimi-k2.5-eagle3": (("lightseekorg/kimi-k2.5-eagle3",),
                                      ("lightseek-k25-mtbench", "lightseek-k25-gsm8k", "lightseek-k25-humaneval"), "k2.5"),
    "lightseekorg/kimi-k2.5-eagle3-mla": (("lightseekorg/kimi-k2.5-eagle3-mla",),
                                          ("lightseek-k25-mla-mtbench", "lightseek-k25-mla-gsm8k"), "k2.5"),
}
PROFILES = {("k2.5", 90): "kimi-k2.5_8xh200_tp8", ("k2.5", 120): "kimi-k2.5_8xrtxpro6000_tp8",
            ("k2", 90): "kimi-k2-instruct_8xh200_tp8"}
PROFILE_GPU = {90: "H200", 120: "RTX PRO 6000"}
PROFILE_DRAFT_VOCAB = 32000  # the profiles cost the AQ-MedAI head (32000-token lm_head)
CHECK = "speedup (prediction)"


def _drafter(path: str) -> str | None:
    """The bundled drafter a model path names: profile name, HF repo id, its cache folder or a folder of that name."""
    p = path.replace("\\", "/").rstrip("/").lower()
    parts = p.split("/")
    cache = next((x.removeprefix("models--").replace("--", "/") for x in parts if x.startswith("models--")), None)
    for name, (aliases, _, _) in DRAFTERS.items():
        for a in (name, *aliases):
            if p == a or p.endswith("/" + a) or cache == a or parts[-1] == a.split("/")[-1]:
                return name
    return None


def _target(d: Deployment) -> str | None:
    t = d.target
    if t.arch == "KimiK25ForConditionalGeneration" or (t.model_type == "kimi_k25"):
        return "k2.5"
    if t.hidden_size == 7168 and t.num_hidden_layers == 61 and t.vocab_size == 163840 and "int4" not in (t.quantization or ""):
        return "k2"  # DeepSeek-V3 layout with Kimi's vocabulary: Kimi-K2(-Instruct)
    return None


def _cost(profile, draft):
    """The profile's costs; a full-vocabulary drafter's lm_head costs more than the profile's 32000-row one."""
    from ..planner import costs

    vocab = draft.draft_vocab_size or draft.vocab_size
    if vocab > PROFILE_DRAFT_VOCAB:
        extra = (vocab - PROFILE_DRAFT_VOCAB) * draft.hidden_size / 8  # lm_head rows per GPU at TP 8
        profile = dataclasses.replace(profile, draft=dataclasses.replace(
            profile.draft, static_bytes_per_gpu=profile.draft.static_bytes_per_gpu + 2 * extra,
            gemm_flops_per_token=profile.draft.gemm_flops_per_token + 2 * extra))
    return costs.from_profile(profile)


def _not(found: str, fix: str = "") -> list[Finding]:
    return [Finding("info", CHECK, f"not predicted: {found}", "",
                    fix or "measure it: sglang-kimi-eagle3 bench --url SPEC --baseline-url PLAIN --json run.json, then "
                           "sglang-kimi-eagle3 plan --bench run.json -o adaptive.json")]


def check_expected_speedup(d: Deployment | None) -> list[Finding]:
    if d is None or d.draft is None or d.algorithm not in ("EAGLE", "EAGLE3"):
        return []
    target = _target(d)
    drafter = _drafter(d.draft.path)
    if target is None:
        return []  # the bundled cost profiles are Kimi's
    if drafter is None:
        return _not(f"the drafter {d.draft.path} has no bundled profile with published acceptance")
    sm = d.gpu.sm if d.gpu is not None else None
    name = PROFILES.get((target, sm))
    if name is None or d.tp != 8:
        why = f"TP {d.tp}" if d.tp != 8 else f"sm{sm} with Kimi-K2{'.5' if target == 'k2.5' else '-Instruct'}"
        return _not(f"no bundled cost profile for {why} (bundled: {', '.join(PROFILES.values())})")
    from ..planner import calibration, profiles, sources
    from ..planner.model import predict, search, settings

    try:
        profile = profiles.load(name)
    except UserError as exc:
        return _not(str(exc))
    cost = _cost(profile, d.draft)
    _, presets, measured_on = DRAFTERS[drafter]
    accs = {p: sources.from_preset(p) for p in presets}
    steps = d.steps if d.steps is not None else 3  # SGLang's choice for DeepSeek/Kimi: 3 / 1 / 4
    if not isinstance(steps, int) or steps < 1:
        return []  # spec_params reports the bad value
    tree = (d.topk or 1) > 1 and not d.adaptive
    band = statistics.fmean(abs(e) for pt, _, e in calibration.rows() if pt.tau is not None) / 100
    per_c = {}
    for c in LEVELS:
        vals = [predict(a.alphas(steps, 1, steps + 1)[0], steps, cost, c).speedup for a in accs.values()]
        per_c[c] = (min(vals) * (1 - band), max(vals) * (1 + band))
    low = min(accs, key=lambda p: sources.PRESETS[p][0])  # the lowest published acceptance
    depth = len(accs[low].chain)  # steps the preset measured: deeper settings would be extrapolated (optimistic)
    plan, _ = search(accs[low], cost, list(LEVELS), settings(list(range(1, depth + 1)), [1], None))
    ours = _ours(d)
    # the launch runs its chain as typed (fixed, or served by this plugin's controller); a tree, or SGLang's own
    # adaptive slots, do not run "this launch's" chain: their recommendation names the flags
    theirs = d.adaptive and ours is None  # SGLang's default table or an operator's file: SGLang's own slot logic
    as_typed = (d.topk or 1) == 1 and not theirs
    rec, fix, sev = _recommend(plan, steps, name, low, depth, ours, as_typed)
    if theirs and fix.startswith("--speculative-num-steps"):
        fix += " without --speculative-adaptive and --speculative-adaptive-config (SGLang's adaptive slots run otherwise)"
    if any(hi < 1.0 for _, hi in per_c.values()):
        sev = "warning"  # slower than plain decoding at some level whatever the traffic
    setting = f"steps {steps} / topk 1 / {steps + 1} tokens" + (" (SGLang's default)" if d.steps is None else "")
    caveat = ""
    if target != measured_on:
        caveat = (f"; the presets were measured on Kimi-K2{'-Instruct' if measured_on == 'k2' else '.5'}, not on this "
                  "target: read the range as an upper bound")
    if steps > min(len(a.chain) for a in accs.values()):
        caveat += (f"; acceptance past the published depth ({min(len(a.chain) for a in accs.values())} steps) taken "
                   "equal to the last position (optimistic)")
    if tree:
        caveat += f"; predicted for a chain: the launch's topk {d.topk} tree has no published acceptance"
    found = (f"PREDICTION (planner model, not a measurement): speedup over plain decoding at {setting}: "
             + ", ".join(f"c {c} {lo:.2f}-{hi:.2f}x" for c, (lo, hi) in per_c.items()) + f"; recommended: {rec}")
    source = (f"source: planner profile {name} ({PROFILE_GPU[sm]}, TP 8) with the published acceptance of "
              f"{drafter} (presets " + ", ".join(f"{p} tau {sources.PRESETS[p][0]:.2f}" for p in presets)
              + f"); range widened by the model's mean error on the published end-to-end points (+-{100 * band:.1f} %)"
              + caveat)
    return [Finding(sev, CHECK, found, source, fix)]


def _ours(d: Deployment) -> str | None:
    """How this plugin's adaptive default serves the launch ("adaptive steps [0, 3] up to batch 128"), None where it
    does not (SGLANG_KIMI_EAGLE3_ADAPTIVE=off, an operator's adaptive flags, a tree, refused for memory)."""
    from ..planner.adaptive_table import KEY

    table = d.adaptive_table or {}
    if not d.adaptive or not any(isinstance(v, dict) and KEY in v for v in table.values()):
        return None
    states = sorted({s for k, v in table.items() if k.isdigit() for s in v.get("candidate_steps", ())})
    top = (d.adaptive_capped or {}).get("top")
    return f"adaptive steps {states}" + (f" up to batch {top}" if top else "")


def _recommend(plan, steps: int, profile: str, preset: str, depth: int, ours: str | None = None,
               as_typed: bool = True) -> tuple[str, str, str]:
    """(recommendation, fix, severity) from the plan on the lowest-acceptance preset, steps 1..depth (its measured
    depth). ours: how this plugin's adaptive default serves the launch (_ours), which already is the adaptive
    recommendation: an adaptive file of `plan` would replace its table and controller with SGLang's own slot logic."""
    best = {c: b for c, (_, b) in plan.items()}
    planned = (f"sglang-kimi-eagle3 plan --profile {profile} --preset {preset} --steps 1-{depth} -o adaptive.json "
               "(then its launch flags)")
    served = f"; this plugin serves the launch with {ours}, dropping to SGLang's off-state where drafting does not pay"
    if all(b.steps == 0 or b.speedup <= 1.0 for b in best.values()):
        why = (" (this plugin's adaptive default would hold SGLang's off-state, which costs more than plain decoding)"
               if ours else "")
        return (f"no speculation (no setting beats plain decoding at any concurrency){why}",
                "drop --speculative-algorithm and the draft model", "warning")
    losing = [c for c, b in best.items() if b.steps == 0 or b.speedup <= 1.0]
    if losing:
        if ours:
            return (f"adaptive steps with no drafting at c {','.join(map(str, losing))}, as this launch is served: "
                    f"{ours}", "", "info")
        return (f"an adaptive file with no drafting at c {','.join(map(str, losing))}", planned, "info")
    from ..planner.adaptive import fixed_chains  # the rule `plan` recommends a fixed chain by

    ok = [s for s in fixed_chains(plan, TOLERANCE) if s <= depth]
    if steps in ok and as_typed:
        return (f"fixed steps {steps}, this launch's (within 3 % of the best at every level){served if ours else ''}",
                "", "info")
    if ok:
        s = min(ok, key=lambda s: abs(s - steps))
        return (f"fixed steps {s} (within 3 % of the best at every level){served if ours else ''}",
                f"--speculative-num-steps {s} --speculative-eagle-topk 1 --speculative-num-draft-tokens {s + 1}", "info")
    by_c = ", ".join(f"c {c}: {b.steps}" for c, b in best.items())
    if ours:
        return f"adaptive steps (the best steps vary: {by_c}), as this launch is served: {ours}", "", "info"
    return f"an adaptive file (the best steps vary: {by_c})", planned, "info"
