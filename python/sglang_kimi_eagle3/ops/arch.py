"""Per-architecture launch tables and the kernel switch (pure: no sglang import).

Launch configurations are data, not constants in launchers: `ops/configs/<key>.<family>.json`, one
file per GPU architecture and kernel family (`sm90.draft_head.json`, `sm120.verify.json`, ...) and
optionally per device name (`NVIDIA_H200.draft_head.json`, written by `benchmark/tune_draft_head.py`
on that GPU). The files of one key merge into one table; a table is looked up by device name
first, then by compute capability. File layout:

    {
      "arch": "sm90",                      # what the table is for
      "device": "NVIDIA H200" | null,      # set when measured on that device
      "source": "how the numbers were chosen (command, date) or 'compile-verified only'",
      "ops": {
        "<op>": {                          # e.g. "lm_head_gemv", "draft_topk", "verify_greedy"
          "default": {...launch params...},
          "rules": [ {"max_bs": 32, "min_rows": 0, ...match..., "config": {...}} , ...],
          "wins": ["<shape key>", ...]      # shapes where our kernel beat SGLang's path in the
                                           # benchmark; `auto` uses ours only there
        }
      }
    }

`SGLANG_KIMI_EAGLE3_KERNELS` = auto (default) | ours | upstream selects between our kernels and
SGLang's at every kernel hook.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path

from ..configs import read_json
from ..errors import UserError

CONFIG_DIR = Path(__file__).parent / "configs"


class Unsupported(ValueError):
    """A launcher's guard: this call lies outside the op's fast path (layout, dtype, shape, device).

    The one exception a kernel hook may catch to hand the call to SGLang's own function. Every other
    error (a broken launch table, a Triton compile error, a bug) propagates, so it is seen instead of
    silently falling back on every decode step. Subclasses ValueError for callers of the ops API.
    """
KERNEL_MODES = ("auto", "ours", "upstream")
ENV_KERNELS = "SGLANG_KIMI_EAGLE3_KERNELS"


def kernels_mode() -> str:
    mode = os.environ.get(ENV_KERNELS, "auto").strip().lower() or "auto"
    if mode not in KERNEL_MODES:
        raise UserError(f"{ENV_KERNELS}={mode!r} is not one of {'|'.join(KERNEL_MODES)}; unset it or pick one")
    return mode


def device_file_name(device_name: str) -> str:
    """'NVIDIA H200' -> 'NVIDIA_H200' (the file stem a tuned table is stored under)."""
    return re.sub(r"[^A-Za-z0-9]+", "_", device_name).strip("_")


@lru_cache(maxsize=None)
def load_table(device_name: str | None, cc: tuple[int, int] | None) -> dict:
    """The launch table in effect for a device: a user-tuned table for this exact GPU
    (`sglang-kimi-eagle3 tune`, tuning/cache.py) over the bundled one; {"origin": ...} alone when
    nothing matches.

    Bundled: per op, a device-name entry overrides the exact-capability entry, which overrides the
    family entry (sm121 -> sm120); $SGLANG_KIMI_EAGLE3_BUNDLED_DIR replaces ops/configs (an empty
    folder hides the bundled tables). A user table applies only on the GPU, driver and Triton major
    version it was measured with (else it is ignored and the origin says why); its rules go first
    and its measured shapes decide their wins (tuning/cache.merge). table["origin"]: one line naming
    the files in effect, from when, for which GPU (`check` and `status` print it).
    """
    from ..tuning import cache

    bundled_dir = cache.bundled_dir(CONFIG_DIR)
    stems = []
    if cc is not None:
        stems += [f"sm{cc[0]}0", f"sm{cc[0]}{cc[1]}"]
    if device_name:
        stems.append(device_file_name(device_name))
    table: dict = {}
    used = []
    for stem in dict.fromkeys(stems):  # lowest priority first; later files override per op
        plain = bundled_dir / f"{stem}.json"
        for path in sorted(bundled_dir.glob(f"{stem}.*.json")) + ([plain] if plain.is_file() else []):
            data = read_json(path, "reinstall the package")
            ops = table.setdefault("ops", {})
            table.update({k: v for k, v in data.items() if k != "ops"})
            ops.update(data.get("ops", {}))
            used.append(cache.describe_bundled(path, data))
    user, path, note = cache.user_table(device_name, cc)
    origin = ("bundled " + ", ".join(used)) if used else "no bundled table for this GPU"
    if user is not None:
        table = cache.merge(table, user)
        origin = f"{cache.describe_user(path, user)} over {origin}"
    elif not used:
        origin += " and no user-tuned one: SGLang's kernels under auto"
    table["origin"] = origin + (f"; note: {note}" if note else "")
    return table


def current_device() -> tuple[str | None, tuple[int, int] | None]:
    """(device name, compute capability) of the current CUDA device, or (None, None) without one."""
    try:
        import torch

        if torch.cuda.is_available():
            idx = torch.cuda.current_device()
            return torch.cuda.get_device_name(idx), tuple(torch.cuda.get_device_capability(idx))
    except Exception:
        pass
    return None, None


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


def tree_shape_key(bs: int, n: int) -> str:
    """`wins` key of the tree-verification ops (argmax_verify, verify_greedy, tree_sampling): 'n4_bs32'."""
    return f"n{n_bucket(n)}_bs{bs_bucket(bs)}"


# ---- per-device lookups, cached per device index (one dict lookup per call) ------------------------
_DEVICE_KEYS: dict[int, tuple] = {}
_PDL: dict[int, bool] = {}


def _index(device) -> int:
    import torch

    return device.index if device.index is not None else torch.cuda.current_device()


def launch_table(device) -> dict:
    """The launch table in effect for a torch device (load_table of its name and capability); the
    CPU (Triton interpreter) gets the table of no device. Resolve it once per hook call and hand it
    to use_ours and the launcher's `table=`."""
    if device.type != "cuda":
        return load_table(None, None)
    idx = _index(device)
    key = _DEVICE_KEYS.get(idx)
    if key is None:
        import torch

        with torch.cuda.device(idx):
            key = _DEVICE_KEYS[idx] = current_device()
    return load_table(*key)


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
    test found it broken with this Triton/driver)."""
    _PDL[_index(device)] = False


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
