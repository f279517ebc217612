"""Seconds each test file took, so that pytest-xdist hands the longest files out first (test/conftest.py).

With `--dist loadfile` a file runs whole in one worker, so a long file handed out late ends the suite late: on the
H200 (2026-12-04, 12 workers) the files' times summed to 3929 s, 327 s per worker, while the suite ran 452 s and
still left a file unstarted. Longest first (LPT) keeps the tail short. The table (`durations.json`, beside this file)
is regenerated from a run's junit XML:

    python test/durations.py SUITE.xml --note "H200, 2026-12-04, run 23"   # merge that run's per-file seconds

A file the table does not know counts as DEFAULT_S when marked `slow`, else FAST_S.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent
TABLE = HERE / "durations.json"
DEFAULT_S = 60.0  # an unknown `slow` file
FAST_S = 5.0  # an unknown file without the mark


def load(path: Path = TABLE) -> dict[str, float]:
    """{path relative to the repository root: seconds}; {} when the table is missing or unreadable."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in data.get("seconds", {}).items()}


def file_of(classname: str) -> str | None:
    """`test.integration.hooks.test_metrics` or `test.ops.test_x.TestClass` -> `test/integration/hooks/test_metrics.py`."""
    parts = classname.split(".")
    for i, part in enumerate(parts):
        if part.startswith("test_"):
            return "/".join(parts[: i + 1]) + ".py"
    return None


def from_junit(xml_path: Path) -> dict[str, float]:
    """Per-file seconds summed over a junit XML's test cases (pytest's --junitxml)."""
    seconds: dict[str, float] = {}
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        f = file_of(case.get("classname") or "")
        if f is not None:
            seconds[f] = seconds.get(f, 0.0) + float(case.get("time") or 0.0)
    return seconds


def order_key(rel_path: str, slow: bool, table: dict[str, float]) -> float:
    """Sort key of a file: longest first by the table; a file it does not know counts as DEFAULT_S if marked `slow`
    (it spawns SGLang processes) and as FAST_S otherwise. Longest first beats `slow` first: on run 23's times with 12
    workers a list schedule ends at 344 s against 390 s (the mean per worker: 337 s)."""
    return -table.get(rel_path, DEFAULT_S if slow else FAST_S)


def merge(xml_path: Path, note: str, path: Path = TABLE) -> dict[str, float]:
    """Merge one run's per-file seconds into the table (a file the run measured takes its new time), written
    atomically; returns the new table."""
    table = load(path)
    table.update({k: round(v, 1) for k, v in from_junit(xml_path).items()})
    body = json.dumps({"source": f"per-file seconds of pytest's junit XML ({note}), merged by test/durations.py",
                       "seconds": dict(sorted(table.items()))}, indent=1) + "\n"
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".durations.")
    with os.fdopen(fd, "w") as fh:
        fh.write(body)
    os.replace(tmp, path)
    return table


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description="merge a junit XML's per-file seconds into test/durations.json")
    ap.add_argument("xml", type=Path, help="a junit XML written by pytest --junitxml")
    ap.add_argument("--note", required=True, help="where and when it ran (kept in the table's source line)")
    args = ap.parse_args()
    if not args.xml.is_file():
        print(f"test/durations.py: {args.xml}: no such file (give the junit XML pytest --junitxml wrote)", file=sys.stderr)
        raise SystemExit(2)
    try:
        merged = merge(args.xml, args.note)
    except ET.ParseError as exc:
        print(f"test/durations.py: {args.xml}: not a junit XML ({exc})", file=sys.stderr)
        raise SystemExit(2) from None
    print(f"durations.json: {len(merged)} files")
