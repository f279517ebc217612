"""Every TP/PP rank's scheduler writes its own status file, and `status --running` compares them with the lead's.

At TP > 1 the hooks load in every rank's scheduler, but only TP 0 used to write the table: a rank whose hook was
skipped or failed was invisible. Now the lead writes port<P>.json, the others port<P>-tp<R>.json (and -pp<R>),
and `status --running P` prints one line per other rank: the same hooks as the lead, or which hook differs
(exit 1)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import pythonpath

from sglang_kimi_eagle3.integration import launch_record, registry
from sglang_kimi_eagle3.integration.hooks import runtime_status as rs
from sglang_kimi_eagle3.status import hookstatus


@pytest.fixture
def ranks(tmp_path, monkeypatch):
    monkeypatch.setenv(rs.ENV_STATUS_DIR, str(tmp_path))
    monkeypatch.setattr(launch_record, "_OURS", [True])
    monkeypatch.setattr(hookstatus, "_COUNTS", type(hookstatus._COUNTS)())
    monkeypatch.setattr(hookstatus, "_CALLS", [0])
    monkeypatch.setattr(hookstatus, "_TABLE", {})
    monkeypatch.setattr(rs, "start_writer", lambda: None)  # one write each; the writer has its own tests
    # what other tests of this process queued to run at publish (metrics, serving_compiles: pytest-xdist runs
    # many files in one worker) is not this test's
    monkeypatch.setattr(rs, "_ON_PUBLISH", [])
    # nor are the hooks other tests queued: publish refreshes queued rows from the live attributes, and where another
    # test of this worker applied its hooks (the H200 suite, 2026-12-01) this test's `failed` row read `applied`
    monkeypatch.setattr(registry, "_PENDING", {})
    # nor the call sites other tests' hook modules named (runtime_status.watch): where such a module of SGLang was
    # imported in this worker, publish checked this test's `applied` row against SGLang's own binding there and
    # called it failed (the H200 suite, 2026-12-01, run 8)
    monkeypatch.setattr(rs, "CALL_SITES", {})
    monkeypatch.setattr(rs, "_OURS_FN", {})

    def publish(tp, pp=0, state="applied"):
        monkeypatch.setattr(rs, "_STATE", {"path": None, "written": -1, "writer": None})
        hookstatus._TABLE.clear()
        hookstatus.record("verify_tree_greedy", "sglang.kernels.ops.speculative.spec_tree.verify_tree_greedy_func", state)
        return rs.publish_status(31337, tp == 0 and pp == 0, None, tp, pp)

    return tmp_path, publish


def _status(tmp_path, *args):
    env = {"SGLANG_KIMI_EAGLE3_STATUS_DIR": str(tmp_path), "PYTHONPATH": pythonpath(), "COLUMNS": "1000"}
    return subprocess.run([sys.executable, "-m", "sglang_kimi_eagle3.cli", "status", "--running", *args],
                          capture_output=True, text=True, env=env, timeout=120)


def test_each_rank_writes_its_own_file_and_status_says_they_agree(ranks):
    tmp_path, publish = ranks
    assert publish(0).name == "port31337.json"
    assert publish(1).name == "port31337-tp1.json"
    assert publish(1, pp=1).name == "port31337-pp1-tp1.json"
    r = _status(tmp_path, "31337")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "TP rank 1: the same hooks as the lead (1 applied)" in r.stdout
    assert "PP rank 1, TP rank 1: the same hooks as the lead" in r.stdout
    doc = json.loads(_status(tmp_path, "31337", "--json").stdout)
    assert [x["rank"] for x in doc["other_ranks"]] == ["PP rank 1, TP rank 1", "TP rank 1"]
    # the newest-file default still picks the lead, not a rank file written after it
    r = _status(tmp_path)
    assert r.stdout.startswith(str(tmp_path / "port31337.json")), r.stdout


def test_a_rank_whose_hook_did_not_apply_is_named_and_status_fails(ranks):
    tmp_path, publish = ranks
    publish(0)
    publish(1, state="failed")
    r = _status(tmp_path, "31337")
    assert r.returncode == 1
    assert "TP rank 1: differs from the lead: verify_tree_greedy: failed here, applied on the lead" in r.stdout
