"""test/gpu/tiny_runs.py on CPU (its servers replaced by stand-ins: no GPU here). GPU_CI_REUSE_RUNS: a role an
earlier device call finished is taken from the log folder with its server log, so the roles can be split over
several 10-minute calls; a start that never finished is not reused, and without the variable nothing is.
Concurrency: the queued roles run at most GPU_CI_PARALLEL at a time, each once, on ports no other role uses;
GPU_CI_TARGETS picks the targets, and the first is the one the single roles (refused, upstream, agree-q) use."""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "gpu"))
import tiny_runs  # noqa: E402


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    monkeypatch.setattr(tiny_runs, "_CACHE", {"log_dir": tmp_path})
    monkeypatch.delenv("GPU_CI_TARGETS", raising=False)
    return tmp_path


@pytest.fixture
def logs(fresh, monkeypatch):
    (fresh / "chain-int4.log").write_text("server log: draft context policy auto -> extend\n")
    (fresh / "chain-int4.json").write_text(json.dumps({"ok": True, "log": str(fresh / "chain-int4.log"), "outputs": [1],
                                                       "status": {"hooks": []}, "port": 30201}))
    (fresh / "tree-int4.json").write_text(json.dumps({"ok": False, "error": "RuntimeError: not healthy", "log": "-"}))
    (fresh / "refused.json").write_text(json.dumps({"ok": False, "error": "printed ValueError", "log": "-"}))
    started = []
    monkeypatch.setattr(tiny_runs, "Server", lambda *a, **k: started.append(a[0]) or (_ for _ in ()).throw(RuntimeError("start")))
    return fresh, started


def test_a_finished_role_is_reused_with_its_log(logs, monkeypatch):
    _d, started = logs
    monkeypatch.setenv("GPU_CI_REUSE_RUNS", "1")
    r = tiny_runs.run("chain-int4")
    assert r["reused"] and r["ok"] and r["outputs"] == [1] and "draft context policy" in r["log_text"]
    assert tiny_runs.run("refused")["error"] == "printed ValueError"  # its failure is its result
    assert started == []


@pytest.mark.parametrize("name", ["tree-int4", "refused"])
def test_an_unfinished_or_interrupted_start_is_run_again(logs, monkeypatch, name):
    d, started = logs
    if name == "refused":  # a refusal is its result, unless the session was stopping when it came
        (d / "refused.json").write_text(json.dumps({"ok": False, "error": "exited", "log": "-", "interrupted": True}))
    monkeypatch.setenv("GPU_CI_REUSE_RUNS", "1")
    monkeypatch.setattr(tiny_runs, "argv_of", lambda role: [])
    with pytest.raises(RuntimeError, match="start"):
        tiny_runs.run(name)
    assert started == [name]


def test_nothing_is_reused_without_the_variable(logs, monkeypatch):
    _d, started = logs
    monkeypatch.delenv("GPU_CI_REUSE_RUNS", raising=False)
    monkeypatch.setattr(tiny_runs, "argv_of", lambda role: [])
    with pytest.raises(RuntimeError, match="start"):
        tiny_runs.run("chain-int4")
    assert started == ["chain-int4"]


class _StandIn:
    """A server that is 'up' for a moment and answers nothing; records how many are up at once."""

    up, peak, started, lock = 0, 0, [], threading.Lock()

    def __init__(self, name, argv, port, log_dir, env):
        self.name, self.port, self.url, self.log = name, port, f"http://127.0.0.1:{port}", log_dir / f"{name}.log"
        self.argv, self.env = argv, env

    def start(self, timeout, give_up=None):
        with _StandIn.lock:
            _StandIn.up += 1
            _StandIn.peak = max(_StandIn.peak, _StandIn.up)
            _StandIn.started.append(self)
        time.sleep(0.05)
        if give_up:
            raise RuntimeError(f"printed {give_up!r}")

    def stop(self):
        with _StandIn.lock:
            _StandIn.up -= 1


def test_roles_run_concurrently_within_the_bound_once_each_on_their_own_ports(fresh, monkeypatch):
    monkeypatch.setenv("GPU_CI_PARALLEL", "3")
    monkeypatch.delenv("GPU_CI_REUSE_RUNS", raising=False)
    monkeypatch.setattr(_StandIn, "started", [])
    monkeypatch.setattr(tiny_runs, "Server", _StandIn)
    monkeypatch.setattr(tiny_runs, "models", lambda target, agreement=1.0: (Path(f"/m/{target}-{agreement}/target"),
                                                                             Path(f"/m/{target}-{agreement}/draft")))
    monkeypatch.setattr(tiny_runs, "generate", lambda url, batch, n=48: [{"output_ids": [], "n": n}])
    monkeypatch.setattr(tiny_runs, "bench", lambda url, name: {"rc": 0})
    real_sleep = time.sleep
    monkeypatch.setattr(tiny_runs.time, "sleep", lambda s: None if s == 3 else real_sleep(s))  # no status-file wait
    names = list(tiny_runs.all_roles())
    tiny_runs.start(names)
    results = {n: tiny_runs.run(n) for n in names}
    tiny_runs.stop_all()
    assert _StandIn.peak == 3, f"{_StandIn.peak} servers up at once, GPU_CI_PARALLEL=3"
    assert sorted(s.name for s in _StandIn.started) == sorted(names)  # each once
    http = [s.port for s in _StandIn.started]
    nccl = [s.argv[s.argv.index("--nccl-port") + 1] for s in _StandIn.started]
    assert len(set(http)) == len(set(nccl)) == len(names)
    assert not results["refused"]["ok"] and all(r["ok"] for n, r in results.items() if n != "refused")
    by = {s.name: s for s in _StandIn.started}
    assert by["refused"].env["SGLANG_KIMI_EAGLE3"] == "0" and by["upstream"].env["SGLANG_KIMI_EAGLE3_KERNELS"] == "upstream"
    assert "/m/int4-0.6/draft" in by["agree-0.6"].argv and "/m/text-1.0/target" in by["plain-text"].argv
    assert "bench" in results["chain-int4"] and "bench" not in results["chain-text"]
    assert results["agree-0.3"]["long_outputs"][0]["n"] == tiny_runs.LONG_TOKENS and "long_outputs" not in results["tree-int4"]


def test_gpu_ci_targets_picks_the_targets_and_the_main_one(fresh, monkeypatch):
    monkeypatch.setenv("GPU_CI_TARGETS", "text,int4")
    assert tiny_runs.selected_targets() == ["text", "int4"] and tiny_runs.main_target() == "text"
    assert tiny_runs.role("refused").target == tiny_runs.role("agree-0.3").target == "text"
    assert tiny_runs.skip_reason("plain-wrapper") and not tiny_runs.skip_reason("tree-int4")
    monkeypatch.setenv("GPU_CI_TARGETS", "int8")
    with pytest.raises(ValueError, match="GPU_CI_TARGETS"):
        tiny_runs.selected_targets()
