"""Host cost of the per-call lookups around our eager verify ops, on any machine (no GPU needed): the dispatch verdict,
the launch table in effect, the interpreter flag and a launch plan's key. Device 0 is named an H200 through the
device-key cache a GPU process fills, so the CUDA path runs without one. Median of --repeats runs of --calls calls.

    python -m benchmark.kernels.host_lookups [--calls 20000] [--repeats 5]      (repository root)
"""

from __future__ import annotations

import argparse
import platform
import statistics
import timeit


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    import torch

    from sglang_kimi_eagle3.integration import dispatch, launch_record
    from sglang_kimi_eagle3.ops import _host, tables

    launch_record._OURS[0] = True  # a scheduler of an EAGLE3 launch, as bench_host.py has it
    tables._DEVICE_KEYS[0] = ("NVIDIA H200", (9, 0))
    dev = torch.device("cuda", 0)
    ts = [torch.empty(4, 8, dtype=torch.int32) for _ in range(8)]
    rows = {"dispatch.why_not (cuda:0, the H200 table)": lambda: dispatch.why_not("verify_argmax_greedy", "n4_bs1", dev),
            "tables.launch_table (cuda:0)": lambda: tables.launch_table(dev),
            "_host.interpreted()": _host.interpreted,
            "_host.op_key (8 tensors)": lambda: _host.op_key("argmax_verify", None, None, ts)}
    print(f"python {platform.python_version()}, {platform.machine()}, torch {torch.__version__}")
    for name, fn in rows.items():
        fn()
        us = statistics.median(timeit.timeit(fn, number=a.calls) / a.calls * 1e6 for _ in range(a.repeats))
        print(f"{name:45s} {us:6.2f} us")


if __name__ == "__main__":
    main()
