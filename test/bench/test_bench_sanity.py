"""`bench` sanity around a run (bench/outputs.py, bench/stats.py): answers that cannot be data are counted as
errors, a baseline that speculates is caught, a run where nothing succeeded fails. Against the fault server."""

import json

import pytest

from stub_server import HIST, FaultServer, cycle
from sglang_kimi_eagle3.bench import client
from sglang_kimi_eagle3.cli import main as cli_main

FAST = ["--max-new-tokens", "8", "--min-requests", "4", "--rounds", "1", "--warmup", "0", "--categories", "chat",
        "--no-progress", "--timeout", "5"]
PLAIN_INFO = {"model_path": "fault-server"}  # /server_info of a server without speculation


@pytest.fixture(autouse=True)
def _fresh_client():
    client.reset()
    yield
    client.reset()


def test_histogram_past_the_draft_count_is_an_error_not_acceptance(tmp_path):
    out = tmp_path / "run.json"
    with FaultServer(cycle("ok", "hist_past_drafts"), lifetime=15) as url:
        rc = cli_main(["bench", "--url", url, "--json", str(out), "--concurrency", "1", *FAST])
    assert rc == 0
    s = json.loads(out.read_text())["levels"][0]["spec"]
    assert s["errors"] == {"bad_field": 2} and s["ok"] == 2
    assert s["histogram"] == [2 * h for h in HIST]  # only the possible answers
    assert s["alpha"] == pytest.approx([7 / 8, 5 / 7, 2 / 5])


def test_zero_completion_tokens_beside_verifies_is_an_error(tmp_path):
    out = tmp_path / "run.json"
    with FaultServer(cycle("ok", "zero_tokens_with_verifies"), lifetime=15) as url:
        assert cli_main(["bench", "--url", url, "--json", str(out), "--concurrency", "1", *FAST]) == 0
    s = json.loads(out.read_text())["levels"][0]["spec"]
    assert s["errors"] == {"bad_field": 2} and s["tau"] == pytest.approx(22 / 8)


def test_a_baseline_server_that_reports_speculation_is_refused_before_the_sweep(tmp_path, capsys):
    out = tmp_path / "run.json"
    with FaultServer(cycle("ok"), lifetime=15) as spec, FaultServer(cycle("ok"), lifetime=15) as base:
        rc = cli_main(["bench", "--url", spec, "--baseline-url", base, "--json", str(out), "--concurrency", "1", *FAST])
    assert rc == 2
    assert "its /server_info reports speculative_algorithm EAGLE3" in capsys.readouterr().err.splitlines()[-1]


def test_a_baseline_whose_answers_speculate_gives_no_speedup_and_says_so(tmp_path, capsys):
    out = tmp_path / "run.json"
    with FaultServer(cycle("ok"), lifetime=15) as spec, FaultServer(cycle("ok"), lifetime=15, info=PLAIN_INFO) as base:
        rc = cli_main(["bench", "--url", spec, "--baseline-url", base, "--json", str(out), "--concurrency", "1", *FAST])
    assert rc == 0
    doc = json.loads(out.read_text())
    assert doc["baseline_speculates"] is True and doc["levels"][0]["speedup"] is None
    assert "the baseline's answers carry spec fields" in capsys.readouterr().err


def test_a_run_where_nothing_succeeded_fails(tmp_path, capsys):
    out = tmp_path / "run.json"
    with FaultServer(cycle("http_500"), lifetime=15) as url:
        rc = cli_main(["bench", "--url", url, "--json", str(out), "--concurrency", "1,2", *FAST])
    assert rc == 1
    doc = json.loads(out.read_text())
    assert doc["status"] == "failed" and "http_500" in doc["interrupted"]["error"]
    assert "succeeded" in capsys.readouterr().err


def test_a_baseline_json_sharing_some_levels_notes_the_others(tmp_path, capsys):
    base = tmp_path / "base.json"
    base.write_text(json.dumps({"levels": [{"concurrency": 1, "spec": {"agg_tok_s": 10.0, "tok_s_per_req_mean": 10.0}}]}))
    out = tmp_path / "run.json"
    with FaultServer(cycle("ok"), lifetime=15) as url:
        rc = cli_main(["bench", "--url", url, "--baseline-json", str(base), "--json", str(out), "--concurrency", "1,2",
                       *FAST])
    assert rc == 0
    doc = json.loads(out.read_text())
    assert doc["levels"][0]["speedup"] is not None and doc["levels"][1]["baseline"] is None
    assert "--baseline-json has no level c=2" in capsys.readouterr().err
