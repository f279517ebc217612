"""The per-call choice every kernel hook makes: our kernel or SGLang's function, counted with the reason.

`call(hook, bucket, device, why, ours, sglang)` is the one function the kernel hooks
(draft_head_kernels.py, verify_kernels.py) call. Our kernel takes the call when nothing says otherwise:
  1. the launch is EAGLE/EAGLE3 with a draft (`launch_record.our_launch()` is not False);
  2. the hook's own pre-check passed (`why` is empty: layout, dtype, the call's contract);
  3. the tensors are on CUDA (or on the CPU under TRITON_INTERPRET=1 with SGLANG_KIMI_EAGLE3_KERNELS=ours:
     tests and debugging);
  4. the kernel switch says ours for this (op, shape) on this device: `ours`, or `auto` and the launch
     table in effect (ops/tables.py) lists a win for the shape;
and then its guard does not raise ops.arch.Unsupported (the only exception caught: anything else propagates).
Otherwise SGLang's function runs. Either way the call is counted (hookstatus.count) with the reason.
"""

from __future__ import annotations

import os
import re

from ..base import ENV_KERNELS, env_reader
from ..ops import arch, tables
from ..status import hookstatus
from .launch_record import our_launch

# kernel hook -> the op whose launch-table `wins` decide it under SGLANG_KIMI_EAGLE3_KERNELS=auto (ops/arch.py's
# one map of the kernel hooks)
KERNEL_OPS = arch.TABLE_OP
KERNEL_HOOKS = tuple(KERNEL_OPS)
NOT_OURS = "not an EAGLE/EAGLE3 launch"
NO_WIN = "launch table: no win for this shape"


def guard_reason(exc: Exception) -> str:
    """A low-cardinality fallback reason from an op guard's message (numbers folded)."""
    return "op guard: " + re.sub(r"\d+", "N", str(exc))[:90]


def device_reason(device) -> str:
    """"" when our kernels may take tensors on `device` (a torch.device), else the fallback reason."""
    if device.type == "cuda":
        return ""
    if device.type == "cpu" and os.environ.get("TRITON_INTERPRET") == "1" and arch.kernels_mode() == "ours":
        return ""
    return f"{device.type} tensors (our kernels need CUDA)"


# The verdict of steps 3-4 per (hook, bucket, device), valid while the variables it reads and the tables read so far
# (tables.generation) are unchanged (base.env_reader: a few dict lookups, where resolving the verdict afresh -
# variables, device key, table lookup - cost about 6 µs per call).
_env_state = env_reader(ENV_KERNELS, tables.ENV_BUNDLED, tables.ENV_DIR, "XDG_CACHE_HOME", "TRITON_INTERPRET")
_VERDICTS: dict[tuple, str] = {}
_VERDICTS_MAX = 4096


def _verdict(hook: str, bucket: str, device) -> str:
    why = device_reason(device)
    if why or device.type != "cuda":
        return why
    return "" if arch.use_ours(KERNEL_OPS[hook], bucket, tables.launch_table(device)) else NO_WIN


def why_not(hook: str, bucket: str, device, why: str = "") -> str:
    """"" when our kernel should take this call of `hook` (shape key `bucket`, tensors on `device`), else the
    reason SGLang's function takes it. `why`: the hook's own pre-check verdict ("" when it passed)."""
    if our_launch() is False:
        return NOT_OURS
    if why:
        return why
    if device.type == "cuda" and device.index is None:  # the current device decides: not memoised
        return _verdict(hook, bucket, device)
    key = (hook, bucket, device.type, device.index, tables.generation(), _env_state())
    verdict = _VERDICTS.get(key)
    if verdict is None:
        verdict = _verdict(hook, bucket, device)
        if len(_VERDICTS) >= _VERDICTS_MAX:
            _VERDICTS.clear()
        _VERDICTS[key] = verdict
    return verdict


def take(hook: str, bucket: str, why: str, ours, sglang):
    """`ours()` unless `why` names a reason not to, or its guard raises Unsupported; else `sglang()`.
    Counted either way, with the reason."""
    if not why:
        try:
            res = ours()
        except arch.Unsupported as exc:
            why = guard_reason(exc)
        else:
            hookstatus.count(hook, "ours", bucket)
            return res
    hookstatus.count(hook, "sglang", bucket, why)
    return sglang()


def call(hook: str, bucket: str, device, why: str, ours, sglang):
    """One kernel-hook call: decide (why_not) and run (take)."""
    return take(hook, bucket, why_not(hook, bucket, device, why), ours, sglang)
