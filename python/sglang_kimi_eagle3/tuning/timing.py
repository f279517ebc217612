"""CUDA-graph replay timing (GPU only; torch and triton, no sglang): one implementation for `tune`
and the kernel benchmarks (benchmark/kernels/harness.py's capture_graph / graph_time_us, to be imported
from here: issue 11).

Two methods:
  graph_time_us(fn)            `triton.testing.do_bench` over replays of a graph of `fn` (median and
                               20/80 quantiles; do_bench picks the repeat count and zero-fills a
                               256 MB buffer before each replay). The method of the bundled tables.
  replay_time_us(fn, items)    a graph of `fn(item)` for every item, replayed a FIXED number of times
                               (warm-up, then `samples` x `replays` timed with CUDA events); per-call
                               µs. With `items` rotated past the L2 (`copies_past_l2`) every call
                               streams its inputs from HBM, as in a decode loop. Fixed counts make two
                               providers' runs comparable (and equal across ranks: no do_bench).
"""

from __future__ import annotations

import statistics

import torch

DEFAULT_L2_BYTES = 50 << 20  # H200; a device reports its own through torch's properties


def capture_graph(fn) -> "torch.cuda.CUDAGraph":
    """`fn` warmed up on a side stream (compiles, allocator pools), then captured once into a CUDA graph."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    torch.cuda.synchronize()
    return g


def graph_time_us(fn, warmup_ms: int = 50, rep_ms: int = 300) -> dict:
    """Median and 20/80 quantiles (µs) of CUDA-graph replays of `fn` (captured once after warm-up)."""
    from triton.testing import do_bench

    g = capture_graph(fn)
    q = do_bench(lambda: g.replay(), warmup=warmup_ms, rep=rep_ms, quantiles=[0.5, 0.2, 0.8])
    return {"us": q[0] * 1e3, "p20_us": q[1] * 1e3, "p80_us": q[2] * 1e3}


def rotating(fn, items):
    """(run, n): run() calls fn(item) for every item; a replay's time / n is the per-call time."""
    items = list(items)

    def run():
        for it in items:
            fn(it)
    return run, len(items)


def l2_bytes() -> int:
    try:
        return int(getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "L2_cache_size", 0)) \
            or DEFAULT_L2_BYTES
    except Exception:
        return DEFAULT_L2_BYTES


def copies_past_l2(make, nbytes_each: int, factor: float = 3.0, cap: int = 64) -> list:
    """[make(0), make(1), ...]: enough copies that cycling them streams >= factor x L2 per pass
    (one copy when one already does; at most `cap`)."""
    n = max(1, min(cap, -(-int(factor * l2_bytes()) // max(1, nbytes_each))))
    return [make(i) for i in range(n)]


def replay_time_us(fn, items=(None,), samples: int = 15, replays: int = 4, warmup: int = 3) -> dict:
    """Per-call µs of fn(item) over `items`, from a fixed count of graph replays.

    One graph calls fn on every item; after `warmup` replays, `samples` groups of `replays` replays
    are each bracketed by CUDA events. Returns median and 20/80 quantiles of the per-call time over
    the groups, and the number of calls timed.
    """
    run, n = rotating(fn, items)
    g = capture_graph(run)
    for _ in range(warmup):
        g.replay()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(samples)]
    for start, end in events:
        start.record()
        for _ in range(replays):
            g.replay()
        end.record()
    torch.cuda.synchronize()
    per = sorted(s.elapsed_time(e) * 1e3 / (replays * n) for s, e in events)
    del g
    q = statistics.quantiles(per, n=5) if len(per) > 1 else [per[0]] * 4
    return {"us": statistics.median(per), "p20_us": q[0], "p80_us": q[3], "calls": samples * replays * n}


def eager_time_us(fn, items=(None,), calls: int = 100, samples: int = 5) -> float:
    """Per-call µs of fn(item) called eagerly, back to back from an idle GPU and synchronised at the end: what a
    call costs where SGLang runs it outside its CUDA graphs (the verify ops after the captured target forward),
    host time (Python, launches) included - roughly max(host, GPU) per call. Median over `samples`."""
    import time

    items = list(items)
    for it in items:  # compiled and warm
        fn(it)
    torch.cuda.synchronize()
    per = []
    for _ in range(samples):
        t0 = time.perf_counter()
        for i in range(calls):
            fn(items[i % len(items)])
        torch.cuda.synchronize()
        per.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(per)
