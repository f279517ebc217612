"""benchmark/serving/round_ledger.py: each measured round's seconds by launch kind, from the step clock's ledger copies
around e2e.py's rounds, and rounds of the same work set side by side. Written the way the real writers write them
(the e2e rows' fields as e2e.py writes them; the ledgers as step_clock.ledger_json writes them)."""

import json
import subprocess
import sys

from helpers import ROOT

from sglang_kimi_eagle3.integration.hooks import step_clock

TOOL = ROOT / "benchmark" / "serving" / "round_ledger.py"


def _row(server, index, t0, t1, requests, tokens, prompt_mean):
    return {"key": f"steady/T0/c8/{index}/{server}", "phase": "steady", "temperature": 0.0, "concurrency": 8,
            "index": index, "server": server, "t_start": t0, "t_end": t1,
            "summary": {"requests": requests, "tokens": tokens, "wall_s": t1 - t0, "prompt_tokens_mean": prompt_mean}}


def _ledger(path, copies):
    """A ledger file as the step clock writes it (its own ledger_json over these copies)."""
    step_clock.reset()
    try:
        step_clock.LEDGER_COPIES.extend(copies)
        path.write_text(step_clock.ledger_json() + "\n")
    finally:
        step_clock.reset()


def _run(*args):
    return subprocess.run([sys.executable, str(TOOL), *map(str, args)], capture_output=True, text=True, timeout=60)


def test_each_rounds_seconds_by_kind_and_the_same_work_side_by_side(tmp_path):
    e2e = tmp_path / "e2e.json"
    e2e.write_text(json.dumps({"rows": [
        _row("plain", 1, 100.0, 120.0, 45, 6924, 599.0),
        _row("ours", 1, 130.0, 150.0, 44, 6715, 558.0),
        _row("plain", 2, 160.0, 180.0, 47, 7087, 576.0),
        _row("ours", 2, 190.0, 211.0, 47, 7087, 576.0),  # the same requests as plain's round 2
    ]}))
    _ledger(tmp_path / "plain.json", [
        [90.0, {"decode": [5.0, 100, 500], "prefill": [5.0, 20, 9000]}],  # the warm-ups, before every round
        [110.0, {"decode": [9.0, 500, 2500], "prefill": [9.0, 30, 14000]}],  # inside round 1
        [121.0, {"decode": [15.0, 1100, 5500], "prefill": [13.0, 60, 28000]}],
        [170.0, {"decode": [20.0, 1600, 8000], "prefill": [17.0, 70, 35000]}],  # inside round 2: never a round's end
        [182.0, {"decode": [25.0, 2100, 10500], "prefill": [21.0, 100, 47000]}],
    ])
    _ledger(tmp_path / "ours.json", [
        [125.0, {"steps 0": [6.0, 120, 600], "prefill": [1.0, 2, 100]}],
        [152.0, {"steps 0": [16.5, 1120, 5600], "steps 3": [0.5, 20, 40], "prefill": [9.0, 42, 20000]}],
        [213.0, {"steps 0": [27.3, 2120, 10600], "steps 3": [1.0, 40, 80], "prefill": [17.2, 82, 39000]}],
    ])
    out_json = tmp_path / "split.json"
    cp = _run(e2e, f"plain={tmp_path / 'plain.json'}", f"ours={tmp_path / 'ours.json'}", "--json", out_json)
    assert cp.returncode == 0, cp.stderr
    got = {(r["server"], r["index"]): r for r in json.loads(out_json.read_text())["rounds"]}
    assert {k: (r["decode_s"], r["prefill_s"], r["outside_s"]) for k, r in got.items()} == {
        ("plain", 1): (10.0, 8.0, 2.0), ("plain", 2): (10.0, 8.0, 2.0),
        ("ours", 1): (11.0, 8.0, 1.0), ("ours", 2): (11.3, 8.2, 1.5)}
    assert got[("ours", 2)]["kinds"]["steps 3"] == [0.5, 20, 40]
    text = cp.stdout
    assert ("same work: ours round 2 - plain round 2 (47 requests, 7087 tokens): wall +1.00 s = decode +1.30 (1020 "
            "against 1000 steps, 11.08 against 10.00 ms each), prefill +0.20 (40 against 40 launches, 205.00 against "
            "200.00 ms each with the work after them), other +0.00, outside -0.50") in text, text
    assert "same work: ours round 1" not in text  # round 1 served other requests
    assert "(steps 0 10.80 in 1000, 10.80 ms each; steps 3 0.50 in 20, 25.00 ms each)" in text


def test_tagged_decode_steps_count_as_decode_and_are_shown_apart_with_their_mean(tmp_path):
    """The step clock's tagged kinds (`steps 0 (flush)`, `decode (after a prefill)`, ...): decode time, each beside
    the others with its mean, so the flush steps' and the post-prefill steps' tail shows against the state's other steps."""
    e2e = tmp_path / "e2e.json"
    e2e.write_text(json.dumps({"rows": [_row("plain", 1, 100.0, 120.0, 47, 7087, 576.0),
                                        _row("ours", 1, 130.0, 151.0, 47, 7087, 576.0)]}))
    _ledger(tmp_path / "plain.json", [
        [99.0, {}],
        [121.0, {"decode": [9.0, 960, 6000], "decode (after a prefill)": [1.0, 40, 250], "prefill": [8.0, 40, 20000]}],
    ])
    _ledger(tmp_path / "ours.json", [
        [129.0, {}],
        [152.0, {"steps 0": [8.4, 840, 5200], "steps 0 (flush)": [1.6, 120, 800],
                 "steps 0 (after a prefill)": [1.2, 40, 250], "prefill": [8.0, 40, 20000]}],
    ])
    cp = _run(e2e, f"plain={tmp_path / 'plain.json'}", f"ours={tmp_path / 'ours.json'}")
    assert cp.returncode == 0, cp.stderr
    assert ("decode 11.20 (1.580) (steps 0 8.40 in 840, 10.00 ms each; steps 0 (after a prefill) 1.20 in 40, 30.00 ms "
            "each; steps 0 (flush) 1.60 in 120, 13.33 ms each)") in cp.stdout, cp.stdout
    assert "(decode 9.00 in 960, 9.38 ms each; decode (after a prefill) 1.00 in 40, 25.00 ms each)" in cp.stdout
    assert "wall +1.00 s = decode +1.20 (1000 against 1000 steps, 11.20 against 10.00 ms each)" in cp.stdout


def test_a_round_without_a_copy_after_it_says_so_and_bad_input_is_one_line(tmp_path):
    e2e = tmp_path / "e2e.json"
    e2e.write_text(json.dumps({"rows": [_row("plain", 1, 100.0, 120.0, 45, 6924, 599.0)]}))
    _ledger(tmp_path / "plain.json", [[90.0, {"decode": [5.0, 100, 500]}], [110.0, {"decode": [9.0, 500, 2500]}]])
    cp = _run(e2e, f"plain={tmp_path / 'plain.json'}")
    assert cp.returncode == 0 and "plain      round 1: no ledger copy after the round" in cp.stdout, cp.stdout
    cp = _run(e2e, f"plain{tmp_path / 'plain.json'}")  # no NAME=
    assert cp.returncode == 2 and cp.stderr.count("\n") == 1 and "give each ledger as NAME=PATH" in cp.stderr
    cp = _run(tmp_path / "nope.json", f"plain={tmp_path / 'plain.json'}")
    assert cp.returncode == 2 and cp.stderr.count("\n") == 1 and "not a readable e2e.py --json file" in cp.stderr
    cp = _run(e2e, f"ours={tmp_path / 'plain.json'}")  # no round of that name
    assert cp.returncode == 2 and "no measured round of a server with a ledger" in cp.stderr
