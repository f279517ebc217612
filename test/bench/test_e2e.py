"""benchmark/serving/e2e.py against protocol stubs (synthetic timing, not a model): the alternation order,
rounds sized by time, the ratio and cold-start arithmetic, interrupt + resume, servers it starts itself.
No speed is asserted: only order, counts, arithmetic and rounds that stop by a deadline."""

import json
import socket
import sys
import time
from pathlib import Path

import pytest

import e2e
from stub_server import ProtocolStub, StubConfig

FAST = ["--concurrency", "1,2", "--temperatures", "0", "--rounds", "2", "--round-s", "0.25", "--max-new-tokens", "8",
        "--min-requests", "3", "--cold-requests", "1"]


def _stubs():
    return (ProtocolStub(StubConfig(alphas=None, pass_ms=0.1)), ProtocolStub(StubConfig(pass_ms=0.1)),
            ProtocolStub(StubConfig(pass_ms=0.1)))


def test_schedule_cold_pairs_then_alternating_rounds():
    opts = {"temperatures": [0.0, 0.7], "concurrency": [1, 4], "rounds": 3}
    units = e2e.schedule(["A", "B", "C"], opts)
    cold = [(u.temperature, u.concurrency, u.index, u.server) for u in units if u.phase == "cold"]
    assert cold[:12] == [(0.0, 1, 1, "A"), (0.0, 1, 1, "B"), (0.0, 1, 1, "C"), (0.0, 1, 2, "A"), (0.0, 1, 2, "B"),
                         (0.0, 1, 2, "C"), (0.0, 4, 1, "A"), (0.0, 4, 1, "B"), (0.0, 4, 1, "C"), (0.0, 4, 2, "A"),
                         (0.0, 4, 2, "B"), (0.0, 4, 2, "C")]
    steady = [u for u in units if u.phase == "steady"]
    assert units.index(steady[0]) == len(cold)  # every cold pass (both temperatures) before any round
    level = [u.server for u in steady if u.temperature == 0.0 and u.concurrency == 4]
    assert level == ["A", "B", "C", "B", "C", "A", "C", "A", "B"]  # each round starts one server later
    assert [u.index for u in steady if u.temperature == 0.0 and u.concurrency == 4] == [1, 1, 1, 2, 2, 2, 3, 3, 3]
    assert len({u.key for u in units}) == len(units)
    assert all(u.phase == "steady" for u in e2e.schedule(["A", "B"], opts, cold=False))


def test_steady_temperatures_narrow_the_rounds_not_the_cold_passes():
    opts = {"temperatures": [0.0, 0.7], "concurrency": [1, 4], "rounds": 2, "steady_temperatures": [0.7]}
    units = e2e.schedule(["A", "B"], opts)
    assert {u.temperature for u in units if u.phase == "cold"} == {0.0, 0.7}
    assert {u.temperature for u in units if u.phase == "steady"} == {0.7}
    assert len([u for u in units if u.phase == "steady"]) == 2 * 2 * 2


def _row(phase, server, index, agg, per_req, wall=1.0):
    return {"phase": phase, "temperature": 0.0, "concurrency": 4, "index": index, "server": server,
            "summary": {"agg_tok_s": agg, "tok_s_per_req_median": per_req, "tau": None, "errors": {}, "wall_s": wall}}


def test_report_takes_ratios_round_by_round_then_median_and_min_max():
    rows = [_row("steady", "plain", i, a, a / 10) for i, a in ((1, 100.0), (2, 200.0), (3, 100.0))]
    rows += [_row("steady", "auto", i, a, a / 20) for i, a in ((1, 150.0), (2, 220.0), (3, 130.0))]
    rows += [_row("cold", "auto", 1, 50.0, 1.0, wall=4.0), _row("cold", "auto", 2, 200.0, 1.0, wall=1.0)]
    rep = e2e.report({"config": {"servers": ["plain", "auto"], "baseline": "plain"}, "rows": rows})
    (lv,) = rep["levels"]
    agg = lv["ratios"]["auto/plain"]["aggregate"]
    # per round 1.5, 1.1, 1.3 -> median 1.3 (not 500/400 = 1.25 of the summed or median throughputs)
    assert agg["median"] == pytest.approx(1.3) and agg["min"] == pytest.approx(1.1) and agg["max"] == pytest.approx(1.5)
    assert lv["ratios"]["auto/plain"]["per_request"]["median"] == pytest.approx(0.65)
    assert lv["servers"]["plain"]["agg_tok_s"] == {"median": 100.0, "min": 100.0, "max": 200.0, "n": 3}
    assert lv["cold"]["auto"]["first_over_second"] == pytest.approx(0.25) and "plain" not in lv["cold"]
    assert "auto/plain" in e2e.format_report(rep)


class _R:
    def __init__(self, n, latency, ok=True):
        self.completion_tokens, self.latency_s, self.ok = n, latency, ok


def test_window_rate_counts_the_tokens_inside_the_deadline_only():
    """A round's full-load rate: each request's tokens spread over its own span, the part after the deadline (the
    drain, fewer requests in flight) left out; failed requests add nothing."""
    sent = [(0.0, _R(100, 2.0)),  # wholly inside a 4 s window: 100
            (3.0, _R(100, 2.0)),  # half inside: 50
            (3.9, _R(40, 0.5)),   # a fifth inside: 8
            (1.0, _R(None, 1.0, ok=False)), (2.0, _R(50, 1.0, ok=False))]
    assert e2e.window_tok_s(sent, 4.0) == pytest.approx((100 + 50 + 8) / 4.0)
    assert e2e.window_tok_s(sent[3:], 4.0) is None and e2e.window_tok_s(sent, 0.0) is None
    # the aggregate rate of the same round: all 240 tokens over the wall to the last answer (4.4 s) = 54.5 tok/s,
    # where a longer drain alone (the last request 4 s longer) would move it and leaves this one unchanged
    slow_tail = sent[:2] + [(3.9, _R(40 * 9, 4.5))]
    assert e2e.window_tok_s(slow_tail, 4.0) == pytest.approx((100 + 50 + 40 * 9 * 0.1 / 4.5) / 4.0)


def test_report_carries_the_window_ratio_round_by_round():
    rows = [_row("steady", "plain", i, 100.0, 10.0) for i in (1, 2, 3)]
    rows += [_row("steady", "ours", i, 100.0, 10.0) for i in (1, 2, 3)]
    for r, w in zip(rows, (100.0, 90.0, 110.0, 95.0, 99.0, 88.0)):
        r["summary"]["window_tok_s"] = w
    rep = e2e.report({"config": {"servers": ["plain", "ours"], "baseline": "plain"}, "rows": rows})
    win = rep["levels"][0]["ratios"]["ours/plain"]["window"]
    assert win["median"] == pytest.approx(0.95) and win["min"] == pytest.approx(0.8) and win["n"] == 3
    assert rep["levels"][0]["servers"]["plain"]["window_tok_s"]["median"] == 100.0
    assert "window 0.950" in e2e.format_report(rep)
    del rows[0]["summary"]["window_tok_s"]  # a document written before the window rate: no window ratio for that round
    assert e2e.report({"config": {"servers": ["plain", "ours"], "baseline": "plain"},
                       "rows": rows})["levels"][0]["ratios"]["ours/plain"]["window"]["n"] == 2


def test_alternating_time_sized_rounds_against_stubs(tmp_path):
    out = tmp_path / "e2e.json"
    a, b, c = _stubs()
    with a as ua, b as ub, c as uc:
        rc = e2e.main(["--server", f"plain={ua}", "--server", f"auto={ub}", "--server", f"upstream={uc}",
                       "--json", str(out), "--plots", str(tmp_path / "img"), "--tag", "t"] + FAST)
    assert rc == 0
    doc = json.loads(out.read_text())
    assert doc["status"] == "complete" and doc["config"]["baseline"] == "plain"
    units = e2e.schedule(["plain", "auto", "upstream"], doc["config"])
    assert [r["key"] for r in doc["rows"]] == [u.key for u in units]  # run in schedule order, nothing skipped
    for prev, row in zip(doc["rows"], doc["rows"][1:]):
        assert row["t_start"] >= prev["t_end"] - 1e-3  # one pass or round at a time: never overlapping
    for row in doc["rows"]:
        s = row["summary"]
        if row["phase"] == "cold":
            assert s["requests"] == max(3, row["concurrency"])  # a pass is a request count
            # and its timeline: every request, sent before it finished, in finishing order, with both clocks
            tl = row["requests"]
            assert len(tl) == s["requests"] and all(t["ok"] for t in tl)
            assert [t["done_s"] for t in tl] == sorted(t["done_s"] for t in tl)
            assert all(0 <= t["sent_s"] <= t["done_s"] and t["client_s"] > 0 and t["server_s"] is not None for t in tl)
        else:  # a round is a time: it loops past c requests, and nothing starts after its deadline
            assert s["requests"] > row["concurrency"] and row["last_start_s"] < row["round_s"] == 0.25
            assert 0 < s["window_tok_s"] and s["window_tok_s"] * 0.25 <= s["tokens"] + 1e-6
            assert "requests" not in row  # rounds keep summaries only
        assert s["ok"] == s["requests"]
    lv = doc["report"]["levels"][0]
    assert set(lv["ratios"]) == {"auto/plain", "upstream/plain", "auto/upstream"} and lv["ratios"]["auto/plain"]["aggregate"]["n"] == 2
    assert set(lv["cold"]) == {"plain", "auto", "upstream"}
    pytest.importorskip("matplotlib")
    for name in ("e2e_t_T0.png",):
        assert (tmp_path / "img" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_an_interrupted_run_keeps_its_rows_and_resume_finishes_it(tmp_path, capsys):
    out = tmp_path / "e2e.json"
    a, b, c = _stubs()
    with a as ua, b as ub:
        args = ["--server", f"plain={ua}", "--server", f"auto={ub}", "--json", str(out)] + FAST

        def stop_after_5(doc):
            if len(doc["rows"]) == 5:
                raise KeyboardInterrupt

        assert e2e.run(args, progress=lambda *_: None, on_row=stop_after_5) == 130
        first = json.loads(out.read_text())
        assert first["status"] == "interrupted" and first["interrupted"] == {"signal": "SIGINT", "rows": 5}
        assert len(first["rows"]) == 5
        assert e2e.main(args + ["--resume"]) == 0
    doc = json.loads(out.read_text())
    units = e2e.schedule(["plain", "auto"], doc["config"])
    assert doc["status"] == "complete" and [r["key"] for r in doc["rows"]] == [u.key for u in units]
    assert doc["rows"][:5] == first["rows"]  # what finished before the interrupt is kept as it was
    assert "warmed plain at T=0" in capsys.readouterr().out  # a resumed server is warmed (uncounted) before rounds
    # resuming with other options is refused, with one line
    assert e2e.main(["--server", f"plain={ua}", "--server", f"auto={ub}", "--json", str(out), "--resume",
                     "--concurrency", "1,8"]) == 2
    assert "differs from this run's" in capsys.readouterr().err


def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_servers_from_a_spec_are_started_waited_for_and_stopped(tmp_path):
    ports = [_free_port(), _free_port()]
    stub = str(Path(__file__).with_name("stub_server.py"))
    spec = {"servers": [{"name": "plain", "argv": [sys.executable, stub, "--port", str(ports[0]), "--no-spec"]},
                        {"name": "spec", "argv": [sys.executable, stub, "--port", str(ports[1])], "env": {"A": 1}}],
            "concurrency": [1], "temperatures": [0.7], "rounds": 1, "round_s": 0.2, "max_new_tokens": 4, "min_requests": 2}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    out = tmp_path / "r.json"
    assert e2e.main(["--spec", str(tmp_path / "spec.json"), "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["config"]["baseline"] == "plain" and doc["servers"]["spec"]["startup_s"] > 0
    assert (tmp_path / "r-logs" / "plain.log").exists()
    for p in ports:  # stopped at the end
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", p), timeout=1).close()


def test_bad_input_is_one_line_exit_2(tmp_path, capsys):
    (tmp_path / "s.json").write_text(json.dumps({"servers": [{"name": "a", "argv": "python -m x"}]}))
    assert e2e.main(["--spec", str(tmp_path / "s.json")]) == 2
    assert e2e.main(["--server", "a=http://127.0.0.1:1"]) == 2
    assert e2e.main(["--server", "a=http://127.0.0.1:1", "--server", "b=http://127.0.0.1:2", "--rounds", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(line.startswith("e2e.py: error: ") for line in err), err
    assert "servers[0].argv" in err[0] and "at least two servers" in err[1] and "--rounds" in err[2]


def test_warmup_lines_are_read_from_a_server_log(tmp_path):
    log = tmp_path / "s.log"
    log.write_text("[2026-12-01 10:00:00 TP0] sglang-kimi-eagle3: kernel warm-up (applied): warmed in 12.5 s: 148 "
                   "variants of ours (37 compiled; ...)\nother line\n")
    (w,) = e2e.warmup_lines(str(log))
    assert w["state"] == "applied" and w["seconds"] == 12.5 and w["detail"].startswith("warmed in 12.5 s")


def test_round_length_fits_the_deadline_and_steady_servers_limit_the_rounds():
    assert e2e.round_length(20.0, 0.0, 100.0, 72) == 20.0  # no deadline
    assert e2e.round_length(20.0, 100.0 + 200, 100.0, 72) == pytest.approx(0.8 * 200 / 72)
    assert e2e.round_length(20.0, 100.0 + 20, 100.0, 72) == 1.0  # never below the floor
    assert e2e.round_length(2.0, 100.0 + 1e6, 100.0, 72) == 2.0
    opts = {"temperatures": [0.0], "concurrency": [1], "rounds": 2, "steady_servers": ["plain", "auto"]}
    units = e2e.schedule(["plain", "auto", "auto-cold"], opts)
    assert {u.server for u in units if u.phase == "cold"} == {"plain", "auto", "auto-cold"}
    assert [u.server for u in units if u.phase == "steady"] == ["plain", "auto", "auto", "plain"]  # rotated


def test_drains_plan_the_rounds_and_a_rotation_runs_whole_or_not_at_all():
    # 100 s left, 10 rounds, 5 s of drains in all: (0.9 * 100 - 5) / 10; without drains the old 20 % margin
    assert e2e.round_length(20.0, 200.0, 100.0, 10, drain_s=5.0) == pytest.approx(8.5)
    assert e2e.round_length(20.0, 200.0, 100.0, 10) == pytest.approx(8.0)
    assert e2e.round_length(20.0, 200.0, 100.0, 10, drain_s=500.0) == 1.0  # the floor
    def row(phase, c, round_s, wall, p90=None):
        return {"phase": phase, "temperature": 0.0, "concurrency": c, "round_s": round_s,
                "summary": {"wall_s": wall, "latency_p90_s": p90}}

    rows = [row("steady", 128, 20.0, w) for w in (31.0, 33.0)]
    rows += [row("steady", 8, 20.0, 19.0), row("cold", 8, None, 99.0)]  # never negative; a cold pass is no round
    warm = [row("warm", 128, None, 30.0, p90=20.0), row("warm", 64, None, 9.0, p90=4.5)]
    # measured rounds win over the warm passes' latency; a level without rounds yet takes the latter
    assert e2e.drains(rows, warm) == {(0.0, 128): 13.0, (0.0, 8): 0.0, (0.0, 64): 4.5}
    group = [e2e.Unit("steady", 0.0, 128, 2, s) for s in ("plain", "ours", "nores")]
    assert e2e.rotation_fits(group, 20.0, {(0.0, 128): 13.0}, 0.0, 99.0)  # 3 x 33 s
    assert not e2e.rotation_fits(group, 20.0, {(0.0, 128): 13.0}, 0.0, 98.0)
    assert e2e.rotation_fits(group, 20.0, {}, 0.0, 0.0)  # no deadline


def test_a_server_idles_the_gap_before_each_of_its_rounds_and_the_plan_counts_it(tmp_path):
    """--server-gap-s: the rotated order runs a server's rounds back to back at each rotation's turn (plain, ours |
    ours, plain), where a step-clock ledger copied every 2-5 s held no copy between them (run 45: half the rounds
    unread). Each server now idles the gap since its own last pass or round; between two servers nobody waits."""
    out = tmp_path / "e2e.json"
    a, b, _ = _stubs()
    with a as ua, b as ub:
        rc = e2e.main(["--server", f"plain={ua}", "--server", f"ours={ub}", "--json", str(out), "--no-cold",
                       "--greedy-check", "0", "--server-gap-s", "1.2", "--concurrency", "1"] + FAST[2:])
    assert rc == 0
    rows = json.loads(out.read_text())["rows"]
    assert [(r["server"], r["index"]) for r in rows] == [("plain", 1), ("ours", 1), ("ours", 2), ("plain", 2)]
    assert rows[2]["t_start"] - rows[1]["t_end"] >= 1.2  # ours twice in a row: the gap
    assert rows[3]["t_start"] - rows[2]["t_end"] < 1.0  # plain idled through ours' two rounds: no wait
    assert rows[1]["t_start"] - rows[0]["t_end"] >= 0  # ours after its warm pass and plain's short round: what is left
    units = [e2e.Unit("steady", 0.0, 1, r, s) for r, s in ((1, "plain"), (1, "ours"), (2, "ours"), (2, "plain"))]
    assert e2e.gap_waits(units, 1.2) == pytest.approx(1.2) and e2e.gap_waits(units[:2], 1.2) == 0.0
    assert not e2e.rotation_fits(units[2:], 20.0, {}, 0.0, 41.0, gap_s=1.2) and e2e.rotation_fits(units[2:], 20.0, {}, 0.0, 41.0)


def test_rounds_with_long_drains_stop_at_a_whole_rotation_by_the_deadline(tmp_path, capsys):
    """H100, 2026-12-06: rounds planned at 20 s took 31-33 s at c 128 (the queue's drain) and the warm passes of two
    of three servers came after the plan; the caller's timeout stopped the run within a rotation (2 rounds of one
    server, 3 of the others). Requests here take about 0.5 s against rounds of 0.3 s: the drains are most of a round."""
    out = tmp_path / "e2e.json"
    a, b = ProtocolStub(StubConfig(alphas=None, pass_ms=60)), ProtocolStub(StubConfig(alphas=None, pass_ms=60))
    with a as ua, b as ub:
        finish_by = time.time() + 6
        rc = e2e.main(["--server", f"plain={ua}", "--server", f"ours={ub}", "--json", str(out), "--no-cold",
                       "--greedy-check", "0", "--concurrency", "1", "--temperatures", "0", "--rounds", "8",
                       "--round-s", "0.3", "--max-new-tokens", "8", "--min-requests", "1", "--cold-requests", "1",
                       "--finish-by", str(finish_by)])
    assert rc == 0
    doc = json.loads(out.read_text())
    steady = [r for r in doc["rows"] if r["phase"] == "steady"]
    counts = {s: sum(r["server"] == s for r in steady) for s in ("plain", "ours")}
    assert counts["plain"] == counts["ours"] >= 1, counts  # whole rotations only
    assert max(r["t_end"] for r in steady) <= finish_by + 2  # by the deadline (the old plan: 17 s past it)
    assert doc["config"]["drain_s"]["T0/c1"] > 0  # measured (each round waits for its last request)
    assert "rounds not started" in doc["config"]["rounds_cut"] and doc["status"] == "complete"
    printed = capsys.readouterr().out
    assert printed.index("warmed ours") < printed.index("steady phase:")


def test_a_server_that_dies_at_start_is_dropped_and_the_others_are_measured(tmp_path):
    """H200, 2026-12-01: one of five servers ran out of GPU memory while loading, and e2e.py gave up on all five.
    A server that exits (or is not healthy in time) is dropped with its reason; the others are measured."""
    port = _free_port()
    stub = str(Path(__file__).with_name("stub_server.py"))
    dead = [sys.executable, "-c", "import sys; print('CUDA out of memory'); sys.exit(3)"]
    spec = {"servers": [{"name": "plain", "argv": [sys.executable, stub, "--port", str(port), "--no-spec"]},
                        {"name": "auto", "argv": dead, "url": f"http://127.0.0.1:{_free_port()}"},
                        {"name": "upstream", "argv": [sys.executable, stub, "--port", str(_free_port())]}],
            "concurrency": [1], "temperatures": [0], "rounds": 1, "round_s": 0.2, "max_new_tokens": 4, "min_requests": 2,
            "cold_requests": 1}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    out = tmp_path / "r.json"
    assert e2e.main(["--spec", str(tmp_path / "spec.json"), "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert list(doc["dropped"]) == ["auto"] and "exited with 3" in doc["dropped"]["auto"]
    assert "CUDA out of memory" in doc["dropped"]["auto"]
    assert {r["server"] for r in doc["rows"]} == {"plain", "upstream"} and doc["status"] == "complete"
    assert set(doc["report"]["levels"][0]["ratios"]) == {"upstream/plain"}
    # the baseline itself dropped: nothing to divide by, exit 2
    spec["servers"][0]["argv"] = dead
    spec["servers"][0]["url"] = f"http://127.0.0.1:{port}"
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    assert e2e.main(["--spec", str(tmp_path / "spec.json"), "--json", str(tmp_path / "r2.json")]) == 2


def test_rounds_cut_short_by_the_deadline_are_flagged(tmp_path, capsys):
    out = tmp_path / "e2e.json"
    a, b, c = _stubs()
    with a as ua, b as ub, c as uc:
        args = [a if a != "0.25" else "20" for a in FAST]  # 20 s asked, 4 s left for 8 rounds: 1 s each (the floor)
        rc = e2e.main(["--server", f"plain={ua}", "--server", f"auto={ub}", "--server", f"upstream={uc}",
                       "--json", str(out), "--no-cold", "--finish-by", str(time.time() + 4)] + args)
    assert rc == 0
    doc = json.loads(out.read_text())
    assert doc["config"]["round_s_used"] < 5 and "too short to decide" in doc["config"]["short_rounds"]
    assert "WARNING: rounds of 1.0 s, not the 20 s asked" in capsys.readouterr().out  # progress goes to stdout


def test_fit_levels_keeps_the_leading_levels_whose_rounds_fit_the_minimum():
    left = [e2e.Unit("steady", t, c, r, s) for t, c in ((0.0, 8), (0.0, 64), (0.7, 8)) for r in (1, 2, 3)
            for s in ("plain", "ours", "ours_q2")]  # 27 rounds, 9 a level
    drain = {(0.0, 8): 2.0, (0.0, 64): 4.0, (0.7, 8): 2.0}
    # 300 s: all 27 rounds fit 7.3 s each ((0.9 x 300 - 72 s of drains) / 27), the first two levels' 18 rounds 12 s,
    # the first level's 9 rounds 20 s (the asked; 28 would fit)
    assert e2e.fit_levels(left, 20.0, 0.0, 300.0, 0.0, drain) == [(0.0, 8), (0.0, 64), (0.7, 8)]
    assert e2e.fit_levels(left, 20.0, 7.0, 300.0, 0.0, drain) == [(0.0, 8), (0.0, 64), (0.7, 8)]
    assert e2e.fit_levels(left, 20.0, 8.0, 300.0, 0.0, drain) == [(0.0, 8), (0.0, 64)]
    assert e2e.fit_levels(left, 20.0, 12.0, 300.0, 0.0, drain) == [(0.0, 8), (0.0, 64)]
    assert e2e.fit_levels(left, 20.0, 13.0, 300.0, 0.0, drain) == [(0.0, 8)]
    assert e2e.fit_levels(left, 20.0, 13.0, 50.0, 0.0, drain) == [(0.0, 8)]  # none fits: the first level still runs


def test_a_minimum_round_leaves_the_last_levels_out_rather_than_shrink_every_round(tmp_path, capsys):
    """Run 37 (H100, 2026-12-06): a call's budget fitted every round of two levels to 6.2 s, and c 64 read plain at
    956-1148 tok/s across its rounds. With --min-round-s the rounds are not fitted below it: c 2 cannot fit beside c 1
    (8 rounds of at least 1.1 s in under 8 s), so it is left out, said in the JSON and printed, and c 1 runs its
    rounds at the length asked."""
    out = tmp_path / "e2e.json"
    a, b = ProtocolStub(StubConfig(alphas=None, pass_ms=0.1)), ProtocolStub(StubConfig(pass_ms=0.1))
    with a as ua, b as ub:
        args = [x if x != "0.25" else "1.2" for x in FAST]
        rc = e2e.main(["--server", f"plain={ua}", "--server", f"ours={ub}", "--json", str(out), "--no-cold",
                       "--greedy-check", "0", "--min-round-s", "1.1", "--finish-by", str(time.time() + 8.0)] + args)
    assert rc == 0
    doc = json.loads(out.read_text())
    assert not [r for r in doc["rows"] if r["phase"] == "steady" and r["concurrency"] == 2]
    assert doc["config"]["round_s_used"] >= 1.1
    assert doc["config"]["levels_dropped"].startswith("T=0 c 2 not measured") and doc["status"] == "complete"
    assert "WARNING: T=0 c 2 not measured" in capsys.readouterr().out
    # a minimum that is not a number of seconds: one line, exit 2
    assert e2e.main(["--server", "plain=http://127.0.0.1:9", "--json", str(tmp_path / "x.json"),
                     "--min-round-s", "-1"]) == 2


def test_the_greedy_check_compares_every_server_with_the_baseline_before_any_pass(tmp_path, capsys):
    """Stubs answer ids seeded by the prompt: the same for plain and a speculative stub, others for a stub with
    another salt (a server whose greedy tokens differ). The check runs before the first pass, one request at a time;
    --greedy-check 0 turns it off."""
    out, off = tmp_path / "e2e.json", tmp_path / "off.json"
    a, b, c = ProtocolStub(StubConfig(alphas=None, pass_ms=0.1)), ProtocolStub(StubConfig(pass_ms=0.1)), \
        ProtocolStub(StubConfig(pass_ms=0.1, salt="x"))
    with a as ua, b as ub, c as uc:
        rc = e2e.main(["--server", f"plain={ua}", "--server", f"ours={ub}", "--server", f"wrong={uc}",
                       "--json", str(out), "--greedy-check", "5"] + FAST)
        rc_off = e2e.main(["--server", f"plain={ua}", "--server", f"ours={ub}", "--json", str(off),
                           "--greedy-check", "0"] + FAST)
    assert rc == 0 and rc_off == 0
    g = json.loads(out.read_text())["greedy_check"]
    assert g["prompts"] == 5 and g["baseline"] == "plain" and g["max_new_tokens"] == 8
    assert g["servers"]["ours"] == {"same": 5, "of": 5, "first_difference": None}
    wrong = g["servers"]["wrong"]
    assert wrong["same"] == 0 and wrong["first_difference"]["at"] == 0 and not wrong["first_difference"]["failed"]
    assert "greedy check wrong vs plain: 0/5 prompts identical" in capsys.readouterr().out
    assert "greedy_check" not in json.loads(off.read_text())
