"""benchmark/serving/load_step.py: the schedule's concurrency as the servers see it, the rotation, the per-second
token counts from streamed chunks, and the report's arithmetic, against streaming stubs (canned SGLang chunk
sequences with set delays: not a model). No timing is asserted."""

import json
import threading
import time

import load_step
import pytest
from stub_server import PLAIN_INFO, StreamServer, sglang_chunks

from sglang_kimi_eagle3.bench.client import RequestResult


class Track:
    """A stream script that counts the requests in flight: the most seen, and per request (its start time, the count
    then). A request leaves the count before its [DONE] goes out, so the client's next request never finds it."""

    def __init__(self, chunks):
        self.chunks, self.lock, self.now, self.peak, self.starts = chunks, threading.Lock(), 0, 0, []

    def __call__(self, n, body):
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
            self.starts.append((time.perf_counter(), self.now))
        left = [False]

        def leave():
            if not left[0]:
                left[0] = True
                with self.lock:
                    self.now -= 1
        try:
            for step in self.chunks:
                if step == "DONE":
                    leave()
                yield step
        finally:
            leave()

    def first_phase(self, seconds: float) -> list[int]:
        """The in-flight counts at the starts within `seconds` of the first request's."""
        t0 = self.starts[0][0]
        return [k for t, k in self.starts if t - t0 < seconds]


def test_token_times_follow_the_stream_and_fall_back_to_the_end():
    r = RequestResult("p", "c", ok=True, completion_tokens=4, latency_s=2.0, ttft_s=0.5, itl_s=[0.1, 0.0, 0.2])
    assert load_step.token_times(r, 10.0) == pytest.approx([10.5, 10.6, 10.6, 10.8])
    r = RequestResult("p", "c", ok=True, completion_tokens=3, latency_s=2.0)  # no stream timing: all at the end
    assert load_step.token_times(r, 1.0) == [3.0, 3.0, 3.0]
    assert load_step.token_times(RequestResult("p", "c", ok=False, completion_tokens=3), 0.0) == []


def test_phase_rates_leave_out_the_settle_seconds():
    per_second = [1, 1, 9, 9, 9, 9, 2, 2]
    assert load_step.phase_rates(per_second, [(1, 2), (8, 4), (1, 2)], 1.0) == [1.0, 9.0, 2.0]
    assert load_step.phase_rates(per_second, [(1, 2), (8, 4), (1, 2)], 0.0) == [1.0, 9.0, 2.0]
    assert load_step.phase_rates([0, 4, 4, 0], [(1, 1), (4, 3)], 5.0) == [0.0, 0.0]  # at least one second kept


def test_sent_rates_count_a_phases_requests_where_they_were_sent_not_where_they_drain():
    # two servers, one schedule c 1 (2 s), c 8 (2 s), c 1 (2 s): the slow one's c-8 requests finish in the last phase
    sched = [(1, 2), (8, 2), (1, 2)]
    fast = [[0.0, 10], [1.0, 10]] + [[2.0 + 0.25 * k, 10] for k in range(8)] + [[4.0, 10], [5.0, 10]]
    slow = [[0.0, 10], [1.0, 10]] + [[2.0 + 0.5 * k, 10] for k in range(4)] + [[4.0, 10], [5.0, 10]]
    assert load_step.sent_rates(fast, sched) == [10.0, 40.0, 10.0]
    assert load_step.sent_rates(slow, sched) == [10.0, 20.0, 10.0]  # its drain after 4 s still counts to phase 1
    assert load_step.sent_rates([[6.0, 5]], sched) == [0.0, 0.0, 0.0]  # after the schedule: no phase's


def test_the_schedule_reaches_each_server_in_rotated_rounds_and_the_report_divides_round_by_round(tmp_path):
    slow = Track(sglang_chunks(0.05, [(0.05, 1)] * 9, spec=False))  # 10 tokens in ~0.5 s
    fast = Track(sglang_chunks(0.05, [(0.05, 3)] * 3))  # 10 tokens in ~0.2 s
    out = tmp_path / "step.json"
    with StreamServer(slow, info=PLAIN_INFO) as p, StreamServer(fast) as o:
        rc = load_step.main(["--server", f"plain={p}", "--server", f"ours={o}", "--json", str(out), "--schedule",
                             "1:1.5,6:1.5,1:1.5", "--rounds", "2", "--settle-s", "0.3", "--timeout-s", "20"])
    assert rc == 0
    doc = json.loads(out.read_text())
    assert [(r["server"], r["round"]) for r in doc["runs"]] == [("plain", 0), ("ours", 0), ("ours", 1), ("plain", 1)]
    assert slow.peak == fast.peak == 6  # the step reached c 6 and never went above it
    for t in (slow, fast):  # the first phase (1.5 s; its first 1.2 s here) is c 1: one request at a time
        assert set(t.first_phase(1.2)) == {1}, t.first_phase(1.2)
    for r in doc["runs"]:
        assert r["errors"] == 0 and r["tokens"] == 10 * r["requests"] == sum(r["per_second"])
        assert sum(n for _, n in r["sent"]) == r["tokens"] and len(r["sent"]) == r["requests"]
        assert len(r["per_second"]) >= 5  # 4.5 s of schedule, and the drain after it
    sched = [tuple(x) for x in doc["config"]["schedule"]]
    assert sched == [(1, 1.5), (6, 1.5), (1, 1.5)]
    runs = {(r["server"], r["round"]): r for r in doc["runs"]}
    for j, ph in enumerate(doc["report"]["phases"]):
        rate = {k: load_step.phase_rates(r["per_second"], sched, 0.3)[j] for k, r in runs.items()}
        want = sorted(rate[("ours", i)] / rate[("plain", i)] for i in (0, 1))
        got = ph["servers"]["ours"]["vs_baseline"]
        assert (got["min"], got["max"], got["n"]) == (pytest.approx(want[0]), pytest.approx(want[1]), 2)
        assert "vs_baseline" not in ph["servers"]["plain"] and "sent_vs_baseline" not in ph["servers"]["plain"]
        sent = {k: load_step.sent_rates(r["sent"], sched)[j] for k, r in runs.items()}
        want = sorted(sent[("ours", i)] / sent[("plain", i)] for i in (0, 1))
        got = ph["servers"]["ours"]["sent_vs_baseline"]
        assert (got["min"], got["max"], got["n"]) == (pytest.approx(want[0]), pytest.approx(want[1]), 2)
    med = doc["report"]["per_second_median"]
    assert set(med) == {"plain", "ours"} and sum(med["plain"]) > 0


@pytest.mark.parametrize("argv, message", [
    (["--schedule", "1:15,128"], "--schedule '1:15,128': each phase is C:SECONDS"),
    (["--schedule", "0:5"], "each phase is C:SECONDS with C >= 1"),
    (["--baseline", "nope"], "--baseline 'nope': not one of the --server names (plain)"),
    (["--rounds", "0"], "--rounds: at least 1"),
])
def test_bad_input_is_one_line_naming_the_flag_exit_2(tmp_path, capsys, argv, message):
    rc = load_step.main(["--server", "plain=http://127.0.0.1:9", "--json", str(tmp_path / "x.json"), *argv])
    err = capsys.readouterr().err
    assert rc == 2 and message in err and len(err.strip().splitlines()) == 1, err
