"""Reading launch tables: bundled, user-tuned, staleness, merge, description (pure: json and os; torch
only to name the current device). The one reader for the ops, the hooks, `check`, `status` and `tune`;
tuning/ only writes (tuning/cache.py).

Bundled tables: `ops/configs/<key>.<family>.json`, one file per key and kernel family. Keys, lowest
priority first (per op, a later file replaces an earlier one's entry):
  sm<major>0, sm<major><minor>   architecture files: compile-verified defaults, no wins (any GPU of it)
  <device file name>             measured on that GPU (`NVIDIA_H200.verify.json`): its wins apply there only
$SGLANG_KIMI_EAGLE3_BUNDLED_DIR replaces ops/configs (an empty folder hides the bundled tables).

User tables (`sglang-kimi-eagle3 tune`): $SGLANG_KIMI_EAGLE3_TUNE_DIR, else $XDG_CACHE_HOME/
sglang-kimi-eagle3/tuned, else ~/.cache/sglang-kimi-eagle3/tuned; one file per GPU model,
`<device file name>.json`, holding every kernel family. A user table applies only on the GPU it was
measured on: same device name and compute capability, same NVIDIA driver and Triton major versions;
anything else is ignored, with a note saying why (in the table's "origin").

File layout:
    {"arch": "sm90", "device": "NVIDIA H200" | null, "source": "how the numbers were chosen",
     "ops": {"<op>": {"default": {...launch params...},
                      "rules": [{"max_bs": 32, "min_rows": 0, ...match..., "config": {...}}, ...],
                      "wins": ["<shape key>", ...]}}}      # `auto` uses our kernel only there
"""

from __future__ import annotations

import json
import os
import re
from functools import lru_cache
from pathlib import Path

from ..base import env_reader, user_cache_dir
from ..configs import read_json
from ..validate import expand_path

CONFIG_DIR = Path(__file__).parent / "configs"
ENV_DIR = "SGLANG_KIMI_EAGLE3_TUNE_DIR"
ENV_BUNDLED = "SGLANG_KIMI_EAGLE3_BUNDLED_DIR"


def device_file_name(device_name: str) -> str:
    """'NVIDIA H200' -> 'NVIDIA_H200' (the file stem a measured table is stored under)."""
    return re.sub(r"[^A-Za-z0-9]+", "_", device_name).strip("_")


# ---- where tables live -----------------------------------------------------------------------------


def bundled_dir() -> Path:
    """The folder of bundled tables: ops/configs, or $SGLANG_KIMI_EAGLE3_BUNDLED_DIR."""
    env = os.environ.get(ENV_BUNDLED, "").strip()
    return expand_path(env, f"${ENV_BUNDLED}") if env else CONFIG_DIR


def cache_dir(override: str | os.PathLike | None = None) -> Path:
    """The folder of user-tuned tables: `override`, else $SGLANG_KIMI_EAGLE3_TUNE_DIR, else the user cache."""
    if override:
        return expand_path(override, "--cache-dir")
    env = os.environ.get(ENV_DIR, "").strip()
    if env:
        return expand_path(env, f"${ENV_DIR}")
    return user_cache_dir("tuned")


def table_path(device_name: str, directory: str | os.PathLike | None = None) -> Path:
    return cache_dir(directory) / f"{device_file_name(device_name)}.json"


# ---- when a user table applies ---------------------------------------------------------------------


def driver_version() -> str | None:
    """The NVIDIA kernel driver version ('580.95.05'), from /proc (no GPU call); None when not known."""
    try:
        text = Path("/proc/driver/nvidia/version").read_text()
        m = re.search(r"Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)", text)
        if m:
            return m.group(1)
    except OSError:
        pass
    return None


def triton_version() -> str | None:
    try:
        from importlib.metadata import version

        return version("triton")
    except Exception:
        return None


def _major(v) -> str | None:
    return str(v).split(".")[0] if v else None


def environment(device_name: str | None, cc: tuple[int, int] | None) -> dict:
    """The facts a table is stamped with and checked against."""
    return {"device": device_name, "cc": f"{cc[0]}.{cc[1]}" if cc else None, "driver": driver_version(),
            "triton": triton_version()}


def stale_reason(table: dict, env: dict) -> str | None:
    """Why `table` does not apply in `env` (None: it applies)."""
    if table.get("device") != env.get("device"):
        return f"tuned on {table.get('device')!r}, this GPU is {env.get('device')!r}"
    if env.get("cc") and table.get("cc") and table["cc"] != env["cc"]:
        return f"tuned for compute capability {table['cc']}, this GPU has {env['cc']}"
    for what in ("driver", "triton"):
        have, want = _major(table.get(what)), _major(env.get(what))
        if have and want and have != want:
            return f"tuned with {what} {table.get(what)}, this machine has {env.get(what)} (another major version)"
    return None


OP_FIELDS = {"default": dict, "rules": list, "wins": list, "measured": dict, "graph_wins": list}


def malformed_op(spec) -> str:
    """"" for an op entry of a launch table whose fields have their types (rules: objects, wins: names), else what
    is not."""
    if not isinstance(spec, dict):
        return "the entry itself"
    bad = [k for k, kind in OP_FIELDS.items() if k in spec and not isinstance(spec[k], kind)]
    if not bad and not all(isinstance(r, dict) for r in spec.get("rules", [])):
        bad.append("a rule")
    if not bad and not all(isinstance(w, str) for w in [*spec.get("wins", []), *spec.get("graph_wins", [])]):
        bad.append("a win")
    return ", ".join(bad)


def read_user_table(path: Path) -> dict:
    """A user table file, read and checked: OSError / ValueError (the reason) where it is not one this plugin can use."""
    table = json.loads(path.read_text())
    if not isinstance(table, dict) or not isinstance(table.get("ops"), dict):
        raise ValueError("no 'ops' object")
    for op, spec in table["ops"].items():  # a hand-edited entry would raise inside a serving kernel hook
        bad = malformed_op(spec)
        if bad:
            raise ValueError(f"ops.{op}: {bad} not of a launch table's type")
    return table


def user_table(device_name: str | None, cc: tuple[int, int] | None,
               directory: str | os.PathLike | None = None) -> tuple[dict | None, Path | None, str | None]:
    """(table, path, note): the user-tuned table for this exact GPU, or (None, path, why not)."""
    if not device_name:
        return None, None, None
    path = table_path(device_name, directory)
    if not path.is_file():
        return None, path, None
    try:
        table = read_user_table(path)
    except (OSError, ValueError) as exc:
        return None, path, f"ignored {path}: unreadable ({exc}); rerun `sglang-kimi-eagle3 tune` or delete it"
    why = stale_reason(table, environment(device_name, cc))
    if why:
        return None, path, f"ignored {path}: {why}; rerun `sglang-kimi-eagle3 tune`"
    return table, path, None


# ---- the table in effect ---------------------------------------------------------------------------


def merge(bundled: dict, user: dict) -> dict:
    """Per op: the user's rules first (they match only the shapes tune measured), then the bundled
    ones; wins = the user's, plus bundled wins for shapes the user table did not measure."""
    out = {k: v for k, v in bundled.items() if k != "ops"}
    ops = {op: dict(spec) for op, spec in bundled.get("ops", {}).items()}
    for op, spec in user.get("ops", {}).items():
        base = ops.get(op, {})
        measured = set(spec.get("measured", {}))
        wins = list(spec.get("wins", [])) + [w for w in base.get("wins", []) if w not in measured and w != "*"]
        ops[op] = {**base, "default": base.get("default") or spec.get("default", {}),
                   "rules": list(spec.get("rules", [])) + list(base.get("rules", [])),
                   "wins": list(dict.fromkeys(wins)),
                   "measured": {**base.get("measured", {}), **spec.get("measured", {})}}
    out["ops"] = ops
    return out


def _date(text) -> str | None:
    m = re.search(r"\d{4}-\d{2}-\d{2}(?:T\d{2}:\d{2}(?::\d{2})?Z?)?", str(text or ""))
    return m.group(0) if m else None


def describe_bundled(path: Path, data: dict) -> str:
    """'NVIDIA_H200.verify.json (measured on NVIDIA H200, 2026-11-29)' / '(compile-verified only, no wins)'."""
    if data.get("device"):
        return f"{Path(path).name} (measured on {data['device']}, {_date(data.get('source')) or 'undated'})"
    return f"{Path(path).name} (compile-verified only, no measured wins)"


def describe_user(path: Path, table: dict) -> str:
    return (f"user-tuned {path} (measured on {table.get('device')}, {table.get('date') or 'undated'}, "
            f"driver {table.get('driver') or '?'}, triton {table.get('triton') or '?'})")


# appended to the origin line where nothing measured says where ours win on this GPU (runtime_status.table_in_effect
# drops it under SGLANG_KIMI_EAGLE3_KERNELS=ours / upstream, where no table is read)
TUNE_HINT = "; `sglang-kimi-eagle3 tune` on this GPU measures where ours win"


def load_table(device_name: str | None, cc: tuple[int, int] | None, user_dir: str | None = None,
               bundled: bool = True) -> dict:
    """The launch table in effect for a device: the user-tuned table for this exact GPU (from `user_dir`,
    default cache_dir()) over the bundled ones (none when `bundled` is False); {"origin": ...} alone when
    nothing matches. table["origin"]: one line naming the files in effect, from when, for which GPU."""
    env = (os.environ.get(ENV_BUNDLED, ""), os.environ.get(ENV_DIR, ""), os.environ.get("XDG_CACHE_HOME", ""))
    return _load(device_name, cc, str(user_dir) if user_dir else None, bundled, env)


@lru_cache(maxsize=None)
def _load(device_name, cc, user_dir, bundled, _env) -> dict:
    stems = []
    if cc is not None:
        stems += [f"sm{cc[0]}0", f"sm{cc[0]}{cc[1]}"]
    if device_name:
        stems.append(device_file_name(device_name))
    table: dict = {}
    used, measured = [], False
    folder = bundled_dir()
    for stem in dict.fromkeys(stems) if bundled else ():  # lowest priority first; later files override per op
        plain = folder / f"{stem}.json"
        for path in sorted(folder.glob(f"{stem}.*.json")) + ([plain] if plain.is_file() else []):
            data = read_json(path, "reinstall the package")
            ops = table.setdefault("ops", {})
            table.update({k: v for k, v in data.items() if k != "ops"})
            ops.update(data.get("ops", {}))
            used.append(describe_bundled(path, data))
            measured = measured or bool(data.get("device"))
    user, path, note = user_table(device_name, cc, user_dir)
    origin = ("bundled " + ", ".join(used)) if used else "no bundled table for this GPU"
    if user is not None:
        table = merge(table, user)
        origin = f"{describe_user(path, user)} over {origin}"
    elif not used:
        origin += " and no user-tuned one: SGLang's kernels under auto" + (TUNE_HINT if device_name or cc else "")
    elif not measured:  # compile-verified tables only (SM120): nothing says where ours win on this GPU
        origin += TUNE_HINT
    table["origin"] = origin + (f"; note: {note}" if note else "")
    return table


_GENERATION = [0]


def clear_cache() -> None:
    """Forget the tables read so far (a file changed underneath: tune, tests); callers that memoise a verdict
    drawn from a table key it by generation()."""
    _load.cache_clear()
    _GENERATION[0] += 1


def generation() -> int:
    """How many times clear_cache() ran in this process."""
    return _GENERATION[0]


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


def ops_with_wins(ops, device: tuple | None = None) -> list[str]:
    """Those of `ops` whose launch table in effect on `device` ((name, cc); default: this process's GPU, as the
    per-call lookup reads it) lists at least one win: under `auto`, the hooks installed for them."""
    table = load_table(*(device or current_device()))
    return [op for op in dict.fromkeys(ops) if table.get("ops", {}).get(op, {}).get("wins")]


_DEVICE_KEYS: dict[int, tuple] = {}
_IN_EFFECT: dict[tuple, dict] = {}  # (device index or None, generation, variables) -> the table load_table gave
_env_state = env_reader(ENV_BUNDLED, ENV_DIR, "XDG_CACHE_HOME")


def launch_table(device) -> dict:
    """The launch table in effect for a torch device (load_table of its name and capability, cached per
    device index); the CPU (Triton interpreter) gets the table of no device. Resolve it once per hook
    call and hand it to use_ours and the launcher's `table=`. Memoised per (device index, clear_cache generation,
    the variables load_table reads): the same dict load_table returns, a few dict lookups a call."""
    if device.type != "cuda":
        idx = None
    else:
        idx = device.index
        if idx is None:
            import torch

            idx = torch.cuda.current_device()
    memo = (idx, _GENERATION[0], _env_state())
    table = _IN_EFFECT.get(memo)
    if table is not None:
        return table
    if idx is None:
        table = load_table(None, None)
    else:
        key = _DEVICE_KEYS.get(idx)
        if key is None:
            import torch

            with torch.cuda.device(idx):
                key = _DEVICE_KEYS[idx] = current_device()
        table = load_table(*key)
    if len(_IN_EFFECT) >= 64:
        _IN_EFFECT.clear()
    _IN_EFFECT[memo] = table
    return table
