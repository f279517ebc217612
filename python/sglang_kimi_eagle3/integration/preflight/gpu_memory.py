"""The target GPU's memory for preflight, and SGLang's resolution made to see it (the `check` command).

SGLang 0.5.23 derives `mem_fraction_static`, `chunked_prefill_size` and the decode CUDA-graph batch from the
GPU's memory (arg_groups/memory_hook.py `handle_gpu_memory_settings`, via `get_device_memory_capacity`). On
the serving machine that is the local GPU; `check` for another GPU (`--for-gpu H200`, the embedded default's
RTX PRO 6000) makes SGLang's resolution read that GPU's capacity, so the defaults it reports are the ones
the real launch gets. Scoped to the `with` block; nothing is changed outside it.
"""

from __future__ import annotations

import contextlib

from ...preflight import GpuTarget
from ...preflight.memory import MIB, known_gpu_memory_mib

# SGLang modules that read the capacity during argument resolution (the name each imported).
_READERS = ("sglang.srt.arg_groups.memory_hook", "sglang.srt.arg_groups.kv_shard_hook",
            "sglang.srt.arg_groups.model_overrides.qwen3_vl")


def gpu_memory(gpu: GpuTarget) -> tuple[float | None, str]:
    """(MiB, where it came from) of the deployment's GPU; (None, why) when unknown."""
    if gpu.how == "local GPU":
        try:
            import torch

            props = torch.cuda.get_device_properties(torch.cuda.current_device())
            return props.total_memory / MIB, f"this machine's {props.name}"
        except Exception as exc:  # no usable CUDA after all
            return None, f"this machine's GPU memory could not be read ({type(exc).__name__})"
    if gpu.how.startswith("assumed"):
        return None, "no local GPU and no --for-gpu naming a GPU model"
    known = known_gpu_memory_mib(gpu.name)
    if known is None:
        return None, f"'{gpu.name}' names an architecture, not a GPU model with a known memory size"
    return float(known[0]), known[1]


@contextlib.contextmanager
def sglang_sees_gpu_memory(mib: float | None):
    """Within: SGLang's argument resolution reads `mib` as the GPU's capacity (None: leave it alone)."""
    if mib is None:
        yield
        return
    import importlib

    saved = []
    for name in _READERS:
        try:
            mod = importlib.import_module(name)
        except Exception:
            continue
        if hasattr(mod, "get_device_memory_capacity"):
            saved.append((mod, mod.get_device_memory_capacity))
            mod.get_device_memory_capacity = lambda device=None, _m=float(mib): _m
    try:
        yield
    finally:
        for mod, fn in saved:
            mod.get_device_memory_capacity = fn
