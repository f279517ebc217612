"""Does a small host-to-device copy from pageable memory block the host until the stream's earlier work is done?

Why: SGLang 0.5.23's `eagle_prepare_for_decode` builds two small int32 CPU tensors (one length per request) with
`torch.tensor(..., device="cpu")` and copies them with `.to(device, non_blocking=True)` on the schedule stream, which
SGLang chains to the decode step in flight. CUDA's documentation allows an asynchronous copy from pageable memory to
synchronise with the stream first; if it does, the host waits there for the rest of the step and cannot prepare the
next batch meanwhile (the `pinned` server of benchmark/serving/device_adaptive.sh pins those tensors to find out live).
This asks the driver directly, with no server: the stream is kept busy by a sleep kernel of --busy-ms, then the copy is
issued and its host time measured (time.perf_counter_ns around building the tensor and `.to(..., non_blocking=True)`).
  - pageable:        torch.tensor(...) then .to(cuda, non_blocking=True), as SGLang does;
  - pinned:          the same with .pin_memory() before the copy (PyTorch's cached pinned blocks; its cost included);
  - pinned, reused:  the values copied into one pinned buffer allocated before the loop, its slice copied (the
                     `pinned` server's ring: benchmark/serving/plain_clock);
  - pageable, idle:  as pageable with nothing in flight (the copy's own host cost).
A host time near --busy-ms means the copy waited for the stream; a few µs means it did not.

    python3 benchmark/host/pageable_copy.py [--bs 1 8 128 1024] [--repeats 15] [--busy-ms 20] [--json FILE]

Needs a CUDA GPU and PyTorch only (no SGLang). Prints one row per (mode, bs): median [min-max] µs of host time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time


def _cycles_per_ms(torch) -> float:
    """torch.cuda._sleep's clock cycles per millisecond on this GPU (timed with CUDA events)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    cycles = 20_000_000
    torch.cuda._sleep(cycles // 10)  # warm the kernel up
    torch.cuda.synchronize()
    start.record()
    torch.cuda._sleep(cycles)
    end.record()
    end.synchronize()
    return cycles / start.elapsed_time(end)


def measure(torch, mode: str, bs: int, repeats: int, busy_cycles: int) -> list[float]:
    """Host µs of building one int32 tensor of `bs` lengths and issuing its non-blocking copy, per repeat."""
    values = list(range(100, 100 + bs))
    ring = torch.empty(max(bs, 1024), dtype=torch.int32).pin_memory() if mode == "pinned, reused" else None
    out = []
    for _ in range(repeats + 2):  # the first two: warm-up (allocator, pinned cache)
        torch.cuda.synchronize()
        if mode != "pageable, idle":
            torch.cuda._sleep(busy_cycles)
        t0 = time.perf_counter_ns()
        x = torch.tensor(values, dtype=torch.int32, device="cpu")
        if mode == "pinned":
            x = x.pin_memory()
        elif ring is not None:
            x = ring[:bs].copy_(x)
        y = x.to(device="cuda", non_blocking=True)
        t1 = time.perf_counter_ns()
        out.append((t1 - t0) / 1000.0)
        torch.cuda.synchronize()
        assert int(y[-1]) == values[-1]
    return out[2:]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bs", type=int, nargs="+", default=[1, 8, 128, 1024], help="lengths per tensor (requests)")
    ap.add_argument("--repeats", type=int, default=15, help="copies timed per (mode, bs), each after a fresh busy kernel")
    ap.add_argument("--busy-ms", type=float, default=20.0, help="the sleep kernel in flight when the copy is issued")
    ap.add_argument("--json", help="write the rows here (atomically)")
    a = ap.parse_args(argv)
    if any(b < 1 for b in a.bs) or a.repeats < 1 or not 0 < a.busy_ms <= 10_000:
        ap.error("--bs and --repeats take positive integers, --busy-ms a number in (0, 10000]")
    import torch

    if not torch.cuda.is_available():
        print("pageable_copy: no CUDA GPU here; run it on the GPU machine", file=sys.stderr)
        return 2
    busy = int(_cycles_per_ms(torch) * a.busy_ms)
    rows = []
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, CUDA {torch.version.cuda}; stream busy "
          f"{a.busy_ms:.0f} ms when the copy is issued; host µs per copy, median [min-max] of {a.repeats}")
    for mode in ("pageable", "pinned", "pinned, reused", "pageable, idle"):
        for bs in a.bs:
            us = measure(torch, mode, bs, a.repeats, busy)
            row = {"mode": mode, "bs": bs, "median_us": statistics.median(us), "min_us": min(us), "max_us": max(us)}
            rows.append(row)
            print(f"  {mode:15s} bs {bs:5d}: {row['median_us']:10.1f} [{row['min_us']:.1f}-{row['max_us']:.1f}]",
                  flush=True)
    if a.json:
        doc = {"what": __doc__.splitlines()[0], "device": torch.cuda.get_device_name(), "torch": torch.__version__,
               "cuda": torch.version.cuda, "driver": _driver(), "python": platform.python_version(),
               "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "busy_ms": a.busy_ms, "rows": rows}
        folder = os.path.dirname(os.path.abspath(a.json))
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".pageable-copy-")
        with os.fdopen(fd, "w") as f:
            json.dump(doc, f, indent=1)
        os.replace(tmp, a.json)
    return 0


def _driver() -> str | None:
    try:
        import subprocess

        return subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=20).stdout.strip() or None
    except Exception:  # noqa: BLE001 - a label only
        return None


if __name__ == "__main__":
    sys.exit(main())
