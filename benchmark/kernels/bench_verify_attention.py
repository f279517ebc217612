"""A chain verify's attention on SGLang's Triton backend, two ways, per layer: the EXTEND kernel with the chain's custom
mask (what SGLang 0.5.23 runs for a target verify of an MLA model on `--attention-backend triton`) against the DECODE
kernel over N queries a request whose KV lengths run prefix + 1 .. prefix + N (the same attention: query j of a chain
sees the prefix and the chain's tokens 0..j).

Why: on an H100 (2026-12-08, run 45: the deployment-shaped pair, 8 MLA heads a rank, 84 layers, all 8 experts active
for every token) a steps-3 step (a verify of 4 tokens a request) read 15-49 ms against a plain step's 8.6-11 ms, where
the weights it reads are the plain step's. The extend kernel spreads one request's few queries over one program per
head and walks the prefix alone; for one token a request the same kernel cost 4.3x the decode kernel (the
`offstate_attention` hook runs that case as a decode). This says what the chain's attention costs each way, at the
pair's shapes, per layer and times `--layers`.

    python -m benchmark.kernels.bench_verify_attention [--bs 1 2 4 8 16 32] [--n 4] [--prefix 600:1600] [--heads 8]
        [--layers 84] [--json PATH]                       (on the GPU; CUDA-graph replays, KV pools rotated past L2)

Both outputs are compared on every shape (bf16 pools; within the kernels' rounding) before anything is timed. The
builders (`chain`, `extend`, `decode`) are what test/integration/test_chain_verify_attention.py runs on the CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time

import torch

DK, DV, SPLITS = 576, 512, 8  # MLA: the latent (512) and the rope part (64) as one KV head; values the latent


def chain(prefix: list[int], n: int, heads: int, dtype=torch.bfloat16, device="cpu", seed: int = 0) -> dict:
    """One verify's inputs: per request its prefix slots and its n chain tokens' slots in one KV pool (written before
    attention, as SGLang does), n queries a request."""
    g = torch.Generator().manual_seed(seed)
    bs, tot = len(prefix), sum(prefix) + n * len(prefix)
    pool = torch.randn(tot + 16, 1, DK, generator=g).to(dtype)
    perm = torch.randperm(tot + 16, generator=g)[:tot]
    slots, start = [], 0
    for p in prefix:
        slots.append(perm[start:start + p + n])
        start += p + n
    q = torch.randn(bs * n, heads, DK, generator=g).to(dtype)
    return {"prefix": prefix, "n": n, "heads": heads, "q": q.to(device), "k": pool.to(device),
            "v": pool[..., :DV].contiguous().to(device), "slots": [s.to(device) for s in slots],
            "sm": DK ** -0.5, "device": device}


def _cum(xs, dtype=torch.int32, device="cpu"):
    return torch.tensor([0, *torch.cumsum(torch.tensor(xs), 0).tolist()], dtype=dtype, device=device)


def extend_args(c: dict) -> tuple:
    """SGLang's extend_attention_fwd arguments for the chain (custom mask: each query sees the prefix and the chain's
    tokens up to its own)."""
    n, dev, prefix = c["n"], c["device"], c["prefix"]
    bs = len(prefix)
    k_new = torch.cat([c["k"][s[p:]] for s, p in zip(c["slots"], prefix)])
    masks = []
    for p in prefix:
        m = torch.zeros(n, p + n, dtype=torch.bool)
        m[:, :p] = True
        m[:, p:] = torch.tril(torch.ones(n, n, dtype=torch.bool))
        masks.append(m.flatten())
    o = torch.zeros(bs * n, c["heads"], DV, dtype=c["q"].dtype, device=dev)
    return (c["q"], k_new, k_new[..., :DV].contiguous(), o, c["k"], c["v"], _cum([n] * bs, device=dev),
            _cum(prefix, device=dev), torch.cat([s[:p] for s, p in zip(c["slots"], prefix)]),
            torch.cat(masks).to(dev), False, _cum([n * (p + n) for p in prefix], torch.int64, dev), n, 1.0, 1.0)


def decode_args(c: dict, splits: int = SPLITS) -> tuple:
    """SGLang's decode_attention_fwd arguments for the chain as bs * n queries: query j of a request over its prefix
    and chain tokens 0..j."""
    n, dev, prefix = c["n"], c["device"], c["prefix"]
    rows = len(prefix) * n
    lens = [p + j + 1 for p in prefix for j in range(n)]
    idx = torch.cat([s[:p + j + 1] for s, p in zip(c["slots"], prefix) for j in range(n)])
    o = torch.zeros(rows, c["heads"], DV, dtype=c["q"].dtype, device=dev)
    return (c["q"], c["k"], c["v"], o, _cum(lens, device=dev), idx,
            torch.empty(rows, c["heads"], splits, DV, dtype=torch.float32, device=dev),
            torch.empty(rows, c["heads"], splits, dtype=torch.float32, device=dev),
            torch.full((rows,), splits, dtype=torch.int32, device=dev), splits, c["sm"], 1.0, 1.0)


def extend(c: dict, args: tuple | None = None) -> torch.Tensor:
    from sglang.kernels.ops.attention.extend_attention import extend_attention_fwd

    a = args or extend_args(c)
    extend_attention_fwd(*a, sm_scale=c["sm"])
    return a[3]


def decode(c: dict, args: tuple | None = None) -> torch.Tensor:
    from sglang.kernels.ops.attention.decode_attention import decode_attention_fwd

    a = args or decode_args(c)
    decode_attention_fwd(*a, has_mla=True)
    return a[3]


def reference(c: dict) -> torch.Tensor:
    """fp32 torch: query j of each request over its prefix and chain tokens 0..j."""
    out, k, v = [], c["k"].float(), c["v"].float()
    for r, (s, p) in enumerate(zip(c["slots"], c["prefix"])):
        for j in range(c["n"]):
            qr = c["q"][r * c["n"] + j].float()
            w = torch.softmax(qr @ k[s[:p + j + 1], 0].T * c["sm"], -1)
            out.append(w @ v[s[:p + j + 1], 0])
    return torch.stack(out)


def _prefixes(spec: str, bs: int, rng: random.Random) -> list[int]:
    lo, _, hi = spec.partition(":")
    return [rng.randint(int(lo), int(hi or lo)) for _ in range(bs)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bs", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32])
    ap.add_argument("--n", type=int, default=4, help="tokens a request verifies (--speculative-num-draft-tokens)")
    ap.add_argument("--prefix", default="600:1600", help="each request's prefix length, uniform in LO:HI (seeded)")
    ap.add_argument("--heads", type=int, default=8, help="attention heads on one rank (the deployment-shaped pair: 8)")
    ap.add_argument("--layers", type=int, default=84, help="layers a step runs (the pair: 84)")
    ap.add_argument("--pools", type=int, default=8, help="KV pools rotated per replay (past L2: one per layer's cache)")
    ap.add_argument("--json", help="rows here too (atomically); default $OUT/verify-attention-<device>.json with $OUT")
    a = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_verify_attention: no CUDA device (the equality runs on the CPU: "
              "test/integration/test_chain_verify_attention.py)", file=sys.stderr)
        return 2
    from benchmark.kernels.harness import device_info, graph_time_us, rotating, versions

    from sglang_kimi_eagle3.atomic import write_atomic

    rng, rows = random.Random(0), []
    dev = torch.cuda.get_device_name(0)
    out = a.json or (os.path.join(os.environ["OUT"], f"verify-attention-{dev.replace(' ', '_')}.json")
                     if os.environ.get("OUT") else None)
    print(f"chain verify attention, {dev}: N {a.n}, {a.heads} heads, prefixes {a.prefix}; us per layer (x{a.layers} "
          "a step in brackets, ms)", flush=True)
    for bs in a.bs:
        prefix = _prefixes(a.prefix, bs, rng)
        cs = [chain(prefix, a.n, a.heads, device="cuda", seed=i) for i in range(a.pools)]
        ea, da = [extend_args(c) for c in cs], [decode_args(c) for c in cs]
        diff = (extend(cs[0], ea[0]).float() - decode(cs[0], da[0]).float()).abs().max().item()
        t = {}
        for name, fn, args in (("extend", extend, ea), ("decode", decode, da)):
            run, k = rotating(lambda i, fn=fn, args=args: fn(cs[i], args[i]), range(a.pools))
            t[name] = graph_time_us(run)["us"] / k
        row = {"bs": bs, "n": a.n, "heads": a.heads, "prefix_mean": sum(prefix) / bs, "extend_us": t["extend"],
               "decode_us": t["decode"], "max_abs_diff": diff, "layers": a.layers}
        rows.append(row)
        print(f"  bs {bs:>3}: extend {t['extend']:8.1f} ({t['extend'] * a.layers / 1000:6.2f})   decode "
              f"{t['decode']:8.1f} ({t['decode'] * a.layers / 1000:6.2f})   decode/extend "
              f"{t['decode'] / t['extend']:.2f}   max |diff| {diff:.3g}", flush=True)
        if out:
            doc = {"bench": "verify_attention", "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                   "versions": versions(), "device": device_info(), "command": " ".join(sys.argv), "rows": rows}
            write_atomic(out, json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
