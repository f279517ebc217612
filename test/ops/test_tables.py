"""ops/tables.launch_table's memo: one load_table per (device, variables, clear_cache generation); a changed variable
or a re-read (clear_cache) gives the table now in effect. No GPU: device 0 is named an H200 through the device-key
cache the function fills on a GPU."""

import json

import pytest
import torch

from sglang_kimi_eagle3.ops import arch, tables

CUDA0 = torch.device("cuda", 0)
OP = "tree_sampling"


@pytest.fixture
def h200(tmp_path, monkeypatch):
    for var in (tables.ENV_DIR, tables.ENV_BUNDLED, arch.ENV_KERNELS):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv(tables.ENV_DIR, str(tmp_path / "tuned"))
    monkeypatch.setitem(tables._DEVICE_KEYS, 0, ("NVIDIA H200", (9, 0)))
    calls = []
    real = tables.load_table
    monkeypatch.setattr(tables, "load_table", lambda *a, **k: calls.append(a) or real(*a, **k))
    tables.clear_cache()
    yield calls
    tables.clear_cache()


def test_one_load_per_device_and_state(h200):
    first = tables.launch_table(CUDA0)
    assert first["ops"][OP]["wins"], "the bundled H200 table lists eager tree-sampling wins"
    assert all(tables.launch_table(CUDA0) is first for _ in range(3))
    assert tables.launch_table(torch.device("cpu")) is not first
    assert h200 == [("NVIDIA H200", (9, 0)), (None, None)]


def test_a_changed_variable_gives_the_table_now_in_effect(h200, tmp_path, monkeypatch):
    assert tables.launch_table(CUDA0)["ops"][OP]["wins"]
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv(tables.ENV_BUNDLED, str(tmp_path / "empty"))
    assert not tables.launch_table(CUDA0).get("ops", {}).get(OP, {}).get("wins")
    monkeypatch.delenv(tables.ENV_BUNDLED)
    assert tables.launch_table(CUDA0)["ops"][OP]["wins"]


def test_a_table_written_later_counts_after_clear_cache(h200, tmp_path, monkeypatch):
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv(tables.ENV_BUNDLED, str(tmp_path / "empty"))
    before = tables.launch_table(CUDA0)
    tuned = tmp_path / "tuned"
    tuned.mkdir()
    (tuned / "NVIDIA_H200.json").write_text(json.dumps({"device": "NVIDIA H200", "cc": "9.0", "ops": {
        OP: {"default": {}, "rules": [], "wins": ["n4_bs1"], "measured": {}}}}))
    assert tables.launch_table(CUDA0) is before  # memoised until the tables are re-read
    tables.clear_cache()
    assert tables.launch_table(CUDA0)["ops"][OP]["wins"] == ["n4_bs1"]


def test_the_h100_has_its_own_measured_verify_wins_and_other_sm90_parts_none(h200, monkeypatch):
    """On an H100 `auto` runs our tree sampling and argmax + verify (eager wins measured there), never our
    verify_greedy (a loss per eager call); an SM90 part with no table of its own keeps SGLang's kernels."""
    monkeypatch.setitem(tables._DEVICE_KEYS, 0, ("NVIDIA H100 80GB HBM3", (9, 0)))
    tables.clear_cache()
    t = tables.launch_table(CUDA0)
    for op in ("tree_sampling", "argmax_verify"):
        assert all(arch.use_ours(op, arch.tree_shape_key(bs, 4), t) for bs in (1, 4, 16, 64, 128)), op
        assert not arch.use_ours(op, arch.tree_shape_key(256, 4), t) and not arch.use_ours(op, "n16_bs1", t)
        assert arch.op_config(op, {"bs": 128, "n": 4}, t)["num_warps"] == 4  # tune's config at bs 65-128
    assert not any(arch.use_ours("verify_greedy", arch.tree_shape_key(bs, 4), t) for bs in (1, 16, 128))
    monkeypatch.setitem(tables._DEVICE_KEYS, 0, ("NVIDIA H800", (9, 0)))
    tables.clear_cache()
    assert not tables.launch_table(CUDA0)["ops"]["tree_sampling"].get("wins")
