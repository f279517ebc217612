"""Costs from the step times `bench` measured against a plain and a speculative server (pure).

Per concurrency c (taken as the batch size: a closed loop keeps all c requests in flight), a bench level's
`step_costs` (bench/step_costs.py) holds
  t1(c)  the plain server's decode step: sum(latency) / sum(tokens)                       MEASURED
  R(c)   the speculative server's round at `steps` drafts / N verify tokens: sum(latency) / sum(verify passes)
                                                                                          MEASURED
Not measurable from outside: how R splits into draft steps and the verify pass. Estimated as
  est(bs, n)    = t1 at bs*n requests   (a verify pass of bs x n tokens costs a plain step of bs*n tokens:
                                          the same tokens through the weights; t1 extended linearly past the
                                          largest measured c where bs*n lies beyond it)
  verify(bs, n) = est(bs, n) x f(bs),   f(c) = min(1, R(c) / est(c, N)): where the measured round is cheaper
                                          than that estimate (a tree's N tokens share one request's KV reads),
                                          the estimate is scaled down to the round, never above what was measured
  draft(bs)     = (R(bs) - verify(bs, N)) / steps   per draft step (every per-round overhead of speculation
                                          -- draft extend, tree build, accept, scheduling -- lumped into it)
so a round at gamma drafts costs verify(bs, gamma + 1) + gamma x draft(bs), which is R(bs) at the measured
setting and every measured c: the plan at the measured point is the measurement. Batch sizes outside the
measured concurrencies take every cost (plain step, verify, draft step) of the nearest measured one: held,
not extrapolated.
"""

from __future__ import annotations

from ..errors import UserError
from ..validate import check_float, check_int
from .costs import CostModel, interp


def _levels(doc: dict, where: str) -> dict[int, dict]:
    """concurrency -> step_costs of the levels that measured both sides (each number checked)."""
    out = {}
    for i, lv in enumerate(doc.get("levels") or []):
        sc = lv.get("step_costs")
        if sc is None:
            continue
        key = f"levels[{i}].step_costs"
        if not isinstance(sc, dict):
            raise UserError(f"{where}: field {key!r} = {str(sc)[:60]}; expected an object or null")
        t1, r = sc.get("plain_step_us"), sc.get("spec_round_us")
        if t1 is None or r is None:
            continue
        got = {"t1": check_float(t1, where, f"{key}.plain_step_us", lo=0, lo_open=True),
               "R": check_float(r, where, f"{key}.spec_round_us", lo=0, lo_open=True),
               "steps": None if sc.get("steps") is None else check_int(sc["steps"], where, f"{key}.steps", lo=1, hi=1024),
               "n": None if sc.get("verify_tokens") is None else check_int(sc["verify_tokens"], where,
                                                                           f"{key}.verify_tokens", lo=2, hi=1 << 20)}
        out[int(lv["concurrency"])] = got
    return out


def usable(doc: dict, where: str) -> bool:
    """Whether `doc` has step times of both servers at a fixed speculative setting (else: the lumped model)."""
    lv = _levels(doc, where)
    return bool(lv) and all(v["steps"] for v in lv.values())


def from_bench_steps(doc: dict, steps: int, n: int, where: str) -> CostModel:
    lv = _levels(doc, where)
    if not lv:
        raise UserError(f"{where}: no level has step_costs with both plain_step_us and spec_round_us (bench with "
                        "--baseline-url or --baseline-json)")
    bad = sorted(c for c, v in lv.items() if v["steps"] != steps or (v["n"] or steps + 1) != n)
    if bad:
        raise UserError(f"{where}: step_costs at concurrency {','.join(map(str, bad))} ran another setting than the "
                        f"server's steps {steps} / {n} verify tokens; the file mixes runs: bench the server again")
    t1 = {float(c): v["t1"] for c, v in lv.items()}
    big = {float(c): v["R"] for c, v in lv.items()}
    lo, hi = min(t1), max(t1)

    def est(bs: float, tokens: int) -> float:
        b = min(max(bs, lo), hi)  # held past the measured concurrencies, as every other cost
        return max(interp(t1, b, clamp=True), interp(t1, b * tokens))

    scale = {c: min(1.0, big[c] / est(c, n)) for c in t1}

    def verify(bs: float, tokens: int) -> float:
        return est(bs, tokens) * interp(scale, bs, clamp=True)

    draft = {c: max(0.0, (big[c] - verify(c, n)) / steps) for c in t1}
    cs = sorted(int(c) for c in t1)
    fmt = lambda d: ", ".join(f"{int(c)}: {v:,.0f}" for c, v in sorted(d.items()))  # noqa: E731
    notes = [
        f"MEASURED from outside (bench), concurrency taken as batch size: plain decode step µs {{{fmt(t1)}}}; "
        f"speculative round at steps {steps} / {n} verify tokens µs {{{fmt(big)}}} (prefill and queueing included "
        "in both: non-streaming latency)",
        f"NOT MEASURABLE from outside: a round's split into draft steps and the verify pass. ESTIMATED: verify of "
        f"bs x n tokens = the plain step at bs*n requests (the plain step extended linearly past c {max(cs)} for "
        f"bs*n beyond it); draft step = (round - verify) / {steps} µs {{{fmt(draft)}}}, every per-round overhead "
        "lumped into the draft steps (one fixed setting cannot separate per-round from per-step costs)",
        f"measured at concurrency {cs}; batch sizes between them interpolated linearly; at steps {steps} / {n} verify "
        "tokens and a measured concurrency the round is the measured one (the plan there is the measurement, up to "
        "the run's noise)",
    ]
    low = sorted(int(c) for c, f in scale.items() if f < 1.0)
    if low:
        notes.append(f"at concurrency {','.join(map(str, low))} the measured round was cheaper than a plain step of "
                     f"bs x {n} tokens: the verify estimate is scaled down to the measured round there (x "
                     f"{', '.join(f'{scale[float(c)]:.2f}' for c in low)}; draft step taken as 0), so other settings are "
                     "predicted from the measured round, not from the plain step")
    more = ",".join(str(c) for c in sorted(set(cs) | {1, 2, 4, 8, 16, 32, 64, 128}))
    return CostModel(f"measured step times in {where} (plain + steps {steps} server)",
                     lambda bs, k: interp(t1, bs, clamp=True) if k <= 1 else verify(bs, k),
                     lambda bs, k: interp(draft, bs, clamp=True), lambda bs, k: 0.0, notes,
                     (min(t1), max(t1)), f"measure them: sglang-kimi-eagle3 bench --concurrency {more} "
                     "--baseline-url ... (then plan --bench again)")
