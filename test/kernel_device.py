"""The one device the kernel tests run on, picked once per test session.

CUDA when torch sees a GPU (the Triton kernels run compiled), else the CPU with Triton's interpreter
(TRITON_INTERPRET=1, which must be set before triton is first imported: conftest.py imports this
module before any test module). An explicit TRITON_INTERPRET=1 keeps the CPU even on a GPU machine.
Tests build their inputs with a seeded CPU generator (the same numbers in both modes) and move them
here with `on()`; every tensor a kernel sees lives on DEVICE.
"""

from __future__ import annotations

import os


def _pick() -> str:
    if os.environ.get("TRITON_INTERPRET", "0") == "1":
        return "cpu"
    try:
        import torch  # does not import triton

        if torch.cuda.is_available():
            return "cuda"
    except Exception:
        pass
    os.environ["TRITON_INTERPRET"] = "1"
    return "cpu"


DEVICE_NAME = _pick()
ON_GPU = DEVICE_NAME == "cuda"


def device():
    """torch.device of the session (cuda:<current> on a GPU, so it equals a tensor's .device)."""
    import torch

    if ON_GPU:
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def on(*tensors):
    """Move tensors (or a list/tuple of them) to the session device; returns a tuple (one: the tensor)."""
    dev = device()
    out = tuple(t.to(dev) if hasattr(t, "to") else t for t in tensors)
    return out[0] if len(out) == 1 else out
