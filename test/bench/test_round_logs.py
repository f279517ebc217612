"""benchmark/serving/round_logs.py: each measured round's prefill batches and decode log lines from the server's own
log, and rounds of the same work side by side. The log lines are SGLang 0.5.23's `Prefill batch` / `Decode batch`
lines as a live server printed them (run 43's logs, with the plugin's EAGLE fields in ours'); the e2e rows carry the
fields e2e.py writes."""

import datetime as dt
import gzip
import json
import subprocess
import sys

from helpers import ROOT

TOOL = ROOT / "benchmark" / "serving" / "round_logs.py"
T0 = dt.datetime(2026, 12, 7, 17, 10, 0, tzinfo=dt.timezone.utc).timestamp()


def _stamp(t):
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("[%Y-%m-%d %H:%M:%S]")


def _prefill(t, seqs, new, cached=0, running=6):
    return (f"{_stamp(t)} Prefill batch, #new-seq: {seqs}, #new-token: {new}, #cached-token: {cached}, token usage: 0.01, "
            f"#running-req: {running}, #queue-req: 0, #pending-token: 0, cuda graph: False, input throughput (token/s): "
            "2871.20\n")


def _decode(t, running, eagle=False):
    spec = "accept len: 1.00, accept rate: 0.00, " if eagle else ""
    return (f"{_stamp(t)} Decode batch, #running-req: {running}, #token: 4520, token usage: 0.07, {spec}cuda graph: True, "
            "gen throughput (token/s): 361.52, #queue-req: 0\n")


def _row(server, index, t0, wall, last, requests, tokens, prompt_mean):
    return {"key": f"steady/T0/c8/{index}/{server}", "phase": "steady", "temperature": 0.0, "concurrency": 8,
            "index": index, "server": server, "t_start": t0, "t_end": t0 + wall, "last_start_s": last,
            "summary": {"requests": requests, "tokens": tokens, "wall_s": wall, "prompt_tokens_mean": prompt_mean}}


def _run(*args):
    return subprocess.run([sys.executable, str(TOOL), *map(str, args)], capture_output=True, text=True, timeout=60)


def test_each_rounds_prefills_and_decode_lines_and_the_same_work_side_by_side(tmp_path):
    e2e = tmp_path / "e2e.json"
    e2e.write_text(json.dumps({"rows": [
        _row("plain", 1, T0 + 0.5, 19.6, 17.6, 3, 420, 576.0),
        _row("ours", 1, T0 + 30, 20.7, 18.3, 3, 420, 576.0),  # the same requests as plain's round 1
        _row("ours", 2, T0 + 60, 20.1, 17.2, 2, 300, 576.0),  # same prompt mean, other work
    ]}))
    plain = tmp_path / "plain.log"
    plain.write_text("".join([
        _prefill(T0 - 5, 1, 512),  # the warm-up: before the round's window
        _prefill(T0 + 0.9, 2, 1100),  # stamped in the second the round began (the window reaches back 1.5 s)
        _decode(T0 + 5, 2), _prefill(T0 + 8, 1, 600, cached=30), _decode(T0 + 12, 3), _decode(T0 + 19.5, 1),
        "[2026-12-07 17:10:21] INFO:     127.0.0.1:48590 - \"POST /generate HTTP/1.1\" 200 OK\n",
    ]))
    ours = tmp_path / "ours.log.gz"
    with gzip.open(ours, "wt") as f:
        f.write("".join([
            _prefill(T0 + 30, 1, 700), _prefill(T0 + 31, 1, 400), _decode(T0 + 36, 2, eagle=True),
            _prefill(T0 + 40, 1, 600), _decode(T0 + 45, 3, eagle=True), _decode(T0 + 50.2, 1, eagle=True),
            _prefill(T0 + 60, 2, 1116), _decode(T0 + 70, 2, eagle=True),
            _prefill(T0 + 81.5, 1, 99),  # after ours' round 2 ended (T0 + 80.1) and its 0.5 s of slack
        ]))
    out_json = tmp_path / "rounds.json"
    cp = _run(e2e, f"plain={plain}", f"ours={ours}", "--json", out_json)
    assert cp.returncode == 0, cp.stderr
    got = {(r["server"], r["index"]): r for r in json.loads(out_json.read_text())["rounds"]}
    assert {k: (r["prefill_batches"], r["prefill_seqs"], r["prefill_new_tokens"], r["prefill_cached_tokens"],
                r["decode_lines"]) for k, r in got.items()} == {
        ("plain", 1): (2, 3, 1700, 30, 3),
        ("ours", 1): (3, 3, 1700, 0, 3),
        ("ours", 2): (1, 2, 1116, 0, 1),
    }
    assert round(got[("ours", 1)]["drain_s"], 2) == 2.4 and round(got[("plain", 1)]["drain_s"], 2) == 2.0
    same = [line for line in cp.stdout.splitlines() if "same work" in line]
    assert same == ["  same work: ours round 1 / plain round 1 (3 requests, 420 tokens): wall 20.70 / 19.60 s (1.056x), "
                    "last start 18.30 / 17.60, drain 2.40 / 2.00; prefill batches 3 / 2 (3 / 3 seqs), decode lines 3 / 3"]


def test_a_log_in_another_time_zone_is_read_with_its_offset(tmp_path):
    e2e = tmp_path / "e2e.json"
    e2e.write_text(json.dumps({"rows": [_row("plain", 1, T0, 10.0, 9.0, 1, 100, 500.0)]}))
    log = tmp_path / "plain.log"
    log.write_text(_prefill(T0 + 2 * 3600 + 3, 1, 500))  # stamped in UTC+2
    assert _run(e2e, f"plain={log}", "--json", tmp_path / "a.json").returncode == 0
    assert json.loads((tmp_path / "a.json").read_text())["rounds"][0]["prefill_batches"] == 0
    cp = _run(e2e, f"plain={log}", "--log-utc-offset-h", "2", "--json", tmp_path / "b.json")
    assert cp.returncode == 0, cp.stderr
    assert json.loads((tmp_path / "b.json").read_text())["rounds"][0]["prefill_batches"] == 1


def test_bad_input_is_one_line_naming_the_argument_and_exit_2(tmp_path):
    e2e = tmp_path / "e2e.json"
    e2e.write_text(json.dumps({"rows": [_row("plain", 1, T0, 10.0, 9.0, 1, 100, 500.0)]}))
    not_a_log = tmp_path / "status.json"
    not_a_log.write_text("{}\n")
    for args, says in (
        ([tmp_path / "missing.json", f"plain={not_a_log}"], "not a readable e2e.py --json file"),
        ([e2e, "plain"], "give each log as NAME=PATH"),
        ([e2e, f"plain={not_a_log}"], "no 'Prefill batch' or 'Decode batch' line"),
        ([e2e, f"plain={tmp_path / 'gone.log'}"], "gone.log"),
    ):
        cp = _run(*args)
        assert cp.returncode == 2, (args, cp.stdout, cp.stderr)
        assert says in cp.stderr and len(cp.stderr.strip().splitlines()) == 1, cp.stderr
