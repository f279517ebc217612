"""test/gpu/tiny_runs.py's GPU_CI_REUSE_RUNS (CPU): a role an earlier device call finished is taken from the
log folder with its server log, so five server starts can be split over several 10-minute calls; a start that
never finished is not reused, and without the variable nothing is."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "gpu"))
import tiny_runs  # noqa: E402


@pytest.fixture
def logs(tmp_path, monkeypatch):
    monkeypatch.setattr(tiny_runs, "_CACHE", {"log_dir": tmp_path})
    (tmp_path / "chain.log").write_text("server log: draft context policy auto -> extend\n")
    (tmp_path / "chain.json").write_text(json.dumps({"ok": True, "log": str(tmp_path / "chain.log"), "outputs": [1],
                                                     "status": {"hooks": []}, "port": 30201}))
    (tmp_path / "tree.json").write_text(json.dumps({"ok": False, "error": "RuntimeError: not healthy", "log": "-"}))
    (tmp_path / "refused.json").write_text(json.dumps({"ok": False, "error": "printed ValueError", "log": "-"}))
    started = []
    monkeypatch.setattr(tiny_runs, "Server", lambda *a, **k: started.append(a[0]) or (_ for _ in ()).throw(RuntimeError("start")))
    return tmp_path, started


def test_a_finished_role_is_reused_with_its_log(logs, monkeypatch):
    _d, started = logs
    monkeypatch.setenv("GPU_CI_REUSE_RUNS", "1")
    r = tiny_runs.run("chain")
    assert r["reused"] and r["ok"] and r["outputs"] == [1] and "draft context policy" in r["log_text"]
    assert tiny_runs.run("refused")["error"] == "printed ValueError"  # its failure is its result
    assert started == []


def test_an_unfinished_start_is_run_again(logs, monkeypatch):
    _d, started = logs
    monkeypatch.setenv("GPU_CI_REUSE_RUNS", "1")
    monkeypatch.setattr(tiny_runs, "argv_of", lambda role: [])
    with pytest.raises(RuntimeError, match="start"):
        tiny_runs.run("tree")
    assert started == ["tree"]


def test_nothing_is_reused_without_the_variable(logs, monkeypatch):
    _d, started = logs
    monkeypatch.delenv("GPU_CI_REUSE_RUNS", raising=False)
    monkeypatch.setattr(tiny_runs, "argv_of", lambda role: [])
    with pytest.raises(RuntimeError, match="start"):
        tiny_runs.run("chain")
    assert started == ["chain"]
