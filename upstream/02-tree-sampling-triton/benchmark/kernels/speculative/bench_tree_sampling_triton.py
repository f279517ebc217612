"""Tree rejection sampling: Triton (parallel over the vocabulary) vs the JIT CUDA kernel.

CUDA-graph replay of each kernel on the same inputs, median of triton.testing.do_bench_cudagraph.
  python benchmark/kernels/speculative/bench_tree_sampling_triton.py [--vocab 163840] [--bs 1,8,32,64,128,256]
Prints one row per (N, bs): CUDA us, Triton us, ratio, and whether the accepted paths matched.
  ... --eager [--calls 200 --rounds 3]
Per eager call instead (how eagle_sample calls the op, outside the CUDA graphs: host time included): `calls`
calls back to back then one synchronize, per call, median over alternated rounds, for the CUDA kernel, the
Triton default (replay_launches after a signature's first call) and the Triton binder path (an explicit config).

Inputs are what eagle_sample passes: draft_probs zero, each draft token one of the three likeliest of
its parent's target row (else a random token), SGLang's retrive_* links. check_inputs validates every
shape, dtype and index before a kernel sees them; the inputs are ready (synchronized) before timing,
since do_bench_cudagraph runs on a stream of its own that does not wait for the default stream.
"""

import argparse
import random

import torch
import triton

from sglang.kernels.ops.speculative.tree_sampling_triton import (
    random_tree_parents,
    tree_from_parents,
    tree_speculative_sampling_triton,
)

SHAPES = {4: (1, 3), 16: (4, 4)}  # N -> (topk, depth): the chain and a topk-4 tree; spec_steps = depth + 1


def setup(bs, n, vocab, seed=0, device="cuda"):
    """(inputs, out): inputs = (candidates, retrive_index, retrive_next_token, retrive_next_sibling,
    uniform_samples, uniform_samples_for_final_sampling, target_probs, draft_probs); out() gives fresh
    (predicts, accept_index, accept_token_num)."""
    topk, depth = SHAPES[n]
    rng = random.Random(seed * 7919 + bs * 31 + n)
    parents = [random_tree_parents(rng, n, topk, depth) for _ in range(bs)]
    ridx, nxt, sib = tree_from_parents(parents, device=device)
    g = torch.Generator(device=device).manual_seed(seed)
    tp = torch.softmax(torch.randn(bs, n, vocab, device=device, generator=g) * 4, -1)
    dp = torch.zeros_like(tp)  # target-only: eagle_sample passes zeros
    par = torch.tensor(parents, device=device).clamp_min(0)  # the root's entry is never read
    top = tp.topk(min(3, vocab), -1).indices  # [bs, n, 3]
    liked = top.gather(2, torch.randint(0, top.shape[2], (bs, n, 1), device=device, generator=g)).squeeze(2)
    follow = torch.rand(bs, n, device=device, generator=g) < 0.6
    cand = torch.where(follow, liked.gather(1, par), torch.randint(0, vocab, (bs, n), device=device, generator=g))
    us = torch.rand(bs, n, device=device, generator=g)
    uf = torch.rand(bs, device=device, generator=g)
    out = lambda: (torch.zeros(bs * n, dtype=torch.int32, device=device),
                   torch.zeros(bs, depth + 1, dtype=torch.int32, device=device),
                   torch.zeros(bs, dtype=torch.int32, device=device))
    return (cand, ridx, nxt, sib, us, uf, tp, dp), out


def check_inputs(inputs, outs):
    """Raise ValueError unless the inputs are within both kernels' contract: int64 [bs, N] tree
    tensors, candidates in [0, vocab), retrive_index a permutation of [0, bs*N) (the predicts slots),
    next_token/next_sibling in [-1, N) linking each request's nodes into one tree from node 0, fp32
    probabilities [bs, N, vocab] with bs*N*vocab < 2**32 (SGLang's kernel keeps row offsets in
    uint32), coins in [0, 1), int32 outputs [bs*N], [bs, spec_steps], [bs]."""
    cand, ridx, nxt, sib, us, uf, tp, dp = inputs
    predicts, accept_index, accept_num = outs
    bs, n = cand.shape
    vocab = tp.shape[-1]

    def need(ok, what):
        if not ok:
            raise ValueError(f"benchmark input: {what}")

    for name, t in (("candidates", cand), ("retrive_index", ridx), ("retrive_next_token", nxt),
                    ("retrive_next_sibling", sib)):
        need(t.dtype == torch.int64 and tuple(t.shape) == (bs, n) and t.is_contiguous(), f"{name} int64 [{bs}, {n}]")
    for name, t in (("target_probs", tp), ("draft_probs", dp)):
        need(t.dtype == torch.float32 and tuple(t.shape) == (bs, n, vocab) and t.is_contiguous(),
             f"{name} fp32 [{bs}, {n}, {vocab}]")
    need(bs * n * vocab < 2**32, f"bs*N*vocab = {bs * n * vocab} >= 2**32 (uint32 offsets in SGLang's kernel)")
    need(us.dtype == uf.dtype == torch.float32 and tuple(us.shape) == (bs, n) and tuple(uf.shape) == (bs,),
         "uniform samples fp32 [bs, N] and [bs]")
    need(bool(((us >= 0) & (us < 1)).all()) and bool(((uf >= 0) & (uf < 1)).all()), "coins in [0, 1)")
    need(bool(((cand >= 0) & (cand < vocab)).all()), f"candidates in [0, {vocab})")
    need(torch.equal(ridx.flatten().sort().values.cpu(), torch.arange(bs * n)), f"retrive_index a permutation of [0, {bs * n})")
    for name, t in (("retrive_next_token", nxt), ("retrive_next_sibling", sib)):
        need(bool(((t >= -1) & (t < n)).all()), f"{name} in [-1, {n})")
    need(predicts.dtype == accept_index.dtype == accept_num.dtype == torch.int32, "outputs int32")
    need(tuple(predicts.shape) == (bs * n,) and accept_index.ndim == 2 and accept_index.shape[0] == bs
         and accept_index.shape[1] >= 1 and tuple(accept_num.shape) == (bs,), "output shapes")
    nx, sb = nxt.tolist(), sib.tolist()
    for b in range(bs):  # every node reached exactly once from the root: a tree, no cycles
        seen, todo = {0}, [0]
        while todo:
            c = nx[b][todo.pop()]
            while c != -1:
                need(c not in seen and c != 0, f"request {b}: node {c} linked twice")
                seen.add(c)
                todo.append(c)
                c = sb[b][c]
        need(len(seen) == n, f"request {b}: {n - len(seen)} nodes not linked from the root")


def time_us(fn, args, out):
    p, a, k = out()
    d = args[-1].clone()
    check_inputs(args, (p, a, k))
    call = lambda: fn(p, a, k, *args[:-1], d)
    call()
    torch.cuda.synchronize()  # inputs and outputs ready: do_bench_cudagraph's stream does not wait for ours
    return triton.testing.do_bench_cudagraph(call, rep=100) * 1000, (a, k)


def eager_us(fns, inputs, out, calls, rounds):
    """{name: median us per eager call}: each fn called `calls` times back to back, then one synchronize; the
    functions alternate within every round."""
    import statistics
    import time

    runs = {}
    for name, fn in fns.items():
        p, a, k = out()
        d = inputs[-1].clone()
        runs[name] = lambda fn=fn, p=p, a=a, k=k, d=d: fn(p, a, k, *inputs[:-1], d)
        for _ in range(3):  # the first call of a signature records or compiles
            runs[name]()
    torch.cuda.synchronize()
    times = {name: [] for name in fns}
    for _ in range(rounds):
        for name, run in runs.items():
            t0 = time.perf_counter()
            for _ in range(calls):
                run()
            torch.cuda.synchronize()
            times[name].append((time.perf_counter() - t0) / calls * 1e6)
    return {name: statistics.median(v) for name, v in times.items()}


def main():
    from sglang.kernels.ops.speculative.sampling import tree_speculative_sampling_target_only
    from sglang.kernels.ops.speculative.tree_sampling_triton import launch_config

    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", type=int, default=163840)
    ap.add_argument("--bs", default="1,8,32,64,128,256")
    ap.add_argument("--eager", action="store_true", help="time per eager call (host included), not graph replays")
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    print(f"device {torch.cuda.get_device_name()}  torch {torch.__version__}  triton {triton.__version__}  vocab {args.vocab}")
    if args.eager:
        print(f"{'N':>3} {'bs':>4} {'cuda_us':>9} {'replay_us':>10} {'binder_us':>10} {'replay/cuda':>12}  (per eager call)")
        for n in SHAPES:
            for bs in map(int, args.bs.split(",")):
                inputs, out = setup(bs, n, args.vocab)
                check_inputs(inputs, out())
                cfg = launch_config(n)
                t = eager_us({"cuda": tree_speculative_sampling_target_only, "replay": tree_speculative_sampling_triton,
                              "binder": lambda *a: tree_speculative_sampling_triton(*a, config=cfg)},
                             inputs, out, args.calls, args.rounds)
                print(f"{n:>3} {bs:>4} {t['cuda']:9.2f} {t['replay']:10.2f} {t['binder']:10.2f} "
                      f"{t['replay'] / t['cuda']:12.2f}")
                del inputs, out
        return
    print(f"{'N':>3} {'bs':>4} {'cuda_us':>9} {'triton_us':>10} {'ratio':>6}  path_equal")
    for n in SHAPES:
        for bs in map(int, args.bs.split(",")):
            inputs, out = setup(bs, n, args.vocab)
            t_cuda, r_cuda = time_us(tree_speculative_sampling_target_only, inputs, out)
            t_tri, r_tri = time_us(tree_speculative_sampling_triton, inputs, out)
            same = all(torch.equal(x, y) for x, y in zip(r_cuda, r_tri))
            print(f"{n:>3} {bs:>4} {t_cuda:9.2f} {t_tri:10.2f} {t_cuda / t_tri:6.2f}  {same}")
            del inputs, out


if __name__ == "__main__":
    main()
