"""Acceptance math for chain speculation (pure): per-position acceptance -> expected tokens per pass.

Notation (one request, one speculation round, chain drafts = topk 1):
  gamma     number of drafted tokens per round (SGLang `--speculative-num-steps`)
  alpha_i   P(draft token i is accepted | tokens 1..i-1 were accepted), i = 1..gamma
            ("per-position acceptance"; conditional, so a rejection ends the round)
  tau       expected tokens emitted per target pass = accepted drafts + 1 bonus token
            = 1 + sum_{i=1..gamma} prod_{j<=i} alpha_j

i.i.d. case (Leviathan et al. 2023, arXiv 2211.17192, eq. 1): alpha_i = alpha for all i gives
  tau = 1 + alpha + ... + alpha^gamma = (1 - alpha^(gamma+1)) / (1 - alpha).

SGLang 0.5.23 reports per request `spec_correct_drafts_histogram`: h[k] = number of verify passes
that accepted exactly k drafts, bonus excluded (managers/schedule_batch.py,
`update_spec_correct_drafts_histogram`). From it:
  P(>= i accepted)      = sum_{k>=i} h[k] / sum_k h[k]
  alpha_i               = sum_{k>=i} h[k] / sum_{k>=i-1} h[k]
For a tree (topk > 1) the same quantities describe the accepted path: alpha_i is then "some
candidate at depth i matched", which the planner keys by (topk, draft tokens).
"""

from __future__ import annotations

import math


def expected_tokens(alphas: list[float]) -> float:
    """tau = 1 + sum_i prod_{j<=i} alpha_j  (tokens per target pass, bonus included)."""
    tau, reach = 1.0, 1.0
    for a in alphas:
        reach *= a  # P(drafts 1..i all accepted)
        tau += reach
    return tau


def iid_expected_tokens(alpha: float, gamma: int) -> float:
    """Leviathan et al.'s closed form (1 - alpha^(gamma+1)) / (1 - alpha); gamma + 1 at alpha = 1."""
    if alpha >= 1.0:
        return float(gamma + 1)
    return (1.0 - alpha ** (gamma + 1)) / (1.0 - alpha)


def alpha_from_tau(tau: float, gamma: int) -> float:
    """The i.i.d. alpha whose closed form gives `tau` at `gamma` drafts (bisection; tau in [1, gamma+1])."""
    if not 1.0 <= tau <= gamma + 1:
        raise ValueError(f"tau {tau} is outside [1, {gamma + 1}] for {gamma} drafted tokens")
    lo, hi = 0.0, 1.0
    for _ in range(60):  # tau(alpha) is increasing in alpha; 60 halvings reach float precision
        mid = (lo + hi) / 2
        if iid_expected_tokens(mid, gamma) < tau:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def alphas_from_histogram(hist: list[int], steps: int) -> list[float | None]:
    """Per-position conditional acceptance alpha_1..alpha_steps from a correct-drafts histogram.

    hist[k] = passes that accepted exactly k drafts (k may stop short of `steps`: SGLang grows the
    list only as far as the largest k seen). alpha_i is None when no pass reached position i.
    """
    h = list(hist) + [0] * max(0, steps + 1 - len(hist))
    tail = [0] * (len(h) + 1)  # tail[i] = sum_{k>=i} h[k]
    for k in range(len(h) - 1, -1, -1):
        tail[k] = tail[k + 1] + h[k]
    return [tail[i] / tail[i - 1] if tail[i - 1] else None for i in range(1, steps + 1)]


def reach_from_histogram(hist: list[int], steps: int) -> list[float | None]:
    """P(at least i drafts accepted), i = 1..steps (the unconditional curve)."""
    total = sum(hist)
    if not total:
        return [None] * steps
    return [sum(hist[i:]) / total for i in range(1, steps + 1)]


def extend_alphas(alphas: list[float], gamma: int) -> tuple[list[float], bool]:
    """alpha_1..alpha_gamma; positions beyond the measured ones repeat the last measured value.

    Returns (alphas, extrapolated). Repeating the last value is an assumption: EAGLE drafters'
    acceptance usually keeps falling with depth, so predictions past the measured depth are optimistic.
    """
    if not alphas:
        raise ValueError("no per-position acceptance given")
    if any(a is None or not 0.0 <= a <= 1.0 or math.isnan(a) for a in alphas):
        raise ValueError(f"per-position acceptance must be numbers in [0, 1], got {alphas}")
    if gamma <= len(alphas):
        return list(alphas[:gamma]), False
    return list(alphas) + [alphas[-1]] * (gamma - len(alphas)), True
