"""The kernel switch, launch-parameter lookup and shared launcher guards (pure: no sglang import).

Launch configurations are data, not constants in launchers: the launch table in effect for a device
(ops/tables.py reads the bundled and user-tuned files) gives each op a default, rules matched on the
call's shape, and the shape keys where our kernel won (`wins`). `SGLANG_KIMI_EAGLE3_KERNELS` = auto
(default: ours only where the table lists a win) | ours | upstream selects between our kernels and
SGLang's at every kernel hook.
"""

from __future__ import annotations

import os
from functools import lru_cache

from ..base import ENV_KERNELS, env_choice
from .tables import current_device, load_table


class Unsupported(ValueError):
    """A launcher's guard: this call lies outside the op's fast path (layout, dtype, shape, device).

    The one exception a kernel hook may catch to hand the call to SGLang's own function. Every other
    error (a broken launch table, a Triton compile error, a bug) propagates, so it is seen instead of
    silently falling back on every decode step. Subclasses ValueError for callers of the ops API.
    """


# The one map of the kernel hooks (no sglang: integration/dispatch.py, integration/verify_kernels.py and
# ops/warmup.py all read it): hook -> (the op it launches, as ops/warmup.py plans it; the launch-table op whose
# `wins` decide it under SGLANG_KIMI_EAGLE3_KERNELS=auto).
KERNEL_HOOKS = {
    "draft_lm_head": ("lm_head_gemv", "lm_head_gemv"),
    "draft_topk1": ("draft_topk1", "draft_topk"),
    "draft_worker_topk": ("topk_rows", "draft_topk"),
    "verify_argmax_greedy": ("argmax_verify", "argmax_verify"),
    "verify_tree_greedy": ("verify_greedy", "verify_greedy"),
    "verify_tree_sampling": ("tree_sampling", "tree_sampling"),
}
TABLE_OP = {hook: table_op for hook, (_op, table_op) in KERNEL_HOOKS.items()}  # hook -> launch-table op


def kernels_mode() -> str:
    """SGLANG_KIMI_EAGLE3_KERNELS: auto | ours | upstream (base.env_choice: one validator, one message)."""
    return env_choice(ENV_KERNELS)


def op_config(op: str, match: dict, table: dict | None = None) -> dict:
    """Launch params for `op`: the first rule whose bounds all hold for `match`, else the default.

    A rule key `max_X` holds when match[X] <= value, `min_X` when match[X] >= value, any other
    key when equal. Missing table/op -> {} (the launcher's own safe default applies).
    """
    if table is None:
        table = load_table(*current_device())
    spec = table.get("ops", {}).get(op, {})
    for rule in spec.get("rules", []):
        ok = True
        for key, val in rule.items():
            if key == "config":
                continue
            if key.startswith("max_"):
                ok = match.get(key[4:], 0) <= val
            elif key.startswith("min_"):
                ok = match.get(key[4:], 0) >= val
            else:
                ok = match.get(key) == val
            if not ok:
                break
        if ok:
            return dict(rule.get("config", {}))
    return dict(spec.get("default", {}))


def use_ours(op: str, shape_key: str, table: dict | None = None) -> bool:
    """Kernel switch: upstream -> False, ours -> True, auto -> only where the table records a win."""
    mode = kernels_mode()
    if mode != "auto":
        return mode == "ours"
    if table is None:
        table = load_table(*current_device())
    wins = table.get("ops", {}).get(op, {}).get("wins", [])
    return "*" in wins or shape_key in wins


# ---- one batch-bucket scheme for every table's `wins` ---------------------------------------------
BS_BUCKETS = (1, 8, 32, 64, 128, 256)  # the batch sizes the benchmarks measure wins at
N_BUCKETS = (4, 16)  # draft tokens per request, likewise (tree ops)


def bs_bucket(bs: int) -> int:
    """The measured batch size a run-time bs is filed under: the first bucket >= bs (the last one
    above the grid, where no table records a draft-head win, so `auto` stays upstream there)."""
    return next((b for b in BS_BUCKETS if bs <= b), BS_BUCKETS[-1])


def n_bucket(n: int) -> int:
    """Draft tokens per request rounded up to the measured grid (n itself above it)."""
    return next((b for b in N_BUCKETS if n <= b), n)


@lru_cache(maxsize=4096)
def tree_shape_key(bs: int, n: int) -> str:
    """`wins` key of the tree-verification ops (argmax_verify, verify_greedy, tree_sampling): 'n4_bs32'."""
    return f"n{n_bucket(n)}_bs{bs_bucket(bs)}"


# ---- per-device facts, cached per device index (one dict lookup per call) ---------------------------
_PDL: dict[int, bool] = {}


def _index(device) -> int:
    import torch

    return device.index if device.index is not None else torch.cuda.current_device()


def num_sms(device) -> int:
    """Streaming multiprocessors of a CUDA device (8 elsewhere: the interpreter's stand-in). Grid sizes of
    the architecture tables are per SM (CTAS_PER_SM, min_programs_per_sm), so they scale with the GPU."""
    if device.type != "cuda":
        return 8
    import torch

    return torch.cuda.get_device_properties(device).multi_processor_count


def pdl_supported(device) -> bool:
    """Programmatic dependent launch usable here: CUDA SM90+, not interpreted, and a Triton that
    has both the `launch_pdl` launch option and tl.extra.cuda.gdc_* (3.4+)."""
    if device.type != "cuda" or os.environ.get("TRITON_INTERPRET", "0") == "1":
        return False
    idx = _index(device)
    ok = _PDL.get(idx)
    if ok is None:
        try:
            import torch
            import triton.language as tl
            from triton.backends.nvidia.compiler import CUDAOptions

            ok = ("launch_pdl" in CUDAOptions.__dataclass_fields__ and hasattr(tl.extra.cuda, "gdc_wait")
                  and torch.cuda.get_device_capability(idx)[0] >= 9)
        except Exception:
            ok = False
        _PDL[idx] = ok
    return ok


def disable_pdl(device) -> None:
    """Launch without programmatic dependent launch on this device from now on (a benchmark's smoke
    test found it broken with this Triton/driver). Launch plans built with it are dropped (ops/_host.py)."""
    from ._host import clear_plans

    _PDL[_index(device)] = False
    clear_plans()


def require_launchable(op: str, *tensors) -> None:
    """Guard shared by the launchers: every tensor on one device, and that device one Triton launches
    on here (CUDA; any device under TRITON_INTERPRET=1). Raises Unsupported naming the op."""
    devs = {t.device for t in tensors if t is not None}
    if len(devs) > 1:
        raise Unsupported(f"{op}: tensors on several devices {sorted(map(str, devs))}")
    interpret = os.environ.get("TRITON_INTERPRET", "0") == "1"
    if devs and not interpret and next(iter(devs)).type != "cuda":
        raise Unsupported(f"{op}: tensors on {next(iter(devs))}; these Triton kernels run on CUDA "
                          "(or anywhere under TRITON_INTERPRET=1)")
