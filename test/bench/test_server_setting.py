"""`bench` checks what /server_info says against what the answers show: a server that says 5 steps while every
answer shows 3 drafts a verify is reported as 3 positions (the answers are trusted, and the run says so), never a
4th position "measured" at 0.00; the file it writes is one `plan --bench` reads."""

import json

import pytest

from stub_server import INFO, FaultServer, cycle
from sglang_kimi_eagle3.bench import client
from sglang_kimi_eagle3.cli import main as cli_main

FAST = ["--max-new-tokens", "8", "--min-requests", "4", "--rounds", "1", "--warmup", "0", "--categories", "chat",
        "--no-progress", "--timeout", "5"]


@pytest.fixture(autouse=True)
def _fresh_client():
    client.reset()
    yield
    client.reset()


def _bench(tmp_path, info, capsys) -> tuple[dict, str]:
    out = tmp_path / "run.json"
    with FaultServer(cycle("ok"), lifetime=20, info=info) as url:
        assert cli_main(["bench", "--url", url, "--json", str(out), "--concurrency", "1,2", *FAST]) == 0
    return json.loads(out.read_text()), capsys.readouterr().err


def test_a_server_contradicting_its_answers_is_read_from_its_answers(tmp_path, capsys):
    lying = {**INFO, "speculative_num_steps": 5, "speculative_num_draft_tokens": 6}  # answers: 24 drafts / 8 verifies
    doc, err = _bench(tmp_path, lying, capsys)
    assert "says steps 5 / topk 1 / 6 draft tokens" in err and "show 3 drafts a verify: trusting the answers" in err
    assert doc["setting"]["source"] == "answers"
    assert (doc["setting"]["steps"], doc["setting"]["draft_tokens"]) == (3, 4)
    for s in [lv["spec"] for lv in doc["levels"]] + [doc["overall"]]:
        assert len(s["alpha"]) == 3 and s["errors"] == {}  # no 4th position
    assert all(lv["step_costs"]["steps"] == 3 and lv["step_costs"]["verify_tokens"] == 4 for lv in doc["levels"])
    assert "will refuse" not in err
    cfg = tmp_path / "cfg.json"
    assert cli_main(["plan", "--no-sglang-check", "-o", str(cfg), "--bench", str(tmp_path / "run.json")]) == 0
    assert "mixes runs" not in capsys.readouterr().err


def test_an_honest_server_is_trusted_and_nothing_is_said(tmp_path, capsys):
    doc, err = _bench(tmp_path, INFO, capsys)
    assert doc["setting"]["source"] == "server_info" and doc["setting"]["notes"] == []
    assert "warning" not in err and len(doc["overall"]["alpha"]) == 3


def test_a_server_saying_no_speculation_while_its_answers_speculate_is_named(tmp_path, capsys):
    doc, err = _bench(tmp_path, {**INFO, "speculative_algorithm": None}, capsys)
    assert "speculative_algorithm None" in err and "trusting the answers" in err
    assert len(doc["overall"]["alpha"]) == 3
