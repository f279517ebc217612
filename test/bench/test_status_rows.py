"""benchmark/serving/status_rows.py: the device log's lines from a server's status file, and its step_clock row set
against plain decoding's (benchmark/serving/plain_clock's file) bucket by bucket. The two rows are written by the
real step_clock.summary(), so a change of its format breaks this file, not a device lease's reading."""

import json
import subprocess
import sys
from collections import deque

from helpers import ROOT

from sglang_kimi_eagle3.integration.hooks import step_clock

SCRIPT = str(ROOT / "benchmark" / "serving" / "status_rows.py")


def _readings(wall_ms: float, bs: int, n: int = 20):
    return [(wall_ms / 1e3, 1e-3, 0.5e-3, 0.2e-3, (wall_ms - 2) / 1e3, 0.4e-3, 0.1e-3, 0.6e-3, 0.05e-3, bs) for _ in range(n)]


def _summaries():
    step_clock.reset()
    try:
        step_clock.STEPS[0] = deque(_readings(10.0, 1) + _readings(21.0, 7) + _readings(40.0, 64, n=3))
        step_clock._READ[0] = 43
        step_clock.STEPS[3] = deque(_readings(30.0, 1))
        step_clock._READ[3] = 20
        ours = step_clock.summary()
        step_clock.STEPS.clear()
        step_clock._READ.clear()
        step_clock.STEPS[step_clock.PLAIN] = deque(_readings(8.0, 1) + _readings(20.0, 6) + _readings(35.0, 16))
        step_clock._READ[step_clock.PLAIN] = 60
        return ours, step_clock.summary()
    finally:
        step_clock.reset()


def _run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=60)


def test_a_state_is_set_against_plain_decoding_at_the_same_batch_sizes(tmp_path):
    ours, plain = _summaries()
    status = tmp_path / "port30504.json"
    status.write_text(json.dumps({"hooks": [{"name": "step_clock", "state": "applied", "detail": ours}]}))
    (tmp_path / "plain.txt").write_text(plain + "\n")
    r = _run("compare", str(status), str(tmp_path / "plain.txt"))
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert r.stdout.strip() == ("steps 0 / plain decoding: bs 1: 1.250 (10.00 / 8.00 ms), bs 5-8: 1.050 (21.00 / 20.00 ms)"
                                "; steps 3 / plain decoding: bs 1: 3.750 (30.00 / 8.00 ms)")
    r = _run("step_clock", str(status))
    assert r.stdout.startswith("applied: steps 0: 43 steps read") and "bs" not in r.stdout.split("|")[0][:40]


def test_missing_or_foreign_files_give_one_line_never_a_traceback(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("{}")
    for args in (("step_clock", str(tmp_path / "none.json")), ("status", str(bad)), ("compare", str(bad), str(bad))):
        r = _run(*args)
        assert r.returncode == 0 and "Traceback" not in r.stderr and r.stdout.startswith("unreadable status file"), r
    no_row = tmp_path / "s.json"
    no_row.write_text(json.dumps({"hooks": []}))
    assert _run("step_clock", str(no_row)).stdout.strip() == "no step_clock row"
    assert _run("nonsense").returncode == 2
