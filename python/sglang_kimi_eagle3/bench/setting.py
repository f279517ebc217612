"""The speculative setting a run trusts: what /server_info says, checked against what the answers show (pure).

`/server_info` says steps / topk / draft tokens / algorithm; every answer says how many drafts it proposed per
verify (spec_num_proposed_drafts / spec_verify_ct = draft tokens - 1; at topk 1 also = steps). Where the two
disagree the answers win: they are what was measured. The result goes into the bench JSON as `setting`
({"steps", "topk", "draft_tokens", "adaptive", "source": "server_info" | "answers", "notes": [...]}), it fixes
how many positions the acceptance per position covers (never one the server did not draft), and
`plan --bench` reads the setting from it.
"""

from __future__ import annotations

SPEC_ALGORITHMS = ("EAGLE", "EAGLE3")


def drafts_per_verify(results: list) -> int | None:
    """Pooled drafts proposed per verify over the ok answers carrying spec fields; None without any."""
    spec = [r for r in results if r.ok and r.spec and r.spec.get("verify_ct")]
    verify = sum(r.spec["verify_ct"] for r in spec)
    proposed = sum(r.spec.get("num_proposed") or 0 for r in spec)
    return round(proposed / verify) if verify and proposed else None


def reconcile(info: dict, results: list) -> dict:
    """The setting to trust for a run whose spec server said `info` and answered `results` (one level)."""
    info = info if isinstance(info, dict) else {}
    adaptive = bool(info.get("speculative_adaptive"))
    steps, topk = info.get("speculative_num_steps"), info.get("speculative_eagle_topk") or 1
    tokens = info.get("speculative_num_draft_tokens") or (steps + 1 if steps else None)
    algo = info.get("speculative_algorithm")
    out = {"steps": steps, "topk": topk, "draft_tokens": tokens, "adaptive": adaptive, "source": "server_info",
           "notes": []}
    carried = sum(1 for r in results if r.ok and r.spec)
    ok = sum(1 for r in results if r.ok)
    if "error" not in info and str(algo or "").upper() not in SPEC_ALGORITHMS and carried:
        out["notes"].append(f"/server_info says speculative_algorithm {algo!r}, but {carried} of {ok} answers carry "
                            "spec fields: trusting the answers (the server speculates)")
        out["source"] = "answers"
    if str(algo or "").upper() in SPEC_ALGORITHMS and ok and not carried:
        out["notes"].append(f"/server_info says speculative_algorithm {algo}, but none of {ok} answers carries spec "
                            "fields: no acceptance is measured (speculation off, or the server does not report it)")
    dpv = drafts_per_verify(results)
    if adaptive or dpv is None or (tokens is not None and tokens - 1 == dpv):
        return out
    if tokens is None:  # /server_info said nothing about speculation (unreachable, or not SGLang): the answers tell
        out.update(steps=dpv if topk == 1 else steps, draft_tokens=dpv + 1, source="answers")
        return out
    said = f"steps {steps} / topk {topk} / {tokens} draft tokens ({tokens - 1} drafts a verify)"
    if topk == 1:
        out["steps"] = dpv  # a chain drafts one token per step
    elif steps is not None and dpv < steps:
        out["steps"] = dpv  # a tree verifies at least one token per step
    out["draft_tokens"] = dpv + 1
    out["source"] = "answers"
    out["notes"].append(f"/server_info says {said}, but its answers show {dpv} drafts a verify: trusting the answers "
                        f"(steps {out['steps']} / topk {topk} / {dpv + 1} draft tokens); acceptance is reported for "
                        f"{out['steps']} positions")
    return out
