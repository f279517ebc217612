"""`plan` against the deployment's KV pool: a batch that does not fit is excluded, with numbers, and the pool is
the one `check` computes (the same function, checks_memory.budget)."""

import json
import re
import shlex
import subprocess
import sys

import pytest

from helpers import ROOT, clean_env
from sglang_kimi_eagle3.cli import main as cli_main
from sglang_kimi_eagle3.errors import UserError
from sglang_kimi_eagle3.planner import capacity, profiles

RTX = "kimi-k2.5_8xrtxpro6000_tp8"


def _plan(tmp_path, *extra):
    out, full = tmp_path / "cfg.json", tmp_path / "plan.json"
    rc = cli_main(["plan", "--no-sglang-check", "-o", str(out), "--json", str(full), *extra])
    return rc, out, full


def test_split_keeps_what_fits_and_records_the_numbers_of_what_does_not():
    cap = capacity.Capacity(kv_tokens=10_000, request_tokens=1000, source="test")
    kept = capacity.split({1: "a", 8: "b", 10: "c", 11: "d", 64: "e"}, cap)
    assert sorted(kept) == [1, 8, 10]  # 10 x 1000 = 10000 fits exactly
    assert cap.excluded == {11: 11_000, 64: 64_000}
    assert cap.as_dict()["max_batch_size"] == 10
    with pytest.raises(UserError, match=r"the smallest, 11, needs 11000; plan --batch-sizes 1-10"):
        capacity.split({11: "d"}, capacity.Capacity(10_000, 1000, "test"))
    unchecked = capacity.Capacity(None, 1000, "not checked: ...")
    assert sorted(capacity.split({1: "a", 1 << 20: "b"}, unchecked)) == [1, 1 << 20]


def test_plan_on_the_rtx_profile_excludes_the_batches_its_kv_pool_cannot_hold(tmp_path, capsys):
    rc, out, full = _plan(tmp_path)  # the default profile: 8x RTX PRO 6000, 119670 KV tokens, 2048 per request
    text = capsys.readouterr().out
    assert rc == 0, text
    cap = profiles.load(RTX)
    pool = capacity.resolve(type("A", (), {"request_tokens": None, "kv_tokens": None}), cap, 2048).kv_tokens
    most = pool // 2048
    cfg = json.loads(out.read_text())
    slots = sorted(int(k) for k in cfg if k.isdigit())
    assert slots and max(slots) <= most < 64, (slots, most)  # bs 64 and 128 need 131072 / 262144 tokens
    assert f"bs 128 needs 128 x 2048 = 262144 tokens > {pool}" in text
    doc = json.loads(full.read_text())
    assert doc["kv_capacity"]["kv_tokens"] == pool and doc["kv_capacity"]["max_batch_size"] == most
    assert doc["kv_capacity"]["excluded"] == {"64": {"kv_tokens_needed": 131072}, "128": {"kv_tokens_needed": 262144}}
    assert {k: v["fits_kv_pool"] for k, v in doc["batch_sizes"].items()} == {str(b): b <= most for b in
                                                                             (1, 2, 4, 8, 16, 32, 64, 128)}
    assert doc["adaptive_config"] == cfg


def test_kv_tokens_and_request_tokens_flags(tmp_path, capsys):
    rc, out, _ = _plan(tmp_path, "--kv-tokens", str(128 * 2048))  # a measured pool that holds every level
    assert rc == 0 and "128" in json.loads(out.read_text())
    capsys.readouterr()
    rc, out, full = _plan(tmp_path, "--request-tokens", "200000")  # one request larger than the pool
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1, err
    assert re.search(r"no batch size fits the KV pool of \d+ tokens .* at 200000 tokens per request: the smallest, 1, "
                     r"needs 200000; plan --request-tokens \d+ or fewer", err), err


def test_a_profile_whose_deployment_does_not_fit_is_refused_with_numbers(tmp_path, capsys):
    doc = json.loads((profiles.DIR / f"{RTX}.json").read_text())
    doc["deployment"]["value"]["tp_size"] = 4  # ~145 GiB of weights per 96 GB card
    p = tmp_path / "tp4.json"
    p.write_text(json.dumps(doc))
    rc, _, _ = _plan(tmp_path, "--profile", str(p))
    err = capsys.readouterr().err
    assert rc == 2 and re.search(r"does not fit in memory \(weights 14\d\.\d GiB per GPU > the static pool", err), err
    doc["deployment"]["value"]["gpu"] = "sm120"
    p.write_text(json.dumps(doc))
    rc, _, _ = _plan(tmp_path, "--profile", str(p))
    assert rc == 2 and "deployment.value.gpu 'sm120' is not a GPU model" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("name", profiles.names())
def test_the_pool_is_the_one_check_prints_for_the_same_launch(name):
    """No second estimate: plan's pool equals the KV pool of `check` on the launch plan names."""
    cap = capacity.resolve(type("A", (), {"request_tokens": None, "kv_tokens": None}), profiles.load(name), 2048)
    if profiles.load(name).deployment is None:
        assert cap.kv_tokens is None and cap.source.startswith("not checked: profile")
        return
    argv = shlex.split(cap.check_command)[1:]
    cp = subprocess.run([sys.executable, "-m", "sglang_kimi_eagle3.cli", *argv, "--json"], capture_output=True,
                        text=True, timeout=300, env=clean_env(COLUMNS="200"), cwd=str(ROOT))
    out = json.loads(cp.stdout)
    assert out["errors"] == 0, out["findings"]
    mem = [f["found"] for f in out["findings"] if f["check"] == "memory" and "KV pool" in f["found"]]
    assert mem and f"= {cap.kv_tokens} tokens (" in mem[0], (cap.kv_tokens, mem)


def test_costs_measured_on_another_box_are_not_cut_by_the_profiles_pool(tmp_path, capsys):
    """H200, 2026-12-01: `plan --bench` of a tiny pair served at c 1-64 dropped bs 64 because the default profile's
    deployment (Kimi-K2.5 on 8x RTX PRO 6000) holds 58 requests of 2048 tokens. The bench's levels ran on the
    operator's own server, so that pool says nothing about them; --kv-tokens still checks. The same live data
    plans no speculation for the drafter right 60 % of the time (fixed 3/1/4 measured 0.61-0.65x of plain)."""
    from pathlib import Path

    from sglang_kimi_eagle3.cli import main as cli_main

    data = Path(__file__).resolve().parents[2] / "benchmark" / "results" / "loop-h200-2026-12-01-derived"
    out = tmp_path / "a.json"
    assert cli_main(["plan", "--bench", str(data / "bench-q0.9.json"), "--batch-sizes", "1,4,16,64", "-o", str(out),
                     "--no-sglang-check"]) == 0
    text = capsys.readouterr().out
    assert "KV capacity not checked: the costs come from --bench" in " ".join(text.split())
    assert {k for k in json.loads(out.read_text()) if k.isdigit()} == {"1", "4", "16", "64"}
    assert cli_main(["plan", "--bench", str(data / "bench-q0.9.json"), "--batch-sizes", "1,4,16,64", "-o", str(out),
                     "--no-sglang-check", "--kv-tokens", "100000", "--request-tokens", "2048", "--force"]) == 0
    assert {k for k in json.loads(out.read_text()) if k.isdigit()} == {"1", "4", "16"}  # 64 x 2048 > 100000
    assert cli_main(["plan", "--bench", str(data / "bench-q0.6.json"), "--batch-sizes", "1,4,16,64", "-o", str(out),
                     "--no-sglang-check", "--force"]) == 0
    cfg = json.loads(out.read_text())
    assert all(v["candidate_steps"] == [0] for k, v in cfg.items() if k.isdigit())
