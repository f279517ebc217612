"""Shared pieces of the per-request tree kernels (verify_greedy, argmax_verify, tree_sampling).

A request's tree is SGLang's: candidates, retrive_index (flat target rows), retrive_next_token and
retrive_next_sibling [bs, N] int64, node links row-local and -1 terminated. The Triton helpers load a
block of requests and resolve every node's parent, sibling rank and first matching child in registers
(tree width/depth only bound loop trip counts), then walk the accepted path one in-register step per
accepted token. Trees must be well formed (each node in at most one sibling chain), which SGLang's
tree builders guarantee. Also here: the input guard of SGLang's tree-op contract, the per-request
launch plan, and the tree builders the tests and benchmarks use.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._host import next_power_of_2
from .arch import Unsupported, op_config, require_launchable
from .tables import launch_table

MAX_DRAFT_TOKENS = 64  # the in-register link matrices are [NP, NP]


def pow2(n: int, lo: int = 2) -> int:
    return max(lo, next_power_of_2(max(int(n), 1)))


_PLANS: dict = {}


def cached_plan(fn, *args):
    """fn(*args) for a pure planning function whose last argument is a launch-config dict, memoised on the
    arguments (the dict by its items): the plan of a serving shape is computed once, not at every call
    (sampling_plan took ~40 µs of host time per call). Unhashable configs are planned every time."""
    *head, cfg = args
    try:
        key = (fn, *head, tuple(sorted(cfg.items())))
        hit = _PLANS.get(key)
    except TypeError:
        return fn(*args)
    if hit is None:
        if len(_PLANS) > 4096:  # bounded: shapes come from a handful of batch sizes
            _PLANS.clear()
        hit = _PLANS[key] = fn(*args)
    return hit


def walk_config(op: str, n_draft: int, bs: int, config: dict | None, device: torch.device,
                table: dict | None = None) -> tuple[int, int, int]:
    """(NP, requests per program, num_warps) for a per-request tree kernel.

    Requests per program keeps the [BB, NP, NP] link matrices small (<= 8192 elements). `device`
    only picks the launch table when no config is given."""
    cfg = dict(config) if config is not None else op_config(op, {"bs": bs, "n": n_draft},
                                                                table if table is not None else launch_table(device))
    np_ = pow2(n_draft)
    bb = int(cfg.get("rows_per_program", 1))
    bb = max(1, min(next_power_of_2(bb), max(1, 8192 // (np_ * np_))))
    warps = int(cfg.get("num_warps", 1 if np_ * np_ * bb <= 256 else 4))
    return np_, bb, warps


# ----------------------------------------------------------------------------- Triton helpers


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
    return load_tree_rows(cand_ptr, ridx_ptr, nxt_ptr, sib_ptr, tl.program_id(0).to(tl.int64) * BB, bs, N, NP, BB)


@triton.jit
def load_tree_rows(cand_ptr, ridx_ptr, nxt_ptr, sib_ptr, b0, bs, N, NP: tl.constexpr, BB: tl.constexpr):
    """load_tree_block of the requests b0 .. b0+BB-1 (b0 int64)."""
    b = b0 + tl.arange(0, BB)
    bm = b < bs
    offs = tl.arange(0, NP)
    nm = bm[:, None] & (offs[None, :] < N)
    row = b[:, None] * N + offs[None, :]
    cand = tl.load(cand_ptr + row, mask=nm, other=-1)
    ridx = tl.load(ridx_ptr + row, mask=nm, other=-1)
    nxt = tl.load(nxt_ptr + row, mask=nm, other=-1).to(tl.int32)
    sib = tl.load(sib_ptr + row, mask=nm, other=-1).to(tl.int32)
    return b, bm, offs, nm, row, cand, ridx, nxt, sib



# ----------------------------------------------------------------------------- guard, builders


def check_tree_inputs(predicts, accept_index, accept_token_num, candidates, retrive_index, retrive_next_token,
                      retrive_next_sibling) -> tuple[int, int, int]:
    """Guard SGLang's tree-op contract; returns (bs, N, S). Every rejection is arch.Unsupported (a
    layout, dtype, device or tree size these kernels do not take: SGLang's kernel takes the call)."""
    # one boolean pass for the call that fits (every serving call): the messages below are built only on a
    # rejection (building them for every call cost ~20 µs of host time per verify on a live server)
    shape = candidates.shape
    if len(shape) == 2:
        bs, n = shape
        i64, i32 = torch.int64, torch.int32
        if (0 < n <= MAX_DRAFT_TOKENS and candidates.dtype == i64 and retrive_index.dtype == i64
                and retrive_next_token.dtype == i64 and retrive_next_sibling.dtype == i64
                and retrive_index.shape == shape and retrive_next_token.shape == shape
                and retrive_next_sibling.shape == shape and accept_index.ndim == 2 and accept_index.shape[0] == bs
                and accept_index.shape[1] > 0 and accept_index.dtype == i32 and accept_token_num.dtype == i32
                and accept_token_num.shape == (bs,) and predicts.dtype == i32 and predicts.shape == (bs * n,)
                and accept_token_num.is_contiguous() and candidates.is_contiguous() and retrive_index.is_contiguous()
                and retrive_next_token.is_contiguous() and retrive_next_sibling.is_contiguous()
                and accept_index.is_contiguous() and predicts.is_contiguous()):
            require_launchable("tree verify", candidates, predicts, accept_index, accept_token_num, retrive_index,
                               retrive_next_token, retrive_next_sibling)
            return bs, n, accept_index.shape[1]
    return _reject_tree_inputs(predicts, accept_index, accept_token_num, candidates, retrive_index,
                               retrive_next_token, retrive_next_sibling)


def _reject_tree_inputs(predicts, accept_index, accept_token_num, candidates, retrive_index, retrive_next_token,
                        retrive_next_sibling) -> tuple[int, int, int]:
    """check_tree_inputs' slow path: the first violated rule as Unsupported, with its message."""
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
    need(tuple(accept_token_num.shape) == (bs,) and accept_token_num.dtype == torch.int32
         and accept_token_num.is_contiguous(), "accept_token_num", accept_token_num, f"a contiguous int32 [{bs}] tensor")
    need(tuple(predicts.shape) == (bs * n,) and predicts.dtype == torch.int32 and predicts.is_contiguous(), "predicts",
         predicts, f"a contiguous int32 [{bs * n}] tensor")
    if n <= 0 or accept_index.shape[1] <= 0:
        raise Unsupported("num_draft_tokens and accept_index.shape[1] must be positive")
    if n > MAX_DRAFT_TOKENS:
        raise Unsupported(f"{n} draft tokens per request: these kernels take at most {MAX_DRAFT_TOKENS} "
                         "(the hooks hand larger trees to SGLang's kernels)")
    require_launchable("tree verify", candidates, predicts, accept_index, accept_token_num, retrive_index,
                       retrive_next_token, retrive_next_sibling)
    return bs, n, accept_index.shape[1]


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
