"""Per-concurrency summaries of RequestResults (pure).

What enters which number:
  throughput  ok requests only (errors are counted, never averaged in)
  tau, acceptance, histogram   ok requests that carried spec fields only; ok requests without them
              are counted as `no_spec` (speculation off, or finished before any verify)
  tau         pooled: sum(completion tokens) / sum(verify passes) over those requests -- the same
              ratio SGLang's spec_accept_length computes per request; `tau_mean_req` is the plain mean
  alpha_i     per-position conditional acceptance from the pooled histogram (planner/acceptance.py)
  streaming   (--stream) p50/p90/p99 and mean of TTFT and end-to-end latency over ok requests, and of ITL
              over every token gap of every ok request (client.py says how each is timed)
Percentiles are nearest-rank: the sorted values' entry round(q x (n - 1)).
"""

from __future__ import annotations

import statistics

from ..planner.acceptance import alphas_from_histogram, reach_from_histogram

MAX_DEPTH = 1024  # draft positions reported at most (a server claiming more is not believed)


def _pct(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def percentiles(xs: list[float]) -> dict:
    """{"p50", "p90", "p99", "mean", "n"} of `xs` (None values when empty)."""
    return {"p50": _pct(xs, 0.5), "p90": _pct(xs, 0.9), "p99": _pct(xs, 0.99),
            "mean": statistics.fmean(xs) if xs else None, "n": len(xs)}


def streaming(ok: list) -> dict | None:
    """The latency block of streamed ok requests; None when none was streamed (a run without --stream)."""
    streamed = [r for r in ok if r.ttft_s is not None]
    if not streamed:
        return None
    return {"requests": len(streamed), "ttft_s": percentiles([r.ttft_s for r in streamed]),
            "itl_s": percentiles([g for r in streamed for g in (r.itl_s or [])]),
            "e2e_s": percentiles([r.latency_s for r in streamed])}


def pooled_histogram(hists: list[list[int]]) -> list[int]:
    out: list[int] = []
    for h in hists:
        out += [0] * (len(h) - len(out))
        for k, v in enumerate(h):
            out[k] += v
    return out


def reject_impossible_histograms(results: list, max_drafts: int | None) -> int:
    """A verify accepts at most `max_drafts` drafts (the server's steps): histogram counts past that index
    are not data (they would inflate every alpha). Such answers become bad_field errors; returns how many."""
    if not max_drafts:
        return 0
    n = 0
    for r in results:
        h = (r.spec or {}).get("histogram") if r.ok else None
        if h and any(h[max_drafts + 1:]):
            r.ok, r.error = False, "bad_field"
            r.detail = (f"spec_correct_drafts_histogram has {len(h)} entries with counts past index {max_drafts}: "
                        f"more drafts accepted than the server drafts per verify ({max_drafts})")
            r.completion_tokens = r.prompt_tokens = r.spec = None
            n += 1
    return n


def summarize(results: list, wall_s: float, depth: int | None = None) -> dict:
    """`depth`: draft positions to report (--speculative-num-steps; default: drafts per verify, right for topk 1)."""
    ok = [r for r in results if r.ok]
    errors: dict[str, int] = {}
    for r in results:
        if not r.ok:
            errors[r.error] = errors.get(r.error, 0) + 1
    spec = [r for r in ok if r.spec]
    per_req = [r.completion_tokens / r.latency_s for r in ok if r.latency_s > 0 and r.completion_tokens]
    tokens = sum(r.completion_tokens or 0 for r in ok)
    s: dict = {
        "requests": len(results), "ok": len(ok), "errors": errors, "no_spec": len(ok) - len(spec),
        "first_error": next((f"{r.error}: {r.detail}" for r in results if not r.ok), None),
        "wall_s": wall_s, "tokens": tokens,
        "agg_tok_s": tokens / wall_s if wall_s > 0 and ok else None,
        "tok_s_per_req_mean": statistics.fmean(per_req) if per_req else None,
        "tok_s_per_req_median": statistics.median(per_req) if per_req else None,
        "latency_p50_s": _pct([r.latency_s for r in ok], 0.5), "latency_p90_s": _pct([r.latency_s for r in ok], 0.9),
        "latency_p99_s": _pct([r.latency_s for r in ok], 0.99), "streaming": streaming(ok),
        "prompt_tokens_mean": statistics.fmean(pt) if (pt := [r.prompt_tokens for r in ok if r.prompt_tokens]) else None,
        "tau": None, "tau_mean_req": None, "accept_rate": None, "drafts_per_verify": None, "histogram": [], "alpha": [], "reach": [],
    }
    if not spec:
        return s
    verify = sum(r.spec["verify_ct"] for r in spec)
    s["tau"] = sum(r.completion_tokens for r in spec) / verify
    lengths = [r.spec["accept_length"] for r in spec if r.spec["accept_length"] is not None]
    s["tau_mean_req"] = statistics.fmean(lengths) if lengths else None
    proposed = sum(r.spec["num_proposed"] or 0 for r in spec)
    s["accept_rate"] = sum(r.spec["num_correct"] or 0 for r in spec) / proposed if proposed else None
    s["drafts_per_verify"] = round(proposed / verify) if proposed else None  # = draft tokens - 1 (= steps at topk 1)
    hist = pooled_histogram([r.spec["histogram"] for r in spec if r.spec.get("histogram")])
    s["histogram"] = hist
    depth = min(depth or s["drafts_per_verify"] or max(len(hist) - 1, 0), MAX_DEPTH)
    s["alpha"] = alphas_from_histogram(hist, depth) if hist else []
    s["reach"] = reach_from_histogram(hist, depth) if hist else []
    return s


LATENCY_KEYS = ("ttft_s", "itl_s", "e2e_s")


def latency_ratio(spec: dict, base: dict) -> dict | None:
    """Spec over baseline streamed latency at one concurrency, per percentile (below 1: speculation is faster):
    {"ttft_s": {"p50": ..., "p90": ..., "p99": ...}, "itl_s": ..., "e2e_s": ...}; None unless both streamed."""
    a, b = (spec or {}).get("streaming"), (base or {}).get("streaming")
    if not a or not b:
        return None
    out = {}
    for k in LATENCY_KEYS:
        out[k] = {q: (a[k][q] / b[k][q] if a[k].get(q) is not None and b[k].get(q) else None) for q in ("p50", "p90", "p99")}
    return out


def speedup(spec: dict, base: dict) -> dict | None:
    """Spec over baseline at one concurrency: aggregate tok/s ratio and mean per-request tok/s ratio."""
    if not spec or not base or not spec.get("agg_tok_s") or not base.get("agg_tok_s"):
        return None
    out = {"aggregate": spec["agg_tok_s"] / base["agg_tok_s"], "per_request": None}
    if spec.get("tok_s_per_req_mean") and base.get("tok_s_per_req_mean"):
        out["per_request"] = spec["tok_s_per_req_mean"] / base["tok_s_per_req_mean"]
    return out
