"""Hooks: our Triton draft-head kernels (ops/lm_head_gemv, ops/draft_topk) at SGLang's own boundaries.

Switch: SGLANG_KIMI_EAGLE3_KERNELS = auto (default: ours only for the (GPU, shape) entries whose
launch table lists a win; no hook is installed when the table in effect on this process's GPU lists
none, the same table the per-call lookup reads) | ours | upstream (no hook is installed).
Every hook falls back to the upstream function for anything outside its fast path (its own pre-checks,
or the op guard raising ops.arch.Unsupported - the only exception caught; anything else propagates),
so contracts (argument checks, dtypes, side effects) stay SGLang's. Every call is counted
(dispatch.call, the one per-call choice): ours, or SGLang's with the reason. Launches other than
EAGLE/EAGLE3 pass through. All are CUDA-graph safe: no host sync, output shapes depend on input shapes
only, the kernels' reduction counters live in one buffer per stream.
Upstream issue/PR: none filed yet (the kernels would be an upstream PR to sglang/kernels/ops/speculative).

1. draft_lm_head — sglang.srt.layers.logits_processor.LogitsProcessor._compute_lm_head (0.5.23
   logits_processor.py:1144), AROUND.
   Why: the draft lm_head GEMM (bs 1..128 rows against a [R, 7168] bf16 shard) runs at ~2x the
   weight-read floor under cuBLAS on the H200 (the SGLang 0.5.23 baseline, 2026-11-29).
   How: only for EAGLE-3 draft LogitsProcessors (their config carries `draft_vocab_size` / an
   *Eagle3 architecture; the target's processor is the same class and always goes upstream), plain
   16-bit weights, no LoRA / quantisation / bias / fp32-lm-head / AMX: `lm_head_gemv`. When nothing
   sits between this call and the fp32 cast in `_get_logits` (no TP or DP gather, logit scale,
   softcap, vocab padding) it writes the fp32 logits (bf16-rounded, the values SGLang's cast
   produces) straight into the logits buffer, saving the cast kernel.
   Remove when: SGLang's draft lm_head reaches the bandwidth floor by itself.
2. draft_topk1 — sglang.kernels.ops.speculative.topk1.draft_topk1_postprocess (topk1.py:74), AROUND.
   HookRegistry propagates it into eagle_worker_v2 (and the module's own draft_topk1_argmax_only).
   Covers the multi-step draft decode (draft_forward, eagle_worker_v2.py:869) only: the draft-extend
   top-1 after verify is a plain torch.argmax on CUDA (eagle_worker_v2.py:1262), not hooked.
   Why: two launches (split argmax + finalize) per draft step. How: `draft_topk1`, one launch, the
   same outputs and side effects (positions += 1, optional draft-token column, topk_p = 1.0).
   Remove when: upstream fuses the two launches.
3. draft_probs + draft_worker_topk — sglang.srt.speculative.spec_utils.renorm_draft_probs (AROUND,
   pass-through) and the name `fast_topk` inside sglang.srt.speculative.eagle_worker_v2 only.
   Fires for topk > 1 in draft_forward and draft-extend-for-decode, and at ANY topk (1 included) in the
   prefill draft-extend (eagle_worker_v2.py:1072-1085 calls renorm_draft_probs + fast_topk unconditionally).
   Why: for topk > 1 the worker runs softmax then torch.topk, whose radix select costs ~30 us per draft
   step at Kimi shapes. How: `fast_topk` is a shared utility (MoE routing uses it, and HookRegistry
   would propagate a hook into every module holding it), so it is NOT hooked globally: the first
   draft `renorm_draft_probs` call rebinds the worker module's own `fast_topk` name to ours, which
   takes only the probabilities that renorm_draft_probs just returned (identity check) and hands
   everything else to SGLang's. The d2t remap stays SGLang's gather after the call (its contract
   returns draft ids; ops.lm_head_topk folds it in where a caller owns the whole tail).
   Remove when: upstream gives the worker a fused softmax + top-k. This project's series does
   (upstream/03-draft-softmax-topk): where the running SGLang's worker takes its top-k through that
   dispatch (upstream_has.draft_topk), draft_probs and draft_worker_topk are not installed (`skipped`,
   `upstream has it: ...`); draft_lm_head and draft_topk1 are not what it replaces and stay.
"""

from __future__ import annotations

import sys
import weakref

from ...ops import tables
from ...ops.arch import ENV_KERNELS, kernels_mode
from ...status import hookstatus
from .. import registry, upstream_has
from ..dispatch import KERNEL_OPS, call
from . import runtime_status

LM_HEAD = ("draft_lm_head", "sglang.srt.layers.logits_processor.LogitsProcessor._compute_lm_head")
TOPK1 = ("draft_topk1", "sglang.kernels.ops.speculative.topk1.draft_topk1_postprocess")
PROBS = ("draft_probs", "sglang.srt.speculative.spec_utils.renorm_draft_probs")
WORKER_TOPK = ("draft_worker_topk", "sglang.srt.speculative.eagle_worker_v2.fast_topk")
WORKER_MODULE = "sglang.srt.speculative.eagle_worker_v2"
HOOKS = (LM_HEAD, TOPK1, PROBS, WORKER_TOPK)
SITES = {
    LM_HEAD[0]: ["sglang.srt.layers.logits_processor:LogitsProcessor._compute_lm_head"],
    TOPK1[0]: ["sglang.kernels.ops.speculative.topk1:draft_topk1_postprocess",
               "sglang.srt.speculative.eagle_worker_v2:draft_topk1_postprocess"],
    PROBS[0]: ["sglang.srt.speculative.spec_utils:renorm_draft_probs",
               "sglang.srt.speculative.eagle_worker_v2:renorm_draft_probs"],
    WORKER_TOPK[0]: ["sglang.srt.speculative.eagle_worker_v2:fast_topk"],
}


def install() -> None:
    for name, sites in SITES.items():
        runtime_status.watch(name, sites, ours=_fast_topk if name == WORKER_TOPK[0] else None)
    runtime_status.on_publish(_bind_if_registered)
    mode = kernels_mode()
    why = ""  # why every hook not replaced upstream is skipped ("": install them)
    if mode == "upstream":
        why = f"{ENV_KERNELS}=upstream"
    elif mode == "auto" and not ops_with_wins():
        why = (f"the launch table in effect here lists no draft-head win "
               f"({tables.load_table(*tables.current_device())['origin']}); {ENV_KERNELS}=ours forces ours")
    fns = {LM_HEAD[0]: _compute_lm_head, TOPK1[0]: _draft_topk1_postprocess, PROBS[0]: _renorm_draft_probs}
    for name, target in HOOKS:
        # where it would be installed: does SGLang's worker already take its own draft top-k (upstream_has.py)?
        why_not = why or upstream_has.detail(name)
        if why_not:
            hookstatus.record(name, target, "skipped", why_not)
        elif name in fns:
            registry.register(name, target, fns[name], "around")
        else:  # WORKER_TOPK: bound lazily, in the worker module only
            hookstatus.record(name, target, "registered", "bound at the first draft renorm_draft_probs call (worker module only)")


def ops_with_wins(device: tuple | None = None) -> list[str]:
    """The draft-head ops whose launch table in effect on `device` ((name, cc); default: this process's
    GPU, as the per-call lookup reads it) lists at least one win; auto installs the hooks if any."""
    return tables.ops_with_wins((KERNEL_OPS[name] for name, _ in HOOKS if name in KERNEL_OPS), device)


# ---- 1. draft lm_head -----------------------------------------------------------------------------


def is_draft_processor(proc) -> bool:
    """True for an EAGLE-3 draft model's LogitsProcessor (cached on the instance)."""
    flag = proc.__dict__.get("_kimi_eagle3_draft")
    if flag is None:
        cfg = getattr(proc, "config", None)
        archs = getattr(cfg, "architectures", None) or []
        flag = getattr(cfg, "draft_vocab_size", None) is not None or any("Eagle3" in a for a in archs)
        proc.__dict__["_kimi_eagle3_draft"] = flag
    return flag


def _plain_weight(proc, hidden, lm_head, embedding_bias):
    """lm_head.weight when the upstream call would be a plain `hidden @ weight.T`, else None."""
    import torch
    from sglang.srt.layers.logits_processor import should_apply_lm_head_quant_method

    w = getattr(lm_head, "weight", None)
    if (embedding_bias is not None or w is None or hasattr(lm_head, "set_lora")
            or should_apply_lm_head_quant_method(lm_head, getattr(lm_head, "quant_method", None))
            or proc.use_fp32_lm_head or getattr(proc, "rl_on_policy_target", None) is not None
            or getattr(lm_head, "use_intel_amx_backend", False)):
        return None
    if (hidden.ndim != 2 or w.ndim != 2 or hidden.dtype != w.dtype
            or hidden.dtype not in (torch.bfloat16, torch.float16) or hidden.stride(1) != 1 or w.stride(1) != 1
            or hidden.shape[1] != w.shape[1]):
        return None
    return w


def _cast_follows(proc, rows: int) -> bool:
    """Nothing between _compute_lm_head and _get_logits' fp32 cast would see a different dtype."""
    return (not proc.do_tensor_parallel_all_gather and not proc.do_tensor_parallel_all_gather_dp_attn
            and proc.logit_scale is None and not proc.final_logit_softcapping and rows == proc.vocab_size)


def _compute_lm_head(original, self, hidden_states, lm_head, embedding_bias=None, *, out=None):
    """[sglang-kimi-eagle3] Draft lm_head through ops.lm_head_gemv (the target goes upstream, uncounted)."""
    if not is_draft_processor(self):
        return original(self, hidden_states, lm_head, embedding_bias, out=out)
    w = _plain_weight(self, hidden_states, lm_head, embedding_bias)
    from ...ops import lm_head_gemv as op

    bs = hidden_states.shape[0]
    bucket = op.shape_key(bs, w.shape[0], w.shape[1]) if w is not None else f"bs{op.bs_bucket(bs)}"
    why = "not a plain 16-bit lm_head (LoRA, quantised, bias, fp32 head or layout)" if w is None else ""
    import torch

    def ours():
        rows = w.shape[0]
        fits = out is not None and tuple(out.shape) == (bs, rows) and out.dtype == torch.float32 and out.stride(1) == 1
        if self.use_fp32_lm_head_output:  # upstream: torch.mm(..., out_dtype=float32, out=out)
            return op.lm_head_gemv(hidden_states, w, out=out if fits else None, out_dtype=torch.float32)
        if _cast_follows(self, rows) and (out is None or fits):
            # fp32 holding the bf16-rounded logits: exactly what _copy_logits_to_buffer would produce
            return op.lm_head_gemv(hidden_states, w, out=out, out_dtype=torch.float32, round_to=w.dtype)
        return op.lm_head_gemv(hidden_states, w)

    return call(LM_HEAD[0], bucket, hidden_states.device, why, ours,
                lambda: original(self, hidden_states, lm_head, embedding_bias, out=out))


# ---- 2. top-1 --------------------------------------------------------------------------------------


def _draft_topk1_postprocess(original, next_token_logits, positions, draft_tokens=None, draft_token_column=0):
    """[sglang-kimi-eagle3] SGLang's draft top-1 in one launch (ops.draft_topk.draft_topk1)."""
    import torch

    from ...ops import draft_topk as op

    x = next_token_logits
    bucket = op.shape_key(x.shape[0], x.shape[-1], 1)
    ok = (x.ndim == 2 and x.stride(1) == 1 and x.dtype in (torch.float32, torch.bfloat16, torch.float16)
          and positions.ndim == 1 and positions.is_contiguous() and positions.shape[0] == x.shape[0]
          and positions.device == x.device and 0 < x.shape[1] < 2**31)
    if ok and draft_tokens is not None:
        ok = (draft_tokens.ndim == 2 and draft_tokens.dtype == torch.long and draft_tokens.device == x.device
              and draft_tokens.shape[0] == x.shape[0] and draft_tokens.stride(1) == 1
              and 0 <= draft_token_column < draft_tokens.shape[1])
    why = "layout: logits/positions/draft_tokens outside the fast path" if not ok else ""
    return call(TOPK1[0], bucket, x.device, why, lambda: op.draft_topk1(x, positions, draft_tokens, draft_token_column),
                lambda: original(next_token_logits, positions, draft_tokens, draft_token_column))


# ---- 3. top-k > 1 ----------------------------------------------------------------------------------

_LAST_PROBS: list = [None]  # weakref to the probabilities renorm_draft_probs returned last
_UPSTREAM_FAST_TOPK: list = [None]


def _renorm_draft_probs(original, next_token_logits, sampling_info, use_rejection_sampling):
    """[sglang-kimi-eagle3] Upstream softmax; remembers the result so the worker's top-k can take it."""
    probs = original(next_token_logits, sampling_info, use_rejection_sampling)
    bind_worker_topk()
    _LAST_PROBS[0] = weakref.ref(probs)
    return probs


def bind_worker_topk_outside_a_server() -> None:
    """For `check` and `status`: a server binds the worker's top-k at its first draft renorm_draft_probs call;
    these commands import the worker module and bind now, so their table says whether the binding takes
    (applied / failed) instead of `registered`, and the two commands agree."""
    row = hookstatus.get(WORKER_TOPK[0])
    if row is None or row.state != "registered":
        return
    import importlib

    try:
        importlib.import_module(WORKER_MODULE)
    except Exception as exc:  # the table says so; the command itself goes on
        hookstatus.record(*WORKER_TOPK, "failed", f"import {WORKER_MODULE}: {type(exc).__name__}: {exc}"[:300])
        return
    bind_worker_topk()


def _bind_if_registered() -> None:
    """In each scheduler after capture (runtime_status.on_publish): bind now if no draft call did yet."""
    row = hookstatus.get(WORKER_TOPK[0])
    if row is not None and row.state == "registered":
        bind_worker_topk()


def bind_worker_topk() -> str:
    """Rebind `fast_topk` in the EAGLE v2 worker module (only there) to ours; idempotent."""
    mod = sys.modules.get(WORKER_MODULE)
    if mod is None:
        return "registered"
    current = getattr(mod, "fast_topk", None)
    if current is _fast_topk:
        return "applied"
    if current is None:
        hookstatus.record(*WORKER_TOPK, "failed", f"{WORKER_MODULE} has no fast_topk on this SGLang")
        return "failed"
    _UPSTREAM_FAST_TOPK[0] = current
    mod.fast_topk = _fast_topk
    hookstatus.record(*WORKER_TOPK, "applied", "worker-local rebinding; other fast_topk users keep SGLang's")
    return "applied"


def _fast_topk(values, topk, dim):
    """[sglang-kimi-eagle3] torch.topk/torch.max contract; ours only on the draft probabilities."""
    import torch

    from ...ops import draft_topk as op

    ref = _LAST_PROBS[0]
    bucket = op.shape_key(values.shape[0], values.shape[-1], topk) if values.ndim == 2 else "other"
    why = "not the draft probabilities renorm_draft_probs just returned" if ref is None or ref() is not values else ""
    why = why or ("layout: not fp32 [bs, V] rows or k outside 1..16"
                  if not (values.ndim == 2 and dim in (-1, 1) and values.dtype == torch.float32
                          and values.stride(1) == 1 and 1 <= topk <= min(op.MAX_K, values.shape[1])) else "")
    return call(WORKER_TOPK[0], bucket, values.device, why, lambda: op.topk_rows(values, topk),
                lambda: _UPSTREAM_FAST_TOPK[0](values, topk, dim=dim))
