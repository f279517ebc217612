"""Shared kernel-benchmark harness (GPU only): CUDA-graph replay timing, bandwidth floor, result rows.

Used by every `benchmark/kernels/bench_<op>.py`. A bench file is thin: a setup factory and
providers (`ours`, `sglang`, `torch_ref`); this module times them the same way in the same run and
writes rows keyed by op/provider/shape/gpu with date and versions.

On the lent device machine SGLang's own kernels import without its heavy package __init__ through
`sglang_module()` (needs the wheels of ../shared/tools/device-wheels.sh installed into $SITE).
"""

from __future__ import annotations

import datetime as _dt
import importlib
import json
import os
import platform
import sys
import types

import torch


def sglang_module(name: str):
    """Import `sglang.<name>` (e.g. 'kernels.ops.speculative.tree') without running sglang/__init__.

    Where sglang is fully installed this is a plain import; on the device machine (torch + triton,
    no sglang stack) it registers an empty parent package pointing at $SITE/sglang first.
    """
    if "sglang" not in sys.modules:
        site = os.environ.get("SITE")
        if site and os.path.isdir(os.path.join(site, "sglang")):
            pkg = types.ModuleType("sglang")
            pkg.__path__ = [os.path.join(site, "sglang")]
            sys.modules["sglang"] = pkg
    return importlib.import_module(f"sglang.{name}")


def versions() -> dict:
    import triton

    out = {"torch": torch.__version__, "triton": triton.__version__, "python": platform.python_version(),
           "cuda": torch.version.cuda}
    try:
        from importlib.metadata import version

        out["sglang"] = version("sglang")
    except Exception:
        out["sglang"] = "0.5.23 (wheel unpacked, no metadata)" if "sglang" in sys.modules else None
    return out


def device_info() -> dict:
    p = torch.cuda.get_device_properties(0)
    return {"name": p.name, "cc": f"{p.major}.{p.minor}", "sms": p.multi_processor_count,
            "mem_gib": round(p.total_memory / 2**30, 1)}


def copy_bandwidth(nbytes: int = 2**30) -> float:
    """Measured device copy bandwidth in bytes/s, counting bytes read + written."""
    from triton.testing import do_bench

    x = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    ms = do_bench(lambda: y.copy_(x), warmup=20, rep=200, return_mode="median")
    del x, y
    return 2 * nbytes / (ms / 1e3)


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


class Results:
    """Collects rows; prints a line per row; `save()` writes JSON with device/date/versions/command."""

    def __init__(self, bench: str):
        self.bench = bench
        self.rows: list[dict] = []
        self.meta = {"bench": bench, "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                     "device": device_info(), "versions": versions(), "command": " ".join([sys.executable] + sys.argv)}

    def add(self, op: str, provider: str, shape: dict, timing: dict | None, floor_us: float | None = None, **extra):
        row = {"op": op, "provider": provider, "shape": shape, "gpu": self.meta["device"]["name"], **(timing or {}),
               "floor_us": floor_us, **extra}
        if timing and floor_us:
            row["x_floor"] = timing["us"] / floor_us
        self.rows.append(row)
        t = f"{timing['us']:9.2f} us" if timing else "   n/a   "
        fl = f"  floor {floor_us:7.2f}  x{timing['us'] / floor_us:5.2f}" if timing and floor_us else ""
        print(f"{op:24s} {provider:10s} {json.dumps(shape):48s} {t}{fl}", flush=True)
        return row

    def save(self, name: str | None = None) -> str:
        out = os.environ.get("OUT") or os.path.join(os.path.dirname(__file__), "..", "results")
        os.makedirs(out, exist_ok=True)
        path = os.path.join(out, name or f"{self.bench}.json")
        with open(path, "w") as f:
            json.dump({**self.meta, "rows": self.rows}, f, indent=1)
        return path
