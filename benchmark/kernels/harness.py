"""Shared kernel-benchmark harness (GPU only): one timing loop, one output writer, result rows.

Used by every `benchmark/kernels/bench_<op>.py`, run from the repository root as a module
(`python -m benchmark.kernels.bench_verify`: package imports, no sys.path edits). A bench file is
thin: a setup factory and providers (`ours`, `sglang`, `torch_ref`); `Results.time` times each the
same way in the same run and writes rows keyed by op/provider/shape/gpu, with date, versions and
command, to `$OUT/<bench>-<device>.json` (benchmark/results/ without $OUT), after every row.

Timing is `sglang_kimi_eagle3.tuning.timing` (the one implementation `tune` uses too: CUDA-graph
replays, L2 rotation, fixed counts); SGLang's own kernels come from
`integration.upstream_kernels.sglang_module` (without sglang/__init__ where that cannot import, as
on a bare GPU box with only SGLang's wheels unpacked in $SITE). Exactness against
SGLang's kernels is asserted in test/gpu_kernels/, not here.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import sys

import torch

from sglang_kimi_eagle3.integration.upstream_kernels import sglang_module  # noqa: F401  (re-exported)
from sglang_kimi_eagle3.atomic import write_atomic
from sglang_kimi_eagle3.ops.tables import device_file_name
from sglang_kimi_eagle3.tuning.timing import (capture_graph, copies_past_l2, graph_time_us,  # noqa: F401
                                              replay_time_us, rotating)


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

    def time(self, op: str, provider: str, shape: dict, fn, floor_us: float | None = None, *,
             warmup_ms: int = 50, rep_ms: int = 300, **extra) -> dict | None:
        """The one timing loop body: graph_time_us(fn), a row, and the file rewritten (a run cut short
        keeps what it measured). A provider that fails is reported in its row, not fatal."""
        try:
            t = graph_time_us(fn, warmup_ms=warmup_ms, rep_ms=rep_ms)
        except Exception as exc:
            print(f"{op} {provider} {shape}: {type(exc).__name__}: {exc}", flush=True)
            t, extra = None, {**extra, "error": f"{type(exc).__name__}: {exc}"[:300]}
        row = self.add(op, provider, shape, t, floor_us, **extra)
        self.save()
        return row

    def out_dir(self) -> str:
        return os.environ.get("OUT") or os.path.join(os.path.dirname(__file__), "..", "results")

    def save(self, name: str | None = None) -> str:
        """Write `<bench>-<device>.json` (or `name`) atomically under $OUT or benchmark/results/."""
        out = self.out_dir()
        os.makedirs(out, exist_ok=True)
        path = os.path.join(out, name or f"{self.bench}-{device_file_name(self.meta['device']['name'])}.json")
        write_atomic(path, json.dumps({**self.meta, "rows": self.rows}, indent=1))
        return path
