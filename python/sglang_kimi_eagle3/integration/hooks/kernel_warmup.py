"""Hook: compile every kernel variant the launch can reach before the scheduler reports ready.

Upstream target: sglang.srt.speculative.base_spec_worker.BaseSpecWorker.init_cuda_graphs
  (base_spec_worker.py:375), AFTER - the same point as runtime_status, queued before it, so it runs
  first and the status table the scheduler publishes already carries this row. Scheduler
  .init_all_cuda_graphs (scheduler.py:1122) calls it once the target's graphs are captured; EAGLEWorkerV2
  .init_cuda_graphs (eagle_worker_v2.py:1387) reaches it through super(), after the draft decode and
  draft-extend graphs are captured. Nothing is served before it returns.
Why: on the H200 (2026-12-01, tiny pair) the first pass at each new concurrency ran 10x slower than the
  second, in both kernel modes: kernels compiled on the serving path. Ours: every verify kernel runs
  eagerly after the captured forward, at the unpadded batch, and Triton specializes on it (see
  ops/warmup.py). SGLang's: the tree-sampling verify and the tree kernels are JIT CUDA modules
  (sglang.kernels.ops.speculative.sampling / .tree, nvcc through tvm-ffi) built at their first call -
  the sampling one at the first request with temperature > 0, which SGLang's own server warm-up
  (one greedy request) never sends.
How: read the launch's shapes from the worker (batch bound, N, topk, steps, target and draft vocab, this
  rank's draft lm_head shard and its output form), `ops.warmup.plan` the variants the kernel switch gives
  to our kernels at those shapes (only for kernel hooks installed here), launch each once on dummy inputs
  on this scheduler's GPU, then call SGLang's two JIT-module kernels once on a valid one-request tree
  (the unwrapped originals: no hook counts them) and FlashInfer's sampling module (the top-k / top-p
  renorm of a batch that mixes greedy and sampled requests: an 84-s nvcc build on first use), and compile
  every variant of SGLang's per-decode-step Triton kernel `assign_req_to_token_pool` (token_pool_variants:
  batch bound x free-list alignment). Each scheduler does it on its own GPU (TP ranks compile in their own
  processes; the Triton disk cache makes a restart cheap). The row says how long it took and how many
  variants; `failed` never stops the launch (serving then compiles on first use).
  SGLang's model forward outside its CUDA graphs (batches above --cuda-graph-max-bs-decode, every
  prefill when prefill graphs are off) also compiles per new shape (Triton attention, fused MoE): that
  is SGLang's, not warmed here; the row names the eager range and the flag that closes it.
  SGLANG_KIMI_EAGLE3_WARMUP=off skips the warm-up (to measure cold starts).
Remove when: SGLang warms its speculative kernels itself at every batch size it can serve.
"""

from __future__ import annotations

import math
import time

from ...base import ENV_WARMUP, env_choice, logger
from ...status import hookstatus

NAME = "kernel_warmup"
TARGET = "sglang.srt.speculative.base_spec_worker.BaseSpecWorker.init_cuda_graphs"
BUDGET_FRACTION = 0.25  # of the free GPU memory, for the dummy inputs of one op
_LAST: dict = {}  # the last warm-up of this process (tests, the log line)


def install() -> None:
    """Queue the AFTER hook directly with HookRegistry: this row is ours to set to applied/skipped/failed
    once the hook has run (registry.refresh would turn a `failed` warm-up back into `applied`)."""
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    if hookstatus.get(NAME) is None or hookstatus.get(NAME).state != "registered":
        HookRegistry.register(TARGET, _after_cuda_graphs, HookType.AFTER)
    hookstatus.record(NAME, TARGET, "registered",
                      "runs in each scheduler after the draft CUDA graphs are captured, before it reports ready")


def switch() -> str:
    """on | off (base.CHOICES; a garbage value refuses the launch in the launch step)."""
    return env_choice(ENV_WARMUP)


# ---- the launch's shapes, from SGLang's worker -------------------------------------------------------


def _lm_head(draft_runner):
    """(weight, LogitsProcessor) of the draft model, or (None, None)."""
    model = getattr(draft_runner, "model", None)
    head = getattr(model, "lm_head", None)
    return getattr(head, "weight", None), getattr(model, "logits_processor", None)


def _lm_head_form(proc, weight) -> str:
    """What the draft_lm_head hook asks lm_head_gemv for with this processor (draft_head_kernels.ours())."""
    from .draft_head_kernels import _cast_follows

    if getattr(proc, "use_fp32_lm_head_output", False):
        return "fp32"
    return "fp32_rounded" if _cast_follows(proc, weight.shape[0]) else "16bit"


def _plain_lm_head(draft_runner, proc, weight) -> bool:
    """The draft_lm_head hook's own fast-path test (draft_head_kernels._plain_weight) holds for this head."""
    import torch

    from .draft_head_kernels import _plain_weight

    head = getattr(getattr(draft_runner, "model", None), "lm_head", None)
    if weight is None or proc is None or weight.ndim != 2:
        return False
    probe = torch.zeros((1, weight.shape[1]), dtype=weight.dtype, device=weight.device)
    return _plain_weight(proc, probe, head, None) is not None


def launch_shapes(worker):
    """(LaunchShapes, weight, device, notes) from an EAGLEWorkerV2 (attribute names of sglang 0.5.23)."""
    import torch

    from ...ops.warmup import LaunchShapes

    draft = getattr(worker, "_draft_worker", None)
    target = getattr(worker, "_target_worker", None)
    runner = getattr(target, "model_runner", None)
    max_bs = int(getattr(runner, "max_running_requests", 0) or 0) or int(runner.req_to_token_pool.size)
    weight, proc = _lm_head(getattr(draft, "draft_runner", None)) if draft is not None else (None, None)
    plain = draft is not None and _plain_lm_head(draft.draft_runner, proc, weight)
    device = weight.device if weight is not None else torch.device(worker.device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    shapes = LaunchShapes(
        max_bs=max_bs, topk=int(worker.topk), num_steps=int(worker.speculative_num_steps),
        num_draft_tokens=int(worker.speculative_num_draft_tokens), target_vocab=int(runner.model_config.vocab_size),
        draft_vocab=int(getattr(proc, "vocab_size", 0) or 0) if draft is not None else 0,
        lm_head_rows=int(weight.shape[0]) if plain else 0, hidden=int(weight.shape[1]) if plain else 0,
        lm_head_form=_lm_head_form(proc, weight) if plain else "fp32_rounded",
        chain_column=getattr(draft, "hot_token_id", None) is None and device.type == "cuda",
        dtype=str(weight.dtype).replace("torch.", "") if plain else "bfloat16")
    notes = []
    graph_max = min((m for r, n in ((draft, "cuda_graph_runner"), (runner, "decode_cuda_graph_runner"))
                     if (m := int(getattr(getattr(r, n, None), "max_bs", 0) or 0))), default=0)
    if graph_max and graph_max < max_bs:
        notes.append(f"batches of {graph_max + 1}..{max_bs} run outside CUDA graphs, where SGLang's model kernels "
                     f"compile at each new size: --cuda-graph-max-bs-decode {max_bs} captures them")
    return shapes, (weight if plain else None), device, notes


def adaptive_steps(worker) -> list[int]:
    """The candidate steps of an adaptive launch (SGLang 0.5.23's EAGLEWorkerV2.adaptive_controller, built in its
    __init__; its runtime states are built after this hook runs): [] without adaptive speculation."""
    ctrl = getattr(worker, "adaptive_controller", None)
    if ctrl is None:
        return []
    try:
        return sorted({int(k) for k in ctrl.candidate_steps})
    except Exception:  # a controller of another shape: warm the launch's own state only
        return []


def _installed_hooks() -> set[str]:
    """Kernel hooks in effect here (refreshed against the live attributes: one SGLang failed to apply is left out)."""
    from ..registry import refresh

    refresh()
    return {r.name for r in hookstatus.rows() if r.state in ("registered", "applied")}


# ---- SGLang's own first-use builds --------------------------------------------------------------------


def _original(fn):
    """The function under our hooks (HookRegistry wrappers set __wrapped__), so warm-up calls are not counted."""
    seen = 0
    while hasattr(fn, "__wrapped__") and seen < 32:
        fn, seen = fn.__wrapped__, seen + 1
    return fn


def _verify_tree(torch, shapes, device):
    """A one-request tree of this launch's shape and fresh outputs for SGLang's verify kernels."""
    from ...ops.warmup import _trees

    n, depth = shapes.num_draft_tokens, shapes.num_steps + 1
    ridx, nxt, sib = _trees(torch, 1, shapes, device)
    outs = (torch.zeros(n, dtype=torch.int32, device=device), torch.full((1, depth), -1, dtype=torch.int32, device=device),
            torch.empty(1, dtype=torch.int32, device=device))
    return outs, torch.zeros((1, n), dtype=torch.int64, device=device), ridx, nxt, sib


def warm_sglang_tree(shapes, device) -> str | None:
    """SGLang's tree JIT CUDA module (greedy verify, tree build), built by one call; None off CUDA."""
    import torch

    if device.type != "cuda":
        return None
    from sglang.kernels.ops.speculative import tree

    outs, cand, ridx, nxt, sib = _verify_tree(torch, shapes, device)
    _original(tree.verify_tree_greedy)(*outs, cand, ridx, nxt, sib, torch.zeros_like(cand))
    torch.cuda.synchronize(device)
    return "tree (greedy verify, tree build)"


def warm_sglang_sampling(shapes, device) -> str | None:
    """SGLang's tree-sampling JIT CUDA module (one per vector width: gcd(4, vocab)), built by one call; None off CUDA."""
    import torch

    if device.type != "cuda":
        return None
    from sglang.kernels.ops.speculative import sampling

    n, v = shapes.num_draft_tokens, shapes.target_vocab
    outs, cand, ridx, nxt, sib = _verify_tree(torch, shapes, device)
    probs = torch.full((1, n, v), 1.0 / v, dtype=torch.float32, device=device)
    _original(sampling.tree_speculative_sampling_target_only)(
        *outs, cand, ridx, nxt, sib, torch.full((1, n), 0.5, device=device), torch.full((1,), 0.5, device=device),
        probs, torch.zeros_like(probs), 1.0, 1.0, True)
    torch.cuda.synchronize(device)
    return f"tree sampling (vec {math.gcd(4, v)})"


def warm_sglang(shapes, device) -> list[str]:
    """SGLang's JIT CUDA modules on the verify path, built by one call each on a one-request tree."""
    return [b for b in (warm_sglang_tree(shapes, device), warm_sglang_sampling(shapes, device)) if b is not None]


def warm_flashinfer_sampling(shapes, device) -> str | None:
    """FlashInfer's sampling JIT module (one nvcc build: every sampling kernel of it), built by one call each of the
    top-k and top-p renorm SGLang's verify calls for a batch that mixes greedy and sampled requests (sglang 0.5.23
    speculative/eagle_utils.py: a greedy request's top_k 1 sets `need_top_k_sampling`; the renorms come from
    flashinfer.sampling on CUDA). Returns what was built, None where SGLang has no such kernel here. On the H200
    (2026-12-02) its first use in the traffic warm-up's closed loop held the scheduler 84.7 s, with a flashinfer
    wheel that ships no prebuilt module: served traffic would have stalled there."""
    import torch

    if device.type != "cuda":
        return None
    from sglang.kernels.ops.sampling import renorm

    if renorm.top_k_renorm_prob is None or renorm.top_p_renorm_prob is None:
        return None
    v = max(2, int(shapes.target_vocab))
    probs = torch.full((2, v), 1.0 / v, dtype=torch.float32, device=device)
    renorm.top_k_renorm_prob(probs, torch.tensor([1, v], dtype=torch.int32, device=device))
    renorm.top_p_renorm_prob(probs, torch.tensor([0.5, 1.0], dtype=torch.float32, device=device))
    torch.cuda.synchronize(device)
    return "FlashInfer sampling (top-k / top-p renorm)"


def token_pool_variants(max_bs: int) -> list[tuple[int, bool]]:
    """(bs_upper, out_cache_loc 16-byte aligned) of every variant of SGLang's `assign_req_to_token_pool` Triton kernel a
    speculative decode batch of 1..max_bs can launch. sglang 0.5.23's alloc_for_spec_decode
    (mem_cache/allocation.py) launches it at every decode step with `bs_upper` = the batch size's next power of two
    (a constexpr) and `out_cache_loc` a slice of the token allocator's free list, which starts at an odd int64
    element after an odd-sized allocation: Triton then finds it not divisible by 16, another variant. On the H200
    (2026-12-02) 13 of these 14 compiled during the traffic warm-up and the 14th (16, unaligned) in the first pass at
    c 16, 0.08 s of it."""
    from sglang.srt.mem_cache.allocation import next_power_of_2  # the one SGLang's launch computes bs_upper with

    ups = sorted({next_power_of_2(b) for b in range(1, max(1, max_bs) + 1)})
    return [(u, aligned) for u in ups for aligned in (True, False)]


def token_pool_args(torch, req_to_token, bs_upper: int, aligned: bool, device):
    """Arguments of one `assign_req_to_token_pool` variant, dtypes as SGLang passes them (req_pool_indices int64, the
    kv lengths int32, out_cache_loc int64, the pool's own req_to_token: its row length is the `pool_len` constexpr)."""
    loc = torch.zeros(bs_upper + 1, dtype=torch.int64, device=device)
    lens = torch.zeros(bs_upper, dtype=torch.int32, device=device)
    return (torch.zeros(bs_upper, dtype=torch.int64, device=device), req_to_token, lens, torch.zeros_like(lens),
            loc[:-1] if aligned else loc[1:], int(req_to_token.shape[1]), bs_upper)


def warm_token_pool(req_to_token, max_bs: int, device) -> int:
    """Compile (Triton's `warmup`: nothing launched, nothing written) every token_pool_variants entry; returns how
    many. Only on CUDA."""
    import torch

    if device.type != "cuda" or req_to_token is None:
        return 0
    from sglang.srt.mem_cache.allocation import assign_req_to_token_pool

    done = 0
    for bs_upper, aligned in token_pool_variants(max_bs):
        assign_req_to_token_pool.warmup(*token_pool_args(torch, req_to_token, bs_upper, aligned, device), grid=(1,))
        done += 1
    return done


# ---- the hook ---------------------------------------------------------------------------------------


def warm(worker) -> dict:
    """Plan and run the warm-up for one scheduler; returns what happened (also kept in _LAST)."""
    import torch

    from ...ops import arch, tables, warmup as W

    t0 = time.perf_counter()
    shapes, weight, device, notes = launch_shapes(worker)
    mode = arch.kernels_mode()
    table = tables.launch_table(device)
    hooks = _installed_hooks()
    steps = adaptive_steps(worker)
    if getattr(worker, "adaptive_controller", None) is not None and not steps:
        notes.append("adaptive speculation: its candidate steps were not readable, only the launch's state is warmed "
                     "(the others compile at first use)")
    states = W.plan_states(shapes, steps, mode, table, hooks)
    variants = [v for _st, vs in states for v in vs]
    idle = [op for op, (hook, _t) in W.OPS.items() if hook in hooks and not any(v.op == op for v in variants)]
    if mode == "auto" and idle:  # e.g. a 4000-row draft lm_head padded to 4032 rows at TP 1: no table key matches
        notes.append(f"auto: the launch table gives {', '.join(idle)} no shape of this launch (SGLang's kernels there)")
    budget = None
    if device.type == "cuda":
        budget = int(torch.cuda.mem_get_info(device)[0] * BUDGET_FRACTION)
    # the launch's own state first (always run: on CUDA its count of compiles is read even with nothing to launch)
    res = W.run(states[0][1], states[0][0], device, weight=weight, budget_bytes=budget)
    for st, vs in states[1:]:
        if vs and not res.error:
            res.add(W.run(vs, st, device, weight=weight, budget_bytes=budget))
    sglang, sglang_error = [], ""
    t_sglang = time.perf_counter()
    if not res.error:
        try:
            sglang = warm_sglang(shapes, device)
        except Exception as exc:
            sglang_error = f"SGLang's JIT modules: {type(exc).__name__}: {exc}"[:300]
        # SGLang's first mixed greedy / sampled batch, and its per-decode-step Triton kernel: a failure of either is a
        # note in the row's detail, not a failed warm-up
        try:
            if (built := warm_flashinfer_sampling(shapes, device)) is not None:
                sglang.append(built)
        except Exception as exc:
            notes.append(f"FlashInfer's sampling module not built ({type(exc).__name__}: {exc}): the first batch "
                         "that mixes greedy and sampled requests builds it"[:300])
        try:
            pool = getattr(getattr(getattr(worker, "_target_worker", None), "model_runner", None), "req_to_token_pool",
                           None)
            n = warm_token_pool(getattr(pool, "req_to_token", None), shapes.max_bs, device)
            if n:
                sglang.append(f"assign_req_to_token_pool ({n} variants)")
        except Exception as exc:
            notes.append(f"SGLang's assign_req_to_token_pool not warmed ({type(exc).__name__}: {exc})"[:300])
    sglang_seconds = time.perf_counter() - t_sglang
    if device.type == "cuda":
        torch.cuda.empty_cache()
    out = {"seconds": time.perf_counter() - t0, "sglang_seconds": sglang_seconds, "mode": mode,
           "shapes": {k: getattr(shapes, k) for k in shapes.__slots__},
           # the adaptive states' other N (draft tokens) and how many variants of ours each added
           "states": [[st.num_draft_tokens, len(vs)] for st, vs in states[1:]],
           "variants": len(variants), "ours": res.as_dict(), "sglang": sglang, "error": res.error or sglang_error,
           "notes": notes}
    _LAST.clear()
    _LAST.update(out)
    return out


def describe(out: dict) -> str:
    s, r = out["shapes"], out["ours"]
    ops = ", ".join(f"{op} {n}" for op, n in r["by_op"].items()) or "none (the kernel switch gives our kernels no shape here)"
    comp = f"{r['compiled']} compiled" if r["compiled"] is not None else "interpreted"
    more = ", ".join(f"{k} more at N {n}" for n, k in out.get("states", []))
    n_text = f"N {s['num_draft_tokens']}" + (f" (adaptive states: {more})" if more else "")
    text = (f"warmed in {out['seconds']:.1f} s: {r['launches']} variants of ours ({comp}; {ops}) for batches 1..{s['max_bs']}, "
            f"{n_text}, topk {s['topk']}, vocab {s['target_vocab']}, draft vocab {s['draft_vocab']}, "
            f"lm_head rows {s['lm_head_rows']}; SGLang's JIT modules"
            + (f" ({out['sglang_seconds']:.1f} s of it)" if out["sglang"] and "sglang_seconds" in out else "")
            + f": {', '.join(out['sglang']) or 'none (not CUDA)'}")
    if r["guarded"]:
        text += f"; {r['guarded']} refused by a guard (SGLang's kernel takes those)"
    if r["skipped_memory"]:
        text += f"; {r['skipped_memory']} not warmed (dummy inputs over {BUDGET_FRACTION:.0%} of free memory)"
    return "; ".join([text] + out["notes"])


def _after_cuda_graphs(result, worker=None, *args, **kwargs):
    try:
        from ..launch_record import our_launch

        if our_launch() is not True:
            hookstatus.record(NAME, TARGET, "skipped", "not an EAGLE/EAGLE3 launch with a draft model: nothing warmed")
            return result
        if switch() == "off":
            hookstatus.record(NAME, TARGET, "skipped", f"{ENV_WARMUP}=off: kernels compile at first use")
            return result
        if not all(hasattr(worker, a) for a in ("_draft_worker", "_target_worker", "topk")):
            hookstatus.record(NAME, TARGET, "skipped", f"{type(worker).__name__} is not SGLang's EAGLE v2 worker "
                              "(e.g. --enable-multi-layer-eagle): nothing warmed")
            return result
        if worker._draft_worker is None:
            hookstatus.record(NAME, TARGET, "skipped", "this rank runs no draft (a pipeline stage without it)")
            return result
        out = warm(worker)
        state = "failed" if out["error"] else "applied"
        detail = describe(out) + (f"; stopped: {out['error']}" if out["error"] else "")
        hookstatus.record(NAME, TARGET, state, detail)
        logger().info("kernel warm-up (%s): %s", state, detail)
    except Exception as exc:  # never break serving from a warm-up
        hookstatus.record(NAME, TARGET, "failed", f"{type(exc).__name__}: {exc}"[:300])
    return result
