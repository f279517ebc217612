"""Tree rejection sampling: Triton (parallel over the vocabulary) vs the JIT CUDA kernel.

CUDA-graph replay of each kernel on the same inputs, median of triton.testing.do_bench_cudagraph.
  python benchmark/kernels/speculative/bench_tree_sampling_triton.py [--vocab 163840] [--bs 1,8,32,64,128,256]
Prints one row per (N, bs): CUDA us, Triton us, ratio, and whether the accepted paths matched.
"""

import argparse
import random

import torch
import triton

from sglang.kernels.ops.speculative.sampling import tree_speculative_sampling_target_only
from sglang.kernels.ops.speculative.tree_sampling_triton import (
    random_tree_parents,
    tree_from_parents,
    tree_speculative_sampling_triton,
)

SHAPES = {4: (1, 3), 16: (4, 4)}  # N -> (topk, depth): the chain and a topk-4 tree


def setup(bs, n, vocab, seed=0):
    topk, depth = SHAPES[n]
    rng = random.Random(seed)
    ridx, nxt, sib = tree_from_parents([random_tree_parents(rng, n, topk, depth) for _ in range(bs)], device="cuda")
    tp = torch.softmax(torch.randn(bs, n, vocab, device="cuda") * 4, -1)
    dp = torch.softmax(torch.randn(bs, n, vocab, device="cuda") * 4, -1)
    cand = tp.argmax(-1)
    us, uf = torch.rand(bs, n, device="cuda"), torch.rand(bs, device="cuda")
    out = lambda: (torch.zeros(bs * n, dtype=torch.int32, device="cuda"),
                   torch.zeros(bs, depth + 1, dtype=torch.int32, device="cuda"),
                   torch.zeros(bs, dtype=torch.int32, device="cuda"))
    return (cand, ridx, nxt, sib, us, uf, tp, dp), out


def time_us(fn, args, out):
    p, a, k = out()
    d = args[-1].clone()
    call = lambda: fn(p, a, k, *args[:-1], d)
    call()
    return triton.testing.do_bench_cudagraph(call, rep=100) * 1000, (a, k)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", type=int, default=163840)
    ap.add_argument("--bs", default="1,8,32,64,128,256")
    args = ap.parse_args()
    print(f"device {torch.cuda.get_device_name()}  torch {torch.__version__}  triton {triton.__version__}  vocab {args.vocab}")
    print(f"{'N':>3} {'bs':>4} {'cuda_us':>9} {'triton_us':>10} {'ratio':>6}  path_equal")
    for n in SHAPES:
        for bs in map(int, args.bs.split(",")):
            inputs, out = setup(bs, n, args.vocab)
            t_cuda, r_cuda = time_us(tree_speculative_sampling_target_only, inputs, out)
            t_tri, r_tri = time_us(tree_speculative_sampling_triton, inputs, out)
            same = all(torch.equal(x, y) for x, y in zip(r_cuda, r_tri))
            print(f"{n:>3} {bs:>4} {t_cuda:9.2f} {t_tri:10.2f} {t_cuda / t_tri:6.2f}  {same}")


if __name__ == "__main__":
    main()
