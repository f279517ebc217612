"""tune's write-as-you-go loop on a CPU box: the GPU measurement is replaced by canned rows (the
timing itself needs CUDA graphs); table writing, Ctrl-C, and what `auto` then picks are real."""

import json
import os
import types

import pytest

from sglang_kimi_eagle3.commands import tune as tune_cmd
from sglang_kimi_eagle3.integration.upstream_kernels import spec_ops
from sglang_kimi_eagle3.ops import arch, tables
from sglang_kimi_eagle3.tuning import run as tune_run
from sglang_kimi_eagle3.tuning.shapes import TuneShapes, measurements

H200 = ("NVIDIA H200", (9, 0))


@pytest.fixture
def fake_gpu(monkeypatch, tmp_path):
    import torch

    # SGLang's kernel modules imported before the device is faked: on a GPU machine a first import under the fake
    # failed (H200 run 22, this file alone in its worker: "tree, sampling do not import here")
    spec_ops()
    monkeypatch.setattr(tables, "current_device", lambda: H200)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: types.SimpleNamespace(multi_processor_count=132))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    for var in (tables.ENV_DIR, tables.ENV_BUNDLED, arch.ENV_KERNELS):
        monkeypatch.delenv(var, raising=False)
    yield tmp_path
    for var in (tables.ENV_DIR, tables.ENV_BUNDLED):  # the table in effect is passed explicitly
        assert var not in os.environ, f"tune set {var} in its own environment"
    tables.clear_cache()


def canned(stop_at=None):
    calls = []

    def measure(m, *args):
        if stop_at is not None and len(calls) == stop_at:
            raise KeyboardInterrupt
        calls.append(m["key"])
        ours_wins = m["shape"]["bs"] == 1  # ours faster at bs 1 only
        ours, up = (5.0, 10.0) if ours_wins else (10.0, 9.0)
        return {"op": m["op"], "key": m["key"], "shape": m["shape"], "sglang_us": up, "ours_us": ours,
                "config": {"num_warps": 4}, "chosen": "ours" if ours_wins else "sglang", "exact": True, "detail": "",
                "measured": {"ours_us": ours, "upstream_us": up, "exact": True}}
    return measure


def shapes():
    return TuneShapes(hidden=7168, draft_vocab=32000, target_vocab=163840, tp=8, topk=1, steps=3, draft_tokens=4,
                      quick=True)


def test_complete_run_writes_the_table_auto_then_uses(fake_gpu, monkeypatch, capsys):
    monkeypatch.setattr(tune_run, "_measure", canned())
    todo = [m for m in measurements(shapes()) if m["op"] in ("draft_topk", "argmax_verify")]
    ours = {"cache_dir": str(fake_gpu), "ignore_bundled": True, "quick": True}
    assert tune_run.run(shapes(), todo, "t", ours, "sglang-kimi-eagle3 tune", spec_ops()) == 0
    out = capsys.readouterr().out
    t = json.loads((fake_gpu / "NVIDIA_H200.json").read_text())
    assert t["device"] == "NVIDIA H200" and t["cc"] == "9.0" and t["ops"]["draft_topk"]["wins"] == ["V32000:k1:bs1"]
    assert t["ops"]["argmax_verify"]["wins"] == ["n4_bs1"] and len(t["ops"]["argmax_verify"]["rules"]) == 3
    assert "| argmax_verify  | n=4 bs=32 vocab=163840" in out and "0.90x | sglang |" in out and "2.00x | ours |" in out
    assert "table in effect now: user-tuned" in out and "over no bundled table for this GPU" in out
    assert "auto picks ours for 2 of 6 measured shapes: draft_topk V32000:k1:bs1, argmax_verify n4_bs1" in out


def test_ctrl_c_keeps_finished_ops_and_shapes(fake_gpu, monkeypatch):
    monkeypatch.setattr(tune_run, "_measure", canned(stop_at=4))  # 3 draft_topk shapes, then 1 of argmax_verify
    todo = [m for m in measurements(shapes()) if m["op"] in ("draft_topk", "argmax_verify")]
    ours = {"cache_dir": str(fake_gpu), "ignore_bundled": False, "quick": True}
    with pytest.raises(KeyboardInterrupt):
        tune_run.run(shapes(), todo, "t", ours, "sglang-kimi-eagle3 tune", spec_ops())
    t = json.loads((fake_gpu / "NVIDIA_H200.json").read_text())
    assert sorted(t["ops"]["draft_topk"]["measured"]) == ["V32000:k1:bs1", "V32000:k1:bs128", "V32000:k1:bs32"]
    assert list(t["ops"]["argmax_verify"]["measured"]) == ["n4_bs1"]  # the op in progress: its finished shape
    assert [p.name for p in fake_gpu.iterdir()] == ["NVIDIA_H200.json"]  # no temp files left behind


def test_baseline_failure_is_one_line_and_keeps_what_finished(fake_gpu, monkeypatch, capsys):
    from sglang_kimi_eagle3.cli import main
    from sglang_kimi_eagle3.errors import UserError
    from sglang_kimi_eagle3.tuning import measure

    ok = canned()

    def measure_or_fail(m, *args):
        if m["op"] == "argmax_verify":  # what _measure raises when SGLang's kernel does not run
            raise UserError("tune: SGLang's kernel for argmax_verify (x) does not run here: boom")
        return ok(m, *args)
    monkeypatch.setattr(tune_run, "_measure", measure_or_fail)
    monkeypatch.setattr(tune_cmd, "_require_gpu", lambda: None)
    monkeypatch.setattr(measure, "clear", lambda: None)
    assert main(["tune", "--quick", "--ops", "draft_topk,argmax_verify", "--cache-dir", str(fake_gpu)]) == 2
    err = capsys.readouterr().err
    assert "kept the 3 shapes measured so far" in err and err.strip().endswith("does not run here: boom")
    t = json.loads((fake_gpu / "NVIDIA_H200.json").read_text())
    assert set(t["ops"]) == {"draft_topk"}


def test_a_verify_op_wins_only_on_gpu_time_and_on_the_eager_call():
    """The verify ops run outside SGLang's CUDA graphs: the H200's bs-1 tree sampling (2026-12-01) was 7.3 vs 62.6 µs
    of GPU time but 223 vs 63 µs per eager call. That is no win; a draft-head op (inside the graphs) is judged on GPU
    time alone."""
    assert not tune_run.is_win("tree_sampling", True, 7.3, 62.6, 223.0, 63.0)
    assert not tune_run.is_win("argmax_verify", True, 4.5, 11.9, None, None)  # eager not measured: no win
    assert tune_run.is_win("tree_sampling", True, 7.3, 62.6, 40.0, 63.0)
    assert tune_run.is_win("draft_topk", True, 5.0, 7.3)
    assert not tune_run.is_win("draft_topk", False, 5.0, 7.3)  # inexact never wins
    assert not tune_run.is_win("draft_topk", True, 7.2, 7.3)  # inside the margin


def test_a_kernel_module_that_does_not_import_is_named_with_its_reason(fake_gpu, monkeypatch):
    """tune's one line names the first missing module and why it did not import (not only that it did not)."""
    from sglang_kimi_eagle3.errors import UserError
    from sglang_kimi_eagle3.integration import upstream_kernels

    real = upstream_kernels.sglang_module

    def no_tree(name):
        if name.endswith(".tree"):
            raise RuntimeError("JIT build of tree failed: nvcc not found\nsecond line")
        return real(name)

    monkeypatch.setattr(upstream_kernels, "sglang_module", no_tree)
    sg = upstream_kernels.spec_ops()
    assert not hasattr(sg, "tree") and hasattr(sg, "sampling"), sg
    assert sg.import_errors == {"tree": "RuntimeError: JIT build of tree failed: nvcc not found"}
    ours = {"cache_dir": str(fake_gpu), "ignore_bundled": True, "quick": True}
    with pytest.raises(UserError) as e:
        tune_run.run(shapes(), [], "t", ours, "sglang-kimi-eagle3 tune", sg)
    msg = str(e.value)
    assert "kernel modules tree do not import here (tree: RuntimeError: JIT build of tree failed: nvcc not found)" \
        in msg and "\n" not in msg, msg


@pytest.mark.parametrize("content,why", [
    ("not json {", "is not a launch table tune can read (Expecting value"),
    ('{"ops": {"draft_topk": {"rules": "x"}}}', "can read (ops.draft_topk: rules not of a launch table's type)"),
    ('{"ops": {"draft_topk": 3}}', "can read (ops.draft_topk: the entry itself not of a launch table's type)"),
    ('{"ops": {"draft_topk": {"wins": [1]}}}', "can read (ops.draft_topk: a win not of a launch table's type)"),
])
def test_a_table_file_tune_cannot_read_or_merge_is_refused_before_measuring_and_kept(fake_gpu, monkeypatch, content,
                                                                                      why):
    """A damaged or hand-edited file where this GPU's table goes: one line before any measurement, the file untouched
    (it was read as no table, measured over, then replaced; a malformed op crashed the merge after measuring)."""
    from sglang_kimi_eagle3.errors import UserError

    if content.startswith("{"):  # a readable table of this environment, one op malformed
        data = {**tables.environment(*H200), **json.loads(content)}
        content = json.dumps(data)
    path = fake_gpu / "NVIDIA_H200.json"
    path.write_text(content)
    measured = []
    monkeypatch.setattr(tune_run, "_measure", lambda m, *a: measured.append(m) or pytest.fail("measured"))
    todo = [m for m in measurements(shapes()) if m["op"] == "draft_topk"]
    ours = {"cache_dir": str(fake_gpu), "ignore_bundled": True, "quick": True}
    with pytest.raises(UserError) as e:
        tune_run.run(shapes(), todo, "t", ours, "sglang-kimi-eagle3 tune", spec_ops())
    assert why in str(e.value) and str(path) in str(e.value) and "\n" not in str(e.value), str(e.value)
    assert path.read_text() == content and not measured


def test_a_failed_table_write_is_one_line_naming_the_file(fake_gpu, monkeypatch):
    from sglang_kimi_eagle3.errors import UserError
    from sglang_kimi_eagle3.tuning import cache

    def full(path, table):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(tune_run, "_measure", canned())
    monkeypatch.setattr(cache, "write_table", full)
    todo = [m for m in measurements(shapes()) if m["op"] == "draft_topk"]
    ours = {"cache_dir": str(fake_gpu), "ignore_bundled": True, "quick": True}
    with pytest.raises(UserError) as e:
        tune_run.run(shapes(), todo, "t", ours, "sglang-kimi-eagle3 tune", spec_ops())
    msg = str(e.value)
    assert msg.startswith(f"tune: could not write the launch table {fake_gpu / 'NVIDIA_H200.json'}: No space left on "
                          "device;") and "--cache-dir" in msg, msg
