"""Fused draft lm_head + top-k: one launch from hidden states to draft tokens, logits never written.

Per shard of the draft lm_head (W [R, H], the rows [id_offset, id_offset + R) of the draft vocab) the
kernel returns, for every batch row, the shard-local softmax statistics (m = max logit,
s = sum exp(logit - m)) and the shard's k best (logit, id). Tensor-parallel ranks then exchange
2 + 2k numbers per row instead of all-gathering bs x V logits; `combine` (plain torch) merges shards
into the global softmax top-k — the same ids and probabilities as softmax + top-k over the gathered
logits. With one shard, `probs="softmax"` writes those probabilities directly, and `probs="one"` gives
SGLang's top-1 contract (topk_p = 1.0, positions += 1, optional d2t map): the whole draft tail in one
kernel.

Inside the launch (grid: stream-K programs x batch blocks):
  1. the stream-K GEMV of lm_head_gemv (the program that completes a row block goes on);
  2. the tile's logits are rounded to the input dtype (SGLang's logits are bf16 before its .float()),
     per batch row: local max / sum-exp and top-k keys (see draft_topk: ties -> lowest id, NaN ->
     -1e30 for selection, NaN or +inf poison the sum) -> candidates buffer;
  3. the last row block of a batch block merges the candidates and writes the outputs.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import triton
import triton.language as tl

from ._host import cdiv, next_power_of_2
from .arch import Unsupported, bs_bucket, op_config, require_launchable
from .draft_topk import MAX_K, canonical, float_key, key_index, key_value, sentinel_like, stable_topk_ref
from .lm_head_gemv import (
    INTERPRET,
    gemv_segment,
    launch_options,
    lm_head_gemv_ref,
    round_16bit,
    round_code,
    row_block_total,
    semaphores,
    stream_plan,
)
from .tables import launch_table

OP = "lm_head_topk"
DEFAULT = {"BLOCK_R": 64, "BLOCK_K": 128, "CTAS_PER_SM": 2, "num_warps": 4, "num_stages": 3}
P_NONE, P_SOFTMAX, P_ONE = 0, 1, 2


class LocalTopK(NamedTuple):
    """One shard's answer. logits/ids: [bs, k] (ids global: id_offset + row, or d2t-mapped);
    stats: [bs, 2] fp32 (m, s; zeros under probs="one"); probs: [bs, k] fp32 or None (shard mode)."""

    probs: torch.Tensor | None
    ids: torch.Tensor
    logits: torch.Tensor
    stats: torch.Tensor


@triton.jit
def _lm_head_topk_kernel(p_ptr, logit_ptr, id_ptr, stat_ptr, pos_ptr,
                         part_ptr, cand_ptr, cstat_ptr, sem_ptr,
                         h_ptr, w_ptr, d2t_ptr,
                         stride_hb, stride_wr, bs, R, H, n_k, n_rb, MAXC, id_offset,
                         BLOCK_R: tl.constexpr, BLOCK_B: tl.constexpr, BLOCK_K: tl.constexpr,
                         EVEN_K: tl.constexpr, UPCAST: tl.constexpr, ROUND: tl.constexpr,
                         K: tl.constexpr, K_P2: tl.constexpr, NRB_P2: tl.constexpr, MERGE_ROWS: tl.constexpr,
                         CHUNK: tl.constexpr, P_MODE: tl.constexpr, HAS_D2T: tl.constexpr, HAS_POS: tl.constexpr):
    # the stream-K GEMV of lm_head_gemv; a finished row block goes to _row_block_candidates
    P = tl.num_programs(0)
    p = tl.program_id(0)
    T = n_rb * n_k
    t = (p * T) // P
    t_end = ((p + 1) * T) // P
    while t < t_end:
        r = t // n_k
        k0 = t - r * n_k
        seg_end = tl.minimum(t_end, (r + 1) * n_k)
        k1 = seg_end - r * n_k
        acc = gemv_segment(h_ptr, w_ptr, stride_hb, stride_wr, bs, R, H, r, k0, k1,
                       BLOCK_R, BLOCK_B, BLOCK_K, EVEN_K, UPCAST)
        done, x = row_block_total(acc, r, (k0 == 0) & (k1 == n_k), n_k, n_rb, P, part_ptr, sem_ptr, MAXC,
                                   BLOCK_R, BLOCK_B)
        if done:
            _row_block_candidates(x, r, p_ptr, logit_ptr, id_ptr, stat_ptr, pos_ptr, cand_ptr, cstat_ptr, sem_ptr,
                                  d2t_ptr, bs, R, n_rb, id_offset, BLOCK_R, BLOCK_B, ROUND, K, K_P2, NRB_P2,
                                  MERGE_ROWS, CHUNK, P_MODE, HAS_D2T, HAS_POS)
        t = seg_end


@triton.jit
def _row_block_candidates(x, r, p_ptr, logit_ptr, id_ptr, stat_ptr, pos_ptr, cand_ptr, cstat_ptr, sem_ptr, d2t_ptr,
                          bs, R, n_rb, id_offset,
                          BLOCK_R: tl.constexpr, BLOCK_B: tl.constexpr, ROUND: tl.constexpr, K: tl.constexpr,
                          K_P2: tl.constexpr, NRB_P2: tl.constexpr, MERGE_ROWS: tl.constexpr, CHUNK: tl.constexpr,
                          P_MODE: tl.constexpr, HAS_D2T: tl.constexpr, HAS_POS: tl.constexpr):
    """Row block r's logits [BLOCK_R, BLOCK_B] -> per batch row: local max / sum-exp and k best keys;
    the last row block of the batch block to get here merges them all (_merge_rows)."""
    pid_b = tl.program_id(1)
    offs_r = r.to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    offs_b = pid_b.to(tl.int64) * BLOCK_B + tl.arange(0, BLOCK_B)
    mask_r = (offs_r < R)[:, None]
    mask_b = offs_b < bs
    x = round_16bit(x, ROUND)
    x = tl.where(mask_r, x, float("-inf"))
    # shard-local softmax stats per batch column; NaN / +inf poison s (the softmax is NaN). The top-1
    # contract (probabilities 1.0) needs none: m = s = 0 there.
    if P_MODE == 2:
        m = tl.zeros((BLOCK_B,), tl.float32)
        s = tl.zeros((BLOCK_B,), tl.float32)
    else:
        bad = tl.max(((x != x) | (x == float("inf"))).to(tl.int32), axis=0)
        m = tl.max(tl.where(x == x, x, float("-inf")), axis=0)
        m_safe = tl.where(m == float("-inf"), 0.0, m)
        s = tl.sum(tl.where(mask_r, tl.exp(x - m_safe[None, :]), 0.0), axis=0)
        s = tl.where(bad > 0, float("nan"), s)
    idx = tl.broadcast_to(offs_r[:, None], (BLOCK_R, BLOCK_B))
    keys = tl.where(mask_r, float_key(canonical(x, 0), idx), sentinel_like(idx))
    # this block's k best per column -> candidates [bs, n_rb, K_P2] (sentinel-padded lanes)
    cbase = (offs_b * n_rb + r) * K_P2
    lane = tl.arange(0, K_P2)
    tl.store(cand_ptr + cbase[:, None] + lane[None, :], sentinel_like(cbase[:, None] + lane[None, :]),
             mask=mask_b[:, None] & (lane >= K)[None, :])
    for j in tl.static_range(K):
        c = tl.max(keys, axis=0)
        keys = tl.where(keys == c[None, :], sentinel_like(keys), keys)
        tl.store(cand_ptr + cbase + j, c, mask=mask_b)
    tl.store(cstat_ptr + (offs_b * n_rb + r) * 2, m, mask=mask_b)
    tl.store(cstat_ptr + (offs_b * n_rb + r) * 2 + 1, s, mask=mask_b)
    tl.debug_barrier()
    counter = sem_ptr + tl.num_programs(1) * n_rb + pid_b  # after the row-block counters
    arrived = tl.atomic_add(counter, 1, sem="acq_rel")
    if arrived == n_rb - 1:
        tl.store(counter, 0)  # reset first: no predicate lives across the merge
        _merge_rows(p_ptr, logit_ptr, id_ptr, stat_ptr, pos_ptr, cand_ptr, cstat_ptr, d2t_ptr,
                    bs, n_rb, id_offset, pid_b * BLOCK_B,
                    BLOCK_B, K, K_P2, NRB_P2, MERGE_ROWS, CHUNK, P_MODE, HAS_D2T, HAS_POS)


@triton.jit
def _merge_rows(p_ptr, logit_ptr, id_ptr, stat_ptr, pos_ptr, cand_ptr, cstat_ptr, d2t_ptr,
                bs, n_rb, id_offset, b0,
                BLOCK_B: tl.constexpr, K: tl.constexpr, K_P2: tl.constexpr, NRB_P2: tl.constexpr,
                MERGE_ROWS: tl.constexpr, CHUNK: tl.constexpr, P_MODE: tl.constexpr, HAS_D2T: tl.constexpr,
                HAS_POS: tl.constexpr):
    """Merge the row blocks' candidates of batch rows [b0, b0 + BLOCK_B): MERGE_ROWS rows at a time,
    CHUNK candidates per row at a time (registers stay bounded for any vocab)."""
    lane = tl.arange(0, K_P2)
    rb = tl.arange(0, NRB_P2)
    for g in range(0, BLOCK_B, MERGE_ROWS):
        rows = b0.to(tl.int64) + g + tl.arange(0, MERGE_ROWS)
        row_ok = rows < bs
        # unordered set of the k best so far; distinct sentinels (sentinel + lane) so that exactly one
        # slot is the minimum
        best = sentinel_like(rows[:, None] + lane[None, :]) + lane[None, :]
        for c0 in range(0, NRB_P2 * K_P2, CHUNK):
            cols = c0 + tl.arange(0, CHUNK)
            valid = row_ok[:, None] & ((cols // K_P2) < n_rb)[None, :]
            ck = tl.load(cand_ptr + rows[:, None] * n_rb * K_P2 + cols[None, :], mask=valid, other=0,
                         cache_modifier=".cg")
            ck = tl.where(valid, ck, sentinel_like(ck))
            for j in tl.static_range(K):
                c = tl.max(ck, axis=1)
                ck = tl.where(ck == c[:, None], sentinel_like(ck), ck)
                worst = tl.min(best, axis=1)  # keys are unique: exactly one slot holds it
                best = tl.where((best == worst[:, None]) & (c > worst)[:, None], c[:, None], best)
        ordered = sentinel_like(best)
        for j in tl.static_range(K):  # sort descending
            c = tl.max(best, axis=1)
            best = tl.where(best == c[:, None], sentinel_like(best), best)
            ordered = tl.where(lane[None, :] == j, c[:, None], ordered)
        best = ordered
        smask = row_ok[:, None] & (rb < n_rb)[None, :]
        ms = tl.load(cstat_ptr + (rows[:, None] * n_rb + rb[None, :]) * 2, mask=smask, other=float("-inf"),
                     cache_modifier=".cg")
        ss = tl.load(cstat_ptr + (rows[:, None] * n_rb + rb[None, :]) * 2 + 1, mask=smask, other=0.0,
                     cache_modifier=".cg")
        M = tl.max(ms, axis=1)
        M_safe = tl.where(M == float("-inf"), 0.0, M)
        S = tl.sum(tl.where(smask, ss * tl.exp(ms - M_safe[:, None]), 0.0), axis=1)
        vals = key_value(best)
        ids = key_index(best)
        out_mask = row_ok[:, None] & (lane < K)[None, :]
        if P_MODE == 1:  # single shard: the global softmax; a NaN row -> NaN probs, ids 0..k-1
            bad = (S != S) | (M == float("-inf"))
            p = tl.exp(vals - M[:, None]) / S[:, None]
            p = tl.where(bad[:, None], float("nan"), p)
            ids = tl.where(bad[:, None], tl.broadcast_to(lane[None, :].to(tl.int64), (MERGE_ROWS, K_P2)), ids)
        ids = ids + id_offset
        if HAS_D2T:
            ids = tl.load(d2t_ptr + ids, mask=out_mask, other=0).to(tl.int64)
        out = rows[:, None] * K + lane[None, :]
        tl.store(logit_ptr + out, vals, mask=out_mask)
        tl.store(id_ptr + out, ids, mask=out_mask)
        tl.store(stat_ptr + rows * 2, M, mask=row_ok)
        tl.store(stat_ptr + rows * 2 + 1, S, mask=row_ok)
        if P_MODE == 1:
            tl.store(p_ptr + out, p, mask=out_mask)
        elif P_MODE == 2:
            tl.store(p_ptr + out, tl.full((MERGE_ROWS, K_P2), 1.0, tl.float32), mask=out_mask)
        if HAS_POS:
            pos = tl.load(pos_ptr + rows, mask=row_ok)
            tl.store(pos_ptr + rows, pos + 1, mask=row_ok)


def shape_key(bs: int, rows: int, hidden: int, k: int) -> str:
    return f"R{rows}:H{hidden}:k{k}:bs{bs_bucket(bs)}"


def launch_config(bs: int, rows: int, hidden: int, k: int, table: dict | None = None) -> dict:
    cfg = {**DEFAULT, **op_config(OP, {"bs": bs, "rows": rows, "hidden": hidden, "k": k}, table)}
    if not cfg.get("BLOCK_B"):
        cfg["BLOCK_B"] = min(max(16, next_power_of_2(max(bs, 1))), 64)
    return cfg


MERGE_BUDGET = 2048  # candidate keys (int64) held at once per CTA in the final merge


def merge_plan(block_b: int, nrb_p2: int, k_p2: int) -> tuple[int, int]:
    """(MERGE_ROWS, CHUNK): batch rows merged together and candidates per row per pass."""
    total = nrb_p2 * k_p2
    chunk = min(total, MERGE_BUDGET)
    rows = max(1, min(block_b, MERGE_BUDGET // total))
    return 1 << (rows.bit_length() - 1), chunk


def lm_head_topk(hidden: torch.Tensor, weight: torch.Tensor, k: int, *, probs: str | None = "softmax",
                 id_offset: int = 0, hot_token_id: torch.Tensor | None = None,
                 positions: torch.Tensor | None = None, round_logits: bool = True,
                 config: dict | None = None, table: dict | None = None) -> LocalTopK:
    """Top-k of hidden @ weight^T per row without writing the logits.

    probs: "softmax" (one shard = the whole vocab: softmax probabilities of the top-k), "one"
    (SGLang's top-1 contract, probabilities 1.0), None (a tensor-parallel shard: merge with `combine`).
    id_offset: global id of the shard's row 0. hot_token_id: map ids through the d2t table (one shard
    only; `combine` maps after merging). positions (mutable, optional): [bs], += 1.
    round_logits: round logits to the input dtype first (SGLang's bf16 lm_head output).
    table (optional): the launch table in effect (tables.launch_table), resolved once by the caller (a hook
    also asks arch.use_ours with it); default: the table of the tensors' device.
    Raises arch.Unsupported outside the fast path (shapes, dtypes, strides, devices, k > 16); a bad
    `probs` mode stays a plain ValueError: it is a programming error, not a call to hand to SGLang.
    """
    if hidden.ndim != 2 or weight.ndim != 2 or hidden.shape[1] != weight.shape[1]:
        raise Unsupported(f"lm_head_topk: expected hidden [bs, H] and weight [R, H], got {tuple(hidden.shape)} and {tuple(weight.shape)}")
    if hidden.dtype not in (torch.bfloat16, torch.float16) or weight.dtype != hidden.dtype:
        raise Unsupported(f"lm_head_topk: hidden and weight must share a 16-bit float dtype, got {hidden.dtype}, {weight.dtype}")
    if hidden.stride(1) != 1 or weight.stride(1) != 1:
        raise Unsupported("lm_head_topk: hidden and weight need a contiguous last dim")
    bs, H = hidden.shape
    R = weight.shape[0]
    if not 1 <= k <= min(MAX_K, R):
        raise Unsupported(f"lm_head_topk: k={k} must be in 1..min({MAX_K}, rows={R})")
    if probs not in ("softmax", "one", None):
        raise ValueError(f"lm_head_topk: probs must be 'softmax', 'one' or None, got {probs!r}")
    if hot_token_id is not None and (hot_token_id.ndim != 1 or hot_token_id.shape[0] < id_offset + R):
        raise Unsupported(f"lm_head_topk: hot_token_id must be a 1-D table of >= {id_offset + R} ids")
    if positions is not None and (positions.shape != (bs,) or not positions.is_contiguous()):
        raise Unsupported(f"lm_head_topk: positions must be a contiguous [{bs}] tensor")
    require_launchable("lm_head_topk", hidden, weight, hot_token_id, positions)
    dev = hidden.device
    p = torch.empty((bs, k), dtype=torch.float32, device=dev) if probs else None
    ids = torch.empty((bs, k), dtype=torch.int64, device=dev)
    logits = torch.empty((bs, k), dtype=torch.float32, device=dev)
    stats = torch.empty((bs, 2), dtype=torch.float32, device=dev)
    if bs == 0:
        return LocalTopK(p, ids, logits, stats)
    table = table if table is not None else launch_table(dev)
    cfg = {**launch_config(bs, R, H, k, table), **(config or {})}
    P, n_k, maxc = stream_plan(bs, R, H, cfg, dev)
    n_rb, n_bb = cdiv(R, cfg["BLOCK_R"]), cdiv(bs, cfg["BLOCK_B"])
    k_p2, nrb_p2 = next_power_of_2(k), next_power_of_2(n_rb)
    merge_rows, chunk = merge_plan(cfg["BLOCK_B"], nrb_p2, k_p2)
    part = torch.empty(n_bb * n_rb * maxc * cfg["BLOCK_R"] * cfg["BLOCK_B"], dtype=torch.float32, device=dev)
    cand = torch.empty(bs * n_rb * k_p2, dtype=torch.int64, device=dev)
    cstat = torch.empty(bs * n_rb * 2, dtype=torch.float32, device=dev)
    sem = semaphores(dev, n_bb * n_rb + n_bb)
    _lm_head_topk_kernel[(P, n_bb)](
        p if p is not None else logits, logits, ids, stats, positions if positions is not None else ids,
        part, cand, cstat, sem, hidden, weight, hot_token_id if hot_token_id is not None else ids,
        hidden.stride(0), weight.stride(0), bs, R, H, n_k, n_rb, maxc, id_offset,
        BLOCK_R=cfg["BLOCK_R"], BLOCK_B=cfg["BLOCK_B"], BLOCK_K=cfg["BLOCK_K"], EVEN_K=H % cfg["BLOCK_K"] == 0,
        UPCAST=INTERPRET, ROUND=round_code(torch.float32, hidden.dtype) if round_logits else 0,
        K=k, K_P2=k_p2, NRB_P2=nrb_p2, MERGE_ROWS=merge_rows, CHUNK=chunk,
        P_MODE={None: P_NONE, "softmax": P_SOFTMAX, "one": P_ONE}[probs],
        HAS_D2T=hot_token_id is not None, HAS_POS=positions is not None,
        num_warps=cfg["num_warps"], num_stages=cfg["num_stages"], **launch_options(cfg))
    return LocalTopK(p, ids, logits, stats)


def combine(shards: list[LocalTopK], k: int, *, hot_token_id: torch.Tensor | None = None):
    """Merge tensor-parallel shards (each from `lm_head_topk(..., probs=None, id_offset=...)`) into the
    global softmax top-k: (probs [bs, k] fp32, ids [bs, k] int64), equal to softmax + top-k over the
    concatenated logits (ties -> lowest id; a NaN softmax row -> NaN probs, ids 0..k-1)."""
    m = torch.stack([sh.stats[:, 0] for sh in shards])  # [S, bs]
    s = torch.stack([sh.stats[:, 1] for sh in shards])
    M = m.max(dim=0).values
    M_safe = torch.where(M == float("-inf"), torch.zeros_like(M), M)
    S = (s * torch.exp(m - M_safe)).sum(dim=0)
    vals = torch.cat([sh.logits for sh in shards], dim=1)  # [bs, S*k]
    ids = torch.cat([sh.ids for sh in shards], dim=1)
    by_id = torch.argsort(ids, dim=1, stable=True)  # ties in value -> lowest id
    vals, ids = vals.gather(1, by_id), ids.gather(1, by_id)
    order = torch.argsort(vals, dim=1, descending=True, stable=True)[:, :k]
    top_v, top_i = vals.gather(1, order), ids.gather(1, order)
    probs = torch.exp(top_v - M[:, None]) / S[:, None]
    bad = (torch.isnan(S) | (M == float("-inf")))[:, None]
    probs = torch.where(bad, torch.full_like(probs, float("nan")), probs)
    top_i = torch.where(bad, torch.arange(k, device=top_i.device).expand_as(top_i), top_i)
    if hot_token_id is not None:
        top_i = hot_token_id.long()[top_i]
    return probs, top_i


def lm_head_topk_ref(hidden, weight, k, *, probs="softmax", hot_token_id=None, round_logits=True):
    """Ground truth: logits (rounded like SGLang's bf16 lm_head), then softmax + stable top-k
    (probs="softmax") or SGLang's top-1 rule (NaN -> -1e30, lowest index; probs "one")."""
    logits = lm_head_gemv_ref(hidden, weight, torch.float32, hidden.dtype if round_logits else None)
    if probs == "one":
        x = torch.where(torch.isnan(logits), torch.full_like(logits, -1e30), logits)
        p, ids = torch.ones((x.shape[0], k), device=x.device), stable_topk_ref(x, k)[1]
    else:
        p, ids = stable_topk_ref(torch.softmax(logits, dim=-1), k)
    return p, (hot_token_id.long()[ids] if hot_token_id is not None else ids)
