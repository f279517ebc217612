"""Greedy verify straight from the target logits: split-vocabulary argmax feeding the tree walk.

Same outputs and in-place writes as `verify_tree_greedy(..., target_predict=argmax(logits))`
(SGLang's `eagle_sample` greedy branch), without materialising target_predict. By default one launch,
`_argmax_verify_kernel`, grid (requests, splits): program (b, j) reduces split j of request b's N rows of
logits [bs*N, V] to (key, first column of the maximum) per row -> partials [bs*N, splits], and the last of
b's programs to finish (a counter per request, reset by that program) combines b's partials (largest key,
lowest column) and walks b's tree. SGLang calls this op eagerly, so one launch is one launcher call of host
time. With "fused": false, a config packing several rows or requests into a program, more than
FUSED_MAX_N draft tokens or more than FUSED_MAX_BS requests (where the GPU time, not the host's, bounds the
call), two launches (the second a programmatic dependent launch on SM90+):
  1. `_split_argmax_kernel`, grid (row blocks, vocab splits) -> the same partials;
  2. `verify_greedy.verify_greedy_kernel` (FROM_PARTIALS): per request, combine and walk.
Numerics match torch.argmax: ties -> lowest index; NaN is the maximum (first NaN wins); -0.0 == +0.0.
Splits (argmax_plan): enough programs to fill the GPU at small batch, slices of at most `chunk`
columns at large batch (many short programs, so no half-empty last wave).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._host import Step, cdiv, int_pointers, next_power_of_2, op_key_ptrs, plan
from ._tree import cached_plan, check_tree_inputs, load_tree_rows, pow2, walk_config
from .arch import Unsupported, num_sms, op_config, pdl_supported
from .tables import launch_table
from .verify_greedy import greedy_walk, verify_greedy_kernel, verify_tree_greedy_ref


@triton.jit
def _f32_key(x):
    """Order-preserving int32 key of a float32 value: a > b  <=>  key(a) > key(b).

    NaN maps above +inf (torch.argmax treats NaN as the maximum) and -0.0 to +0.0's key (they
    compare equal in torch, so the lower index must win between them)."""
    bits = x.to(tl.int32, bitcast=True)
    key = bits ^ ((bits >> 31) & 0x7FFFFFFF)  # negative floats: flip magnitude bits
    key = tl.where(x == 0.0, 0, key)
    return tl.where(x != x, 0x7FFFFFFF, key)


@triton.jit
def _slice_argmax(logits_ptr, r, rm, stride_row, lo, CH, V, BR: tl.constexpr, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    """(key, first column) of the maximum of rows r [BR] over the columns lo .. lo+CH-1 (masked at V unless EVEN)."""
    lane = lo + tl.arange(0, BLOCK)
    # per lane: the largest value seen and its first column; a lane of -inf keeps its first column
    best = tl.full([BR, BLOCK], float("-inf"), tl.float32)
    best_col = tl.zeros([BR, BLOCK], tl.int32) + lane[None, :]
    base = logits_ptr + r[:, None] * stride_row
    for start in range(lo, lo + CH, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        if EVEN:
            x = tl.load(base + cols[None, :]).to(tl.float32)
        else:
            m = rm[:, None] & (cols < V)[None, :]
            x = tl.load(base + cols[None, :], mask=m, other=float("-inf")).to(tl.float32)
        # strict '>' keeps the earlier of equal values (-0.0 == +0.0 as in torch); NaN is the maximum
        # and the first NaN stays (nothing replaces a NaN best)
        up = (x > best) | ((x != x) & (best == best))
        best = tl.where(up, x, best)
        best_col = tl.where(up, cols[None, :], best_col)
    is_nan = best != best
    any_nan = tl.max(is_nan.to(tl.int32), axis=1)
    vmax = tl.max(tl.where(is_nan, float("-inf"), best), axis=1)
    winner = tl.where(any_nan[:, None] != 0, is_nan, best == vmax[:, None])
    col = tl.min(tl.where(winner, best_col, 2**30), axis=1)
    key = tl.where(any_nan != 0, 0x7FFFFFFF, _f32_key(vmax))
    return key, col


@triton.jit
def _split_argmax_kernel(
    part_key_ptr,  # out [R, SP] int32: _f32_key of the slice maximum
    part_idx_ptr,  # out [R, SP] int32: first column holding it
    logits_ptr,  # [R, V] fp32/bf16/fp16, unit column stride
    stride_row,
    R,
    V,
    CH,  # columns per split (a multiple of BLOCK)
    SP,
    BR: tl.constexpr,
    BLOCK: tl.constexpr,
    EVEN: tl.constexpr,  # V % CH == 0 and R % BR == 0: no masks
    USE_PDL: tl.constexpr,
):
    if USE_PDL:
        tl.extra.cuda.gdc_launch_dependents()  # the verify kernel may start and load its tree now
    r = tl.program_id(0).to(tl.int64) * BR + tl.arange(0, BR)
    rm = r < R
    key, col = _slice_argmax(logits_ptr, r, rm, stride_row, tl.program_id(1) * CH, CH, V, BR, BLOCK, EVEN)
    tl.store(part_key_ptr + r * SP + tl.program_id(1), key, mask=rm)
    tl.store(part_idx_ptr + r * SP + tl.program_id(1), col, mask=rm)


@triton.jit
def _argmax_verify_kernel(
    predicts_ptr,  # mutable [bs*N] int32
    accept_index_ptr,  # mutable [bs, S] int32
    accept_num_ptr,  # mutable [bs] int32
    part_key_ptr,  # workspace [bs*N, SP] int32
    part_idx_ptr,  # workspace [bs*N, SP] int32
    sem_ptr,  # workspace [2*bs + 1] int32, 0 between launches: per-request counters, foreign flags, a global counter
    cand_ptr,
    ridx_ptr,
    nxt_ptr,
    sib_ptr,
    logits_ptr,  # [bs*N, V] fp32/bf16/fp16, unit column stride
    stride_row,
    bs,
    S,
    N,
    V,
    CH,  # columns per split (a multiple of BLOCK)
    SP,
    NP: tl.constexpr,
    BLOCK: tl.constexpr,
    SPP: tl.constexpr,
    EVEN: tl.constexpr,  # V % CH == 0 and N == NP: no masks
    INIT: tl.constexpr = False,  # also write what SGLang's buffers start as (verify_greedy.greedy_walk)
    ACC_ADD: tl.constexpr = 0,  # added to each accept count stored (verify_greedy.greedy_walk)
):
    """Both launches in one, grid (bs, SP): program (b, j) reduces split j of request b's N rows to partials and
    bumps b's counter; the last of b's programs to arrive walks b's tree from the partials (read through L2) and
    resets the counter (release/acquire as tree_sampling's fused draw). A request whose retrive_index points
    outside its own N rows (never on a SGLang tree: row b*N + i) needs rows of other requests: its last program
    flags it, and the last request to finish (a global counter) walks every flagged request."""
    b = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, NP)
    r = b * N + offs
    key, col = _slice_argmax(logits_ptr, r, offs < N, stride_row, tl.program_id(1) * CH, CH, V, NP, BLOCK, EVEN)
    tl.store(part_key_ptr + r * SP + tl.program_id(1), key, mask=offs < N)
    tl.store(part_idx_ptr + r * SP + tl.program_id(1), col, mask=offs < N)
    tl.debug_barrier()
    if tl.atomic_add(sem_ptr + b, 1, sem="acq_rel") == SP - 1:
        bb, bm, offs2, nm, row, cand, ridx, nxt, sib = load_tree_rows(cand_ptr, ridx_ptr, nxt_ptr, sib_ptr, b, bs, N,
                                                                       NP, 1)
        foreign = tl.max((nm & (ridx >= 0) & ((ridx < b * N) | (ridx >= b * N + N))).to(tl.int32))
        if foreign == 0:
            greedy_walk(predicts_ptr, accept_index_ptr, accept_num_ptr, ridx_ptr, part_key_ptr, part_idx_ptr, bb, bm,
                        offs2, nm, cand, ridx, nxt, sib, S, bs * N, SP, NP, SPP, True, True, INIT, ACC_ADD)
        else:
            tl.store(sem_ptr + bs + b, 1)
        tl.store(sem_ptr + b, 0)  # for the next launch / graph replay
        tl.debug_barrier()  # the flag (and the walk's writes) before the release below
        if tl.atomic_add(sem_ptr + 2 * bs, 1, sem="acq_rel") == bs - 1:
            for f in range(0, bs):
                if tl.load(sem_ptr + bs + f, cache_modifier=".cg") != 0:
                    fb, fm, fo, fn, frow, fc, fr, fx, fs = load_tree_rows(cand_ptr, ridx_ptr, nxt_ptr, sib_ptr,
                                                                          f + b * 0, bs, N, NP, 1)
                    greedy_walk(predicts_ptr, accept_index_ptr, accept_num_ptr, ridx_ptr, part_key_ptr, part_idx_ptr,
                                fb, fm, fo, fn, fc, fr, fx, fs, S, bs * N, SP, NP, SPP, True, True, INIT, ACC_ADD)
                    tl.store(sem_ptr + bs + f, 0)
            tl.store(sem_ptr + 2 * bs, 0)


def _verify_walk(n: int, bs: int, vcfg: dict) -> tuple[int, int, int]:
    """walk_config of the verify kernel from an explicit config (no table: cached_plan memoises it)."""
    return walk_config("verify_greedy", n, bs, vcfg, None)


def argmax_plan(rows: int, vocab: int, cfg: dict) -> tuple[int, int, int, int, int, bool]:
    """(rows per program, BLOCK, columns per split, splits, num_warps, EVEN) for the split argmax.

    Splits: enough for `min_programs` programs at small batch (latency), and slices of at most
    `chunk` columns at large batch (many short programs: no half-empty last wave)."""
    br = max(1, next_power_of_2(int(cfg.get("rows_per_program", 1))))
    block = int(cfg.get("block", 2048))
    warps = int(cfg.get("num_warps", 8))
    nblk = cdiv(vocab, block)
    want = int(cfg.get("splits", 0)) or max(cdiv(vocab, int(cfg.get("chunk", 16384))),
                                            cdiv(int(cfg.get("min_programs", 528)), cdiv(rows, br)))
    per = cdiv(nblk, max(1, min(want, nblk)))  # blocks per split
    splits = cdiv(nblk, per)
    even = vocab % (per * block) == 0 and rows % br == 0
    return br, block, per * block, splits, warps, even


def argmax_verify_greedy(
    predicts: torch.Tensor,  # mutable
    accept_index: torch.Tensor,  # mutable
    accept_token_num: torch.Tensor,  # mutable
    candidates: torch.Tensor,
    retrive_index: torch.Tensor,
    retrive_next_token: torch.Tensor,
    retrive_next_sibling: torch.Tensor,
    logits: torch.Tensor,
    config: dict | None = None,
    table: dict | None = None,
    init: bool = False,
    lens: bool = False,
) -> None:
    """verify_tree_greedy with target_predict = argmax(logits [bs*N, V], -1), fused.

    Writes predicts, accept_index, accept_token_num exactly as SGLang's greedy path would. No host
    sync, no allocation: guards, config and the [bs*N, splits] partials come from the call signature's plan
    (ops/_host.py), built on its first call; later calls launch through the compiled kernels' C launch.
    config (optional) overrides the table entry `argmax_verify`: rows_per_program, block,
    num_warps, splits or chunk / min_programs, verify_rows_per_program / verify_num_warps, and pdl
    (programmatic dependent launch of the verify kernel, SM90+: it loads its tree while the argmax
    runs). table (optional): the launch table in effect (tables.launch_table) when a caller already resolved it.
    init: the buffers' starting values written too, as SGLang's eagle_sample allocates them (predicts 0, accept_index
    -1), so a caller may pass torch.empty buffers and save those two fill launches; for trees whose retrive_index rows
    are each request's own (SGLang's), with S <= N (else Unsupported). lens: accept_token_num receives the accept
    lengths (drafts accepted + 1: what eagle_sample returns), so a caller saves its `+ 1` launch."""
    tensors = (predicts, accept_index, accept_token_num, candidates, retrive_index, retrive_next_token,
               retrive_next_sibling, logits)
    if table is None:
        table = launch_table(logits.device)
    key, ptrs = op_key_ptrs(_KEYS[init, lens], table, config, tensors)
    p = plan(key, _ArgmaxPlan, tensors, config, table, init, lens)
    if p.bs == 0:
        return
    # the kept launches take the pointers as ints (ops/_host.int_pointers); the binder (a first call) the tensors
    pr, ai, an, ca, ri, nx, sb, lg = ptrs
    if p.fused is not None:
        if not (p.ints and p.fused.launch((pr, ai, an, *p.wp, ca, ri, nx, sb, lg, *p.fused_tail))):
            p.fused(predicts, accept_index, accept_token_num, p.part_key, p.part_idx, p.sem, candidates, retrive_index,
                    retrive_next_token, retrive_next_sibling, logits, *p.fused_tail)
        return
    if not (p.ints and p.argmax.launch((*p.wp[:2], lg, *p.argmax_tail))):
        p.argmax(p.part_key, p.part_idx, logits, *p.argmax_tail)
    if not (p.ints and p.verify.launch((pr, ai, an, ca, ri, nx, sb, ca, *p.wp[:2], *p.verify_tail))):
        p.verify(predicts, accept_index, accept_token_num, candidates, retrive_index, retrive_next_token,
                 retrive_next_sibling, candidates, p.part_key, p.part_idx, *p.verify_tail)


# What the greedy hook (integration/hooks/verify_kernels.py) asks of this op per call, read there on every call and by
# the kernel warm-up (ops/warmup.py), so that the warm-up compiles exactly the hook's variants (INIT and ACC_ADD are
# constexprs: another value is another kernel, compiled on first traffic otherwise).
# HOOK_INIT: torch.empty buffers, the kernel writing eagle_sample's starting values (on since the H200 suite of
# 2026-12-04, run 22, ran its 21 tests compiled). HOOK_LENS: the kernel writes the accept lengths, so the hook skips
# eagle_sample's `+ 1` launch (on since the H200 suite of 2026-12-04, run 23, ran the 16 lens tests compiled).
HOOK_INIT = True
HOOK_LENS = True

_KEYS = {(False, False): "argmax_verify", (True, False): "argmax_verify_init", (False, True): "argmax_verify_lens",
         (True, True): "argmax_verify_init_lens"}  # one plan per (init, lens): their kernels differ


class _ArgmaxPlan:
    """One call signature's launch plan (ops/_host.plan): guards passed once, the two Steps with their integer and
    constexpr arguments, the partials workspace (and its pointers as ints, `wp`)."""

    def __init__(self, tensors, config, table, init=False, lens=False):
        (predicts, accept_index, accept_token_num, candidates, retrive_index, retrive_next_token, retrive_next_sibling,
         logits) = tensors
        self.table = table  # held: the plan's key names it by id
        bs, n, s = check_logits(*tensors)
        if init and s > n:
            raise Unsupported(f"init: accept_index has {s} columns, more than the {n} draft tokens")
        self.bs = bs
        if bs == 0:
            return
        rows, vocab = logits.shape
        cfg = argmax_config(rows, vocab, bs, n, logits.device, config, table)
        self.fused = None
        self.ints = int_pointers()
        if fused_applies(cfg, n, bs):
            np_, block, ch, splits, warps, even = fused_plan(bs, n, vocab, cfg)
            self.part_key = torch.empty((rows, splits), dtype=torch.int32, device=logits.device)
            self.part_idx = torch.empty((rows, splits), dtype=torch.int32, device=logits.device)
            self.sem = torch.zeros(2 * bs + 1, dtype=torch.int32, device=logits.device)
            self.wp = (self.part_key.data_ptr(), self.part_idx.data_ptr(), self.sem.data_ptr())
            self.fused = Step(_argmax_verify_kernel, (bs, splits), num_warps=warps)
            self.fused_tail = (logits.stride(0), bs, s, n, vocab, ch, splits, np_, block, pow2(splits, 1), even, init,
                               int(lens))
            return
        br, block, ch, splits, warps, even = argmax_plan(rows, vocab, cfg)
        pdl = bool(cfg.get("pdl", True)) and pdl_supported(logits.device)
        self.part_key = torch.empty((rows, splits), dtype=torch.int32, device=logits.device)
        self.part_idx = torch.empty((rows, splits), dtype=torch.int32, device=logits.device)
        self.wp = (self.part_key.data_ptr(), self.part_idx.data_ptr())
        self.argmax = Step(_split_argmax_kernel, (cdiv(rows, br), splits), num_warps=warps)
        self.argmax_tail = (logits.stride(0), rows, vocab, ch, splits, br, block, even, pdl)
        np_, bb, vwarps = _verify_walk(n, bs, verify_config(cfg))
        self.verify = Step(verify_greedy_kernel, (cdiv(bs, bb),), num_warps=vwarps, launch_pdl=pdl)
        self.verify_tail = (bs, s, n, rows, splits, np_, bb, pow2(splits, 1), True, pdl, init, int(lens))


FUSED_MAX_N = 16  # larger trees: the walk's [NP, NP] tiles beside the argmax's spill registers (SM120, 8 warps)
# Above this batch the two launches: the one launch costs more GPU time from bs 16 (H200, 2026-12-02: 14.4 vs 12.2 µs;
# bs 64: 58.0 vs 50.7 µs) but saves a launch's host time, and SGLang calls the op eagerly: at bs 16 (H200, 2026-12-04,
# bench_host, both through compiled.run) 17.3 against 20.8 µs per eager call; at bs 64 the GPU time bounds the call.
# A config's "fused_max_bs" overrides it.
FUSED_MAX_BS = 16


def fused_applies(cfg: dict, n: int, bs: int = 1) -> bool:
    """One launch (_argmax_verify_kernel) unless the config says "fused": false or packs several rows or requests into a
    program, the tree has more than FUSED_MAX_N nodes or the batch more than "fused_max_bs" (FUSED_MAX_BS)
    requests (the two kernels take those)."""
    return (bool(cfg.get("fused", True)) and int(cfg.get("rows_per_program", 1)) == 1
            and int(cfg.get("verify_rows_per_program", 1)) == 1 and n <= FUSED_MAX_N
            and bs <= int(cfg.get("fused_max_bs", FUSED_MAX_BS)))


def fused_plan(bs: int, n: int, vocab: int, cfg: dict) -> tuple[int, int, int, int, int, bool]:
    """(NP, BLOCK, columns per split, splits, num_warps, EVEN) of the fused kernel: a program reduces one request's
    N rows (NP = N rounded up to a power of 2) over BLOCK = block / NP columns at a time (the tile of the split
    kernel's one row), and the splits per request are argmax_plan's with the request as the row; at most
    8192 / NP splits (the walk holds NP x splits partials in registers)."""
    np_ = pow2(n, 1)
    sub = dict(cfg, rows_per_program=1)
    sub["block"] = min(int(cfg.get("block", 2048)), max(16, int(cfg.get("block", 2048)) // np_))
    _, block, ch, splits, warps, _ = argmax_plan(bs, vocab, sub)
    cap = max(1, 8192 // np_)
    if splits > cap and not int(cfg.get("splits", 0)):
        _, block, ch, splits, warps, _ = argmax_plan(bs, vocab, dict(sub, splits=cap))
    return np_, block, ch, splits, warps, vocab % ch == 0 and n == np_


def check_logits(predicts, accept_index, accept_token_num, candidates, retrive_index, retrive_next_token,
                 retrive_next_sibling, logits) -> tuple[int, int, int]:
    """The op's guard (check_tree_inputs and the logits rules); (bs, N, S)."""
    bs, n, s = check_tree_inputs(predicts, accept_index, accept_token_num, candidates, retrive_index,
                                 retrive_next_token, retrive_next_sibling)
    if logits.ndim != 2 or logits.shape[0] != bs * n or logits.dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise Unsupported(f"logits must be fp32/bf16/fp16 [{bs * n}, vocab], got {logits.dtype} {tuple(logits.shape)}")
    if logits.shape[1] == 0 or (logits.shape[1] > 1 and logits.stride(1) != 1):
        raise Unsupported("logits must have a non-empty vocab dimension with unit stride")
    if logits.device != candidates.device:
        raise Unsupported(f"logits on {logits.device}, tree tensors on {candidates.device}")
    return bs, n, s


def argmax_config(rows: int, vocab: int, bs: int, n: int, device, config: dict | None, table: dict | None) -> dict:
    """The launch config in effect: `config`, else the table's entry (an architecture table's per-SM program count
    scaled to this GPU)."""
    cfg = dict(config) if config is not None else op_config(
        "argmax_verify", {"rows": rows, "vocab": vocab, "bs": bs, "n": n}, table if table is not None else launch_table(device))
    if "min_programs_per_sm" in cfg and "min_programs" not in cfg:  # an architecture table: scale with the GPU
        cfg["min_programs"] = int(cfg["min_programs_per_sm"]) * num_sms(device)
    return cfg


def verify_config(cfg: dict) -> dict:
    """The verify kernel's walk config from the op's config."""
    vcfg = {"rows_per_program": cfg.get("verify_rows_per_program", 1)}
    if "verify_num_warps" in cfg:
        vcfg["num_warps"] = cfg["verify_num_warps"]
    return vcfg


def launch_binder(predicts, accept_index, accept_token_num, candidates, retrive_index, retrive_next_token,
                  retrive_next_sibling, logits, config: dict | None = None, table: dict | None = None) -> None:
    """The same op through Triton's binder, guards and fresh workspaces on every call (the path before plans):
    the reference the planned path is compared with (test/ops/test_host_path.py) and a benchmark provider."""
    bs, n, s = check_logits(predicts, accept_index, accept_token_num, candidates, retrive_index, retrive_next_token,
                            retrive_next_sibling, logits)
    if bs == 0:
        return
    rows, vocab = logits.shape
    cfg = argmax_config(rows, vocab, bs, n, logits.device, config, table)
    br, block, ch, splits, warps, even = cached_plan(argmax_plan, rows, vocab, cfg)
    pdl = bool(cfg.get("pdl", True)) and pdl_supported(logits.device)
    part_key = torch.empty((rows, splits), dtype=torch.int32, device=logits.device)
    part_idx = torch.empty((rows, splits), dtype=torch.int32, device=logits.device)
    _split_argmax_kernel[(cdiv(rows, br), splits)](
        part_key, part_idx, logits, logits.stride(0), rows, vocab, ch, splits, BR=br, BLOCK=block, EVEN=even,
        USE_PDL=pdl, num_warps=warps)
    np_, bb, vwarps = cached_plan(_verify_walk, n, bs, verify_config(cfg))
    verify_greedy_kernel[(cdiv(bs, bb),)](
        predicts, accept_index, accept_token_num, candidates, retrive_index, retrive_next_token,
        retrive_next_sibling, candidates, part_key, part_idx, bs, s, n, rows, splits,
        NP=np_, BB=bb, SPP=pow2(splits, 1), FROM_PARTIALS=True, USE_PDL=pdl, num_warps=vwarps, launch_pdl=pdl)


def argmax_verify_greedy_ref(predicts, accept_index, accept_token_num, candidates, retrive_index,
                             retrive_next_token, retrive_next_sibling, logits) -> None:
    """Ground truth: torch.argmax (ties -> first, NaN -> first NaN) then SGLang's walk."""
    bs, n = candidates.shape
    target_predict = torch.argmax(logits, dim=-1).reshape(bs, n)
    verify_tree_greedy_ref(predicts, accept_index, accept_token_num, candidates, retrive_index,
                           retrive_next_token, retrive_next_sibling, target_predict)
