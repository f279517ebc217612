"""Target-only tree rejection sampling: SGLang 0.5.23's `tree_speculative_sampling_target_only`.

Contract (N draft tokens, S = accept_index.shape[1], V vocab; uniform samples in, nothing random
inside):
  candidates, retrive_index, retrive_next_token, retrive_next_sibling  [bs, N] int64
  uniform_samples [bs, N] f32, uniform_samples_for_final_sampling [bs] f32
  target_probs [bs, N, V] f32, draft_probs [bs, N, V] f32 (mutable: see below)
Walk, per request: coin = uniform_samples[b, node] of the last accepted node (the root first);
prob_acc sums the target probability q of each child tried, in sibling order, and a child with
q > 0 is accepted when coin < prob_acc / threshold_acc or q >= threshold_single (q is read from the
last accepted node's row, at the child's token). Accepting resets prob_acc and moves on; a rejected
child's draft_probs entry in that row is set to its q. After the walk (at most S-1 accepts), the
last node's token is drawn from relu(target - draft) of its row (draft ignored after S-1 accepts:
the bonus token has no draft), by inverse CDF with u = uniform_final * sum; ties of u with a CDF
boundary go to the next positive entry; if none exceeds u, the last positive entry, else V-1.
Outputs as SGLang: predicts[retrive_index of each accepted-path node] = the next accepted draft
token, and the sampled token at the last node; accept_index; accept_token_num.

Parallel over the vocabulary (SGLang runs one 1024-thread block per request over all V):
  1. `_walk_kernel` (per request): the tree walk with every node's edge probability gathered in one
     load; writes accept_index, accept_token_num, accepted predicts and the draft_probs side effect,
     and which row/bonus flag/slot the final draw uses.
  2. `_tile_sums_kernel`, grid (requests, tiles): per tile of G entries, the residual sum and its
     last positive column.
  3. `_sample_kernel` (per request): cumulative tile sums pick the tile holding u, one tile scan
     picks the token.
By default (launch config "fused", default true) the three are one launch, `_tree_sampling_kernel`, grid (requests,
tile programs): every program runs its request's walk in registers, sums its tiles with the last node's
rejected children zeroed (exactly what the walk's draft_probs writes make them), and the last program of the
request to finish (a counter per request, reset by that program) draws the token. One launch is one launcher
call of host time per eager call instead of three; "fused": false, or any *rows_per_program above 1, keeps the
three kernels (and their PDL).
Floating-point order: fixed by G and the launch table's warp counts (which do not vary with the
batch), never by the batch or the grid, so results are run-to-run deterministic (`deterministic` is accepted
for SGLang compatibility; both modes are
deterministic here). The accepted path is bit-identical to SGLang's (same fp32 operations in the same
order, IEEE division); the final draw can differ from SGLang's CUB scan only where u lies within fp32
rounding of a CDF boundary.
"""

from __future__ import annotations

import functools

import numpy as np
import torch
import triton
import triton.language as tl

from ._host import Step, cdiv, int_pointers, next_power_of_2, op_key_ptrs, plan
from ._tree import cached_plan, check_tree_inputs, first_child, load_tree_block, pick, pow2, take, tree_links, walk, walk_config
from .arch import Unsupported, op_config, pdl_supported, require_launchable
from .tables import launch_table

TILE = 4096  # G: residual tile, min(TILE, vocab rounded up to a power of two); it fixes the fp32
# summation order per vocabulary size (never per batch or split), so keep it fixed per release


@triton.jit
def _walk_kernel(
    predicts_ptr,  # mutable [bs*N] int32
    accept_index_ptr,  # mutable [bs, S] int32
    accept_num_ptr,  # mutable [bs] int32
    draft_probs_ptr,  # mutable [bs, N, V] f32
    work_ptr,  # out [bs, 3] int64: probs row of the last node, use-draft flag, predicts slot
    cand_ptr,
    ridx_ptr,
    nxt_ptr,
    sib_ptr,
    coins_ptr,  # [bs, N] f32
    target_probs_ptr,  # [bs, N, V] f32
    threshold_single,
    threshold_acc,
    bs,
    S,
    N,
    V,
    NP: tl.constexpr,
    BB: tl.constexpr,
    USE_PDL: tl.constexpr,
):
    if USE_PDL:
        tl.extra.cuda.gdc_launch_dependents()  # the tile-sum kernel may get its SMs now
    b, bm, offs, nm, row, cand, ridx, nxt, sib = load_tree_block(cand_ptr, ridx_ptr, nxt_ptr, sib_ptr, bs, N, NP, BB)
    coins = tl.load(coins_ptr + row, mask=nm, other=0.0)
    par, prev, rank = tree_links(nxt, sib, offs, NP)
    # q of each edge: target prob of the child's token in its parent's row, all gathered at once
    em = nm & (par >= 0) & (cand >= 0) & (cand < V)
    qoff = (b[:, None] * N + par) * V + cand
    q = tl.load(target_probs_ptr + qoff, mask=em, other=0.0)
    # prob_acc along each sibling chain in chain order: acc_k = acc_(k-1) + q_k (fp32, as CUDA)
    acc = q
    k = 1
    max_rank = tl.max(rank)
    while k <= max_rank:
        acc = tl.where(rank == k, take(acc, prev, offs) + q, acc)
        k += 1
    coin = take(coins, par, offs)  # the coin of the parent (the last accepted node when tried)
    # q: target prob of the draft token, acc: running sum over the siblings tried (one coin per parent);
    # accept when coin < acc / threshold_acc (IEEE division, as nvcc without fast-math) or q >= single
    ok = em & (q > 0) & ((coin < tl.math.div_rn(acc, threshold_acc)) | (q >= threshold_single))
    accd = first_child(par, rank, ok, offs, NP)
    pos, n, cur = walk(accd, offs, S)
    onp = nm & (pos >= 0)
    tl.store(accept_index_ptr + b[:, None] * S + pos, ridx.to(tl.int32), mask=onp)
    # path nodes before the last predict the draft token accepted after them
    tl.store(predicts_ptr + ridx, take(cand, accd, offs).to(tl.int32), mask=onp & (pos < n[:, None]))
    tl.store(accept_num_ptr + b, n, mask=bm)
    # rejected children: those tried before the accepted one, or all children of the last node when
    # the walk stopped on a rejection (not after S-1 accepts); SGLang sets draft_probs = q there
    ppos = take(pos + 1, par, offs) - 1
    tried = (ppos >= 0) & ((ppos < n[:, None]) | (n[:, None] < S - 1))
    pacc = take(accd + 1, par, offs) - 1  # the accepted sibling, if any
    arank = take(rank + 1, pacc, offs) - 1
    rej = em & tried & ((pacc < 0) | (rank < arank))
    tl.store(draft_probs_ptr + qoff, q, mask=rej)
    tl.store(work_ptr + b * 3, b * N + cur, mask=bm)
    tl.store(work_ptr + b * 3 + 1, (n != S - 1).to(tl.int64), mask=bm)
    tl.store(work_ptr + b * 3 + 2, pick(ridx, offs, cur), mask=bm)


@triton.jit
def _per_request(v, BB: tl.constexpr):
    """A per-request [BB, 1] value; a scalar when BB == 1. Uniform scalars broadcast over a tile as
    they are, whereas a [1, 1] tensor can get a one-row-per-thread layout whose broadcast to a
    [1, G] tile costs G registers and a shared-memory round trip per thread (seen: 60 us)."""
    if BB == 1:
        return tl.sum(tl.sum(v, axis=1), axis=0)
    else:
        return v


@triton.jit
def _residual(target_probs_ptr, draft_probs_ptr, prow, use_p, cols, m, V):
    """relu(q - p) of rows prow [BB, 1] at cols [BB, G]; p only where use_p. NaN -> 0 (CUDA fmaxf)."""
    off = prow * V + cols
    q = tl.load(target_probs_ptr + off, mask=m, other=0.0)
    p = tl.load(draft_probs_ptr + off, mask=m & (use_p != 0), other=0.0)
    x = q - p
    return tl.where(x > 0, x, 0.0)


@triton.jit
def _tile_sums_kernel(
    tile_sum_ptr,  # out [bs, T] f32
    tile_last_ptr,  # out [bs, T] int32: last column with a positive residual, -1 if none
    target_probs_ptr,
    draft_probs_ptr,
    work_ptr,
    bs,
    V,
    T,
    TPS,  # tiles per program
    BB: tl.constexpr,
    G: tl.constexpr,
    USE_PDL: tl.constexpr,  # programmatic dependent of _walk_kernel
):
    if USE_PDL:
        tl.extra.cuda.gdc_launch_dependents()
        tl.extra.cuda.gdc_wait()  # work rows and the draft_probs writes come from the walk
    # per-request values stay [BB, 1] (keep_dims) so that broadcasting them over a tile never
    # builds a tile in a one-row-per-thread layout
    b = tl.program_id(0).to(tl.int64) * BB + tl.arange(0, BB)[:, None]
    bm = b < bs
    prow = tl.load(work_ptr + b * 3, mask=bm, other=0)
    use_p = tl.load(work_ptr + b * 3 + 1, mask=bm, other=0)
    t0 = tl.program_id(1) * TPS
    for t in range(t0, t0 + TPS):
        cols = t * G + tl.arange(0, G)[None, :]
        m = bm & (cols < V)
        x = _residual(target_probs_ptr, draft_probs_ptr, prow, use_p, cols, m, V)
        tm = bm & (t < T)
        tl.store(tile_sum_ptr + b * T + t, tl.sum(x, axis=1, keep_dims=True), mask=tm)
        tl.store(tile_last_ptr + b * T + t, tl.max(tl.where(x > 0, cols, -1), axis=1, keep_dims=True), mask=tm)


@triton.jit
def _sample_kernel(
    predicts_ptr,  # mutable [bs*N] int32
    tile_sum_ptr,
    tile_last_ptr,
    target_probs_ptr,
    draft_probs_ptr,
    work_ptr,
    coin_ptr,  # [bs] f32 uniform_samples_for_final_sampling
    bs,
    V,
    T,
    BB: tl.constexpr,
    TP: tl.constexpr,
    G: tl.constexpr,
    USE_PDL: tl.constexpr,  # programmatic dependent of _tile_sums_kernel
):
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
    b = tl.program_id(0).to(tl.int64) * BB + tl.arange(0, BB)[:, None]
    bm = _per_request((b < bs).to(tl.int32), BB) != 0
    b = _per_request(b, BB)
    prow = tl.load(work_ptr + b * 3, mask=bm, other=0)
    use_p = tl.load(work_ptr + b * 3 + 1, mask=bm, other=0)
    slot = tl.load(work_ptr + b * 3 + 2, mask=bm, other=0)
    coin = tl.load(coin_ptr + b, mask=bm, other=0.0)
    tt = tl.arange(0, TP)[None, :]
    tm = bm & (tt < T)
    cum = tl.cumsum(tl.load(tile_sum_ptr + b * T + tt, mask=tm, other=0.0), axis=1)
    u = coin * _per_request(tl.sum(tl.where(tt == T - 1, cum, 0.0), axis=1, keep_dims=True), BB)  # coin * total
    # first tile whose cumulative sum exceeds u (cum is non-decreasing)
    tstar = _per_request(tl.sum((tm & (cum <= u)).to(tl.int32), axis=1, keep_dims=True), BB)
    before = _per_request(tl.sum(tl.where(tt == tstar - 1, cum, 0.0), axis=1, keep_dims=True), BB)  # 0 for tile 0
    cols = tstar * G + tl.arange(0, G)[None, :]
    m = bm & (tstar < T) & (cols < V)
    x = _residual(target_probs_ptr, draft_probs_ptr, prow, use_p, cols, m, V)
    cdf = tl.cumsum(x, axis=1)
    hit = m & (x > 0) & (cdf + before > u)
    j = _per_request(tl.min(tl.where(hit, cols, 2**30), axis=1, keep_dims=True), BB)
    # nothing above u (rounding): the last positive entry among the tiles scanned, else V-1
    lastcol = tl.load(tile_last_ptr + b * T + tt, mask=tm, other=-1)
    last = _per_request(tl.max(tl.where(tm & (tt <= tstar), lastcol, -1), axis=1, keep_dims=True), BB)
    tok = tl.where(j < 2**30, j, tl.where(last >= 0, last, V - 1))
    tl.store(predicts_ptr + slot, tok.to(tl.int32), mask=bm)


@triton.jit
def _unrejected(x, cols, rtok, offs, N):
    """x with 0 at the columns of rtok [NP] (-1 = none): the last node's rejected children, whose draft_probs entry
    the walk sets to their target prob, so relu(q - p) is exactly 0 there (q - q; NaN -> 0 as well)."""
    for i in range(0, N):  # a runtime bound: not unrolled (slots past N hold -1)
        tok = tl.max(tl.where(offs == i, rtok, -1), axis=0)
        x = tl.where(cols == tok, 0.0, x)
    return x


@triton.jit
def _tree_sampling_kernel(
    predicts_ptr,  # mutable [bs*N] int32
    accept_index_ptr,  # mutable [bs, S] int32
    accept_num_ptr,  # mutable [bs] int32
    draft_probs_ptr,  # mutable [bs, N, V] f32
    tile_sum_ptr,  # workspace [bs, T] f32
    tile_last_ptr,  # workspace [bs, T] int32
    sem_ptr,  # workspace [bs] int32 counters, 0 between launches
    cand_ptr,
    ridx_ptr,
    nxt_ptr,
    sib_ptr,
    coins_ptr,  # [bs, N] f32
    target_probs_ptr,  # [bs, N, V] f32
    final_ptr,  # [bs] f32 uniform_samples_for_final_sampling
    threshold_single,
    threshold_acc,
    bs,
    S,
    N,
    V,
    T,
    TPS,  # tiles per program
    NP: tl.constexpr,
    TP: tl.constexpr,
    G: tl.constexpr,
):
    """The three kernels in one launch, grid (bs, programs per request). Every program of request b runs its walk
    in registers (the tree is N <= 64 nodes); program 0 of b writes the walk's outputs. Each program sums its
    tiles of the last node's residual, the rejected children's columns zeroed in registers (what the walk's
    draft_probs writes make them), deposits the tile sums and bumps b's counter; the last to arrive draws the
    token from all tile sums (read through L2) and resets the counter (release/acquire as draft_topk's split)."""
    b, bm, offs, nm, row, cand, ridx, nxt, sib = load_tree_block(cand_ptr, ridx_ptr, nxt_ptr, sib_ptr, bs, N, NP, 1)
    coins = tl.load(coins_ptr + row, mask=nm, other=0.0)
    par, prev, rank = tree_links(nxt, sib, offs, NP)
    em = nm & (par >= 0) & (cand >= 0) & (cand < V)
    qoff = (b[:, None] * N + par) * V + cand
    q = tl.load(target_probs_ptr + qoff, mask=em, other=0.0)
    acc = q
    k = 1
    max_rank = tl.max(rank)
    while k <= max_rank:
        acc = tl.where(rank == k, take(acc, prev, offs) + q, acc)
        k += 1
    coin = take(coins, par, offs)
    ok = em & (q > 0) & ((coin < tl.math.div_rn(acc, threshold_acc)) | (q >= threshold_single))
    accd = first_child(par, rank, ok, offs, NP)
    pos, n, cur = walk(accd, offs, S)
    onp = nm & (pos >= 0)
    ppos = take(pos + 1, par, offs) - 1
    tried = (ppos >= 0) & ((ppos < n[:, None]) | (n[:, None] < S - 1))
    pacc = take(accd + 1, par, offs) - 1
    arank = take(rank + 1, pacc, offs) - 1
    rej = em & tried & ((pacc < 0) | (rank < arank))
    # the draw's row, as scalars (a [1, 1] tensor broadcast over a tile can get a costly layout: _per_request)
    bs_ = tl.program_id(0).to(tl.int64)
    cur_s = tl.sum(cur, axis=0)
    n_s = tl.sum(n, axis=0)
    prow = bs_ * N + cur_s
    use_p = (n_s != S - 1).to(tl.int64)
    slot = tl.sum(pick(ridx, offs, cur), axis=0)
    rtok = tl.sum(tl.where(rej & (par == cur[:, None]), cand, -1), axis=0)  # [NP]: the last node's rejected children
    t0 = tl.program_id(1) * TPS
    for t in range(t0, t0 + TPS):
        cols = t * G + tl.arange(0, G)
        m = cols < V
        x = _unrejected(_residual(target_probs_ptr, draft_probs_ptr, prow, use_p, cols, m, V), cols, rtok, offs, N)
        tl.store(tile_sum_ptr + bs_ * T + t, tl.sum(x, axis=0), mask=t < T)
        tl.store(tile_last_ptr + bs_ * T + t, tl.max(tl.where(x > 0, cols, -1), axis=0), mask=t < T)
    tl.debug_barrier()
    arrived = tl.atomic_add(sem_ptr + bs_, 1, sem="acq_rel")
    if arrived == tl.num_programs(1) - 1:
        coin_f = tl.load(final_ptr + bs_)
        tt = tl.arange(0, TP)
        tm = tt < T
        cum = tl.cumsum(tl.load(tile_sum_ptr + bs_ * T + tt, mask=tm, other=0.0, cache_modifier=".cg"), axis=0)
        u = coin_f * tl.sum(tl.where(tt == T - 1, cum, 0.0), axis=0)  # coin * total
        tstar = tl.sum((tm & (cum <= u)).to(tl.int32), axis=0)  # first tile whose cumulative sum exceeds u
        before = tl.sum(tl.where(tt == tstar - 1, cum, 0.0), axis=0)  # 0 for tile 0
        cols = tstar * G + tl.arange(0, G)
        m = (tstar < T) & (cols < V)
        x = _unrejected(_residual(target_probs_ptr, draft_probs_ptr, prow, use_p, cols, m, V), cols, rtok, offs, N)
        cdf = tl.cumsum(x, axis=0)
        hit = m & (x > 0) & (cdf + before > u)
        j = tl.min(tl.where(hit, cols, 2**30), axis=0)
        # nothing above u (rounding): the last positive entry among the tiles scanned, else V-1
        lastcol = tl.load(tile_last_ptr + bs_ * T + tt, mask=tm, other=-1, cache_modifier=".cg")
        last = tl.max(tl.where(tm & (tt <= tstar), lastcol, -1), axis=0)
        tok = tl.where(j < 2**30, j, tl.where(last >= 0, last, V - 1))
        tl.store(predicts_ptr + slot, tok.to(tl.int32))
        tl.store(sem_ptr + bs_, 0)  # for the next launch / graph replay
    # the walk's outputs, by program 0 of the request, last: no program's sums depend on when the draft_probs
    # writes land (the interpreter, which runs programs one by one, then checks that on the CPU too)
    if tl.program_id(1) == 0:
        tl.store(accept_index_ptr + b[:, None] * S + pos, ridx.to(tl.int32), mask=onp)
        tl.store(predicts_ptr + ridx, take(cand, accd, offs).to(tl.int32), mask=onp & (pos < n[:, None]))
        tl.store(accept_num_ptr + b, n, mask=bm)
        tl.store(draft_probs_ptr + qoff, q, mask=rej)


def tree_speculative_sampling(
    predicts: torch.Tensor,  # mutable
    accept_index: torch.Tensor,  # mutable
    accept_token_num: torch.Tensor,  # mutable
    candidates: torch.Tensor,
    retrive_index: torch.Tensor,
    retrive_next_token: torch.Tensor,
    retrive_next_sibling: torch.Tensor,
    uniform_samples: torch.Tensor,
    uniform_samples_for_final_sampling: torch.Tensor,
    target_probs: torch.Tensor,
    draft_probs: torch.Tensor,  # mutable
    threshold_single: float = 1.0,
    threshold_acc: float = 1.0,
    deterministic: bool = True,
    config: dict | None = None,
    table: dict | None = None,
) -> None:
    """SGLang's tree_speculative_sampling_target_only, parallel over the vocabulary.

    Writes predicts, accept_index, accept_token_num and (rejected entries of) draft_probs. No host
    sync, no allocation: guards, config and workspaces come from the call signature's plan (ops/_host.py),
    built on its first call; later calls launch through the compiled kernels' C launch. Guards raise
    arch.Unsupported, except thresholds outside [0, 1]: a plain ValueError (a caller's error that
    SGLang's kernel would not catch either, so handing it over would hide it). config (optional)
    overrides the table entry `tree_sampling` (keys: see sampling_plan). table (optional): the launch table
    in effect (tables.launch_table) when a caller already resolved it. On SM90+ the second and
    third kernels are programmatic dependent launches (they start while the previous one runs)."""
    del deterministic  # both modes are deterministic here (see module docstring)
    tensors = (predicts, accept_index, accept_token_num, candidates, retrive_index, retrive_next_token,
               retrive_next_sibling, uniform_samples, uniform_samples_for_final_sampling, target_probs, draft_probs)
    if table is None:
        table = launch_table(candidates.device)
    key, ptrs = op_key_ptrs("tree_sampling", table, config, tensors)
    p = plan(key, _SamplingPlan, tensors, config, table)
    if not (0 <= threshold_single <= 1 and 0 <= threshold_acc <= 1):
        raise ValueError(f"threshold_single ({threshold_single}) and threshold_acc ({threshold_acc}) must lie in [0, 1]")
    if p.bs == 0:
        return
    thr_single, thr_acc = _thresholds(threshold_single, threshold_acc)
    # the kept launches take the pointers as ints (ops/_host.int_pointers); the binder (a first call) the tensors
    pr, ai, an, ca, ri, nx, sb, us, uf, tp, dp = ptrs
    if p.fused is not None:
        if not (p.ints and p.fused.launch((pr, ai, an, dp, *p.wp, ca, ri, nx, sb, us, tp, uf, thr_single, thr_acc,
                                           *p.fused_tail))):
            p.fused(predicts, accept_index, accept_token_num, draft_probs, p.tile_sum, p.tile_last, p.sem, candidates,
                    retrive_index, retrive_next_token, retrive_next_sibling, uniform_samples, target_probs,
                    uniform_samples_for_final_sampling, thr_single, thr_acc, *p.fused_tail)
        return
    ts_, tl_, wk = p.wp
    if not (p.ints and p.walk.launch((pr, ai, an, dp, wk, ca, ri, nx, sb, us, tp, thr_single, thr_acc, *p.walk_tail))):
        p.walk(predicts, accept_index, accept_token_num, draft_probs, p.work, candidates, retrive_index,
               retrive_next_token, retrive_next_sibling, uniform_samples, target_probs, thr_single, thr_acc,
               *p.walk_tail)
    if not (p.ints and p.sums.launch((ts_, tl_, tp, dp, wk, *p.sums_tail))):
        p.sums(p.tile_sum, p.tile_last, target_probs, draft_probs, p.work, *p.sums_tail)
    if not (p.ints and p.sample.launch((pr, ts_, tl_, tp, dp, wk, uf, *p.sample_tail))):
        p.sample(predicts, p.tile_sum, p.tile_last, target_probs, draft_probs, p.work,
                 uniform_samples_for_final_sampling, *p.sample_tail)


class _SamplingPlan:
    """One call signature's launch plan (ops/_host.plan): the guards passed once, the three Steps, their integer
    and constexpr arguments, and the workspaces (reused by every call of the plan)."""

    def __init__(self, tensors, config, table):
        (predicts, accept_index, accept_token_num, candidates, retrive_index, retrive_next_token, retrive_next_sibling,
         uniform_samples, uniform_samples_for_final_sampling, target_probs, draft_probs) = tensors
        bs, n, s = check_tree_inputs(predicts, accept_index, accept_token_num, candidates, retrive_index,
                                     retrive_next_token, retrive_next_sibling)
        check_sampling_inputs(bs, n, uniform_samples, uniform_samples_for_final_sampling, target_probs, draft_probs,
                              0.0, 0.0)
        require_launchable("tree_speculative_sampling", candidates, uniform_samples, uniform_samples_for_final_sampling,
                           target_probs, draft_probs)
        vocab = target_probs.shape[2]
        if vocab <= 0:
            raise Unsupported("vocab must be positive")
        self.table = table  # held: the plan's key names it by id
        self.bs = bs
        if bs == 0:
            return
        dev = candidates.device
        cfg = dict(config) if config is not None else op_config("tree_sampling", {"bs": bs, "n": n, "vocab": vocab},
                                                                 table)
        pl = sampling_plan(bs, n, vocab, cfg)
        pdl = bool(cfg.get("pdl", True)) and pdl_supported(dev)
        tiles, g = pl["tiles"], pl["G"]
        self.work = torch.empty((bs, 3), dtype=torch.int64, device=dev)
        self.tile_sum = torch.empty((bs, tiles), dtype=torch.float32, device=dev)
        self.tile_last = torch.empty((bs, tiles), dtype=torch.int32, device=dev)
        self.fused = None
        self.ints = int_pointers()
        # one launch (_tree_sampling_kernel, one request per program) where fused_taken, else the three kernels
        if fused_taken(cfg, pl):
            self.sem = torch.zeros(bs, dtype=torch.int32, device=dev)
            self.wp = (self.tile_sum.data_ptr(), self.tile_last.data_ptr(), self.sem.data_ptr())
            self.fused = Step(_tree_sampling_kernel, (bs, cdiv(tiles, pl["tps"])), num_warps=pl["sum_warps"])
            self.fused_tail = (bs, s, n, vocab, tiles, pl["tps"], pl["np"], pl["TP"], g)
            return
        self.wp = (self.tile_sum.data_ptr(), self.tile_last.data_ptr(), self.work.data_ptr())
        self.walk = Step(_walk_kernel, (cdiv(bs, pl["walk_bb"]),), num_warps=pl["walk_warps"])
        self.walk_tail = (bs, s, n, vocab, pl["np"], pl["walk_bb"], pdl)
        self.sums = Step(_tile_sums_kernel, (cdiv(bs, pl["sum_bb"]), cdiv(tiles, pl["tps"])), num_warps=pl["sum_warps"],
                         launch_pdl=pdl)
        self.sums_tail = (bs, vocab, tiles, pl["tps"], pl["sum_bb"], g, pdl)
        self.sample = Step(_sample_kernel, (cdiv(bs, pl["sample_bb"]),), num_warps=pl["sample_warps"], launch_pdl=pdl)
        self.sample_tail = (bs, vocab, tiles, pl["sample_bb"], pl["TP"], g, pdl)


def check_sampling_inputs(bs: int, n: int, uniform_samples, uniform_samples_for_final_sampling, target_probs,
                          draft_probs, threshold_single: float, threshold_acc: float) -> None:
    """The sampling half of the contract (check_tree_inputs guards the tree): Unsupported for a layout
    or dtype these kernels do not take, ValueError for thresholds outside [0, 1]."""
    f32 = torch.float32
    if not (target_probs.ndim == 3 and target_probs.shape[:2] == (bs, n) and target_probs.dtype == f32
            and target_probs.is_contiguous()):
        raise Unsupported(f"target_probs must be a contiguous fp32 [{bs}, {n}, vocab] tensor, "
                         f"got {target_probs.dtype} {tuple(target_probs.shape)}")
    if draft_probs.shape != target_probs.shape or draft_probs.dtype != f32 or not draft_probs.is_contiguous():
        raise Unsupported(f"draft_probs must be a contiguous fp32 tensor shaped like target_probs {tuple(target_probs.shape)}")
    if tuple(uniform_samples.shape) != (bs, n) or uniform_samples.dtype != f32 or not uniform_samples.is_contiguous():
        raise Unsupported(f"uniform_samples must be a contiguous fp32 [{bs}, {n}] tensor")
    if tuple(uniform_samples_for_final_sampling.shape) != (bs,) or uniform_samples_for_final_sampling.dtype != f32:
        raise Unsupported(f"uniform_samples_for_final_sampling must be fp32 [{bs}]")
    if not (0 <= threshold_single <= 1 and 0 <= threshold_acc <= 1):
        raise ValueError(f"threshold_single ({threshold_single}) and threshold_acc ({threshold_acc}) must lie in [0, 1]")


@functools.lru_cache(maxsize=64)
def _thresholds(threshold_single: float, threshold_acc: float) -> tuple[float, float]:
    """The two thresholds as SGLang's kernel reads them (fp32; threshold_acc clamped to >= 1e-9), once per pair."""
    return float(np.float32(threshold_single)), float(max(np.float32(threshold_acc), np.float32(1e-9)))


def launch_sampling(predicts, accept_index, accept_token_num, candidates, retrive_index, retrive_next_token,
                    retrive_next_sibling, uniform_samples, uniform_samples_for_final_sampling, target_probs,
                    draft_probs, threshold_single: float, threshold_acc: float, s: int, cfg: dict,
                    pdl_ok: bool) -> None:
    """The three launches on checked inputs (bs > 0) through Triton's binder, with fresh workspaces; cfg: launch
    parameters (see sampling_plan); pdl_ok: programmatic dependent launch available on this device. The reference
    the planned path (tree_speculative_sampling) is compared with (test/ops/test_host_path.py), and the launch of
    the upstream PR's copy."""
    bs, n, vocab = target_probs.shape
    dev = candidates.device
    # SGLang's kernel takes float thresholds (threshold_acc clamped to >= 1e-9 to avoid 0/0)
    thr_single, thr_acc = _thresholds(threshold_single, threshold_acc)
    pl = cached_plan(sampling_plan, bs, n, vocab, cfg)
    pdl = bool(cfg.get("pdl", True)) and pdl_ok
    work = torch.empty((bs, 3), dtype=torch.int64, device=dev)
    _walk_kernel[(cdiv(bs, pl["walk_bb"]),)](
        predicts, accept_index, accept_token_num, draft_probs, work, candidates, retrive_index,
        retrive_next_token, retrive_next_sibling, uniform_samples, target_probs, thr_single, thr_acc,
        bs, s, n, vocab, NP=pl["np"], BB=pl["walk_bb"], USE_PDL=pdl, num_warps=pl["walk_warps"])
    tiles, g = pl["tiles"], pl["G"]
    tile_sum = torch.empty((bs, tiles), dtype=torch.float32, device=dev)
    tile_last = torch.empty((bs, tiles), dtype=torch.int32, device=dev)
    _tile_sums_kernel[(cdiv(bs, pl["sum_bb"]), cdiv(tiles, pl["tps"]))](
        tile_sum, tile_last, target_probs, draft_probs, work, bs, vocab, tiles, pl["tps"], BB=pl["sum_bb"], G=g,
        USE_PDL=pdl, num_warps=pl["sum_warps"], launch_pdl=pdl)
    _sample_kernel[(cdiv(bs, pl["sample_bb"]),)](
        predicts, tile_sum, tile_last, target_probs, draft_probs, work, uniform_samples_for_final_sampling,
        bs, vocab, tiles, BB=pl["sample_bb"], TP=pl["TP"], G=g, USE_PDL=pdl, num_warps=pl["sample_warps"],
        launch_pdl=pdl)


_FUSED_WORK: dict = {}  # launch_sampling_fused's workspaces: (device, bs, tiles) -> (tile sums, tile lasts, counters)


def launch_sampling_fused(predicts, accept_index, accept_token_num, candidates, retrive_index, retrive_next_token,
                          retrive_next_sibling, uniform_samples, uniform_samples_for_final_sampling, target_probs,
                          draft_probs, threshold_single: float, threshold_acc: float, s: int, cfg: dict,
                          work: tuple | None = None) -> None:
    """One launch of _tree_sampling_kernel on checked inputs (bs > 0) through Triton's binder: the upstream PR's
    default path (no plan, no compiled-launcher fast path; one launch instead of three is most of the host saving).
    Workspaces per (device, bs, tiles), kept and reused (fused_workspaces; `work` hands them in instead, so that
    every tensor of the launch is an argument of its caller): the counters are zero between launches (the kernel
    resets them), the tile sums and lasts are rewritten by every launch, so calls on one stream share them,
    CUDA-graph replays included. cfg: launch parameters (sampling_plan; num_warps, tiles_per_program)."""
    bs, n, vocab = target_probs.shape
    thr_single, thr_acc = _thresholds(threshold_single, threshold_acc)
    pl = cached_plan(sampling_plan, bs, n, vocab, cfg)
    tiles, g = pl["tiles"], pl["G"]
    if work is None:
        work = fused_workspaces(candidates.device, bs, tiles)
    _tree_sampling_kernel[(bs, cdiv(tiles, pl["tps"]))](
        predicts, accept_index, accept_token_num, draft_probs, *work, candidates, retrive_index, retrive_next_token,
        retrive_next_sibling, uniform_samples, target_probs, uniform_samples_for_final_sampling, thr_single, thr_acc,
        bs, s, n, vocab, tiles, pl["tps"], NP=pl["np"], TP=pl["TP"], G=g, num_warps=pl["sum_warps"])


def fused_workspaces(dev, bs: int, tiles: int) -> tuple:
    """launch_sampling_fused's workspaces for (device, bs, tiles), made at the first call and kept: tile sums
    [bs, tiles] f32, tile lasts [bs, tiles] int32, counters [bs] int32 (zero; the kernel leaves them zero)."""
    work = _FUSED_WORK.get((dev, bs, tiles))
    if work is None:
        work = _FUSED_WORK[(dev, bs, tiles)] = (torch.empty((bs, tiles), dtype=torch.float32, device=dev),
                                                torch.empty((bs, tiles), dtype=torch.int32, device=dev),
                                                torch.zeros(bs, dtype=torch.int32, device=dev))
    return work


def fused_taken(cfg: dict, pl: dict) -> bool:
    """One launch (_tree_sampling_kernel) for this config: unless "fused" is false or a config packs several
    requests into a program (the three kernels take such configs)."""
    return bool(cfg.get("fused", True)) and pl["walk_bb"] == pl["sum_bb"] == pl["sample_bb"] == 1


def sampling_plan(bs: int, n: int, vocab: int, cfg: dict) -> dict:
    """Launch parameters of the three kernels for one call (pure: used by the launcher and the
    SM120 compile test). cfg keys: walk_rows_per_program, walk_num_warps, rows_per_program,
    num_warps, tiles_per_program (tile sums), sample_rows_per_program, sample_num_warps, pdl; and "fused"
    (tree_speculative_sampling: one launch, _tree_sampling_kernel with num_warps and tiles_per_program; default true, taken
    when every *rows_per_program is 1)."""
    wcfg = {"rows_per_program": cfg.get("walk_rows_per_program", 1)}
    if "walk_num_warps" in cfg:
        wcfg["num_warps"] = cfg["walk_num_warps"]
    np_, walk_bb, walk_warps = walk_config("tree_sampling", n, bs, wcfg, None)
    g = min(TILE, pow2(vocab, 16))
    tiles = cdiv(vocab, g)
    sum_bb = max(1, next_power_of_2(int(cfg.get("rows_per_program", 1))))
    tps = max(1, min(int(cfg.get("tiles_per_program", 1)), tiles))
    return {"np": np_, "walk_bb": walk_bb, "walk_warps": walk_warps, "G": g, "tiles": tiles, "TP": pow2(tiles, 1),
            "sum_bb": sum_bb, "tps": tps, "sum_warps": int(cfg.get("num_warps", 8)),
            "sample_bb": max(1, next_power_of_2(int(cfg.get("sample_rows_per_program", 1)))),
            "sample_warps": int(cfg.get("sample_num_warps", 8))}


def tree_speculative_sampling_ref(
    predicts: torch.Tensor,  # mutable
    accept_index: torch.Tensor,  # mutable
    accept_token_num: torch.Tensor,  # mutable
    candidates: torch.Tensor,
    retrive_index: torch.Tensor,
    retrive_next_token: torch.Tensor,
    retrive_next_sibling: torch.Tensor,
    uniform_samples: torch.Tensor,
    uniform_samples_for_final_sampling: torch.Tensor,
    target_probs: torch.Tensor,
    draft_probs: torch.Tensor,  # mutable
    threshold_single: float = 1.0,
    threshold_acc: float = 1.0,
    deterministic: bool = True,
) -> None:
    """Ground truth: SGLang's sequential walk per request (fp32 scalar arithmetic as the CUDA kernel),
    then inverse-CDF sampling of relu(q - p) with the CDF in float64 (exact for dyadic inputs)."""
    f32 = np.float32
    bs, n = candidates.shape
    s = accept_index.shape[1]
    vocab = target_probs.shape[2]
    thr_single, thr_acc = f32(threshold_single), max(f32(threshold_acc), f32(1e-9))
    cand, ridx = candidates.tolist(), retrive_index.tolist()
    nxt, sib = retrive_next_token.tolist(), retrive_next_sibling.tolist()
    tp = target_probs.numpy() if target_probs.device.type == "cpu" else target_probs.cpu().numpy()
    coins = uniform_samples.cpu().numpy()
    for b in range(bs):
        prob_acc, row, coin = f32(0), 0, coins[b, 0]
        last = ridx[b][0]
        accept_index[b, 0] = last
        n_acc, cur = 0, 0
        for _ in range(1, s):
            cur = nxt[b][cur]
            while cur != -1:
                tok = cand[b][cur]
                q = f32(tp[b, row, tok])
                prob_acc = f32(prob_acc + q)
                # q: target prob of the draft token; accept with the running sum against one coin
                if q > 0 and (coin < f32(prob_acc / thr_acc) or q >= thr_single):
                    prob_acc, row, coin = f32(0), cur, coins[b, cur]
                    predicts[last] = tok
                    n_acc += 1
                    accept_index[b, n_acc] = ridx[b][cur]
                    last = ridx[b][cur]
                    break
                draft_probs[b, row, tok] = float(q)  # rejected: its mass leaves the residual
                cur = sib[b][cur]
            if cur == -1:
                break
        accept_token_num[b] = n_acc
        q = target_probs[b, row].double()
        p = draft_probs[b, row].double() if n_acc != s - 1 else torch.zeros_like(q)  # no draft for the bonus
        x = torch.where(q - p > 0, q - p, torch.zeros_like(q))  # relu, NaN -> 0
        cdf = torch.cumsum(x, 0)
        u = float(f32(uniform_samples_for_final_sampling[b].item()) * f32(cdf[-1].item()))
        above = torch.nonzero((cdf > u) & (x > 0))
        pos = torch.nonzero(x > 0)
        predicts[last] = int(above[0]) if len(above) else (int(pos[-1]) if len(pos) else vocab - 1)
