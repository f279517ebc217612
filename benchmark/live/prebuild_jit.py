"""Compile SGLang's JIT kernels that an INT4 (compressed-tensors WNA16) MoE server builds at its first CUDA-graph
capture, ahead of the server and in parallel, into SGLANG_JIT_CACHE_DIR (default ~/.cache/sglang/jit).

Why: on the H200 (2026-12-03, SGLang 0.5.23) a lone server of the deployment-shaped pair (`tiny --preset deploy
--int4`) sat in its first decode-graph capture (bs 128) for over 6 minutes: SGLang JIT-compiles its Marlin MoE GEMM
(`moe_wna16_marlin`) there, one variant per expert-output mode, each a single-threaded nvcc run of about 5 minutes,
one after the other. Two processes compile the two variants side by side; a server started afterwards with the same
cache directory finds them (SGLang's cache is content-addressed: same sources, flags, compilers and versions).

    python3 benchmark/live/prebuild_jit.py [--cache DIR] [--timeout S]     (on the GPU machine, the carried stack)

Exit 0 when every variant is in the cache, 1 when one failed (its error printed), 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import time

# (dtype, is_ep, has_bias, expert_ids_are_sorted, zero_inactive_output, has_inactive_prefix_count): the variants the
# deploy-pair server built on 2026-12-03 (their cache folders: moe_wna16_marlin_bf16_t_false_false_true_{true,false}_true)
MARLIN_VARIANTS = ((False, False, True, True, True), (False, False, True, False, True))


def _build(flags: tuple) -> str:
    import torch
    from sglang.kernels.ops.moe import moe_wna16_marlin as m

    t0 = time.time()
    m._jit_moe_wna16_marlin_module(torch.bfloat16, *flags)
    return f"moe_wna16_marlin bf16 {flags}: {time.time() - t0:.0f} s"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", help="SGLANG_JIT_CACHE_DIR to fill (default: the environment's, else SGLang's default)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for all variants (default 900)")
    args = ap.parse_args(argv)
    if args.cache:
        os.environ["SGLANG_JIT_CACHE_DIR"] = args.cache
    print(f"prebuild_jit: {len(MARLIN_VARIANTS)} variants of moe_wna16_marlin into "
          f"{os.environ.get('SGLANG_JIT_CACHE_DIR') or '~/.cache/sglang/jit'}", flush=True)
    ctx = mp.get_context("spawn")  # CUDA is initialised in each child, never in this parent
    with ctx.Pool(len(MARLIN_VARIANTS)) as pool:
        jobs = [pool.apply_async(_build, (v,)) for v in MARLIN_VARIANTS]
        bad = 0
        deadline = time.time() + args.timeout
        for v, j in zip(MARLIN_VARIANTS, jobs):
            try:
                print("built", j.get(max(1.0, deadline - time.time())), flush=True)
            except Exception as exc:  # one line per variant that did not build; the others still count
                bad += 1
                print(f"prebuild_jit: moe_wna16_marlin {v} failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
