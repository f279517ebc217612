"""Top-k over the draft vocabulary for EAGLE draft topk > 1, one launch per call (Triton).

The EAGLE worker's multi-step draft takes, for topk > 1, ``renorm_draft_probs`` (softmax) then
``fast_topk`` (``torch.topk``, a radix select of ~4 launches) of every draft step's probabilities.
  ``draft_probs_topk(probs, k)``     torch.topk(probs, k): the same values (bit for bit), ids in
                                     descending order, ties to the lowest index, NaN above +inf.
  ``draft_softmax_topk(logits, k)``  softmax + top-k fused (selection on the logit; probabilities
                                     exp(l - M) / S over the whole row); not dispatched yet.
Rows longer than BLOCK are split over CTAs; each writes its k best keys (and softmax stats), the
last CTA of a row (a per-row counter) merges them and resets the counter: no host sync, shapes fixed
by the inputs (CUDA-graph safe). ``draft_probs_topk_dispatch`` runs this kernel where DISPATCH
(measured on the H200 against torch.topk) says it wins, ``fast_topk`` elsewhere;
SGLANG_SPEC_DRAFT_TOPK_BACKEND=auto|triton|torch.
"""

from __future__ import annotations

import functools
import os

import torch
import triton
import triton.language as tl

MAX_K = 16
ENV_BACKEND = "SGLANG_SPEC_DRAFT_TOPK_BACKEND"  # srt/environ.py
# Launch parameters by batch size (measured on the H200, V 32000, k 4)
LAUNCH = ((1, {"BLOCK": 1024, "num_warps": 4}), (32, {"BLOCK": 4096, "num_warps": 8}),
          (128, {"BLOCK": 4096, "num_warps": 4}))
LAUNCH_LARGE = {"BLOCK": 2048, "num_warps": 4}
# Where it beat torch.topk over the draft probabilities (CUDA-graph replay, NVIDIA H200, torch 2.11,
# triton 3.6): V 32000 k 4 bs 1 / 32 / 128: 12.1 / 9.1 / 5.7x; V 4000 k 4 bs 1..128: 3.4-4.1x.
# Other k, vocabularies, architectures: not measured, so fast_topk runs there.
DISPATCH = {9: {"k": (4,), "vocab": (4000, 32000), "max_bs": 128}}
_SEM_MIN = 4096
_SEMS: dict = {}


def _semaphores(device: torch.device, n: int) -> torch.Tensor:
    """Zeroed int32 row counters, one buffer per device; every launch leaves them at 0, so the buffer
    is zeroed once, on the first (eager) call, before any CUDA-graph capture."""
    key = (device.type, device.index)
    buf = _SEMS.get(key)
    if buf is None or buf.numel() < n:
        buf = torch.zeros(max(n, _SEM_MIN), dtype=torch.int32, device=device)
        _SEMS[key] = buf
    return buf


def launch_config(bs: int) -> dict:
    return dict(next((c for b, c in LAUNCH if bs <= b), LAUNCH_LARGE))


# ---- order-preserving int64 keys ----------------------------------------------------------------
# key = (ordered float bits << 32) | (2^31 - 1 - index): one tl.max gives the largest value and,
# among equal values, the lowest index. Keys are unique, so each round removes exactly one element.


# @ops draft_topk: canonical, float_key, sentinel_like, key_value, key_index, top_keys


# ---- kernel ----------------------------------------------------------------------------------------


@triton.jit
def _finalize(best, M, S, row, val_ptr, idx_ptr, d2t_ptr,
              K: tl.constexpr, K_P2: tl.constexpr, MODE: tl.constexpr, HAS_D2T: tl.constexpr):
    lane = tl.arange(0, K_P2)
    out_mask = lane < K
    ids = key_index(best)
    if MODE == 1:
        # softmax of a row holding NaN/+inf (S is NaN) or only -inf (M = -inf) is NaN everywhere
        bad = (S != S) | (M == float("-inf"))
        ids = tl.where(bad, lane.to(tl.int64), ids)
        vals = tl.exp(key_value(best) - M) / S
        vals = tl.where(bad, float("nan"), vals)
    else:
        vals = key_value(best)
    if HAS_D2T:
        ids = tl.load(d2t_ptr + ids, mask=out_mask, other=0).to(tl.int64)
    tl.store(val_ptr + row * K + lane, vals, mask=out_mask)
    tl.store(idx_ptr + row * K + lane, ids, mask=out_mask)


@triton.jit
def _row_topk_kernel(val_ptr, idx_ptr, part_key_ptr, part_stat_ptr, sem_ptr,
                     x_ptr, d2t_ptr,
                     stride_x, V, n_splits,
                     K: tl.constexpr, K_P2: tl.constexpr, BLOCK: tl.constexpr, NS_P2: tl.constexpr,
                     MODE: tl.constexpr, HAS_D2T: tl.constexpr, SPLIT: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    split = tl.program_id(1)
    offs = split.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < V
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=float("-inf")).to(tl.float32)
    m = 0.0
    s = 0.0
    if MODE == 1:
        # softmax stats of this slice; NaN / +inf anywhere poison S (checked in _finalize)
        bad = tl.max(((x != x) | (x == float("inf"))).to(tl.int32), axis=0)
        m = tl.max(tl.where(x == x, x, float("-inf")), axis=0)
        m_safe = tl.where(m == float("-inf"), 0.0, m)
        s = tl.sum(tl.where(mask, tl.exp(x - m_safe), 0.0), axis=0)
        s = tl.where(bad > 0, float("nan"), s)
        x = canonical(x, 0)
    else:
        x = canonical(x, 1)
    keys = tl.where(mask, float_key(x, offs), sentinel_like(offs))
    best = top_keys(keys, K, K_P2)
    if SPLIT:
        lane = tl.arange(0, K_P2)
        base = row * n_splits
        tl.store(part_key_ptr + (base + split) * K_P2 + lane, best)
        tl.store(part_stat_ptr + (base + split) * 2, m)
        tl.store(part_stat_ptr + (base + split) * 2 + 1, s)
        tl.debug_barrier()
        arrived = tl.atomic_add(sem_ptr + row, 1, sem="acq_rel")
        if arrived == n_splits - 1:
            sp = tl.arange(0, NS_P2)
            sp_mask = sp < n_splits
            pk = tl.load(part_key_ptr + (base + sp[:, None]) * K_P2 + lane[None, :], mask=sp_mask[:, None],
                         other=0, cache_modifier=".cg")
            pk = tl.where(sp_mask[:, None], pk, sentinel_like(pk))
            best = top_keys(tl.reshape(pk, (NS_P2 * K_P2,)), K, K_P2)
            ms = tl.load(part_stat_ptr + (base + sp) * 2, mask=sp_mask, other=float("-inf"), cache_modifier=".cg")
            ss = tl.load(part_stat_ptr + (base + sp) * 2 + 1, mask=sp_mask, other=0.0, cache_modifier=".cg")
            M = tl.max(ms, axis=0)
            M_safe = tl.where(M == float("-inf"), 0.0, M)
            S = tl.sum(tl.where(sp_mask, ss * tl.exp(ms - M_safe), 0.0), axis=0)
            _finalize(best, M, S, row, val_ptr, idx_ptr, d2t_ptr, K, K_P2, MODE, HAS_D2T)
            tl.store(sem_ptr + row, 0)
    else:
        _finalize(best, m, s, row, val_ptr, idx_ptr, d2t_ptr, K, K_P2, MODE, HAS_D2T)


def _launch(x, k, mode, *, vals, ids, hot_token_id=None, config=None):
    bs, V = x.shape
    cfg = {**launch_config(bs), **(config or {})}
    block = min(cfg["BLOCK"], max(16, triton.next_power_of_2(V)))
    n_splits = triton.cdiv(V, block)
    k_p2 = triton.next_power_of_2(k)
    if n_splits > 1:
        part_key = torch.empty(bs * n_splits * k_p2, dtype=torch.int64, device=x.device)
        part_stat = torch.empty(bs * n_splits * 2, dtype=torch.float32, device=x.device)
        sem = _semaphores(x.device, bs)
    else:
        part_key = part_stat = sem = ids  # never dereferenced
    _row_topk_kernel[(bs, n_splits)](
        vals, ids, part_key, part_stat, sem, x, hot_token_id if hot_token_id is not None else ids,
        x.stride(0), V, n_splits, K=k, K_P2=k_p2, BLOCK=block, NS_P2=triton.next_power_of_2(n_splits),
        MODE=mode, HAS_D2T=hot_token_id is not None, SPLIT=n_splits > 1, num_warps=cfg["num_warps"])
    return vals, ids


class Unsupported(ValueError):
    """Outside this kernel's fast path: the dispatcher runs fast_topk."""


def _check_rows(name, x, k, hot_token_id):
    if x.ndim != 2 or x.stride(1) != 1:
        raise Unsupported(f"{name}: expected a 2-D tensor with a contiguous last dim, got {tuple(x.shape)}")
    if x.dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise Unsupported(f"{name}: expected float32/bf16/fp16 rows, got {x.dtype}")
    if not 1 <= k <= min(MAX_K, max(x.shape[1], 1)):
        raise Unsupported(f"{name}: k={k} must be in 1..min({MAX_K}, vocab={x.shape[1]})")
    if x.shape[1] >= 2**31:
        raise Unsupported(f"{name}: vocab {x.shape[1]} does not fit the 31-bit index keys")
    if x.device.type != "cuda" and os.environ.get("TRITON_INTERPRET", "0") != "1":
        raise Unsupported(f"{name}: tensors on {x.device}; this Triton kernel runs on CUDA")
    if hot_token_id is not None and (hot_token_id.ndim != 1 or hot_token_id.shape[0] < x.shape[1]
                                     or hot_token_id.device != x.device or hot_token_id.dtype.is_floating_point):
        raise Unsupported(f"{name}: hot_token_id must be an integer [>= {x.shape[1]}] table on {x.device}")


def draft_probs_topk(probs: torch.Tensor, k: int, *, config=None):
    """torch.topk(probs, k, dim=-1), one launch: (values [bs, k] fp32 descending, ids [bs, k] int64)."""
    _check_rows("draft_probs_topk", probs, k, None)
    bs = probs.shape[0]
    vals = torch.empty((bs, k), dtype=torch.float32, device=probs.device)
    ids = torch.empty((bs, k), dtype=torch.int64, device=probs.device)
    if bs == 0:
        return vals, ids
    return _launch(probs, k, 2, vals=vals, ids=ids, config=config)


def draft_softmax_topk(logits: torch.Tensor, k: int, *, hot_token_id=None, config=None):
    """softmax(logits) then top-k, fused: (probs [bs, k] fp32 descending, ids [bs, k] int64).
    A row whose softmax is NaN (any NaN or +inf, or all -inf) gives NaN probabilities, ids 0..k-1."""
    _check_rows("draft_softmax_topk", logits, k, hot_token_id)
    bs = logits.shape[0]
    probs = torch.empty((bs, k), dtype=torch.float32, device=logits.device)
    ids = torch.empty((bs, k), dtype=torch.int64, device=logits.device)
    if bs == 0:
        return probs, ids
    return _launch(logits, k, 1, vals=probs, ids=ids, hot_token_id=hot_token_id, config=config)


# ---- dispatch ---------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _capability_major_index(index: int) -> int:
    return torch.cuda.get_device_capability(index)[0]


def _capability_major(device: torch.device) -> int:
    return _capability_major_index(device.index if device.index is not None else torch.cuda.current_device())


def use_triton(bs: int, vocab: int, k: int, device: torch.device) -> bool:
    """The Triton top-k for this call? (auto: only where DISPATCH records a measured win)."""
    from sglang.srt.environ import envs

    mode = (envs.SGLANG_SPEC_DRAFT_TOPK_BACKEND.get() or "auto").strip().lower()
    if mode not in ("auto", "triton", "torch"):
        raise ValueError(f"{ENV_BACKEND}={mode!r}: expected auto, triton or torch")
    if mode != "auto":
        return mode == "triton"
    if device.type != "cuda":
        return False
    rule = DISPATCH.get(_capability_major(device))
    return rule is not None and k in rule["k"] and vocab in rule["vocab"] and bs <= rule["max_bs"]


def draft_probs_topk_dispatch(fast_topk):
    """`fast_topk(values, topk, dim)` for the draft probabilities: the Triton top-k where it wins."""

    def topk(probs: torch.Tensor, k: int):
        if probs.ndim == 2 and use_triton(probs.shape[0], probs.shape[1], k, probs.device):
            try:
                return draft_probs_topk(probs, k)
            except Unsupported:
                pass
        return fast_topk(probs, k, dim=-1)

    return topk


# ---- references (plain torch) --------------------------------------------------------------------------


# @ops draft_topk: stable_topk_ref, draft_softmax_topk_ref, topk_rows_ref
