"""Step costs as functions of batch size and tokens per request (pure).

A `CostModel` is three functions of (bs, n) -> microseconds, n = tokens per request in the pass:
  target_us(bs, n)  one target forward (n = 1: plain decode; n = draft tokens: a verify pass)
  draft_us(bs, n)   one draft forward  (n = topk: a draft decode step; n = steps + 1: the draft extend)
  verify_us(bs, n)  tree build + accept/reject kernels of one verify
They come from a hardware profile (`from_profile`), a measured table or kernel-benchmark rows
(`from_table`), a bench run (`from_bench`), or Leviathan et al.'s constant ratio (`leviathan`).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from typing import Callable

from ..errors import UserError
from ..validate import check_float, check_int, show
from .profiles import Hardware, PassModel, Profile

Fn = Callable[[int, int], float]


@dataclass(slots=True)
class CostModel:
    name: str
    target_us: Fn
    draft_us: Fn
    verify_us: Fn
    notes: list[str] = field(default_factory=list)
    measured_bs: tuple[float, float] | None = None  # measured batch-size range; outside it costs are held, not extended
    how_to_measure: str = ""  # what to run to measure more batch sizes


def clamped_note(cost: CostModel, batch_sizes: list[int]) -> str | None:
    """A line naming the batch sizes outside the measured range (their costs are the nearest measured)."""
    if cost.measured_bs is None:
        return None
    lo, hi = cost.measured_bs
    out = [b for b in batch_sizes if not lo <= b <= hi]
    if not out:
        return None
    return (f"batch sizes {','.join(map(str, out))} lie outside the measured {lo:g}-{hi:g}: their costs are held at "
            f"the nearest measured batch size, not extrapolated (predictions there are rough); "
            f"{cost.how_to_measure}".rstrip("; "))


def pass_us(m: PassModel, hw: Hardware, bs: int, n: int, ctx: int) -> float:
    """One forward pass of `bs` requests x `n` tokens each, every request holding `ctx` context tokens.

    t = pass overhead + layers x per-layer launch floor + max(memory, compute) + all-reduces + tail
      memory  = weights touched + KV read; routed experts touched by T = bs*n tokens, with uniform
                independent routing (assumption): E_hit = E * (1 - (1 - k/E)^T)
      compute = T * (GEMM FLOPs + ctx * attention FLOPs)
      comm    = allreduces * (latency + T * bytes_per_token / bandwidth)
    Memory and compute overlap (max); launch floors, communication and the tail do not (sum).
    """
    t = bs * n  # tokens in this pass
    e_hit = m.experts * (1.0 - (1.0 - m.experts_per_token / m.experts) ** t) if m.experts else 0.0
    nbytes = m.static_bytes_per_gpu + m.moe_layers * e_hit * m.expert_bytes_per_gpu + bs * ctx * m.kv_bytes_per_ctx_token
    mem_us = nbytes / (hw.mem_GBps * 1e3 * hw.mem_efficiency)  # GB/s = 1e3 bytes/us
    flop_us = t * (m.gemm_flops_per_token + ctx * m.attn_flops_per_ctx_token) / (hw.bf16_tflops * 1e6 * hw.compute_efficiency)
    comm_us = m.allreduces * (hw.allreduce_latency_us + t * m.allreduce_bytes_per_token / (hw.allreduce_GBps * 1e3))
    return m.pass_overhead_us + m.layers * hw.layer_overhead_us + max(mem_us, flop_us) + comm_us + m.tail_us


def interp(points: dict[float, float], x: float, clamp: bool = False) -> float:
    """Piecewise-linear through `points`; past either end a straight-line extension (never below 0), or with
    `clamp` the end value (measured data is never extended past what was measured)."""
    xs = sorted(points)
    if len(xs) == 1:
        return points[xs[0]]
    if clamp:
        x = min(max(x, xs[0]), xs[-1])
    i = min(max(bisect.bisect_left(xs, x), 1), len(xs) - 1)
    x0, x1 = xs[i - 1], xs[i]
    y0, y1 = points[x0], points[x1]
    return max(0.0, y0 + (y1 - y0) * (x - x0) / (x1 - x0))


def from_profile(p: Profile, ctx: int | None = None) -> CostModel:
    c = p.context_tokens if ctx is None else ctx
    return CostModel(
        f"profile {p.name} (context {c} tokens)",
        lambda bs, n: pass_us(p.target, p.hardware, bs, n, c),
        lambda bs, n: pass_us(p.draft, p.hardware, bs, n, c),
        lambda bs, n: interp(p.verify_us, bs * n),
        [f"{len(p.assumptions())} of the profile's numbers are assumptions (plan --explain lists them)"],
    )


def leviathan(c: float) -> CostModel:
    """Leviathan et al.'s model: a target pass costs 1 whatever n, a draft pass costs c, verify is free."""
    if not isinstance(c, (int, float)) or not math.isfinite(c) or c < 0:
        raise UserError(f"--draft-cost-ratio {c!r}: expected a finite number >= 0 (draft pass / target pass)")
    return CostModel(f"Leviathan constant ratio c = {c}", lambda bs, n: 1.0, lambda bs, n: c, lambda bs, n: 0.0)


def _key(k, source: str, where: str) -> float:
    try:
        v = float(k)
    except (TypeError, ValueError):
        v = float("nan")
    if not math.isfinite(v) or v < 1:
        raise UserError(f"{source}: field {where!r} has key {k!r}; expected a batch size / token count >= 1")
    return v


def _grid_fn(table, what: str, source: str) -> Fn:
    """{bs: {n: us}} or {bs: us} -> f(bs, n), piecewise-linear in n then in bs. Every key and value checked."""
    if not isinstance(table, dict) or not table:
        raise UserError(f"{source}: field {what!r} = {show(table)}; expected a non-empty object {{bs: {{n: us}} | us}}")
    rows = {}
    for bs, v in table.items():
        b = _key(bs, source, what)
        if isinstance(v, dict):
            if not v:
                raise UserError(f"{source}: field '{what}.{bs}' is empty; expected {{n: us}}")
            rows[b] = {_key(n, source, f"{what}.{bs}"): check_float(us, source, f"{what}.{bs}.{n}", lo=0)
                       for n, us in v.items()}
        else:
            rows[b] = {1.0: check_float(v, source, f"{what}.{bs}", lo=0)}
    return lambda bs, n: interp({b: interp(r, n) for b, r in rows.items()}, bs, clamp=True)


def from_table(doc: dict, source: str) -> CostModel:
    """Measured costs. Either {"target_us": {bs: {n: us}}, "draft_us": {bs: {n: us} | us}, "verify_us": ...}
    or a kernel-benchmark file (benchmark/kernels/harness.py) whose rows have op in
    {"target_pass", "draft_pass", "verify"}, shape {"bs": .., "n": ..} and "us"."""
    if not isinstance(doc, dict):
        raise UserError(f"{source}: expected a JSON object, found {show(doc)}")
    if "rows" in doc:
        tables: dict[str, dict] = {"target_us": {}, "draft_us": {}, "verify_us": {}}
        key = {"target_pass": "target_us", "draft_pass": "draft_us", "verify": "verify_us"}
        rows = doc["rows"]
        if not isinstance(rows, list):
            raise UserError(f"{source}: field 'rows' = {show(rows)}; expected a list of benchmark rows")
        for i, r in enumerate(rows):
            if not isinstance(r, dict):
                raise UserError(f"{source}: field 'rows[{i}]' = {show(r)}; expected an object")
            if r.get("op") in key and r.get("us") is not None:
                shape = r.get("shape", {})
                if not isinstance(shape, dict):
                    raise UserError(f"{source}: field 'rows[{i}].shape' = {show(shape)}; expected an object")
                bs = check_int(shape.get("bs", 1), source, f"rows[{i}].shape.bs", lo=1)
                n = check_int(shape.get("n", 1), source, f"rows[{i}].shape.n", lo=1)
                tables[key[r["op"]]].setdefault(bs, {})[n] = check_float(r["us"], source, f"rows[{i}].us", lo=0)
        doc = {k: v for k, v in tables.items() if v}
    if "target_us" not in doc or "draft_us" not in doc:
        raise UserError(f"{source}: a cost table needs 'target_us' and 'draft_us' (or harness rows with op target_pass/draft_pass)")
    verify = _grid_fn(doc["verify_us"], "verify_us", source) if doc.get("verify_us") else (lambda bs, n: 0.0)
    notes = [] if doc.get("verify_us") else ["no verify_us in the table: verify kernels counted as free"]
    target = _grid_fn(doc["target_us"], "target_us", source)
    if not all(target(b, 1) > 0 for b in (1, 8, 64)):
        raise UserError(f"{source}: 'target_us' gives 0 us for a plain decode pass; expected measured times > 0")
    bss = [_key(b, source, "target_us") for b in doc["target_us"]]
    return CostModel(f"measured table {source}", target, _grid_fn(doc["draft_us"], "draft_us", source), verify, notes,
                     (min(bss), max(bss)), "add rows for them to the cost table")


def from_bench(levels: list[dict], steps: int, source: str) -> CostModel:
    """Costs calibrated on a bench run with a baseline (the same model without speculation).

    Per concurrency c (taken as the batch size: all c requests in flight together):
      t1(c)  = 1e6 / baseline tok/s per request         (us per plain decode pass)
      it(c)  = 1e6 * tau(c) / spec tok/s per request    (us per speculation round at `steps`)
    Lumped model (assumption: the speculative overhead grows linearly with drafted tokens):
      target_us(bs, n) = t1(bs) + (it(bs) - t1(bs)) * (n - 1) / steps,   draft_us = verify_us = 0
    so a round at gamma drafts costs t1 + (it - t1) * gamma / steps and reproduces the measurement at
    gamma = steps. Per-request rates include time to first token; long prompts bias both alike.
    """
    t1, extra = {}, {}
    for lv in levels:
        b, s = lv.get("baseline"), lv.get("spec")
        if not b or not s or not b.get("tok_s_per_req_mean") or not s.get("tok_s_per_req_mean") or not s.get("tau"):
            continue
        c = float(lv["concurrency"])
        t1[c] = 1e6 / b["tok_s_per_req_mean"]
        extra[c] = 1e6 * s["tau"] / s["tok_s_per_req_mean"] - t1[c]
    if not t1:
        raise UserError(f"{source}: no concurrency level has both a speculative and a baseline measurement "
                        "(run `sglang-kimi-eagle3 bench --baseline-url ...`, or give --profile/--costs for costs)")
    cs = sorted(int(c) for c in t1)
    more = ",".join(str(c) for c in sorted(set(cs) | {1, 2, 4, 8, 16, 32, 64, 128}))
    return CostModel(f"calibrated on bench {source} (lumped overhead, measured at steps {steps})",
                     lambda bs, n: interp(t1, bs, clamp=True) + interp(extra, bs, clamp=True) * (n - 1) / steps,
                     lambda bs, n: 0.0, lambda bs, n: 0.0,
                     [f"measured at concurrency {cs}; batch sizes between them interpolated linearly"],
                     (min(t1), max(t1)), f"measure them: sglang-kimi-eagle3 bench --concurrency {more} "
                     "--baseline-url ... (then plan --bench again)")
