"""The speedup model (pure): expected tokens per round over the cost of a round.

One speculation round of SGLang's EAGLE worker (speculative/eagle_worker_v2.py) at batch size bs,
gamma = --speculative-num-steps, k = --speculative-eagle-topk, N = --speculative-num-draft-tokens:
  draft    gamma draft forwards: gamma - 1 decode steps over bs*k rows + 1 draft extend over the
           gamma + 1 tokens of the last round (it yields step 1's distribution)
  verify   one target forward over N tokens per request, plus tree build / greedy accept kernels
  round_us = target(bs, N) + (gamma - 1) * draft(bs, k) + draft(bs, gamma + 1) + verify(bs, N)

Without speculation a round is one plain decode pass: base_us = target(bs, 1), one token.
  tau(gamma)  = 1 + sum_{i<=gamma} prod_{j<=i} alpha_j        (planner/acceptance.py)
  speedup     = (tau / round_us) / (1 / base_us) = tau * base_us / round_us

Leviathan et al. 2023 as a special case: alpha_i = alpha, target(bs, n) = 1 for every n,
draft(bs, n) = c, verify = 0  =>  round = 1 + gamma*c and
  speedup = (1 - alpha^(gamma+1)) / ((1 - alpha) * (gamma*c + 1)).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..errors import UserError
from .acceptance import expected_tokens, extend_alphas
from .costs import CostModel


@dataclass(slots=True)
class Acceptance:
    """Per-position acceptance: a chain (topk 1) curve usable at any depth, plus measured trees."""
    chain: list[float] | None
    source: str
    trees: dict[tuple[int, int, int], list[float]] = field(default_factory=dict)  # (steps, topk, N) -> alphas

    def alphas(self, steps: int, topk: int, n: int) -> tuple[list[float], bool] | None:
        """(alpha_1..alpha_steps, extrapolated) for a setting, or None when nothing was measured for it."""
        if topk == 1 and self.chain:
            return extend_alphas(self.chain, steps)
        tree = self.trees.get((steps, topk, n))
        return (list(tree), False) if tree else None


@dataclass(slots=True)
class Prediction:
    bs: int
    steps: int  # 0 = no speculation
    topk: int
    draft_tokens: int
    tau: float
    base_us: float  # one plain decode pass
    round_us: float  # one speculation round (= base_us when steps == 0)
    speedup: float
    extrapolated: bool = False  # acceptance past the measured depth was assumed equal to the last measured

    def setting(self) -> str:
        return "no speculation" if self.steps == 0 else f"steps {self.steps} / topk {self.topk} / {self.draft_tokens} draft tokens"

    def as_dict(self) -> dict:
        return asdict(self)


def round_us(cost: CostModel, bs: int, steps: int, topk: int, n: int) -> float:
    """us of one speculation round (see the module docstring)."""
    return (cost.target_us(bs, n) + (steps - 1) * cost.draft_us(bs, topk) + cost.draft_us(bs, steps + 1)
            + cost.verify_us(bs, n))


def predict(alphas: list[float], steps: int, cost: CostModel, bs: int, topk: int = 1, n: int | None = None,
            extrapolated: bool = False) -> Prediction:
    base = cost.target_us(bs, 1)
    if not base > 0 or base != base or base == float("inf"):
        raise UserError(f"costs ({cost.name}) give {base!r} us for a plain decode pass at batch size {bs}; "
                        "expected a finite time > 0 - check the profile or cost table")
    if steps == 0:
        return Prediction(bs, 0, 1, 1, 1.0, base, base, 1.0)
    n = steps + 1 if n is None else n  # topk 1: a chain verifies the steps drafts + the last token
    tau = expected_tokens(alphas[:steps])
    spec = round_us(cost, bs, steps, topk, n)
    if not spec > 0 or spec == float("inf"):
        raise UserError(f"costs ({cost.name}) give {spec!r} us for a speculation round at batch size {bs}, "
                        f"steps {steps}; expected a finite time > 0 - check --draft-cost-ratio, the cost table or "
                        "the profile")
    return Prediction(bs, steps, topk, n, tau, base, spec, tau * base / spec, extrapolated)


def tree_nodes(steps: int, topk: int) -> int:
    """The most draft tokens SGLang verifies for (steps, topk): its draft tree scores topk candidates at step 1
    and topk^2 at each later step, and organize_draft_results keeps N - 1 of them plus the verified token.
    (test/integration/test_sglang_agreement.py checks this against SGLang's own function.)"""
    return topk + (steps - 1) * topk * topk + 1


def settings(steps: list[int], topks: list[int], draft_tokens: list[int] | None) -> list[tuple[int, int, int]]:
    """(steps, topk, N) to try; topk 1 fixes N = steps + 1, a tree needs N in (steps, tree_nodes(steps, topk)]."""
    out = []
    for s in steps:
        for k in topks:
            if k == 1:
                out.append((s, 1, s + 1))
                continue
            for n in draft_tokens or [min(k * s + 1, 2 * s + 2)]:
                if s < n <= tree_nodes(s, k):
                    out.append((s, k, n))
    return out


def search(acc: Acceptance, cost: CostModel, batch_sizes: list[int], space: list[tuple[int, int, int]]):
    """Per batch size: (every Prediction incl. steps 0, best Prediction, settings skipped for want of acceptance)."""
    result, skipped = {}, set()
    for bs in batch_sizes:
        preds = [predict([], 0, cost, bs)]
        for s, k, n in space:
            got = acc.alphas(s, k, n)
            if got is None:
                skipped.add((s, k, n))
                continue
            alphas, extra = got
            preds.append(predict(alphas, s, cost, bs, k, n, extra))
        best = max(preds, key=lambda p: p.speedup)
        result[bs] = (preds, best)
    return result, sorted(skipped)
