"""The lead scheduler's status file follows the counters while serving (runtime_status.start_writer).

Seen on the H200 (2026-11-30, live tiny tree server): with a flush only on the next counted call, a server
whose whole generation took less than the flush interval left a file with no verify call at all, and SGLang
ends its schedulers by signal, so there is no write at exit. Here: calls counted after the first write reach
the file within FLUSH_S with no further call, and an idle writer does not rewrite it."""

from __future__ import annotations

import json
import time

import pytest

from sglang_kimi_eagle3.integration import launch_record
from sglang_kimi_eagle3.integration.hooks import runtime_status as rs
from sglang_kimi_eagle3.status import hookstatus


@pytest.fixture
def status(tmp_path, monkeypatch):
    monkeypatch.setattr(rs, "FLUSH_S", 0.05)
    monkeypatch.setattr(rs, "_STATE", {"path": tmp_path / "port1.json", "written": -1, "writer": None})
    monkeypatch.setattr(launch_record, "_OURS", [True])
    monkeypatch.setattr(hookstatus, "_COUNTS", type(hookstatus._COUNTS)())
    monkeypatch.setattr(hookstatus, "_CALLS", [0])
    monkeypatch.setattr(hookstatus, "_TABLE", {})
    hookstatus.record("verify_tree_greedy", "sglang.kernels.ops.speculative.spec_tree.verify_tree_greedy_func", "applied")
    return tmp_path / "port1.json"


def _ours(path, hook="verify_tree_greedy"):
    hooks = {h["name"]: h for h in json.loads(path.read_text())["hooks"]}
    return sum(hooks[hook]["counters"]["ours"].values())


def _wait(pred, s=5.0):
    end = time.monotonic() + s
    while time.monotonic() < end and not pred():
        time.sleep(0.02)
    return pred()


def test_counted_calls_reach_the_file_without_another_call(status):
    rs.write_status()
    rs._STATE["written"] = hookstatus.calls()
    rs.start_writer()
    for _ in range(3):
        hookstatus.count("verify_tree_greedy", "ours", "n8_bs1")
    assert _wait(lambda: _ours(status) == 3), "the counted calls never reached the status file"
    before = status.stat().st_mtime_ns
    time.sleep(0.3)  # idle: six ticks, no new call
    assert status.stat().st_mtime_ns == before, "an idle writer rewrote the file"
    hookstatus.count("verify_tree_greedy", "sglang", "n8_bs1", "launch table: no win for this shape")
    assert _wait(lambda: json.loads(status.read_text())["hooks"] and any(
        h["counters"]["sglang"] for h in json.loads(status.read_text())["hooks"] if h["name"] == "verify_tree_greedy"))


def test_an_unwritable_status_file_stops_the_writer_after_one_warning(status, tmp_path, caplog):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    rs._STATE["path"] = blocker / "port1.json"  # its parent is a file: mkdir fails
    rs.start_writer()
    hookstatus.count("verify_tree_greedy", "ours", "n8_bs1")
    assert _wait(lambda: not rs._STATE["writer"].is_alive()), "the writer kept retrying an unwritable file"
    warnings = [r for r in caplog.records if "cannot write the status file" in r.getMessage()]
    assert len(warnings) == 1, [r.getMessage() for r in caplog.records]


def test_status_running_counts_bound_sites_out_of_what_the_server_registered(status, monkeypatch, capsys):
    """The reading process never imports the hooks (its CALL_SITES is empty): the denominator comes from the
    call sites the serving process recorded in its file, not 'bound N/0'."""
    from sglang_kimi_eagle3.cli import main as cli_main

    sites = ["sglang.srt.speculative.eagle_utils:verify_tree_greedy_func",
             "sglang.srt.speculative.eagle_worker_v2:verify_tree_greedy_func"]
    monkeypatch.setattr(rs, "CALL_SITES", {"verify_tree_greedy": sites})
    rs.write_status()
    monkeypatch.setattr(rs, "CALL_SITES", {})  # as in `status --running` in another process
    cli_main(["status", "--running", str(status)])
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.strip().startswith("verify_tree_greedy"))
    assert f"/{len(sites)}]" in line and "/0]" not in line, line
    row = next(h for h in json.loads(status.read_text())["hooks"] if h["name"] == "verify_tree_greedy")
    assert row["call_sites"] == sites


def test_a_hook_with_no_call_site_shows_no_bound_count():
    """The serving process records `sites` with empty lists for hooks that bind no call site (launch_step, ...):
    the status text says nothing about binding there, not 'bound 0/0'."""
    empty = {"bound": [], "unbound": [], "n/a": [], "not imported": []}
    row = {"status": "active", "counters": {"ours": {}, "sglang": {}}}
    snap = {"pid": 1, "time": "t", "table_in_effect": "x", "hooks": [
        {**row, "name": "launch_step", "sites": empty, "call_sites": []},
        {**row, "name": "verify_tree_greedy", "sites": {**empty, "bound": ["a:f"]}, "call_sites": ["a:f", "b:f"]}]}
    text = rs.format_snapshot(snap)
    assert "bound 0/0" not in text and "bound 1/2" in text, text


def test_the_status_says_how_the_verify_ops_launch(monkeypatch):
    """The snapshot (status file and `status --running`) names the launch path of this process's planned verify ops:
    nothing before one has built a plan, then the binder (and why), or Triton's C launch directly or compiled.run,
    with the pointer form and any kernel that fell back."""
    from sglang_kimi_eagle3.ops import _host

    monkeypatch.setattr(_host, "STEPS_BUILT", [0])
    snap = rs.snapshot()
    assert snap["launch_path"] is None and "verify ops launch" not in rs.format_snapshot(snap)
    _host.Step(lambda *a: None, (1,))  # a plan's Step: the fast path probed
    lp = rs.launch_path()
    assert lp is not None and lp["int_pointers"] is True
    line = rs.format_snapshot(rs.snapshot())
    if _host.fast_path_reason():  # the CPU interpreter
        assert "verify ops launch through Triton's binder: TRITON_INTERPRET=1" in line, line
    else:
        assert "verify ops launch through Triton's C launch directly, pointers as ints" in line, line
    on = {"fast_path": "on", "direct_launch": "on", "int_pointers": True, "fallbacks": {"k": "scratch buffer"}}
    assert rs.format_launch_path(on) == ("verify ops launch through Triton's C launch directly, pointers as ints; "
                                         "k through compiled.run: scratch buffer")
    off = dict(on, direct_launch=_host.SWITCHED_OFF, int_pointers=False, fallbacks={"k": _host.SWITCHED_OFF})
    assert rs.format_launch_path(off) == f"verify ops launch through compiled.run ({_host.SWITCHED_OFF}), pointers as tensors"
