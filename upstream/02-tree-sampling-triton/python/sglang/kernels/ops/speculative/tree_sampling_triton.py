"""Target-only tree rejection sampling in Triton, parallel over the vocabulary.

Same contract as the JIT CUDA ``tree_speculative_sampling_target_only`` (sampling.py), which runs one
1024-thread block per request over the whole vocabulary:
  candidates, retrive_index, retrive_next_token, retrive_next_sibling  [bs, N] int64
  uniform_samples [bs, N] f32, uniform_samples_for_final_sampling [bs] f32
  target_probs [bs, N, V] f32, draft_probs [bs, N, V] f32 (mutable)
  predicts [bs*N], accept_index [bs, S], accept_token_num [bs] int32 (mutable)
Walk, per request: coin = uniform_samples[b, node] of the last accepted node (the root first);
prob_acc sums the target probability q of each child tried, in sibling order; a child with q > 0 is
accepted when coin < prob_acc / threshold_acc or q >= threshold_single. A rejected child's
draft_probs entry in that row is set to its q. After the walk (at most S-1 accepts) the last node's
token is drawn from relu(target - draft) of its row (draft ignored after S-1 accepts), by inverse
CDF with u = uniform_final * sum; if no entry exceeds u, the last positive entry, else V-1.

Three launches:
  1. ``_walk_kernel`` (per request): the walk, every edge probability gathered in one load, tree
     links resolved in registers; writes accept_index, accept_token_num, the accepted predicts and
     the draft_probs side effect, and which row the final draw uses.
  2. ``_tile_sums_kernel``, grid (requests, tiles): per tile of G entries, the residual sum and its
     last positive column.
  3. ``_sample_kernel`` (per request): the tile prefix picks the tile holding u, one tile scan picks
     the token.
The accepted path, accept counts and draft_probs are bit-identical to the CUDA kernel's (same fp32
operations in the same order, IEEE division). The final draw sums in a fixed order (tiles of
min(4096, V)): run-to-run deterministic in both ``deterministic`` modes, independent of batch size;
it can differ from the CUDA kernel's CUB scan only where u lies within fp32 rounding of a CDF
boundary. Trees: well formed (each node in at most one sibling chain), N <= 64.

``tree_speculative_sampling_dispatch`` wraps the CUDA kernel: this one where DISPATCH (measured on
the H200 against the CUDA kernel, see benchmark/kernels/speculative/bench_tree_sampling_triton.py)
says it wins, the CUDA kernel everywhere else. SGLANG_SPEC_TREE_SAMPLING_BACKEND=auto|triton|cuda.
"""

from __future__ import annotations

import functools
import os
from typing import Callable, Optional

import numpy as np
import torch
import triton
import triton.language as tl

TILE = 4096  # G: residual tile, min(TILE, vocab rounded up to a power of two); it fixes the fp32
# summation order per vocabulary size (never per batch or split)
MAX_DRAFT_TOKENS = 64  # the in-register link matrices are [NP, NP]

# Launch parameters (measured on the H200; variants within ~3% of these)
LAUNCH = {
    "walk_rows_per_program": 1,
    "walk_num_warps": 1,
    "rows_per_program": 1,
    "tiles_per_program": 1,
    "num_warps": 8,
    "sample_rows_per_program": 1,
    "sample_num_warps": 4,
    "pdl": True,
}
LAUNCH_WIDE = {**LAUNCH, "walk_num_warps": 4}  # N > 16

# Where the Triton kernel beat the CUDA kernel (ratio = CUDA us / Triton us, CUDA-graph replay,
# NVIDIA H200, torch 2.11, triton 3.6, vocab 163840): N 4 / 16 at bs 1..256, 1.9-6.8x. Other
# architectures, N > 16, other vocabularies: not measured, so the CUDA kernel runs there.
DISPATCH = {
    # compute capability major: (max draft tokens N, max batch size, vocabularies measured)
    9: (16, 256, (163840,)),
}

ENV_BACKEND = "SGLANG_SPEC_TREE_SAMPLING_BACKEND"  # srt/environ.py


class Unsupported(ValueError):
    """Outside this kernel's fast path (layout, dtype, device, tree size): the CUDA kernel takes it."""


def pow2(n: int, lo: int = 2) -> int:
    return max(lo, triton.next_power_of_2(max(int(n), 1)))


def launch_config(n: int) -> dict:
    return dict(LAUNCH_WIDE if n > 16 else LAUNCH)


def _walk_config(n_draft: int, cfg: dict) -> tuple:
    """(NP, requests per program, num_warps): keeps the [BB, NP, NP] link matrices <= 8192 elements."""
    np_ = pow2(n_draft)
    bb = int(cfg.get("rows_per_program", 1))
    bb = max(1, min(triton.next_power_of_2(bb), max(1, 8192 // (np_ * np_))))
    warps = int(cfg.get("num_warps", 1 if np_ * np_ * bb <= 256 else 4))
    return np_, bb, warps


@functools.lru_cache(maxsize=None)
def _pdl_supported_index(index: int) -> bool:
    try:
        from triton.backends.nvidia.compiler import CUDAOptions

        return (
            "launch_pdl" in CUDAOptions.__dataclass_fields__
            and hasattr(tl.extra.cuda, "gdc_wait")
            and torch.cuda.get_device_capability(index)[0] >= 9
        )
    except Exception:
        return False


def _pdl_supported(device: torch.device) -> bool:
    """Programmatic dependent launch: CUDA SM90+, compiled (not interpreted), Triton >= 3.4."""
    if device.type != "cuda" or os.environ.get("TRITON_INTERPRET", "0") == "1":
        return False
    return _pdl_supported_index(device.index if device.index is not None else torch.cuda.current_device())


def _require_launchable(*tensors) -> None:
    devs = {t.device for t in tensors}
    if len(devs) > 1:
        raise Unsupported(f"tensors on several devices {sorted(map(str, devs))}")
    if os.environ.get("TRITON_INTERPRET", "0") != "1" and next(iter(devs)).type != "cuda":
        raise Unsupported(f"tensors on {next(iter(devs))}: this Triton kernel runs on CUDA")


# ----------------------------------------------------------------------------- tree helpers


@triton.jit
def pick(vec, offs, idx):
    """vec[b, idx[b]] for each row b of vec [BB, NP] (0 where idx[b] is out of range)."""
    return tl.sum(tl.where(offs[None, :] == idx[:, None], vec, 0), axis=1)


@triton.jit
def take(vec, idx, offs):
    """out[b, i] = vec[b, idx[b, i]] (0 where idx[b, i] is out of range), vec/idx [BB, NP].

    Exact for ints and floats: each output sums one selected element and zeros."""
    hit = idx[:, :, None] == offs[None, None, :]
    return tl.sum(tl.where(hit, vec[:, None, :], 0), axis=2)


@triton.jit
def tree_links(nxt, sib, offs, NP: tl.constexpr):
    """Parent, previous sibling and rank in the sibling chain of every node ([BB, NP] each, -1 = none).

    nxt/sib are retrive_next_token/_sibling (row-local, -1 terminated). A node's parent is the node
    whose first child it is, or its previous sibling's parent; rank 0 is the first child. The loop
    runs once per sibling position (topk - 1 times on a SGLang tree; capped at NP)."""
    hit = nxt[:, :, None] == offs[None, None, :]  # [BB, p, c]: c is p's first child
    par = tl.max(tl.where(hit, offs[None, :, None], -1), axis=1)
    hit = sib[:, :, None] == offs[None, None, :]  # [BB, x, c]: c follows x
    prev = tl.max(tl.where(hit, offs[None, :, None], -1), axis=1)
    rank = tl.where(par >= 0, 0, -1)
    todo = (par < 0) & (prev >= 0)
    it = 0
    while (tl.max(todo.to(tl.int32)) > 0) & (it < NP):
        pp = take(par + 1, prev, offs) - 1  # parent of the previous sibling, -1 if not known yet
        pr = take(rank + 1, prev, offs)
        upd = todo & (pp >= 0)
        par = tl.where(upd, pp, par)
        rank = tl.where(upd, pr, rank)
        todo = todo & (pp < 0)
        it += 1
    return par, prev, rank


@triton.jit
def first_child(par, rank, ok, offs, NP: tl.constexpr):
    """acc[b, p] = the child c of p with ok[b, c] that comes first in p's sibling chain, else -1."""
    key = tl.where(ok & (par >= 0), rank * NP + offs[None, :], 1 << 30)  # [BB, c]
    hit = par[:, None, :] == offs[None, :, None]  # [BB, p, c]
    k = tl.min(tl.where(hit, key[:, None, :], 1 << 30), axis=2)
    return tl.where(k < (1 << 30), k % NP, -1)


@triton.jit
def walk(acc, offs, S):
    """Follow acc (first accepted child) from the root for at most S-1 steps.

    Returns pos [BB, NP] (a node's position on the accepted path, -1 off it), n [BB] (accepted
    draft tokens) and cur [BB] (the last path node, row-local)."""
    zero = tl.sum(acc * 0, axis=1)  # [BB] int32 zeros in acc's row layout
    n = zero
    cur = zero
    pos = tl.where(offs[None, :] == 0, 0, -1) + acc * 0
    nx = pick(acc, offs, cur)
    go = (nx >= 0) & (n + 1 < S)
    while tl.max(go.to(tl.int32)) > 0:
        n = tl.where(go, n + 1, n)
        cur = tl.where(go, nx, cur)
        pos = tl.where(go[:, None] & (offs[None, :] == cur[:, None]), n[:, None], pos)
        nx = pick(acc, offs, cur)
        go = go & (nx >= 0) & (n + 1 < S)
    return pos, n, cur


@triton.jit
def load_tree_block(cand_ptr, ridx_ptr, nxt_ptr, sib_ptr, bs, N, NP: tl.constexpr, BB: tl.constexpr):
    """This program's BB requests x NP node slots: candidates, retrive_index/next_token/next_sibling.
    Masked slots (past bs or N) read -1. Request ids in int64 (row offsets may pass 2**31)."""
    b = tl.program_id(0).to(tl.int64) * BB + tl.arange(0, BB)
    bm = b < bs
    offs = tl.arange(0, NP)
    nm = bm[:, None] & (offs[None, :] < N)
    row = b[:, None] * N + offs[None, :]
    cand = tl.load(cand_ptr + row, mask=nm, other=-1)
    ridx = tl.load(ridx_ptr + row, mask=nm, other=-1)
    nxt = tl.load(nxt_ptr + row, mask=nm, other=-1).to(tl.int32)
    sib = tl.load(sib_ptr + row, mask=nm, other=-1).to(tl.int32)
    return b, bm, offs, nm, row, cand, ridx, nxt, sib


# ----------------------------------------------------------------------------- kernels


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


def tree_speculative_sampling_triton(
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
    config: Optional[dict] = None,
) -> None:
    """tree_speculative_sampling_target_only, parallel over the vocabulary (same contract).

    Writes predicts, accept_index, accept_token_num and (rejected entries of) draft_probs. No host
    sync; allocations are shape-dependent workspaces only (CUDA-graph safe). Guards raise
    Unsupported (the dispatcher then runs the CUDA kernel), except thresholds outside [0, 1]: a
    ValueError. config (optional) overrides LAUNCH (keys: see sampling_plan). On SM90+ the second
    and third kernels are programmatic dependent launches."""
    del deterministic  # both modes are deterministic here (see module docstring)
    bs, n, s = check_tree_inputs(predicts, accept_index, accept_token_num, candidates, retrive_index,
                                 retrive_next_token, retrive_next_sibling)
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
    _require_launchable(candidates, uniform_samples, uniform_samples_for_final_sampling, target_probs,
                        draft_probs, predicts, accept_index, accept_token_num, retrive_index,
                        retrive_next_token, retrive_next_sibling)
    vocab = target_probs.shape[2]
    if vocab <= 0:
        raise Unsupported("vocab must be positive")
    if bs == 0:
        return
    dev = candidates.device
    cfg = dict(config) if config is not None else launch_config(n)
    # SGLang's kernel takes float thresholds (threshold_acc clamped to >= 1e-9 to avoid 0/0)
    thr_single = float(np.float32(threshold_single))
    thr_acc = float(max(np.float32(threshold_acc), np.float32(1e-9)))
    pl = sampling_plan(bs, n, vocab, cfg)
    pdl = bool(cfg.get("pdl", True)) and _pdl_supported(dev)
    work = torch.empty((bs, 3), dtype=torch.int64, device=dev)
    _walk_kernel[(triton.cdiv(bs, pl["walk_bb"]),)](
        predicts, accept_index, accept_token_num, draft_probs, work, candidates, retrive_index,
        retrive_next_token, retrive_next_sibling, uniform_samples, target_probs, thr_single, thr_acc,
        bs, s, n, vocab, NP=pl["np"], BB=pl["walk_bb"], USE_PDL=pdl, num_warps=pl["walk_warps"])
    tiles, g = pl["tiles"], pl["G"]
    tile_sum = torch.empty((bs, tiles), dtype=torch.float32, device=dev)
    tile_last = torch.empty((bs, tiles), dtype=torch.int32, device=dev)
    _tile_sums_kernel[(triton.cdiv(bs, pl["sum_bb"]), triton.cdiv(tiles, pl["tps"]))](
        tile_sum, tile_last, target_probs, draft_probs, work, bs, vocab, tiles, pl["tps"], BB=pl["sum_bb"], G=g,
        USE_PDL=pdl, num_warps=pl["sum_warps"], launch_pdl=pdl)
    _sample_kernel[(triton.cdiv(bs, pl["sample_bb"]),)](
        predicts, tile_sum, tile_last, target_probs, draft_probs, work, uniform_samples_for_final_sampling,
        bs, vocab, tiles, BB=pl["sample_bb"], TP=pl["TP"], G=g, USE_PDL=pdl, num_warps=pl["sample_warps"],
        launch_pdl=pdl)


def sampling_plan(bs: int, n: int, vocab: int, cfg: dict) -> dict:
    """Launch parameters of the three kernels for one call (pure: used by the launcher and the
    SM120 compile test). cfg keys: walk_rows_per_program, walk_num_warps, rows_per_program,
    num_warps, tiles_per_program (tile sums), sample_rows_per_program, sample_num_warps, pdl."""
    wcfg = {"rows_per_program": cfg.get("walk_rows_per_program", 1)}
    if "walk_num_warps" in cfg:
        wcfg["num_warps"] = cfg["walk_num_warps"]
    np_, walk_bb, walk_warps = _walk_config(n, wcfg)
    g = min(TILE, pow2(vocab, 16))
    tiles = triton.cdiv(vocab, g)
    sum_bb = max(1, triton.next_power_of_2(int(cfg.get("rows_per_program", 1))))
    tps = max(1, min(int(cfg.get("tiles_per_program", 1)), tiles))
    return {"np": np_, "walk_bb": walk_bb, "walk_warps": walk_warps, "G": g, "tiles": tiles, "TP": pow2(tiles, 1),
            "sum_bb": sum_bb, "tps": tps, "sum_warps": int(cfg.get("num_warps", 8)),
            "sample_bb": max(1, triton.next_power_of_2(int(cfg.get("sample_rows_per_program", 1)))),
            "sample_warps": int(cfg.get("sample_num_warps", 8))}



def check_tree_inputs(predicts, accept_index, accept_token_num, candidates, retrive_index, retrive_next_token,
                      retrive_next_sibling) -> tuple[int, int, int]:
    """Guard SGLang's tree-op contract; returns (bs, N, S). Every rejection is Unsupported (a
    layout, dtype, device or tree size these kernels do not take: SGLang's kernel takes the call)."""
    if candidates.ndim != 2:
        raise Unsupported(f"candidates must be [bs, num_draft_tokens], got shape {tuple(candidates.shape)}")
    bs, n = candidates.shape

    def need(ok: bool, name: str, t: torch.Tensor, want: str):
        if not ok:
            raise Unsupported(f"{name} must be {want}, got {t.dtype} {tuple(t.shape)}")

    for name, t in (("candidates", candidates), ("retrive_index", retrive_index),
                    ("retrive_next_token", retrive_next_token), ("retrive_next_sibling", retrive_next_sibling)):
        need(t.dtype == torch.int64 and tuple(t.shape) == (bs, n) and t.is_contiguous(), name, t,
             f"a contiguous int64 [{bs}, {n}] tensor")
    need(accept_index.ndim == 2 and accept_index.shape[0] == bs and accept_index.dtype == torch.int32
         and accept_index.is_contiguous(), "accept_index", accept_index, f"a contiguous int32 [{bs}, spec_steps+1] tensor")
    need(tuple(accept_token_num.shape) == (bs,) and accept_token_num.dtype == torch.int32, "accept_token_num",
         accept_token_num, f"int32 [{bs}]")
    need(tuple(predicts.shape) == (bs * n,) and predicts.dtype == torch.int32 and predicts.is_contiguous(), "predicts",
         predicts, f"a contiguous int32 [{bs * n}] tensor")
    if n <= 0 or accept_index.shape[1] <= 0:
        raise Unsupported("num_draft_tokens and accept_index.shape[1] must be positive")
    if n > MAX_DRAFT_TOKENS:
        raise Unsupported(f"{n} draft tokens per request: these kernels take at most {MAX_DRAFT_TOKENS} "
                         "(the hooks hand larger trees to SGLang's kernels)")
    return bs, n, accept_index.shape[1]


# ----------------------------------------------------------------------------- dispatch


def use_triton(bs: int, n: int, vocab: int, device: torch.device) -> bool:
    """The Triton kernel for this call? (auto: only where DISPATCH records a measured win)."""
    from sglang.srt.environ import envs

    mode = (envs.SGLANG_SPEC_TREE_SAMPLING_BACKEND.get() or "auto").strip().lower()
    if mode not in ("auto", "triton", "cuda"):
        raise ValueError(f"{ENV_BACKEND}={mode!r}: expected auto, triton or cuda")
    if mode != "auto":
        return mode == "triton"
    if device.type != "cuda":
        return False
    entry = DISPATCH.get(_capability_major(device))
    if entry is None:
        return False
    max_n, max_bs, vocabs = entry
    return n <= max_n and bs <= max_bs and vocab in vocabs


@functools.lru_cache(maxsize=None)
def _capability_major_index(index: int) -> int:
    return torch.cuda.get_device_capability(index)[0]


def _capability_major(device: torch.device) -> int:
    return _capability_major_index(device.index if device.index is not None else torch.cuda.current_device())


def tree_speculative_sampling_dispatch(cuda_kernel: Optional[Callable]) -> Optional[Callable]:
    """Wrap the CUDA tree_speculative_sampling_target_only: Triton where it wins, else `cuda_kernel`.

    Decided on the host from shapes and the device only (CUDA-graph safe). Calls outside the Triton
    kernel's fast path (Unsupported) go to the CUDA kernel."""
    if cuda_kernel is None:
        return None

    @functools.wraps(cuda_kernel)
    def tree_speculative_sampling_target_only(
        predicts, accept_index, accept_token_num, candidates, retrive_index, retrive_next_token,
        retrive_next_sibling, uniform_samples, uniform_samples_for_final_sampling, target_probs,
        draft_probs, threshold_single=1.0, threshold_acc=1.0, deterministic=True,
    ):
        args = (predicts, accept_index, accept_token_num, candidates, retrive_index, retrive_next_token,
                retrive_next_sibling, uniform_samples, uniform_samples_for_final_sampling, target_probs,
                draft_probs, threshold_single, threshold_acc, deterministic)
        if target_probs.ndim == 3 and use_triton(target_probs.shape[0], target_probs.shape[1],
                                                 target_probs.shape[2], target_probs.device):
            try:
                return tree_speculative_sampling_triton(*args)
            except Unsupported:
                pass
        return cuda_kernel(*args)

    tree_speculative_sampling_target_only.cuda_kernel = cuda_kernel
    return tree_speculative_sampling_target_only


# ----------------------------------------------------------------------------- reference and test trees


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


def random_tree_parents(rng, n: int, topk: int, depth: int) -> list[int]:
    """A random tree of n nodes as a parent list: at most topk children per node and `depth` levels
    below the root (rng: random.Random). For tests and benchmarks."""
    par, lvl, kids = [-1], [0], [0] * n
    for i in range(1, n):
        open_ = [p for p in range(i) if lvl[p] < depth and kids[p] < topk]
        p = rng.choice(open_) if open_ else 0
        par.append(p)
        lvl.append(lvl[p] + 1)
        kids[p] += 1
    return par


def tree_from_parents(parents: list[list[int]], sibling_order: str = "asc", device=None):
    """SGLang's (retrive_index, retrive_next_token, retrive_next_sibling) [bs, N] int64 for trees
    given as parent lists (parents[b][0] == -1 for the root; every other parent has a lower index).

    retrive_index is the flat row b*N + i; children are chained in ascending ("asc") or descending
    ("desc") node order. Tests and benchmarks build their trees with this."""
    bs, n = len(parents), len(parents[0])
    ridx = torch.arange(bs * n, dtype=torch.int64).reshape(bs, n)
    nxt = torch.full((bs, n), -1, dtype=torch.int64)
    sib = torch.full((bs, n), -1, dtype=torch.int64)
    for b, par in enumerate(parents):
        if len(par) != n or par[0] != -1 or any(not 0 <= p < i for i, p in enumerate(par) if i):
            raise ValueError(f"request {b}: parents must start with -1 and point to lower indices, got {par}")
        for p in range(n):
            kids = [i for i in range(1, n) if par[i] == p]
            if sibling_order == "desc":
                kids.reverse()
            if kids:
                nxt[b, p] = kids[0]
                for a, c in zip(kids, kids[1:]):
                    sib[b, a] = c
    if device is not None:
        ridx, nxt, sib = ridx.to(device), nxt.to(device), sib.to(device)
    return ridx, nxt, sib


def emission_law(parents: list[int], candidates: list[int], target_probs, spec_steps: int) -> dict[tuple, float]:
    """The law of the tokens one request emits under SGLang's target-only rule: what any correct kernel
    must produce with thresholds 1 and draft_probs all zero on entry (as eagle_sample passes them: the
    draft is a point mass on its token), sibling draft tokens distinct.

    From a node v with target row q_v: one coin against the running sum accepts the child whose token
    is t with probability q_v(t); when none is accepted, the residual (q_v less the tried children's
    mass) emits any other token x with probability q_v(x); after spec_steps - 1 accepts the bonus
    token is drawn from q_v. So each emitted token follows the target row it is drawn from, and the
    walk goes on exactly when it equals a child's token. (A draft distribution left in draft_probs
    would be subtracted from the residual: the emitted token would then not follow q_v.)
    Returns {(t_1, ..., t_k): probability}: the accepted path's tokens, then the final draw.
    parents/candidates: one request's tree (parents[0] == -1) and draft tokens; target_probs [N, V]."""
    q = [[float(x) for x in row] for row in target_probs.tolist()]
    kids = [[c for c in range(1, len(parents)) if parents[c] == v] for v in range(len(parents))]
    law: dict[tuple, float] = {}

    def visit(v: int, prefix: tuple, p: float, depth: int) -> None:
        by_token = {candidates[c]: c for c in kids[v]} if depth < spec_steps - 1 else {}
        if depth < spec_steps - 1 and len(by_token) != len(kids[v]):
            raise ValueError(f"node {v}: sibling draft tokens must be distinct")
        for x, qx in enumerate(q[v]):
            if qx > 0 and x in by_token:
                visit(by_token[x], prefix + (x,), p * qx, depth + 1)
            elif qx > 0:
                law[prefix + (x,)] = law.get(prefix + (x,), 0.0) + p * qx

    visit(0, (), 1.0, 0)
    return law


def emitted_tokens(predicts: torch.Tensor, accept_index: torch.Tensor, accept_token_num: torch.Tensor) -> list[tuple]:
    """Per request, the tokens it emits: predicts at each accepted path node (the next accepted draft
    token, then the final draw), in path order."""
    p, a, k = predicts.tolist(), accept_index.tolist(), accept_token_num.tolist()
    return [tuple(p[a[b][j]] for j in range(k[b] + 1)) for b in range(len(k))]


def emission_counts(sequences: list[tuple], law: dict[tuple, float]) -> tuple[torch.Tensor, torch.Tensor]:
    """(observed counts, expected probabilities) over the law's sequences, float64 and aligned, for a
    chi-square test; the probabilities renormalised (fp32 target rows sum to 1 within ~1e-7).
    Raises ValueError on a sequence the law cannot emit."""
    counts: dict[tuple, int] = {}
    for seq in sequences:
        if seq not in law:
            raise ValueError(f"emitted {seq}: a token sequence the rule cannot emit")
        counts[seq] = counts.get(seq, 0) + 1
    keys = sorted(law)
    expected = torch.tensor([law[k] for k in keys], dtype=torch.float64)
    return torch.tensor([counts.get(k, 0) for k in keys], dtype=torch.float64), expected / expected.sum()


# The CUDA test's case: EMISSION_ROWS requests, coins from seed EMISSION_SEED (drawn on the CPU, so the
# same on every device). A kernel that follows the rule emits, on these coins, the tokens the reference
# (tree_speculative_sampling_ref) emits but for draws within fp32 rounding of a CDF boundary, so its
# chi-square is the reference's: the seed is the first one (0, 1, ...) whose reference p-value is at least
# 1e-3 (seed 0: p = 2.9e-4, the 1-in-3400 tail; seed 1: p = 0.37), and the CPU test checks that it still is.
EMISSION_ROWS, EMISSION_SEED = 100000, 1


def emission_case(rows: int, vocab: int = 8, seed: int = 0, device=None):
    """Inputs for a distribution test of the rule, and their law (emission_law): `rows` identical
    requests on the tree root -> {1, 2}, 1 -> 3, 2 -> 4 (spec_steps 3), with the draft tokens
    each the first or second likeliest of its parent row, draft_probs zero, fresh coins per
    request. Returns ((candidates, retrive_index, retrive_next_token, retrive_next_sibling,
    uniform_samples, uniform_samples_for_final_sampling, target_probs, draft_probs), spec_steps, law)."""
    g = torch.Generator().manual_seed(seed)
    parents, s = [-1, 0, 0, 1, 2], 3
    q = torch.softmax(torch.randn(len(parents), vocab, generator=g) * 0.5, -1)
    order = q.argsort(-1, descending=True)
    cand = [0, int(order[0, 0]), int(order[0, 1]), int(order[1, 1]), int(order[2, 0])]
    ridx, nxt, sib = tree_from_parents([parents] * rows)
    inputs = (torch.tensor([cand] * rows, dtype=torch.int64), ridx, nxt, sib,
              torch.rand(rows, len(parents), generator=g), torch.rand(rows, generator=g),
              q.expand(rows, -1, -1).contiguous(), torch.zeros(rows, len(parents), vocab))
    if device is not None:
        inputs = tuple(t.to(device) for t in inputs)
    return inputs, s, emission_law(parents, cand, q, s)
