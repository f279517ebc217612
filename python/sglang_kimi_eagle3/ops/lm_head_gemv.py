"""lm_head GEMV for the draft step: logits[bs, R] = hidden[bs, H] @ W[R, H]^T (bf16/fp16, fp32 accumulate).

The draft step runs at bs 1..128, where a cuBLAS GEMM leaves the H200 well above the weight-read
floor (docs/kernels-draft-head.md). The kernel puts W on the MMA's M side ("swap AB": a tile of
BLOCK_R weight rows times BLOCK_B hidden rows, BLOCK_B >= 16) and spreads the T = row blocks x k-tiles
work items evenly over P programs (stream-K: P ~ the CTAs that fit the GPU at once, so there is no
half-empty last wave). A row block whose k-tiles span several programs is fixed up inside the same
launch: each writes an fp32 partial and bumps the block's counter; the last to arrive sums the
partials in a fixed order (deterministic) and writes the output, then resets the counter to 0 (so the
next launch and every CUDA-graph replay start from zero; see `semaphores`). No host sync, no
data-dependent allocation.

Output: `out_dtype` = the input dtype (what `torch.matmul` returns, SGLang's default lm_head) or
float32; with `round_to` = bf16/fp16 a float32 output holds the 16-bit-rounded values, i.e. exactly
what SGLang's logits processor hands the EAGLE worker after its `.float()` cast, in one kernel.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from ._host import cdiv, next_power_of_2
from .arch import BS_BUCKETS, Unsupported, bs_bucket, num_sms, op_config, require_launchable  # noqa: F401  (bs_bucket re-exported)
from .tables import launch_table

OP = "lm_head_gemv"
# Safe launch defaults when no table entry matches (also the interpreter's).
DEFAULT = {"BLOCK_R": 64, "BLOCK_K": 128, "CTAS_PER_SM": 2, "num_warps": 4, "num_stages": 3}
_SEM_MIN = 1 << 16  # counters per device; grown on demand
INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"


@triton.jit
def gemv_segment(h_ptr, w_ptr, stride_hb, stride_wr, bs, R, H, r, k0, k1,
             BLOCK_R: tl.constexpr, BLOCK_B: tl.constexpr, BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr,
             UPCAST: tl.constexpr):
    """fp32 [BLOCK_R, BLOCK_B] = W[row block r, k-tiles k0..k1) @ hidden[batch block, same k]^T."""
    offs_r = r.to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    offs_b = tl.program_id(1).to(tl.int64) * BLOCK_B + tl.arange(0, BLOCK_B)
    # Clamp out-of-range rows to row 0 instead of masking: the loads stay unpredicated (full 16-byte
    # vectors) and the garbage rows are dropped at the store.
    w_rows = tl.where(offs_r < R, offs_r, 0) * stride_wr
    h_rows = tl.where(offs_b < bs, offs_b, 0) * stride_hb
    acc = tl.zeros((BLOCK_R, BLOCK_B), dtype=tl.float32)
    for kt in range(k0, k1):
        offs_k = kt * BLOCK_K + tl.arange(0, BLOCK_K)
        if EVEN_K:
            w = tl.load(w_ptr + w_rows[:, None] + offs_k[None, :])
            h = tl.load(h_ptr + h_rows[:, None] + offs_k[None, :])
        else:
            mk = offs_k < H
            w = tl.load(w_ptr + w_rows[:, None] + offs_k[None, :], mask=mk[None, :], other=0.0)
            h = tl.load(h_ptr + h_rows[:, None] + offs_k[None, :], mask=mk[None, :], other=0.0)
        if UPCAST:  # Triton's interpreter multiplies bf16 bit patterns as integers (3.8); exact in fp32
            w = w.to(tl.float32)
            h = h.to(tl.float32)
        acc = tl.dot(w, tl.trans(h), acc)
    return acc


@triton.jit
def round_16bit(x, ROUND: tl.constexpr):
    """Round fp32 to the nearest bf16 (ROUND 1) / fp16 (ROUND 2) value, ties to even, kept in fp32.

    bf16 by bit arithmetic: the same result as the hardware cvt.rn, and also right in Triton's
    interpreter, whose fp32 -> bf16 cast truncates (3.8). NaN passes through unchanged: the
    rounding add would carry a NaN with a full mantissa (the GPU's canonical 0x7FFFFFFF, what an
    MMA returns for inf * 0 or NaN input) into the sign bit and make it -0.0.
    """
    if ROUND == 1:
        bits = x.to(tl.int32, bitcast=True)
        bits = (bits + (0x7FFF + ((bits >> 16) & 1))) & -65536
        x = tl.where(x == x, bits.to(tl.float32, bitcast=True), x)
    elif ROUND == 2:
        x = x.to(tl.float16).to(tl.float32)
    return x


@triton.jit
def row_block_total(acc, r, full, n_k, n_rb, P, part_ptr, sem_ptr, MAXC,
                     BLOCK_R: tl.constexpr, BLOCK_B: tl.constexpr):
    """Stream-K fix-up of row block r: (done, total). done: this program holds the block's whole sum.

    A block whose k-tiles span several programs: each deposits its partial in the block's slot
    (program - first program of the block) and bumps the block's counter; the last to arrive sums the
    slots in slot order (deterministic) and resets the counter. Release/acquire: every thread's
    partial store is ordered before the CTA barrier, the barrier before the counter's acq_rel atomic;
    the last program reads the partials with .cg (L2, never a stale L1 line).
    """
    total = acc
    done = full
    if not full:
        T = n_rb * n_k
        first = ((r * n_k + 1) * P - 1) // T  # the program holding tile t is ((t + 1) * P - 1) // T
        last = (((r + 1) * n_k) * P - 1) // T
        tile = tl.program_id(1) * n_rb + r
        local = tl.arange(0, BLOCK_B)[None, :] * BLOCK_R + tl.arange(0, BLOCK_R)[:, None]
        base = part_ptr + tile.to(tl.int64) * MAXC * (BLOCK_R * BLOCK_B)
        tl.store(base + (tl.program_id(0) - first) * (BLOCK_R * BLOCK_B) + local, acc)
        tl.debug_barrier()
        arrived = tl.atomic_add(sem_ptr + tile, 1, sem="acq_rel")
        done = arrived == last - first
        if done:
            tl.store(sem_ptr + tile, 0)  # for the next launch / graph replay
            total = tl.zeros((BLOCK_R, BLOCK_B), dtype=tl.float32)
            for s in range(0, last - first + 1):
                total += tl.load(base + s * (BLOCK_R * BLOCK_B) + local, cache_modifier=".cg")
    return done, total


@triton.jit
def _lm_head_gemv_kernel(out_ptr, part_ptr, sem_ptr, h_ptr, w_ptr,
                         stride_ob, stride_hb, stride_wr, bs, R, H, n_k, n_rb, MAXC,
                         BLOCK_R: tl.constexpr, BLOCK_B: tl.constexpr, BLOCK_K: tl.constexpr,
                         EVEN_K: tl.constexpr, ROUND: tl.constexpr, UPCAST: tl.constexpr):
    # stream-K: program p of P owns k-tiles [p*T/P, (p+1)*T/P) of the T = n_rb * n_k tiles, in
    # row-block-major order, i.e. at most a few segments of consecutive k-tiles of one row block
    P = tl.num_programs(0)
    p = tl.program_id(0)
    T = n_rb * n_k
    t = (p * T) // P
    t_end = ((p + 1) * T) // P
    offs_b = tl.program_id(1).to(tl.int64) * BLOCK_B + tl.arange(0, BLOCK_B)
    while t < t_end:
        r = t // n_k
        k0 = t - r * n_k
        seg_end = tl.minimum(t_end, (r + 1) * n_k)
        k1 = seg_end - r * n_k
        acc = gemv_segment(h_ptr, w_ptr, stride_hb, stride_wr, bs, R, H, r, k0, k1,
                       BLOCK_R, BLOCK_B, BLOCK_K, EVEN_K, UPCAST)
        done, total = row_block_total(acc, r, (k0 == 0) & (k1 == n_k), n_k, n_rb, P, part_ptr, sem_ptr, MAXC,
                                       BLOCK_R, BLOCK_B)
        if done:
            # a 16-bit output, or fp32 holding 16-bit-rounded values (SGLang: bf16 matmul, then .float())
            offs_r = r.to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
            total = round_16bit(total, ROUND)
            tl.store(out_ptr + offs_b[None, :] * stride_ob + offs_r[:, None], total.to(out_ptr.dtype.element_ty),
                     mask=(offs_r < R)[:, None] & (offs_b < bs)[None, :])
        t = seg_end


def shape_key(bs: int, rows: int, hidden: int) -> str:
    """`wins` key of this op in ops/configs tables, e.g. 'R4000:H7168:bs8'."""
    return f"R{rows}:H{hidden}:bs{bs_bucket(bs)}"


def lm_head_gemv_ref(hidden: torch.Tensor, weight: torch.Tensor, out_dtype: torch.dtype | None = None,
                     round_to: torch.dtype | None = None) -> torch.Tensor:
    """Ground truth: fp32 product of the 16-bit inputs, rounded like the kernel's output."""
    logits = hidden.float() @ weight.float().t()
    if round_to is not None:
        logits = logits.to(round_to).float()
    return logits.to(out_dtype or hidden.dtype)


def launch_config(bs: int, rows: int, hidden: int, table: dict | None = None) -> dict:
    """Launch parameters: table rule (ops/configs) over DEFAULT; BLOCK_B from bs when the table has none."""
    cfg = {**DEFAULT, **op_config(OP, {"bs": bs, "rows": rows, "hidden": hidden}, table)}
    cfg.setdefault("BLOCK_B", None)
    if not cfg.get("BLOCK_B"):
        cfg["BLOCK_B"] = min(max(16, next_power_of_2(max(bs, 1))), 64)
    return cfg


def launch_options(cfg: dict) -> dict:
    """Compiler options a table entry may carry besides warps/stages (maxnreg: a register cap)."""
    return {"maxnreg": cfg["maxnreg"]} if cfg.get("maxnreg") and not INTERPRET else {}


def stream_plan(bs: int, rows: int, hidden: int, cfg: dict, device: torch.device) -> tuple[int, int, int]:
    """(programs P, k-tiles per row n_k, partial slots per row block MAXC) of the stream-K grid.

    P = the table's PROGRAMS, else CTAS_PER_SM x SM count (2 by default: two CTAs of a 64-row tile
    with 3-4 cp.async stages fit an SM90 SM), never more than the tiles there are.
    """
    n_k = cdiv(hidden, cfg["BLOCK_K"])
    tiles = cdiv(rows, cfg["BLOCK_R"]) * n_k
    P = int(cfg.get("PROGRAMS") or 0) or num_sms(device) * int(cfg.get("CTAS_PER_SM", 2))
    P = max(1, min(P, tiles))
    return P, n_k, cdiv(n_k, tiles // P) + 1


_SEMS: dict = {}
_RETIRED: list = []  # outgrown buffers, kept alive (a captured graph may still point at one)


def _device_key(device) -> str:
    """'cuda' and 'cuda:0' (the current device) name one buffer: the key always carries the index."""
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return str(device)


def semaphores(device: torch.device, n: int) -> torch.Tensor:
    """Zeroed int32 counters for in-launch reductions, one buffer per device.

    Every kernel that uses them leaves them at 0 when it exits, so a buffer is zeroed once, when it is
    first made: on the first (eager) call, before any CUDA-graph capture, as long as no launch needs
    more than _SEM_MIN counters. One buffer per device assumes these kernels never run on two
    streams of one device at the same time (SGLang runs the draft step on one stream).
    """
    key = _device_key(device)
    buf = _SEMS.get(key)
    if buf is None or buf.numel() < n:
        if buf is not None:  # CUDA graphs captured before may hold its address: never free it
            _RETIRED.append(buf)
        buf = torch.zeros(max(n, _SEM_MIN), dtype=torch.int32, device=device)
        _SEMS[key] = buf
    return buf


def round_code(out_dtype: torch.dtype, round_to: torch.dtype | None) -> int:
    target = out_dtype if out_dtype != torch.float32 else round_to
    return {None: 0, torch.bfloat16: 1, torch.float16: 2}[target]


def lm_head_gemv(hidden: torch.Tensor, weight: torch.Tensor, *, out: torch.Tensor | None = None,
                 out_dtype: torch.dtype | None = None, round_to: torch.dtype | None = None,
                 config: dict | None = None, table: dict | None = None) -> torch.Tensor:
    """logits [bs, R] = hidden [bs, H] @ weight [R, H]^T.

    hidden, weight: same 16-bit dtype, last dim contiguous. out_dtype: hidden's dtype (default) or
    float32; round_to (bf16/fp16, float32 output only) rounds each logit to that dtype first.
    out (mutable, optional): [bs, R] of out_dtype, last dim contiguous; written and returned.
    config: launch params overriding the per-arch table (tests, tuner). table (optional): the launch table
    in effect (tables.launch_table), resolved once by the caller (a hook
    also asks arch.use_ours with it); default: the table of the tensors' device.
    Raises arch.Unsupported for any call outside the kernel's fast path (shapes, dtypes, strides,
    devices): a hook hands such a call to SGLang's own path.
    """
    if hidden.ndim != 2 or weight.ndim != 2 or hidden.shape[1] != weight.shape[1]:
        raise Unsupported(f"lm_head_gemv: expected hidden [bs, H] and weight [R, H], got {tuple(hidden.shape)} and {tuple(weight.shape)}")
    if hidden.dtype not in (torch.bfloat16, torch.float16) or weight.dtype != hidden.dtype:
        raise Unsupported(f"lm_head_gemv: hidden and weight must share a 16-bit float dtype, got {hidden.dtype} and {weight.dtype}")
    if hidden.stride(1) != 1 or weight.stride(1) != 1:
        raise Unsupported("lm_head_gemv: hidden and weight need a contiguous last dimension")
    bs, H = hidden.shape
    R = weight.shape[0]
    out_dtype = out.dtype if out is not None else (out_dtype or hidden.dtype)
    if out_dtype not in (hidden.dtype, torch.float32):
        raise Unsupported(f"lm_head_gemv: out_dtype must be {hidden.dtype} or float32, got {out_dtype}")
    if out is None:
        out = torch.empty((bs, R), dtype=out_dtype, device=hidden.device)
    elif tuple(out.shape) != (bs, R) or out.stride(1) != 1:
        raise Unsupported(f"lm_head_gemv: out must be [{bs}, {R}] with a contiguous last dim, got {tuple(out.shape)}")
    require_launchable("lm_head_gemv", hidden, weight, out)
    if bs == 0 or R == 0:
        return out
    if H == 0:
        return out.zero_()
    table = table if table is not None else launch_table(hidden.device)
    cfg = {**launch_config(bs, R, H, table), **(config or {})}
    P, n_k, maxc = stream_plan(bs, R, H, cfg, hidden.device)
    n_rb, n_bb = cdiv(R, cfg["BLOCK_R"]), cdiv(bs, cfg["BLOCK_B"])
    part = torch.empty(n_bb * n_rb * maxc * cfg["BLOCK_R"] * cfg["BLOCK_B"], dtype=torch.float32, device=hidden.device)
    _lm_head_gemv_kernel[(P, n_bb)](
        out, part, semaphores(hidden.device, n_bb * n_rb), hidden, weight,
        out.stride(0), hidden.stride(0), weight.stride(0), bs, R, H, n_k, n_rb, maxc,
        BLOCK_R=cfg["BLOCK_R"], BLOCK_B=cfg["BLOCK_B"], BLOCK_K=cfg["BLOCK_K"], EVEN_K=H % cfg["BLOCK_K"] == 0,
        ROUND=round_code(out_dtype, round_to), UPCAST=INTERPRET, num_warps=cfg["num_warps"],
        num_stages=cfg["num_stages"], **launch_options(cfg))
    return out
