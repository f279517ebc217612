"""Compile SGLang's JIT kernels a server builds at its start, ahead of the server and in parallel, into
SGLANG_JIT_CACHE_DIR (default ~/.cache/sglang/jit).

Why: on the H200 (2026-12-03, SGLang 0.5.23) a lone server of the deployment-shaped pair (`tiny --preset deploy
--int4`) sat in its first decode-graph capture (bs 128) for over 6 minutes: SGLang JIT-compiles its Marlin MoE GEMM
(`moe_wna16_marlin`) there, one variant per expert-output mode, each a single-threaded nvcc run of about 5 minutes,
one after the other. Two processes compile the two variants side by side; a server started afterwards with the same
cache directory finds them (SGLang's cache is content-addressed: same sources, flags, compilers and versions).

--spec VOCAB builds instead what this plugin's kernel warm-up builds inside every speculative server before it
listens: SGLang's tree and tree-sampling JIT modules and FlashInfer's sampling module (into FLASHINFER_WORKSPACE_BASE,
--flashinfer to set it), three processes side by side, with the warm-up's own calls. On an H100 (2026-12-05, a fresh
box, two speculative servers starting together) that part of the warm-up took 167-172 s of each server's start; built
while the plain server starts, the speculative servers find them.

    python3 benchmark/live/prebuild_jit.py [--cache DIR] [--timeout S]     (on the GPU machine, the carried stack)
    python3 benchmark/live/prebuild_jit.py --spec 20480 [--draft-tokens 4 --steps 3 --topk 1] [--flashinfer DIR]

Exit 0 when every module is in the cache (--spec without CUDA: nothing to build, said so), 1 when one failed (its error
printed), 2 on bad arguments.
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
    return f"built moe_wna16_marlin bf16 {flags}: {time.time() - t0:.0f} s"


def _shapes(a):
    from sglang_kimi_eagle3.ops.warmup import LaunchShapes

    return LaunchShapes(max_bs=1, topk=a.topk, num_steps=a.steps, num_draft_tokens=a.draft_tokens, target_vocab=a.spec)


def _build_spec(part: str, a) -> str:
    """One of the kernel warm-up's SGLang builds (integration/hooks/kernel_warmup.py), in this child process."""
    import torch

    from sglang_kimi_eagle3.integration.hooks import kernel_warmup as kw

    fn = {"tree": kw.warm_sglang_tree, "sampling": kw.warm_sglang_sampling, "flashinfer": kw.warm_flashinfer_sampling}[part]
    t0 = time.time()
    built = fn(_shapes(a), torch.device(a.device))
    if built is None:
        return f"{part}: nothing to build (not CUDA, or SGLang has no such kernel here)"
    return f"built {built}: {time.time() - t0:.0f} s"


SPEC_PARTS = ("tree", "sampling", "flashinfer")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", help="SGLANG_JIT_CACHE_DIR to fill (default: the environment's, else SGLang's default)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for all variants (default 900)")
    ap.add_argument("--spec", type=int, metavar="VOCAB", help="the speculative servers' modules instead, for a target "
                    "of this vocabulary (the verify logits' width)")
    ap.add_argument("--draft-tokens", type=int, default=4, help="--speculative-num-draft-tokens (default 4)")
    ap.add_argument("--steps", type=int, default=3, help="--speculative-num-steps (default 3)")
    ap.add_argument("--topk", type=int, default=1, help="--speculative-eagle-topk (default 1)")
    ap.add_argument("--flashinfer", help="FLASHINFER_WORKSPACE_BASE to fill (with --spec; default: the environment's)")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"),
                    help="with --spec: cpu runs the same processes and calls, which build nothing (a rehearsal)")
    args = ap.parse_args(argv)
    if args.spec is not None:
        try:
            _shapes(args)
        except ValueError as exc:
            ap.error(f"--spec / --draft-tokens / --steps / --topk: {exc}")
    if args.cache:
        os.environ["SGLANG_JIT_CACHE_DIR"] = args.cache
    if args.flashinfer:
        os.environ["FLASHINFER_WORKSPACE_BASE"] = args.flashinfer
    where = os.environ.get("SGLANG_JIT_CACHE_DIR") or "~/.cache/sglang/jit"
    if args.spec is not None:
        import torch

        if args.device == "cuda" and not torch.cuda.is_available():
            print("prebuild_jit --spec: no CUDA device here: nothing to build", flush=True)
            return 0
        jobs = [(p, (p, args)) for p in SPEC_PARTS]
        fn = _build_spec
        print(f"prebuild_jit: SGLang's speculative modules ({', '.join(SPEC_PARTS)}; vocab {args.spec}, N "
              f"{args.draft_tokens}) into {where}", flush=True)
    else:
        jobs = [(f"moe_wna16_marlin {v}", (v,)) for v in MARLIN_VARIANTS]
        fn = _build
        print(f"prebuild_jit: {len(MARLIN_VARIANTS)} variants of moe_wna16_marlin into {where}", flush=True)
    ctx = mp.get_context("spawn")  # CUDA is initialised in each child, never in this parent
    with ctx.Pool(len(jobs)) as pool:
        started = [(name, pool.apply_async(fn, fargs)) for name, fargs in jobs]
        bad = 0
        deadline = time.time() + args.timeout
        for name, j in started:
            try:
                print(j.get(max(1.0, deadline - time.time())), flush=True)
            except Exception as exc:  # one line per module that did not build; the others still count
                bad += 1
                print(f"prebuild_jit: {name} failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
