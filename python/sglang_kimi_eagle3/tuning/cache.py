"""Where `tune` keeps per-GPU launch tables, and when one applies (pure: json and os; no torch import).

Location: $SGLANG_KIMI_EAGLE3_TUNE_DIR, else $XDG_CACHE_HOME/sglang-kimi-eagle3/tuned, else
~/.cache/sglang-kimi-eagle3/tuned. One file per GPU model: `<device file name>.json`
(ops/arch.device_file_name: 'NVIDIA H200' -> NVIDIA_H200.json), holding every kernel family.

A table applies only on the GPU it was measured on: same device name and compute capability, same
NVIDIA driver major version and Triton major version. Anything else is ignored, with a note saying
why (`user_table` returns it; ops/arch.load_table puts it in the table's "origin").
Writes are atomic (temp file in the same folder + os.replace): a reader never sees half a table.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

from ..base import user_cache_dir
from ..ops.arch import device_file_name

ENV_DIR = "SGLANG_KIMI_EAGLE3_TUNE_DIR"


def cache_dir(override: str | os.PathLike | None = None) -> Path:
    if override:
        return Path(override).expanduser()
    env = os.environ.get(ENV_DIR, "").strip()
    if env:
        return Path(env).expanduser()
    return user_cache_dir("tuned")


def table_path(device_name: str, directory: str | os.PathLike | None = None) -> Path:
    return cache_dir(directory) / f"{device_file_name(device_name)}.json"


def driver_version() -> str | None:
    """The NVIDIA kernel driver version ('580.95.05'), from /proc (no GPU call), else torch's CUDA
    driver API version; None when neither is known."""
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


def user_table(device_name: str | None, cc: tuple[int, int] | None,
               directory: str | os.PathLike | None = None) -> tuple[dict | None, Path | None, str | None]:
    """(table, path, note): the user-tuned table for this exact GPU, or (None, path, why not)."""
    if not device_name:
        return None, None, None
    path = table_path(device_name, directory)
    if not path.is_file():
        return None, path, None
    try:
        table = json.loads(path.read_text())
        if not isinstance(table, dict) or not isinstance(table.get("ops"), dict):
            raise ValueError("no 'ops' object")
    except (OSError, ValueError) as exc:
        return None, path, f"ignored {path}: unreadable ({exc}); rerun `sglang-kimi-eagle3 tune` or delete it"
    why = stale_reason(table, environment(device_name, cc))
    if why:
        return None, path, f"ignored {path}: {why}; rerun `sglang-kimi-eagle3 tune`"
    return table, path, None


def write_atomic(path: Path, data: dict) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


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


ENV_BUNDLED = "SGLANG_KIMI_EAGLE3_BUNDLED_DIR"


def bundled_dir(default: Path) -> Path:
    """The folder of bundled tables: ops/configs, or $SGLANG_KIMI_EAGLE3_BUNDLED_DIR (an empty folder
    hides them: what `tune --ignore-bundled` measures against)."""
    env = os.environ.get(ENV_BUNDLED, "").strip()
    return Path(env).expanduser() if env else Path(default)


def _date(text) -> str | None:
    m = re.search(r"\d{4}-\d{2}-\d{2}(?:T\d{2}:\d{2}(?::\d{2})?Z?)?", str(text or ""))
    return m.group(0) if m else None


def describe_bundled(path: Path, data: dict) -> str:
    """'sm90.verify.json (measured on NVIDIA H200, 2026-11-29)' / '(compile-verified only, no wins)'."""
    if data.get("device"):
        return f"{Path(path).name} (measured on {data['device']}, {_date(data.get('source')) or 'undated'})"
    return f"{Path(path).name} (compile-verified only, no measured wins)"


def describe_user(path: Path, table: dict) -> str:
    return (f"user-tuned {path} (measured on {table.get('device')}, {table.get('date') or 'undated'}, "
            f"driver {table.get('driver') or '?'}, triton {table.get('triton') or '?'})")


def merge_op(old: dict | None, new: dict) -> dict:
    """One op of a user table re-tuned: the new run's shapes replace the same shapes of the old
    (rules with the same bounds, wins and measurements of the same keys); other shapes stay, so
    tuning a second deployment on the same GPU adds to the table."""
    if not old:
        return new
    bounds = lambda r: json.dumps({k: v for k, v in r.items() if k != "config"}, sort_keys=True)  # noqa: E731
    fresh = {bounds(r) for r in new.get("rules", [])}
    measured = set(new.get("measured", {}))
    return {"default": new.get("default") or old.get("default", {}),
            "rules": list(new.get("rules", [])) + [r for r in old.get("rules", []) if bounds(r) not in fresh],
            "wins": [w for w in old.get("wins", []) if w not in measured] + list(new.get("wins", [])),
            "measured": {**old.get("measured", {}), **new.get("measured", {})}}
