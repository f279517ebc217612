"""The launch-time adaptive table: per batch size, the chain (topk 1) steps worth having, with the planner's
costs of each, for SGLang's `--speculative-adaptive-config` and this plugin's controller (pure).

Why: SGLang's default table (adaptive_spec_params.DEFAULT_ADAPTIVE_CONFIG) is one guess for every model; a
state per candidate step costs GPU memory (one set of CUDA graphs and buffers per step), and its slot logic
probes up from steps 0 every few batches. Here the candidates come from the planner's cost model of the
launch (planner/costs.py): per batch size, the steps that are best at some plausible acceptance (iid per
position, ALPHAS); from their union at most `max_states` states are kept (steps 0 always, SGLang's off-state, the
nearest it has to no speculation; the operator's --speculative-num-steps, which SGLang requires as a candidate; then
the most valuable within a memory budget: `table`), and each slot then lists, per acceptance, the best kept state.
Each slot carries `kimi_eagle3`: its plain decode time, the time of one steps-0 step and of a round of each
candidate (SGLang's measured path cost, PATH_EXTRA_US, included), in microseconds, plus the controller's knobs
(planner/adaptive_control.py reads them in every scheduler).

State memory (modelled, not measured): SGLang builds one runtime state per candidate step, its CUDA graphs
pruned to the batch sizes whose slot lists that step. Measured on the H200 (2026-12-02) at vocab 163840,
--cuda-graph-max-bs-decode 128: 4.2 / 8.3 / 25.1 / ~33 GB for steps 0 / 1 / 5 / 7, about 4.15 GB per
verified token (steps + 1); `state_memory_gb` (preflight/memory.py) scales that by vocab and the largest
graph batch size.
"""

from __future__ import annotations

import math

from ..preflight.memory import (  # noqa: F401 (re-exported)
    GB_PER_TOKEN_AT,
    adaptive_memory_lines as memory_lines,
    adaptive_state_gb as state_memory_gb,  # noqa: F401 (re-exported)
    adaptive_states as states,
)
from .acceptance import expected_tokens
from .costs import CostModel, interp
from .model import round_us

MAX_STEPS = 7
ALPHAS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95)  # per-position acceptance the table must serve
KEY = "kimi_eagle3"
KNOBS = {"dwell_batches": 128, "probe_batches": 32, "probe_wait_batches": 256, "probe_wait_max_batches": 8192,
         "probe_min_batches": 4, "hysteresis": 0.05, "ema_alpha": 0.1}


# SGLang 0.5.23's speculative path costs more than the planner's passes: its steps-0 off-state (a 1-token verify
# through that path plus a draft extend each step, the drafter's forward about 5 % of a target step) took this much
# longer per decode step than plain decoding, microseconds by batch size, on one H200 (2026-12-03, the
# deployment-shaped pair, benchmark/serving/step_ratio.py; plain 8.2 / 8.5 / 14.2 / 20.0 ms, so 1.34 / 1.24 / 1.35 /
# 2.32x; raw benchmark/results/step-ratio-h200-2026-12-03-deploy-q0.9.json). Every round of the speculative path
# pays it, so it is added to steps 0 (a plain step + it) and to each positive round (the model's + it; the model's
# own draft extend, ~5 %, is then counted twice). Taken as absolute time (host work and small kernels, which do not
# grow with the target's weight reads) and held at the end values outside bs 1-128. Measured before the
# offstate_attention hook (integration/hooks/offstate_attention.py): what it saves at steps 0 is OFFSTATE_SAVED_US
# below, measured on the Triton MoE where these came from the Marlin one (the attention kernels are the same).
PATH_EXTRA_US = {1: 2756.0, 8: 2020.0, 32: 4936.0, 128: 26508.0}
# What the offstate_attention hook takes off a steps-0 step, microseconds by batch size, on one H200 (2026-12-03, the
# deployment-shaped pair on SGLang's Triton MoE): bs 128, its attention 27,973 -> 6,523 µs a step (decode anatomy,
# benchmark/results/anatomy-h200-2026-12-03-offstate-hook-c128.json); bs 8 and 32, the hooked off-state's step against
# the unhooked one read in the same rotated rounds (step-ratio-rotated-h200-2026-12-03-run17-deploy-q0.9.json, its
# measure run). Below bs 8 the bs-8 saving stands (clamped): that leaves 0.7-1.0 ms of path cost on a hooked steps-0
# step at bs 1-4, near what the hooked off-state read against plain at 1024-token contexts on 2026-12-04 (0.95-1.15x of
# a 9-19 ms step, step-ratio-rotated-h200-2026-12-04-run25-deploy-q0.3-ctx1024.json; the unhooked one 2.6-3.0x).
# Only steps 0 gets it (a positive round verifies steps + 1 tokens: the extend kernel, unhooked), and only from the
# batch where the hook reroutes (base.offstate_min_bs: every batch under the default `auto`, none when it is off).
OFFSTATE_SAVED_US = {8: 1752.0, 32: 5621.0, 128: 21450.0}


def path_extra_us(bs: int, steps: int = 1, hooked_from: int | None = None) -> float:
    """SGLang's speculative path cost above the model's passes for one round of `steps` at batch `bs`; steps 0 less
    what the offstate_attention hook saves where it reroutes (bs >= hooked_from)."""
    extra = interp(PATH_EXTRA_US, bs, clamp=True)
    if steps == 0 and hooked_from is not None and bs >= hooked_from:
        extra = max(0.0, extra - interp(OFFSTATE_SAVED_US, bs, clamp=True))
    return extra


def step_us(cost: CostModel, bs: int, steps: int, hooked_from: int | None = None) -> float:
    """One round of `steps` in SGLang's speculative path; steps 0 is its off-state, dearer than plain decoding."""
    model = cost.target_us(bs, 1) if steps == 0 else round_us(cost, bs, steps, 1, steps + 1)
    return model + path_extra_us(bs, steps, hooked_from)


def speedup(cost: CostModel, bs: int, steps: int, alpha: float, hooked_from: int | None = None) -> float:
    """Predicted throughput of `steps` over plain decoding (steps 0: below 1)."""
    return expected_tokens([alpha] * steps) * cost.target_us(bs, 1) / step_us(cost, bs, steps, hooked_from)


def best_steps(cost: CostModel, bs: int, alpha: float, steps=range(MAX_STEPS + 1), hooked_from: int | None = None) -> int:
    return max(steps, key=lambda s: (speedup(cost, bs, s, alpha, hooked_from), -s))


def _value(cost: CostModel, bss: list[int], keep: set[int], hooked_from: int | None = None) -> float:
    """What a set of states is worth: the log of the best kept speedup, summed over the slots and the acceptances
    served (a log, so that a 20 % loss at a low acceptance weighs what a 20 % gain at a high one does)."""
    return sum(math.log(max(speedup(cost, bs, s, a, hooked_from) for s in keep)) for bs in bss for a in ALPHAS)


def table(cost: CostModel, batch_sizes: list[int], *, operator_steps: int | None = None, max_states: int = 3,
          source: str = "", state_gb=None, budget_gb: float | None = None, hooked_from: int | None = None,
          fixed_above: int | None = None) -> dict:
    """SGLang's adaptive config (every digit key a slot) with our per-slot costs and knobs under KEY.

    The kept states: steps 0 and the operator's steps, then, one at a time, the step among the slots' unrestricted
    bests that adds the most value (`_value`), while at most `max_states` and, given `state_gb(steps)` (a state's
    modelled GB), while the states beside the operator's fit `budget_gb`. Until 2026-12-03 the most often best
    steps were kept, ties to the smaller: the seed kept [0, 1, 3] where steps 7 is worth about 27 % more than 3
    at bs 1 and acceptance 0.9 (live on the H200, c 1: SGLang's table with steps 5-7 ran 1.81x of plain, ours
    with 3 at most 1.53x).

    fixed_above (with operator_steps): the slots above this batch size (one is added right above it) list only the
    operator's steps, a fixed chain there, so SGLang captures the other states' CUDA graphs only up to it
    (adaptive_default: where the states do not fit the budget at the launch's largest graph batch, they may fit up to
    a smaller one)."""
    if fixed_above is not None and not operator_steps:
        raise ValueError("fixed_above needs operator_steps (the fixed chain the slots above it run)")
    if fixed_above is not None:  # a slot right above it: SGLang routes a batch to the largest slot at or below its
        batch_sizes = [*batch_sizes, fixed_above + 1]  # padded size, so every graph size above fixed_above is fixed
    bss = sorted(set(batch_sizes))
    best = {bs: {best_steps(cost, bs, a, hooked_from=hooked_from) for a in ALPHAS} for bs in bss}
    keep = {0} | ({operator_steps} if operator_steps else set())

    def extra_gb(ks: set[int]) -> float:
        return sum(state_gb(k) for k in ks if k != operator_steps) if state_gb else 0.0

    pool = sorted(set().union(*best.values()) - keep)
    while len(keep) < max_states:
        fits = [k for k in pool if k not in keep and (budget_gb is None or extra_gb(keep | {k}) <= budget_gb)]
        if not fits:
            break
        worth = {k: _value(cost, bss, keep | {k}, hooked_from) for k in fits}
        k = max(fits, key=lambda k: (worth[k], -k))
        if worth[k] <= _value(cost, bss, keep, hooked_from) + 1e-9:
            break
        keep.add(k)
    cfg: dict = {"_generated_by": {"by": "sglang-kimi-eagle3 adaptive default", "costs": source or cost.name,
                                   "alphas": list(ALPHAS), "max_states": max_states, "offstate_hooked_from": hooked_from,
                                   **({"budget_gb": budget_gb} if budget_gb is not None else {}),
                                   **({"fixed_above": fixed_above} if fixed_above is not None else {})}}
    for bs in bss:
        if fixed_above is not None and bs > fixed_above:
            cfg[str(bs)] = {"candidate_steps": [operator_steps], KEY: dict(
                KNOBS, bs=bs, base_us=round(cost.target_us(bs, 1), 3), off_us=round(step_us(cost, bs, 0, hooked_from), 3),
                round_us={str(operator_steps): round(step_us(cost, bs, operator_steps, hooked_from), 3)})}
            continue
        # per acceptance, the best of the KEPT states (not the kept part of the unrestricted best: on 2026-12-03 the
        # seed's bs-8 slot listed [0, 1] because its unrestricted best at alpha 0.9 was 7, a cut state, though the
        # kept 3 beats 1 there by 29 % in this very model; live on the H200, steps 1 ran 0.61x of plain at c 8
        # where the fixed steps 3 ran 0.92x)
        cands = {best_steps(cost, bs, a, sorted(keep), hooked_from) for a in ALPHAS}
        cands |= {0}  # the floor: the controller drops to it when drafting does not pay
        if operator_steps and bs == bss[0]:
            cands.add(operator_steps)  # SGLang starts every slot at the launch's steps when it is a candidate
        cands = sorted(cands)
        cfg[str(bs)] = {"candidate_steps": cands, KEY: dict(
            KNOBS, bs=bs, base_us=round(cost.target_us(bs, 1), 3), off_us=round(step_us(cost, bs, 0, hooked_from), 3),
            round_us={str(s): round(step_us(cost, bs, s, hooked_from), 3) for s in cands if s})}
    return cfg
