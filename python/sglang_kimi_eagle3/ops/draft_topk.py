"""Draft-step top-k over the draft vocabulary, one launch per call.

Three contracts, one kernel (`MODE`):
  0  `draft_topk1`: SGLang 0.5.23's `draft_topk1_postprocess` (kernels/ops/speculative/topk1.py) —
     argmax per row, `topk_p` = 1.0, positions += 1, optional `draft_tokens[:, column]` = token.
     NaN counts as -1e30 (SGLang's rule), ties -> lowest index (an all-NaN row -> index 0).
  1  `draft_softmax_topk`: softmax + top-k, the values and ids of SGLang's `renorm_draft_probs`
     (plain softmax) followed by `fast_topk` (torch.topk). Selection is on the logit (softmax is
     monotone), probabilities are exp(l - M) / S over the whole row. A row whose softmax is NaN
     (any NaN, any +inf, or all -inf) gives NaN probabilities and ids 0..k-1, what a stable sort of
     the NaN softmax row returns.
  2  `topk_rows`: torch.topk / torch.max over the last dim of a float row (SGLang's `fast_topk`),
     NaN above +inf, ties -> lowest index.
Optional `hot_token_id` (EAGLE-3 d2t table) maps the draft ids to target ids inside the kernel.

Rows longer than BLOCK are split over CTAs; each writes its k best keys (and softmax stats), the last
CTA of the row (per-row counter, see lm_head_gemv.semaphores) merges them and resets the counter.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._host import cdiv, next_power_of_2
from .arch import Unsupported, bs_bucket, op_config, require_launchable
from .lm_head_gemv import launch_options, semaphores
from .tables import launch_table

OP = "draft_topk"
DEFAULT = {"BLOCK": 4096, "num_warps": 8}
MAX_K = 16

# ---- order-preserving int64 keys (shared with lm_head_topk) -------------------------------------
# key = (ordered float bits << 32) | (2^31 - 1 - index): one tl.max gives the largest value and,
# among equal values, the lowest index. Keys are unique, so each round removes exactly one element.


@triton.jit
def canonical(x, NAN_MODE: tl.constexpr):
    """-0.0 -> +0.0 (equal values must tie); NaN -> -1e30 (NAN_MODE 0) or +NaN, above +inf (1)."""
    x = tl.where(x == 0.0, 0.0, x)
    if NAN_MODE == 0:
        x = tl.where(x == x, x, -1e30)
    else:
        x = tl.where(x == x, x, float("nan"))
    return x


@triton.jit
def float_key(x, idx):
    """x fp32 (canonical), idx int64 in [0, 2^31) -> int64 key."""
    bits = x.to(tl.int32, bitcast=True)
    ordered = tl.where(bits >= 0, bits, bits ^ 0x7FFFFFFF)
    return (ordered.to(tl.int64) << 32) | (0x7FFFFFFF - idx)


@triton.jit
def sentinel_like(idx):
    """Below every real key (its high word, INT32_MIN, only a negative NaN would map to)."""
    return tl.full(idx.shape, -2147483648, tl.int64) << 32


@triton.jit
def key_value(key):
    ordered = (key >> 32).to(tl.int32)
    bits = tl.where(ordered >= 0, ordered, ordered ^ 0x7FFFFFFF)
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def key_index(key):
    return 0x7FFFFFFF - (key & 0x7FFFFFFF)


@triton.jit
def top_keys(keys, K: tl.constexpr, K_P2: tl.constexpr):
    """The K largest of a 1-D key vector, descending, in a [K_P2] vector (sentinel-padded)."""
    lane = tl.arange(0, K_P2)
    sent = sentinel_like(lane)
    best = sent
    for j in tl.static_range(K):
        c = tl.max(keys, axis=0)
        keys = tl.where(keys == c, sentinel_like(keys), keys)
        best = tl.where(lane == j, c, best)
    return best


# ---- kernel ----------------------------------------------------------------------------------------


@triton.jit
def _finalize(best, M, S, row, val_ptr, idx_ptr, pos_ptr, tok_ptr, d2t_ptr, stride_tok, tok_col,
              K: tl.constexpr, K_P2: tl.constexpr, MODE: tl.constexpr, HAS_D2T: tl.constexpr,
              WRITE_TOK: tl.constexpr):
    lane = tl.arange(0, K_P2)
    out_mask = lane < K
    ids = key_index(best)
    if MODE == 1:
        # softmax of a row holding NaN/+inf (S is NaN) or only -inf (M = -inf) is NaN everywhere
        bad = (S != S) | (M == float("-inf"))
        ids = tl.where(bad, lane.to(tl.int64), ids)
        vals = tl.exp(key_value(best) - M) / S
        vals = tl.where(bad, float("nan"), vals)
    elif MODE == 2:
        vals = key_value(best)
    else:
        vals = tl.full((K_P2,), 1.0, tl.float32)
    if HAS_D2T:
        ids = tl.load(d2t_ptr + ids, mask=out_mask, other=0).to(tl.int64)
    tl.store(val_ptr + row * K + lane, vals, mask=out_mask)
    tl.store(idx_ptr + row * K + lane, ids, mask=out_mask)
    if MODE == 0:
        pos = tl.load(pos_ptr + row)
        tl.store(pos_ptr + row, pos + 1)
        if WRITE_TOK:
            tl.store(tok_ptr + row * stride_tok + tok_col + lane, ids, mask=out_mask)


@triton.jit
def _row_topk_kernel(val_ptr, idx_ptr, pos_ptr, tok_ptr, part_key_ptr, part_stat_ptr, sem_ptr,
                     x_ptr, d2t_ptr,
                     stride_x, stride_tok, tok_col, V, n_splits,
                     K: tl.constexpr, K_P2: tl.constexpr, BLOCK: tl.constexpr, NS_P2: tl.constexpr,
                     MODE: tl.constexpr, HAS_D2T: tl.constexpr, WRITE_TOK: tl.constexpr,
                     SPLIT: tl.constexpr):
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
    elif MODE == 2:
        x = canonical(x, 1)
    else:
        x = canonical(x, 0)
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
            _finalize(best, M, S, row, val_ptr, idx_ptr, pos_ptr, tok_ptr, d2t_ptr, stride_tok, tok_col,
                      K, K_P2, MODE, HAS_D2T, WRITE_TOK)
            tl.store(sem_ptr + row, 0)
    else:
        _finalize(best, m, s, row, val_ptr, idx_ptr, pos_ptr, tok_ptr, d2t_ptr, stride_tok, tok_col,
                  K, K_P2, MODE, HAS_D2T, WRITE_TOK)


def shape_key(bs: int, vocab: int, k: int) -> str:
    """`wins` key of this op in ops/configs tables, e.g. 'V4000:k1:bs8'."""
    return f"V{vocab}:k{k}:bs{bs_bucket(bs)}"


def launch_config(bs: int, vocab: int, k: int, table: dict | None = None) -> dict:
    return {**DEFAULT, **op_config(OP, {"bs": bs, "vocab": vocab, "k": k}, table)}


def _launch(x, k, mode, *, vals, ids, positions=None, draft_tokens=None, column=0, hot_token_id=None,
            config=None, table=None):
    bs, V = x.shape
    table = table if table is not None else launch_table(x.device)
    cfg = {**launch_config(bs, V, k, table), **(config or {})}
    block = min(cfg["BLOCK"], max(16, next_power_of_2(V)))
    n_splits = cdiv(V, block)
    k_p2 = next_power_of_2(k)
    if n_splits > 1:
        part_key = torch.empty(bs * n_splits * k_p2, dtype=torch.int64, device=x.device)
        part_stat = torch.empty(bs * n_splits * 2, dtype=torch.float32, device=x.device)
        sem = semaphores(x.device, bs)
    else:
        part_key = part_stat = sem = ids  # never dereferenced
    _row_topk_kernel[(bs, n_splits)](
        vals, ids, positions if positions is not None else ids,
        draft_tokens if draft_tokens is not None else ids, part_key, part_stat, sem,
        x, hot_token_id if hot_token_id is not None else ids,
        x.stride(0), draft_tokens.stride(0) if draft_tokens is not None else 0, column, V, n_splits,
        K=k, K_P2=k_p2, BLOCK=block, NS_P2=next_power_of_2(n_splits), MODE=mode,
        HAS_D2T=hot_token_id is not None, WRITE_TOK=draft_tokens is not None, SPLIT=n_splits > 1,
        num_warps=cfg["num_warps"], **launch_options(cfg))
    return vals, ids


def _check_rows(name, x, k, hot_token_id):
    """Guards of the three launchers: every rejection is arch.Unsupported (SGLang's path takes the call)."""
    if x.ndim != 2 or x.stride(1) != 1:
        raise Unsupported(f"{name}: expected a 2-D tensor with a contiguous last dim, got shape {tuple(x.shape)} strides {x.stride()}")
    if x.dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise Unsupported(f"{name}: expected float32/bf16/fp16 rows, got {x.dtype}")
    if not 1 <= k <= min(MAX_K, max(x.shape[1], 1)):
        raise Unsupported(f"{name}: k={k} must be in 1..min({MAX_K}, vocab={x.shape[1]})")
    if x.shape[1] >= 2**31:
        raise Unsupported(f"{name}: vocab {x.shape[1]} does not fit the 31-bit index keys")
    require_launchable(name, x, hot_token_id)
    if hot_token_id is not None and (hot_token_id.ndim != 1 or hot_token_id.shape[0] < x.shape[1]
                                     or hot_token_id.device != x.device or hot_token_id.dtype.is_floating_point):
        raise Unsupported(f"{name}: hot_token_id must be an integer [>= {x.shape[1]}] table on {x.device}")


def draft_topk1(logits: torch.Tensor, positions: torch.Tensor, draft_tokens: torch.Tensor | None = None,
                draft_token_column: int = 0, *, hot_token_id: torch.Tensor | None = None,
                config: dict | None = None, table: dict | None = None):
    """SGLang's `draft_topk1_postprocess` in one launch: (topk_p [bs,1] fp32 = 1.0, topk_index [bs,1] int64).

    positions (mutable): [bs] contiguous, += 1. draft_tokens (mutable, optional): [bs, n] int64, column
    `draft_token_column` gets the chosen token. hot_token_id (ours, optional): ids are mapped through it
    (SGLang applies d2t after the call and writes the column only without d2t).
    """
    _check_rows("draft_topk1", logits, 1, hot_token_id)
    if positions.ndim != 1 or not positions.is_contiguous() or positions.shape[0] != logits.shape[0] \
            or positions.device != logits.device:
        raise Unsupported(f"draft_topk1: positions must be a contiguous [{logits.shape[0]}] tensor on {logits.device}")
    if draft_tokens is not None:
        if draft_tokens.ndim != 2 or draft_tokens.dtype != torch.long or draft_tokens.shape[0] != logits.shape[0] \
                or draft_tokens.stride(1) != 1 or draft_tokens.device != logits.device \
                or not 0 <= draft_token_column < draft_tokens.shape[1]:
            raise Unsupported("draft_topk1: draft_tokens must be int64 [bs, n] (contiguous rows) on the logits' device, "
                             f"with 0 <= draft_token_column < n (got column {draft_token_column})")
    bs = logits.shape[0]
    topk_p = torch.empty((bs, 1), dtype=torch.float32, device=logits.device)
    topk_index = torch.empty((bs, 1), dtype=torch.int64, device=logits.device)
    if bs == 0:
        return topk_p, topk_index
    return _launch(logits, 1, 0, vals=topk_p, ids=topk_index, positions=positions, draft_tokens=draft_tokens,
                   column=draft_token_column, hot_token_id=hot_token_id, config=config, table=table)


def draft_softmax_topk(logits: torch.Tensor, k: int, *, hot_token_id: torch.Tensor | None = None,
                       config: dict | None = None, table: dict | None = None):
    """softmax(logits) then top-k, fused: (probs [bs,k] fp32 descending, ids [bs,k] int64)."""
    _check_rows("draft_softmax_topk", logits, k, hot_token_id)
    bs = logits.shape[0]
    probs = torch.empty((bs, k), dtype=torch.float32, device=logits.device)
    ids = torch.empty((bs, k), dtype=torch.int64, device=logits.device)
    if bs == 0:
        return probs, ids
    return _launch(logits, k, 1, vals=probs, ids=ids, hot_token_id=hot_token_id, config=config, table=table)


def topk_rows(values: torch.Tensor, k: int, *, config: dict | None = None, table: dict | None = None):
    """torch.topk(values, k, dim=-1) (sorted, NaN largest, ties -> lowest index); values fp32 out."""
    _check_rows("topk_rows", values, k, None)
    bs = values.shape[0]
    vals = torch.empty((bs, k), dtype=torch.float32, device=values.device)
    ids = torch.empty((bs, k), dtype=torch.int64, device=values.device)
    if bs == 0:
        return vals, ids
    return _launch(values, k, 2, vals=vals, ids=ids, config=config, table=table)


# ---- references (plain torch) ---------------------------------------------------------------------


def stable_topk_ref(x: torch.Tensor, k: int):
    """Top-k along the last dim: descending, NaN above everything, ties -> lowest index."""
    vals, ids = torch.sort(x, dim=-1, descending=True, stable=True)
    return vals[..., :k], ids[..., :k]


def draft_topk1_ref(logits, positions, draft_tokens=None, draft_token_column=0, *, hot_token_id=None):
    x = logits.float()
    x = torch.where(torch.isnan(x), torch.full_like(x, -1e30), x)
    idx = torch.argmax(x, dim=-1, keepdim=True) if x.shape[0] else torch.empty((0, 1), dtype=torch.long, device=x.device)
    if hot_token_id is not None:
        idx = hot_token_id.long()[idx]
    positions.add_(1)
    if draft_tokens is not None:
        draft_tokens[:, draft_token_column] = idx[:, 0]
    return torch.ones((x.shape[0], 1), dtype=torch.float32, device=x.device), idx


def draft_softmax_topk_ref(logits, k, *, hot_token_id=None):
    probs = torch.softmax(logits.float(), dim=-1)
    vals, ids = stable_topk_ref(probs, k)
    return vals, (hot_token_id.long()[ids] if hot_token_id is not None else ids)


def topk_rows_ref(values, k):
    return stable_topk_ref(values.float(), k)
