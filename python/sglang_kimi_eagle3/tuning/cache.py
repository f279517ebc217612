"""Writing the per-GPU launch tables `tune` measures (reading them, and when one applies: ops/tables.py).

One file per GPU model in tables.cache_dir(): `<device file name>.json` ('NVIDIA H200' ->
NVIDIA_H200.json), holding every kernel family. Writes are atomic (atomic.write_atomic): a reader never
sees half a table, and `tune` rewrites the file after every op so Ctrl-C keeps what finished.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..atomic import write_json_atomic


def write_table(path: Path, table: dict) -> Path:
    """Write a launch table atomically (creating its folder)."""
    return write_json_atomic(path, table, mkdir=True)


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
