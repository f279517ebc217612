"""Greedy tree verification: SGLang 0.5.23's `verify_tree_greedy` contract, in Triton.

Inputs (N = draft tokens per request, S = accept_index.shape[1] = spec steps + 1):
  candidates, retrive_index, retrive_next_token, retrive_next_sibling, target_predict  [bs, N] int64
Outputs, written in place (nothing else is touched):
  predicts [bs*N] int32          predicts[retrive_index[b, p]] = target_predict[retrive_index[b, p]]
                                 for every node p on the accepted path (root included)
  accept_index [bs, S] int32     [b, k] = retrive_index of the k-th path node, k = 0..accepted
  accept_token_num [bs] int32    number of accepted draft tokens

The walk (SGLang's, one thread per request): from the root, try the children of the last accepted
node in sibling order (first child = retrive_next_token, then retrive_next_sibling) and accept the
first whose candidate equals the target's token at the last accepted node; stop at a node with no
matching child or after S-1 accepts. `retrive_index` values are flat row indices into the
[bs*N] target rows (as in SGLang), node links are row-local.

Ours loads a whole request row at once and resolves every node's parent, sibling rank and first
matching child in registers (ops/_tree.py, shared with argmax_verify and tree_sampling), so the
sequential part is one in-register step per accepted token instead of a chain of dependent global
loads. `verify_greedy_kernel` is also argmax_verify's second launch (FROM_PARTIALS).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._host import Step, cdiv, int_pointers, op_key_ptrs, plan
from ._tree import (  # noqa: F401
    MAX_DRAFT_TOKENS,
    check_tree_inputs,
    first_child,
    load_tree_block,
    pow2,
    random_tree_parents,
    take,
    tree_from_parents,
    tree_links,
    walk,
    walk_config,
)
from .arch import Unsupported, pdl_supported, require_launchable  # noqa: F401  (re-exported)
from .tables import launch_table

# ----------------------------------------------------------------------------- greedy verify kernel


@triton.jit
def verify_greedy_kernel(
    predicts_ptr,  # mutable [bs*N] int32
    accept_index_ptr,  # mutable [bs, S] int32
    accept_num_ptr,  # mutable [bs] int32
    cand_ptr,
    ridx_ptr,
    nxt_ptr,
    sib_ptr,
    target_ptr,  # [bs*N] int64 target_predict (FROM_PARTIALS=False)
    part_key_ptr,  # [R, SP] int32 split-argmax keys (FROM_PARTIALS=True)
    part_idx_ptr,  # [R, SP] int32 split-argmax column of each key
    bs,
    S,
    N,
    R,
    SP,
    NP: tl.constexpr,
    BB: tl.constexpr,
    SPP: tl.constexpr,
    FROM_PARTIALS: tl.constexpr,
    USE_PDL: tl.constexpr,  # launched as a programmatic dependent of _split_argmax_kernel
    INIT: tl.constexpr = False,  # also write what SGLang's buffers start as (greedy_walk): callers may pass torch.empty
    ACC_ADD: tl.constexpr = 0,  # added to each accept count stored (1: eagle_sample's accept_lens; greedy_walk)
):
    b, bm, offs, nm, row, cand, ridx, nxt, sib = load_tree_block(cand_ptr, ridx_ptr, nxt_ptr, sib_ptr, bs, N, NP, BB)
    if USE_PDL:
        tl.extra.cuda.gdc_wait()  # the tree is loaded; the partials need the argmax grid finished
    greedy_walk(predicts_ptr, accept_index_ptr, accept_num_ptr, target_ptr, part_key_ptr, part_idx_ptr, b, bm, offs, nm,
                cand, ridx, nxt, sib, S, R, SP, NP, SPP, FROM_PARTIALS, False, INIT, ACC_ADD)


@triton.jit
def greedy_walk(predicts_ptr, accept_index_ptr, accept_num_ptr, target_ptr, part_key_ptr, part_idx_ptr, b, bm, offs, nm,
                cand, ridx, nxt, sib, S, R, SP, NP: tl.constexpr, SPP: tl.constexpr, FROM_PARTIALS: tl.constexpr,
                CG: tl.constexpr, INIT: tl.constexpr = False, ACC_ADD: tl.constexpr = 0):
    """The walk of the requests b [BB] (their tree block loaded: load_tree_block) and its writes. Target token of
    each node from target_predict, or (FROM_PARTIALS) from the split-argmax partials, read through L2 when CG
    (written by other programs of the same launch: argmax_verify's fused kernel). INIT: also the values SGLang's
    eagle_sample starts its buffers with where the walk writes nothing (predicts 0 at every node's row off the path,
    accept_index -1 after the path, up to S <= NP): the same outputs from buffers of any content (torch.empty), the
    stores disjoint from the walk's (no ordering needed). ACC_ADD: added to the accept count stored (1: the accept
    lengths eagle_sample returns, drafts accepted + 1, without the caller's extra `+ 1` launch)."""
    rok = nm & (ridx >= 0) & (ridx < R)
    if FROM_PARTIALS:
        # target token of node i = argmax of logits row ridx[i]: the largest split key, then the
        # lowest column among the splits holding it (each split stored its own first maximum).
        sp = tl.arange(0, SPP)
        pm = rok[:, :, None] & (sp[None, None, :] < SP)
        poff = ridx[:, :, None] * SP + sp[None, None, :]
        if CG:
            key = tl.load(part_key_ptr + poff, mask=pm, other=-(2**31), cache_modifier=".cg")
            col = tl.load(part_idx_ptr + poff, mask=pm, other=2**30, cache_modifier=".cg")
        else:
            key = tl.load(part_key_ptr + poff, mask=pm, other=-(2**31))
            col = tl.load(part_idx_ptr + poff, mask=pm, other=2**30)
        kmax = tl.max(key, axis=2)
        tgt = tl.min(tl.where(key == kmax[:, :, None], col, 2**30), axis=2).to(tl.int64)
        tgt = tl.where(rok, tgt, -1)
    else:
        tgt = tl.load(target_ptr + ridx, mask=rok, other=-1)
    par, prev, rank = tree_links(nxt, sib, offs, NP)
    # a child matches when its draft token is the target's token at its parent
    ok = nm & (cand == take(tgt, par, offs))
    acc = first_child(par, rank, ok, offs, NP)
    pos, n, cur = walk(acc, offs, S)
    onp = nm & (pos >= 0)
    tl.store(accept_index_ptr + b[:, None] * S + pos, ridx.to(tl.int32), mask=onp)
    # every path node's prediction is the target's token there (the last one is the bonus token)
    tl.store(predicts_ptr + ridx, tgt.to(tl.int32), mask=onp & rok)
    tl.store(accept_num_ptr + b, n + ACC_ADD, mask=bm)
    if INIT:
        tl.store(predicts_ptr + ridx, tl.zeros_like(ridx).to(tl.int32), mask=nm & rok & (pos < 0))
        after = bm[:, None] & (offs[None, :] > n[:, None]) & (offs[None, :] < S)
        tl.store(accept_index_ptr + b[:, None] * S + offs[None, :], tl.full(after.shape, -1, tl.int32), mask=after)


# ----------------------------------------------------------------------------- launcher


def verify_tree_greedy(
    predicts: torch.Tensor,  # mutable
    accept_index: torch.Tensor,  # mutable
    accept_token_num: torch.Tensor,  # mutable
    candidates: torch.Tensor,
    retrive_index: torch.Tensor,
    retrive_next_token: torch.Tensor,
    retrive_next_sibling: torch.Tensor,
    target_predict: torch.Tensor,
    config: dict | None = None,
    table: dict | None = None,
) -> None:
    """Greedy tree verify with SGLang's contract; writes predicts, accept_index, accept_token_num.

    config (optional) overrides the per-arch table entry `verify_greedy`:
    {"rows_per_program": requests per program, "num_warps": ...}. table (optional): the launch table in
    effect (tables.launch_table) when a caller already resolved it."""
    tensors = (predicts, accept_index, accept_token_num, candidates, retrive_index, retrive_next_token,
               retrive_next_sibling, target_predict)
    if table is None and config is None:
        table = launch_table(candidates.device)
    key, ptrs = op_key_ptrs("verify_greedy", table, config, tensors)
    p = plan(key, _GreedyPlan, tensors, config, table)
    if p.bs == 0:
        return
    # the kept launch takes the pointers as ints (ops/_host.int_pointers); the binder (a first call) the tensors
    if not (p.ints and p.verify.launch((*ptrs, ptrs[0], ptrs[0], *p.tail))):
        p.verify(predicts, accept_index, accept_token_num, candidates, retrive_index, retrive_next_token,
                 retrive_next_sibling, target_predict, predicts, predicts, *p.tail)


class _GreedyPlan:
    """One call signature's launch plan (ops/_host.plan): the guard passed once, the Step and its arguments."""

    def __init__(self, tensors, config, table):
        self.table = table  # held: the plan's key names it by id
        self.bs, n, s = check_greedy(*tensors)
        if self.bs == 0:
            return
        bs = self.bs
        np_, bb, warps = walk_config("verify_greedy", n, bs, config, tensors[3].device, table)
        self.verify = Step(verify_greedy_kernel, (cdiv(bs, bb),), num_warps=warps)
        self.ints = int_pointers()
        self.tail = (bs, s, n, bs * n, 1, np_, bb, 1, False, False, False)


def check_greedy(predicts, accept_index, accept_token_num, candidates, retrive_index, retrive_next_token,
                 retrive_next_sibling, target_predict) -> tuple[int, int, int]:
    """The op's guard: check_tree_inputs and the target_predict rules; (bs, N, S)."""
    bs, n, s = check_tree_inputs(predicts, accept_index, accept_token_num, candidates, retrive_index,
                                 retrive_next_token, retrive_next_sibling)
    if target_predict.dtype != torch.int64 or target_predict.numel() != bs * n or not target_predict.is_contiguous():
        raise Unsupported(f"target_predict must be a contiguous int64 tensor of {bs * n} elements, "
                         f"got {target_predict.dtype} {tuple(target_predict.shape)}")
    require_launchable("verify_tree_greedy", candidates, target_predict)
    return bs, n, s


def launch_binder(predicts, accept_index, accept_token_num, candidates, retrive_index, retrive_next_token,
                  retrive_next_sibling, target_predict, config: dict | None = None, table: dict | None = None) -> None:
    """The same op through Triton's binder with the guard on every call (the path before plans): the reference the
    planned path is compared with (test/ops/test_host_path.py)."""
    bs, n, s = check_greedy(predicts, accept_index, accept_token_num, candidates, retrive_index, retrive_next_token,
                            retrive_next_sibling, target_predict)
    if bs == 0:
        return
    np_, bb, warps = walk_config("verify_greedy", n, bs, config, candidates.device, table)
    verify_greedy_kernel[(cdiv(bs, bb),)](
        predicts, accept_index, accept_token_num, candidates, retrive_index, retrive_next_token,
        retrive_next_sibling, target_predict, predicts, predicts, bs, s, n, bs * n, 1,
        NP=np_, BB=bb, SPP=1, FROM_PARTIALS=False, USE_PDL=False, num_warps=warps)


def verify_tree_greedy_ref(
    predicts: torch.Tensor,  # mutable
    accept_index: torch.Tensor,  # mutable
    accept_token_num: torch.Tensor,  # mutable
    candidates: torch.Tensor,
    retrive_index: torch.Tensor,
    retrive_next_token: torch.Tensor,
    retrive_next_sibling: torch.Tensor,
    target_predict: torch.Tensor,
) -> None:
    """Ground truth: SGLang's sequential walk, one request at a time, in plain Python/torch."""
    bs, n = candidates.shape
    s = accept_index.shape[1]
    tp = target_predict.reshape(-1).tolist()
    cand, ridx = candidates.tolist(), retrive_index.tolist()
    nxt, sib = retrive_next_token.tolist(), retrive_next_sibling.tolist()
    for b in range(bs):
        last = ridx[b][0]
        accept_index[b, 0] = last
        n_acc, cur = 0, 0
        for _ in range(1, s):
            cur = nxt[b][cur]
            while cur != -1:
                if cand[b][cur] == tp[last]:  # draft token == target's token after the last accepted
                    predicts[last] = tp[last]
                    n_acc += 1
                    accept_index[b, n_acc] = ridx[b][cur]
                    last = ridx[b][cur]
                    break
                cur = sib[b][cur]
            if cur == -1:
                break
        accept_token_num[b] = n_acc
        predicts[last] = tp[last]  # bonus token: the target's own choice after the last accepted
