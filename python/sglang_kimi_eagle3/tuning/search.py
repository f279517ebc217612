"""Launch-parameter candidates per op, within the architecture's limits (pure: no torch).

Shared memory per block (cp.async stages of the weight and hidden tiles) must fit the part: 227 KB
on SM90/SM100 (a 200 KB budget, as benchmark/tune_draft_head.py used), 99 KB on SM120/SM89 (the
bound test/ops/test_sm120_compile_*.py verifies). `quick` keeps the grid to a few compiles per shape.
Every candidate sets each key the launcher reads, so no table entry leaks into it.
"""

from __future__ import annotations

# compute-capability major -> (shared memory budget per block, shared memory per SM), bytes
SMEM = {8: (160 << 10, 164 << 10), 9: (200 << 10, 228 << 10), 10: (200 << 10, 228 << 10),
        12: (99 << 10, 100 << 10)}
SM89 = (99 << 10, 100 << 10)


def smem_limits(cc: tuple[int, int]) -> tuple[int, int]:
    if tuple(cc) == (8, 9):
        return SM89
    return SMEM.get(cc[0], SM89)


def gemv(bs: int, rows: int, cc: tuple[int, int], quick: bool) -> list[dict]:
    """lm_head_gemv tiles x resident CTAs per SM (stream-K grid = CTAS_PER_SM x SMs)."""
    budget, per_sm = smem_limits(cc)
    block_b = {1: [16], 8: [16], 32: [32, 16], 64: [64, 32], 128: [64, 128]}.get(bs, [64])
    tiles = [(64, 128, 4), (128, 128, 3)] if quick else [(64, 128, 4), (64, 128, 3), (64, 64, 6), (64, 256, 3), (128, 128, 3)]
    out = []
    for bb in block_b[:1] if quick else block_b:
        for br, bk, st in tiles:
            if br * bb > 8192:
                continue
            while st > 2 and (br + bb) * bk * 2 * st > budget:
                st -= 1
            smem = (br + bb) * bk * 2 * st
            if smem > budget:
                continue
            nw = 8 if br * bb >= 8192 else 4  # <= 64 fp32 accumulators per thread (no spills)
            base = {"BLOCK_R": br, "BLOCK_B": bb, "BLOCK_K": bk, "num_warps": nw, "num_stages": st, "PROGRAMS": 0,
                    "maxnreg": None}
            slots = max(1, min(2 if quick else 4, per_sm // smem))
            out += [{**base, "CTAS_PER_SM": c} for c in range(1, slots + 1)]
    return out


def fused(gemv_cfg: dict, cc: tuple[int, int]) -> dict:
    """The fused lm_head + top-k on a GEMV tile: 8 warps from 64 x 64 up (its top-k epilogue needs the
    registers); on SM120 a 255-register cap (ptxas spills without it, see the sm120 table)."""
    c = {**gemv_cfg, "num_warps": 8 if gemv_cfg["BLOCK_R"] * gemv_cfg["BLOCK_B"] >= 4096 else gemv_cfg["num_warps"]}
    if cc[0] == 12:
        c["maxnreg"] = 255
    return c


def topk(vocab: int, quick: bool) -> list[dict]:
    blocks = (1024, 4096) if quick else (1024, 2048, 4096, 8192)
    return [{"BLOCK": b, "num_warps": w, "maxnreg": None} for b in blocks for w in (4, 8) if b <= 2 * vocab or b == 1024]


def argmax_verify(rows: int, sms: int, quick: bool) -> list[dict]:
    base = {"block": 2048, "num_warps": 8, "min_programs": 4 * sms, "chunk": 16384, "rows_per_program": 1,
            "verify_rows_per_program": 1, "verify_num_warps": 1 if rows <= 64 else 4, "pdl": True}
    variants = ([{}, {"num_warps": 4}, {"block": 1024, "min_programs": 8 * sms}] if rows <= 256 else
                [{}, {"chunk": 8192}, {"num_warps": 4}])
    if not quick:
        variants += [{"pdl": False}, {"block": 4096}, {"chunk": 32768}]
    return [{**base, **v} for v in variants]


def verify_greedy(n: int, quick: bool) -> list[dict]:
    out = [{"rows_per_program": 1, "num_warps": 1}, {"rows_per_program": 1, "num_warps": 4}]
    if not quick:
        out += [{"rows_per_program": 2, "num_warps": 4}]
    return out


def tree_sampling(n: int, quick: bool) -> list[dict]:
    base = {"walk_rows_per_program": 1, "walk_num_warps": 1 if n <= 16 else 4, "rows_per_program": 1,
            "tiles_per_program": 1, "num_warps": 8, "sample_rows_per_program": 1, "sample_num_warps": 4, "pdl": True}
    variants = [{}, {"num_warps": 4}] + ([] if quick else [{"sample_num_warps": 8}, {"tiles_per_program": 2},
                                                           {"pdl": False}])
    return [{**base, **v} for v in variants]
