"""Does a busy process on another CPU slow a launch-bound loop? (hidden SMT siblings, shared caches, a noisy host)

A host-bound loop (LAUNCHES tiny CUDA kernels back to back, as an eager prefill launches its layers' kernels) pinned
to CPU A is timed alone, then beside a pure-Python busy loop pinned to each other CPU B in turn, and beside one on A
itself (time-shared: the upper bound). A guest's CPU list says nothing of which of its CPUs share a physical core on
the host; this reads it from the slowdowns. Needs PyTorch with a GPU (falls back to a CPU loop without one).

    python3 benchmark/host/cpu_neighbours.py [--cpu 0] [--launches 20000] [--json OUT]
    python3 benchmark/host/cpu_neighbours.py --alone [--rounds 3] [--launches 10000] [--json OUT]

--alone: the same loop alone on each CPU in turn, --rounds rounds (every other round in reverse CPU order): whether
the CPUs launch at one speed (on an H100 lease, 2026-12-07: two speeds, about 7.0 and 9.0-9.6 µs a launch, some CPUs
at one of them in every round, others switching between rounds).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import time


def _busy(cpu: int, stop) -> None:
    os.sched_setaffinity(0, {cpu})
    x = 0
    while not stop.is_set():
        for _ in range(10000):
            x += 1


def _loop(torch, dev, n: int) -> float:
    t = torch.zeros(16, device=dev)
    if dev == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        t.add_(1.0)
    if dev == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) / n * 1e6  # µs per launch


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cpu", type=int, default=0)
    ap.add_argument("--launches", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--alone", action="store_true", help="each CPU alone, --rounds rotated rounds")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    import torch

    dev = "cuda" if torch.cuda.is_available() else "cpu"
    cpus = sorted(os.sched_getaffinity(0))
    if a.cpu not in cpus:
        print(f"cpu_neighbours.py: --cpu {a.cpu} is not one of this process's CPUs ({cpus})", file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    if a.alone:
        res = {c: [] for c in cpus}
        for r in range(a.rounds):
            for c in (cpus if r % 2 == 0 else cpus[::-1]):
                os.sched_setaffinity(0, {c})
                _loop(torch, dev, 1000)
                res[c].append(_loop(torch, dev, a.launches))
        for c in cpus:
            print(f"CPU {c:2d}: " + " ".join(f"{v:6.2f}" for v in res[c]) + f"  median {statistics.median(res[c]):.2f} µs")
        _write(a.json, {"device": torch.cuda.get_device_name(0) if dev == "cuda" else "cpu", "torch": torch.__version__,
                        "launches": a.launches, "alone_us": res, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())})
        return 0
    os.sched_setaffinity(0, {a.cpu})
    _loop(torch, dev, 2000)  # warm

    def timed():
        return statistics.median(_loop(torch, dev, a.launches) for _ in range(a.repeats))

    alone = timed()
    rows = {}
    for b in cpus:
        stop = mp.Event()
        p = mp.Process(target=_busy, args=(b, stop), daemon=True)
        p.start()
        time.sleep(0.2)
        try:
            rows[b] = timed()
        finally:
            stop.set()
            p.join(5)
        print(f"busy on CPU {b:2d}: {rows[b]:6.2f} µs a launch ({rows[b] / alone:.2f}x alone)", flush=True)
    again = timed()
    doc = {"device": torch.cuda.get_device_name(0) if dev == "cuda" else "cpu", "torch": torch.__version__,
           "cpu": a.cpu, "launches": a.launches, "alone_us": alone, "alone_after_us": again,
           "beside_us": rows, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    print(f"alone on CPU {a.cpu}: {alone:.2f} µs a launch (again after: {again:.2f})")
    _write(a.json, doc)
    return 0


def _write(path: str | None, doc: dict) -> None:
    """The project's atomic write (its module is pure Python: the bare image imports it from the checkout)."""
    if path:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
        from sglang_kimi_eagle3.atomic import write_atomic

        write_atomic(path, json.dumps(doc, indent=1), mkdir=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
