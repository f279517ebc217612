"""Step times per concurrency, measured from outside the servers (pure): what `plan --bench` needs for costs.

Per level `lv["step_costs"]` (its own key; the summaries are unchanged):
  plain_step_us    sum(latency) / sum(completion tokens) over the baseline's ok requests: the time one plain
                   decode pass takes with c requests in flight (one token per request per pass)
  spec_round_us    sum(latency) / sum(spec_verify_ct) over the speculative server's ok requests that carried
                   spec fields: one draft + verify round with c requests in flight
  steps, verify_tokens   the speculative setting those rounds ran (steps drafts, steps + 1 tokens verified)
  tau              completion tokens per round of the same requests
  plain_requests, spec_requests   how many answers each number pools
Both times include each request's share of prefill and queueing (a non-streaming request has no first-token
time): short prompts and a closed loop keep that small, and it biases both servers alike.
What cannot be seen from outside: how a round splits into draft steps and the verify pass. `plan --bench`
estimates it (planner/measured.py) and prints how.
"""

from __future__ import annotations

import math
from typing import Iterable


def _num(v, integer: bool = False) -> bool:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        return False
    return isinstance(v, int) if integer else True


def _rows(rows: Iterable) -> list[dict]:
    """Request rows with a usable latency and token count (rows read back from a file may be anything)."""
    out = []
    for r in rows if isinstance(rows, (list, tuple)) else []:
        r = r.as_dict() if hasattr(r, "as_dict") else r
        if not isinstance(r, dict):
            continue
        spec = r.get("spec")
        if spec is not None and not (isinstance(spec, dict) and _num(spec.get("verify_ct"), True)):
            continue
        if r.get("ok") is True and _num(r.get("latency_s")) and _num(r.get("completion_tokens"), True):
            out.append(r)
    return out


def _plain(rows) -> list[dict]:
    """Answers of the plain server: tokens, no spec fields (a speculating 'baseline' gives no plain time)."""
    return [r for r in _rows(rows) if r["completion_tokens"] > 0 and not r.get("spec")]


def _per_token_us(rows: list[dict]) -> float:
    return 1e6 * sum(r["latency_s"] for r in rows) / sum(r["completion_tokens"] for r in rows)


def level_costs(spec_rows: Iterable, plain_rows: Iterable, steps: int | None, verify_tokens: int | None = None,
                adaptive: bool = False) -> dict | None:
    """`spec_rows` / `plain_rows`: RequestResults or their dicts (the JSON's `requests` rows) of one level;
    `steps` / `verify_tokens`: the speculative server's --speculative-num-steps / --speculative-num-draft-tokens
    (None when unknown; both None under --speculative-adaptive, where the steps vary)."""
    spec = [r for r in _rows(spec_rows) if r.get("spec") and r["spec"]["verify_ct"]]
    plain = _plain(plain_rows)
    out: dict = {"plain_step_us": None, "spec_round_us": None, "steps": None if adaptive else steps,
                 "verify_tokens": None if adaptive or not steps else verify_tokens or steps + 1, "tau": None,
                 "plain_requests": len(plain), "spec_requests": len(spec),
                 "prefill": "included (non-streaming latency)"}
    if plain:
        out["plain_step_us"] = _per_token_us(plain)
    if spec:
        rounds = sum(r["spec"]["verify_ct"] for r in spec)
        out["spec_round_us"] = 1e6 * sum(r["latency_s"] for r in spec) / rounds
        out["tau"] = sum(r["completion_tokens"] or 0 for r in spec) / rounds
    if out["plain_step_us"] is None and out["spec_round_us"] is None:
        return None
    return out


def merge_plain(lv: dict, plain_rows) -> None:
    """`--baseline-json`: the plain step time of this level from the earlier run's request rows."""
    if lv.get("step_costs") is None:
        return
    plain = _plain(plain_rows)
    lv["step_costs"]["plain_requests"] = len(plain)
    lv["step_costs"]["plain_step_us"] = _per_token_us(plain) if plain else None
