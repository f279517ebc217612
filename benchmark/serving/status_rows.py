"""One line per server from its status file, for the device scripts' logs (device_adaptive.sh after the rounds).

    python3 benchmark/serving/status_rows.py status FILE      # adaptive_control / offstate_extend: state, switches
    python3 benchmark/serving/status_rows.py step_clock FILE  # the step_clock row: per runtime state, medians

A file that is missing or not a status file prints one line saying so (never a traceback, never an empty line: on
2026-12-05 an inline `python3 -c` with nested double quotes printed nothing for every server, and the run's
step_clock reading had to be dug out of the packed status files)."""

from __future__ import annotations

import json
import sys


def _rows(path: str) -> dict:
    with open(path) as f:
        return {r["name"]: r for r in json.load(f)["hooks"]}


def status_line(path: str) -> str:
    rows = _rows(path)
    parts = []
    for name in ("adaptive_control", "offstate_extend"):
        r = rows.get(name)
        if r:
            parts.append(f"{name} {r['state']} {(r.get('counters') or {}).get('ours')} ...{r.get('detail', '')[-160:]}")
    return "; ".join(parts) if parts else "no adaptive_control or offstate_extend row"


def step_clock_line(path: str) -> str:
    r = _rows(path).get("step_clock")
    return f"{r['state']}: {r.get('detail', '')}" if r else "no step_clock row"


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("status", "step_clock"):
        print("usage: status_rows.py status|step_clock STATUS_FILE", file=sys.stderr)
        return 2
    kind, path = argv
    try:
        line = status_line(path) if kind == "status" else step_clock_line(path)
    except (OSError, ValueError, KeyError, TypeError) as e:
        line = f"unreadable status file {path}: {type(e).__name__}: {e}"
    print(line[:1200])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
