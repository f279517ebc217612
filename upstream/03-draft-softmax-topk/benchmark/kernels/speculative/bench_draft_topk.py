"""Draft top-k (EAGLE topk > 1): Triton vs torch.topk over the draft probabilities, and the fused
softmax + top-k vs torch.softmax + torch.topk. CUDA-graph replay, median of do_bench_cudagraph.
  python benchmark/kernels/speculative/bench_draft_topk.py [--vocab 32000] [--k 4] [--bs 1,8,32,64,128]
"""

import argparse

import torch
import triton

from sglang.kernels.ops.speculative.draft_topk import draft_probs_topk, draft_softmax_topk


def us(call):
    call()
    return triton.testing.do_bench_cudagraph(call, rep=100) * 1000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--bs", default="1,8,32,64,128")
    a = ap.parse_args()
    print(f"device {torch.cuda.get_device_name()}  torch {torch.__version__}  triton {triton.__version__}  V {a.vocab} k {a.k}")
    print(f"{'bs':>4} {'torch.topk':>11} {'triton':>8} {'ratio':>6} | {'softmax+topk':>13} {'fused':>7} {'ratio':>6}")
    for bs in map(int, a.bs.split(",")):
        logits = torch.randn(bs, a.vocab, device="cuda")
        probs = torch.softmax(logits, -1)
        t1, t2 = us(lambda: torch.topk(probs, a.k, dim=-1)), us(lambda: draft_probs_topk(probs, a.k))
        t3 = us(lambda: torch.topk(torch.softmax(logits, -1), a.k, dim=-1))
        t4 = us(lambda: draft_softmax_topk(logits, a.k))
        print(f"{bs:>4} {t1:11.2f} {t2:8.2f} {t1 / t2:6.2f} | {t3:13.2f} {t4:7.2f} {t3 / t4:6.2f}")


if __name__ == "__main__":
    main()
