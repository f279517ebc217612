"""Turn per-batch-size predictions into SGLang's `--speculative-adaptive-config` JSON (pure).

Format read by sglang/srt/speculative/adaptive_spec_params.py (`_load_adaptive_config`, 0.5.23):
  {"<bs>": {"candidate_steps": [non-negative ints], ...optional hysteresis keys}, ...}
  - keys that are not digit strings are ignored (we use one, "_generated_by", for provenance);
  - a running batch is padded to a CUDA-graph size, then routed to the largest key <= it;
  - within a slot SGLang moves between candidate steps on an EMA of accepted drafts
    (up when EMA > steps - 0.5, down when EMA <= lower - 0.5 + down_hysteresis); 0 = no speculation;
  - adaptive mode is topk 1 only and sets num_draft_tokens = steps + 1.
So the planner's job per slot is to restrict the candidates to the steps worth running there:
every topk-1 setting predicted within `tolerance` of the best one, and 0 when not speculating is
itself that close (or when no setting beats 1.0).
"""

from __future__ import annotations

import json
from pathlib import Path

from ..atomic import write_atomic
from ..errors import UserError
from .model import Prediction


def candidate_steps(preds: list[Prediction], tolerance: float) -> list[int]:
    """Never empty: SGLang refuses a slot without candidates. tolerance in (0, 1] (checked by the CLI)."""
    chain = [p for p in preds if p.topk == 1]  # adaptive mode is topk 1 only; includes steps 0
    best = max(p.speedup for p in chain)
    if not best > 1.0:  # also NaN
        return [0]
    top = max(chain, key=lambda p: p.speedup).steps
    keep = {p.steps for p in chain if p.speedup >= tolerance * best and (p.steps == 0 or p.speedup > 1.0)}
    return sorted(keep | {top})


def adaptive_config(plan: dict[int, tuple[list[Prediction], Prediction]], tolerance: float, provenance: dict) -> dict:
    cfg: dict = {"_generated_by": provenance}
    for bs in sorted(plan):
        cfg[str(bs)] = {"candidate_steps": candidate_steps(plan[bs][0], tolerance)}
    return cfg


def recommend(plan: dict[int, tuple[list[Prediction], Prediction]], tolerance: float,
              measured_steps: int | None = None) -> dict:
    """What to launch: {"kind": "none"} when no topk-1 setting beats plain decoding at any batch size;
    {"kind": "fixed", "steps": s, "draft_tokens": s + 1, "worst_vs_best": r} when one chain setting is predicted
    within `tolerance` of the best topk-1 setting at EVERY batch size (and above 1.0 everywhere): an adaptive
    file then buys less than SGLang's adaptive mode costs each round (on the H200, 2026-12-01, the tiny pair's
    adaptive server ran 0.87x of the fixed one at concurrency 16, at the same steps and acceptance);
    {"kind": "adaptive"} otherwise (the best steps differ by batch size, or drafting loses somewhere).
    measured_steps: the chain the costs were measured on (`plan --bench`: the speculative server's steps). When it is
    within tolerance everywhere it is the one recommended ("measured": True), not a chain the model only predicts to
    be as good: on the H200 (2026-12-01) the tiny pair's predicted-equal 2/1/3 ran 0.60-0.93x of the measured 3/1/4."""
    chains = {bs: [p for p in preds if p.topk == 1] for bs, (preds, _) in plan.items()}
    if not any(chains.values()) or all(not max(p.speedup for p in c) > 1.0 for c in chains.values() if c):
        tree = fixed_tree(plan, tolerance)  # no chain gains anywhere; a tree may (`plan --bench` of a tree server)
        return tree or {"kind": "none"}
    ok = fixed_chains(plan, tolerance)
    if ok:
        if measured_steps in ok:  # a measured setting over a predicted one the model cannot tell apart from it
            return {"kind": "fixed", "steps": measured_steps, "draft_tokens": measured_steps + 1,
                    "worst_vs_best": ok[measured_steps], "measured": True}
        s = max(ok, key=lambda s: (ok[s], -s))  # the closest to the best everywhere; the shorter draft on a tie
        return {"kind": "fixed", "steps": s, "draft_tokens": s + 1, "worst_vs_best": ok[s], "measured": False}
    return {"kind": "adaptive"}


def fixed_tree(plan: dict[int, tuple[list[Prediction], Prediction]], tolerance: float) -> dict | None:
    """Where no chain beats plain decoding: the tree setting (topk > 1) above 1.0 at every planned batch size and
    within `tolerance` of the best tree there, the closest to the best everywhere ({"kind": "tree", ...}); None when
    none is (adaptive steps are chain-only, so a tree that wins at some batch sizes only has no setting to name)."""
    trees = {bs: {(p.steps, p.topk, p.draft_tokens): p for p in preds if p.topk > 1} for bs, (preds, _) in plan.items()}
    if not trees or not all(trees.values()):
        return None
    best = {bs: max(p.speedup for p in t.values()) for bs, t in trees.items()}
    common = set.intersection(*(set(t) for t in trees.values()))
    ok = {k: min(trees[bs][k].speedup / best[bs] for bs in trees) for k in sorted(common)
          if all(trees[bs][k].speedup > 1.0 and trees[bs][k].speedup >= tolerance * best[bs] for bs in trees)}
    if not ok:
        return None
    s, k, n = max(ok, key=lambda key: (ok[key], -key[2]))
    return {"kind": "tree", "steps": s, "topk": k, "draft_tokens": n, "worst_vs_best": ok[(s, k, n)]}


def fixed_chains(plan: dict[int, tuple[list[Prediction], Prediction]], tolerance: float) -> dict[int, float]:
    """steps s >= 1 -> the worst, over the planned batch sizes, of s's predicted speedup over the best topk-1
    setting there; only the chains above 1.0 and within `tolerance` of that best at every batch size."""
    chains = {bs: {p.steps: p for p in preds if p.topk == 1} for bs, (preds, _) in plan.items()}
    if not chains or not all(chains.values()):
        return {}
    best = {bs: max(p.speedup for p in c.values()) for bs, c in chains.items()}
    common = set.intersection(*(set(c) for c in chains.values())) - {0}
    return {s: min(chains[bs][s].speedup / best[bs] for bs in chains) for s in sorted(common)
            if all(chains[bs][s].speedup > 1.0 and chains[bs][s].speedup >= tolerance * best[bs] for bs in chains)}


def tree_flags(steps: int, topk: int, draft_tokens: int) -> str:
    return (f"--speculative-algorithm EAGLE3 --speculative-num-steps {steps} --speculative-eagle-topk {topk} "
            f"--speculative-num-draft-tokens {draft_tokens}")


def fixed_flags(steps: int) -> str:
    return (f"--speculative-algorithm EAGLE3 --speculative-num-steps {steps} --speculative-eagle-topk 1 "
            f"--speculative-num-draft-tokens {steps + 1}")


def recommended_flags(rec: dict, cfg: dict, path: str) -> str:
    """The launch flags of the recommendation: a fixed chain, or for an adaptive one the chain this plugin serves
    adaptively by default (`steps` set: commands/plan.py; the file's flags are then `file_flags`), else the adaptive
    file's flags or the no-speculation line."""
    if rec.get("kind") == "tree":
        return tree_flags(rec["steps"], rec["topk"], rec["draft_tokens"])
    if rec.get("kind") == "fixed" or (rec.get("kind") == "adaptive" and rec.get("steps")):
        return fixed_flags(rec["steps"])
    return launch_flags(cfg, path)


def start_steps(cfg: dict) -> int:
    """The steps a launch of `cfg` starts at (one of the candidates' union): the small-batch slot's longest draft
    (SGLang's default: the union's middle); 0 when no slot drafts."""
    union = sorted({s for k, v in cfg.items() if k.isdigit() for s in v["candidate_steps"]})
    first = cfg[min((k for k in cfg if k.isdigit()), key=int)]["candidate_steps"]
    return max(first) or max(union)


def launch_flags(cfg: dict, path: str) -> str:
    """The launch_server flags that load `cfg`; the start value must be one of the candidates' union."""
    union = sorted({s for k, v in cfg.items() if k.isdigit() for s in v["candidate_steps"]})
    start = start_steps(cfg)
    if start == 0:
        return f"(no batch size gains from speculation: launch without --speculative-algorithm; union {union})"
    return (f"--speculative-algorithm EAGLE3 --speculative-eagle-topk 1 --speculative-adaptive "
            f"--speculative-adaptive-config {path} --speculative-num-steps {start}")


def check(cfg: dict) -> None:
    """The rules of SGLang 0.5.23's `_load_adaptive_config`: at least one digit-string key, each with a
    non-empty list of non-negative int candidate_steps. A violation here is a bug of ours (AssertionError)."""
    slots = {k: v for k, v in cfg.items() if k.isdigit()}
    assert slots, f"adaptive config without a batch-size slot: {list(cfg)}"
    for k, v in slots.items():
        steps = v.get("candidate_steps") if isinstance(v, dict) else None
        assert isinstance(steps, list) and steps and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0
                                                         for s in steps), f"slot {k}: candidate_steps {steps!r}"


def render(cfg: dict) -> str:
    lines = [f"  {json.dumps(k)}: {json.dumps(v, allow_nan=False)}" for k, v in cfg.items()]  # one slot a line
    return "{\n" + ",\n".join(lines) + "\n}\n"


def write(cfg: dict, path: str, sglang_check=None) -> str:
    """Checked, then written atomically. `sglang_check(tmp_path)` (SGLang's own loader, from integration/)
    runs on the temp file before it replaces `path`; it returns None or the reason SGLang refuses it."""
    check(cfg)

    def sglang_agrees(tmp):
        why = sglang_check(tmp) if sglang_check is not None else None
        assert why is None, f"SGLang's _load_adaptive_config refuses the planned config: {why}"

    p = Path(path)
    try:
        write_atomic(p, render(cfg), check=sglang_agrees)
    except OSError as exc:
        raise UserError(f"-o {path}: could not be written ({exc.strerror or exc}); nothing was replaced") from None
    return str(p)
