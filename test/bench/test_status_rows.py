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


def _readings(wall_ms: float, bs: int, n: int = 20, results_ms: float = 0.6):
    return [(wall_ms / 1e3, 1e-3, 0.5e-3, 0.2e-3, (wall_ms - 2) / 1e3, 0.4e-3, 0.1e-3, results_ms / 1e3, 0.05e-3, bs)
            for _ in range(n)]


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
        step_clock.STEPS[step_clock.PLAIN] = deque(_readings(8.0, 1, results_ms=0.3) + _readings(20.0, 6, results_ms=0.3)
                                                   + _readings(35.0, 16, results_ms=0.3))
        step_clock._READ[step_clock.PLAIN] = 60
        return ours, step_clock.summary()
    finally:
        step_clock.reset()


def _run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=60)


def _compare(tmp_path, ours: str, plain: str):
    """`status_rows.py compare` over ours' step_clock detail (in a status file) and plain's clock text."""
    status = tmp_path / "port30504.json"
    status.write_text(json.dumps({"hooks": [{"name": "step_clock", "state": "applied", "detail": ours}]}))
    (tmp_path / "plain.txt").write_text(plain + "\n")
    return _run("compare", str(status), str(tmp_path / "plain.txt"))


def test_a_state_is_set_against_plain_decoding_at_the_same_batch_sizes(tmp_path):
    ours, plain = _summaries()
    r = _compare(tmp_path, ours, plain)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    # then where each state's step goes against plain's (medians over every batch size: GPU wait = wall - 2 ms here)
    loop = ("the loop, ms, this / plain: launch 1.00 / 1.00, GPU wait {} / {}, rest 1.00 / 1.00 (results 0.60 / 0.30, "
            "controller 0.05 / 0.05, preparing 0.40 / 0.40)")
    assert r.stdout.strip() == (
        "steps 0 / plain decoding: bs 1: 1.250 (10.00 / 8.00 ms), bs 5-8: 1.050 (21.00 / 20.00 ms); "
        + loop.format("19.00", "18.00") + " | steps 3 / plain decoding: bs 1: 3.750 (30.00 / 8.00 ms); "
        + loop.format("28.00", "18.00")), r.stdout
    r = _run("step_clock", str(tmp_path / "port30504.json"))
    assert r.stdout.startswith("applied: steps 0: 43 steps read") and "bs" not in r.stdout.split("|")[0][:40]


def test_the_gpu_side_is_set_against_plain_decodings(tmp_path):
    """With the CUDA-event readings (one step in a few): per state the GPU step and its parts beside plain's, and per
    bucket the GPU step's ratio, where a GPU-bound step's difference lives."""
    step_clock.reset()
    try:
        step_clock.STEPS[0] = deque(_readings(11.0, 7))
        step_clock._READ[0] = 20
        step_clock.GPU[0] = deque([(10.95, 10.65, 0.10, 10.10, 0.30, 7)] * 20)
        ours = step_clock.summary()
        step_clock.reset()
        step_clock.STEPS[step_clock.PLAIN] = deque(_readings(10.5, 6))
        step_clock._READ[step_clock.PLAIN] = 20
        step_clock.GPU[step_clock.PLAIN] = deque([(10.50, 10.25, None, None, 0.25, 6)] * 20)
        plain = step_clock.summary()
    finally:
        step_clock.reset()
    out = _compare(tmp_path, ours, plain).stdout.strip()
    assert out.startswith("steps 0 / plain decoding: bs 5-8: 1.048 (11.00 / 10.50 ms); the loop"), out
    assert out.endswith("; GPU, ms, this / plain: step 10.95 / 10.50, the launch's work 10.65 / 10.25 (before the verify "
                        "0.10 / -, the verify 10.10 / -, after it 0.45 / -), between launches 0.30 / 0.25; GPU step / "
                        "plain's: bs 5-8: 1.043 (10.95 / 10.50 ms, after the verify 0.45)"), out


def test_prefill_is_set_against_plain_decodings_first(tmp_path):
    """The prefill batches' GPU time per batch (the real summary's part), bucket by bucket, ahead of the
    decode states (the line is cut at 2000 characters): a speculative server's prefill also runs the draft."""
    step_clock.reset()
    try:
        step_clock.STEPS[0] = deque(_readings(11.0, 7))
        step_clock._READ[0] = 20
        step_clock.PREFILL.extend([(43.0, 2.0, 1000, 41.5, 30.5, 2.5, (2, 1, 0, 0))] * 10
                                  + [(10.0, 0.6, 300, 9.0, 8.0, 0.7, (0, 0, 0, 0))] * 3)  # 3: under MIN_PREFILL
        ours = step_clock.summary()
        step_clock.reset()
        step_clock.STEPS[step_clock.PLAIN] = deque(_readings(10.5, 6))
        step_clock._READ[step_clock.PLAIN] = 20
        step_clock.PREFILL.extend([(40.0, None, 1000, 39.0, 38.0, None, (0, 0, 0, 0))] * 12)
        plain = step_clock.summary()
    finally:
        step_clock.reset()
    assert ours.endswith(" | prefill: 13 batches timed on the GPU; median GPU ms per batch, the launch / the draft's "
                         "prefill in it (batches, median new tokens; the launch's host ms, of it the scheduler thread on "
                         "the CPU, the draft's prefill's host ms), by new tokens: 513-2048: 43.00 / 2.00 (10, 1000; host "
                         "41.50, on the CPU 30.50, the draft's host 2.50); the CUDA allocator inside 13 of these launches: "
                         "cudaMalloc 20 (in 10 launches), cudaFree 10, retries 0, syncs to free 0"), ours
    out = _compare(tmp_path, ours, plain).stdout.strip()
    assert out.startswith("prefill / plain's, GPU ms per batch: 513-2048: 1.075 (43.00 / 40.00 ms, new tokens 1000 / 1000, "
                          "the draft's prefill 2.00, host 41.50 / 39.00 (on the CPU 30.50 / 38.00), the draft's host "
                          "2.50); the CUDA allocator per prefill launch, this / plain: cudaMalloc 1.54 / 0.00, cudaFree "
                          "0.77 / 0.00, retries 0.00 / 0.00 | steps 0 / plain decoding: bs 5-8: 1.048"), out


def test_the_garbage_collector_is_set_against_plain_decodings(tmp_path):
    """Collections inside the prefill launches per launch, and each process's longest pause, this server / plain."""
    pf = ("prefill: 10 batches timed on the GPU; median GPU ms per batch, the launch / the draft's prefill in it (batches, "
          "median new tokens; the launch's host ms, of it the scheduler thread on the CPU, the draft's prefill's host ms), "
          "by new tokens: 513-2048: {} (10, 1000; host 41.50, on the CPU 30.50, the draft's host 2.50); the CUDA "
          "allocator inside 10 of these launches: cudaMalloc 0 (in 0 launches), cudaFree 0, retries 0, syncs to free 0; "
          "the garbage collector: inside 10 of these launches {} ms in {} collections ({} full); in this process{} {} "
          "ms in {} collections ({} full), the longest {} ms")
    step_clock.reset()
    try:
        step_clock.STEPS[0] = deque(_readings(11.0, 7))
        step_clock._READ[0] = 20
        since = " since the traffic warm-up ended"  # ours' row after its warm-up; plain has none
        ours = step_clock.summary() + " | " + pf.format("43.00 / 2.00", "250.0", 20, 5, since, "900.5", 400, 12, "48.20")
        step_clock.reset()
        step_clock.STEPS[step_clock.PLAIN] = deque(_readings(10.5, 6))
        step_clock._READ[step_clock.PLAIN] = 20
        plain = step_clock.summary() + " | " + pf.format("40.00 / -", "10.0", 10, 0, "", "120.0", 300, 2, "9.10")
    finally:
        step_clock.reset()
    out = _compare(tmp_path, ours, plain).stdout.strip()
    assert ("retries 0.00 / 0.00; the garbage collector per prefill launch, this / plain: 25.00 / 1.00 ms, collections "
            "2.00 / 1.00 (full 0.500 / 0.000); in the process, this / plain: 900 / 120 ms in collections, full 12 / 2, "
            "the longest 48.2 / 9.1 ms | steps 0") in out, out


def test_a_prefill_row_of_run_41_still_parses():
    """Rows written before the CPU time and the allocator calls (an H100, 2026-12-07) read None there."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("status_rows", SCRIPT)
    rows = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rows)
    old = ("prefill: 412 batches timed on the GPU; median GPU ms per batch, the launch / the draft's prefill in it "
           "(batches, median new tokens; the launch's host ms), by new tokens: 1-512: 192.72 / 3.38 (246, 215; host "
           "203.43), 2049-8192: 211.93 / 3.62 (47, 3072; host 214.15)")
    assert rows.prefill(old) == {"1-512": (192.72, 3.38, 246, 215.0, 203.43, None, None),
                                 "2049-8192": (211.93, 3.62, 47, 3072.0, 214.15, None, None)}
    assert rows.prefill_alloc(old) is None


def test_a_row_written_before_the_loop_was_split_still_compares(tmp_path):
    """Run 28's files (2026-12-05, an H100) hold no results / controller parts: those read `-`, the rest stands."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("status_rows", SCRIPT)
    rows = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rows)
    old = ("steps 0: 9683 steps read since the traffic warm-up ended; medians per step of the last 2048: wall 8.99 ms, "
           "launch 2.42 (verify 1.31, draft extend 0.87; graph launches 0.08), waiting on the GPU 5.07, rest of the loop "
           "1.52 (preparing the next batch 0.26); waited over 0.2 ms in 99% of steps: GPU-bound; by batch size, wall / "
           "GPU wait ms (steps): 1: 8.99 / 5.07 (2048)")
    assert rows.loop_parts(old) == {"steps 0": (2.42, 5.07, 1.52, 0.26, None, None)}
    assert "(results - / 0.30, controller - / 0.05, preparing 0.26 / 0.40)" in rows._loop_text(
        rows.loop_parts(old)["steps 0"], (1.0, 18.0, 1.0, 0.4, 0.3, 0.05))


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
