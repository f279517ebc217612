"""The `auto` install gates of the draft-head and the verify hooks read the launch table in effect on this process's GPU:
the same table the per-call lookup reads (bundled files of that device, a user-tuned table for it,
SGLANG_KIMI_EAGLE3_BUNDLED_DIR). Each case runs SGLang's own load_plugins() in a fresh process whose
GPU identity is set (this box has none): `ops.tables.current_device` answers the device of the case.
Expectations are written out here, not computed with the gate's function.
"""

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from helpers import run_json

pytest.importorskip("sglang")
pytestmark = pytest.mark.slow

PROBE = r"""
import json, os, sys
from sglang_kimi_eagle3.ops import tables
dev = json.loads(os.environ["GATE_DEVICE"])
tables.current_device = lambda: (dev[0], tuple(dev[1]) if dev[1] else None)
from sglang.srt.plugins import load_plugins
load_plugins()
from sglang_kimi_eagle3.status import hookstatus
print(json.dumps({r.name: [r.state, r.detail] for r in hookstatus.rows() if r.name.startswith(("draft_", "verify_"))}))
"""
H200 = ["NVIDIA H200", [9, 0]]
H100 = ["NVIDIA H100 80GB HBM3", [9, 0]]
H800 = ["NVIDIA H800", [9, 0]]
RTX = ["NVIDIA RTX PRO 6000 Blackwell Server Edition", [12, 0]]


def _user_table(folder, device, op="draft_topk", win="bs1_v32000_k4"):
    """A table as `tune` writes it for `device`, with one win of `op` (no driver/triton stamp: applies)."""
    folder.mkdir(parents=True, exist_ok=True)
    doc = {"device": device[0], "cc": f"{device[1][0]}.{device[1][1]}", "ops": {
        op: {"default": {}, "rules": [], "wins": [win], "measured": {win: {}}}}}
    (folder / (device[0].replace(" ", "_") + ".json")).write_text(json.dumps(doc))
    return folder


@pytest.fixture(scope="module")
def gate(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gate")
    empty = tmp / "no-bundled"
    empty.mkdir()
    cases = {
        # the bundled H200 tables list the verify ops' eager per-call wins (tree sampling; argmax + verify at bs >= 16)
        # and no draft-head win (its GPU-time ones are kept apart as graph_wins): the two verify hooks install
        "h200": (H200, {}),
        "h200_user_verify": (H200, {"SGLANG_KIMI_EAGLE3_TUNE_DIR": str(_user_table(tmp / "tuned-v", H200, "tree_sampling",
                                                                                   "n4_bs1"))}),
        "h100": (H100, {}),  # its own bundled verify table (2026-12-05): the same two verify hooks as the H200
        "h800": (H800, {}),  # same architecture, not measured there: no wins
        "sm120": (RTX, {}),  # compile-verified only
        "sm120_user": (RTX, {"SGLANG_KIMI_EAGLE3_TUNE_DIR": str(_user_table(tmp / "tuned", RTX))}),
        "h200_no_bundled": (H200, {"SGLANG_KIMI_EAGLE3_BUNDLED_DIR": str(empty)}),
        "no_gpu": ([None, None], {}),
    }
    env = {"SGLANG_KIMI_EAGLE3_KERNELS": "auto", "SGLANG_KIMI_EAGLE3_TUNE_DIR": str(tmp / "none")}
    with ThreadPoolExecutor(3) as pool:
        futs = {k: pool.submit(run_json, PROBE, 400, **{**env, "GATE_DEVICE": json.dumps(d), **extra})
                for k, (d, extra) in cases.items()}
        return {k: f.result() for k, f in futs.items()}


DRAFT = ("draft_lm_head", "draft_topk1", "draft_probs", "draft_worker_topk")
VERIFY = ("verify_argmax_greedy", "verify_tree_greedy", "verify_tree_sampling")


H200_VERIFY = ("verify_argmax_greedy", "verify_tree_sampling")


@pytest.mark.parametrize("case,installed", [
    ("h200", H200_VERIFY), ("h100", H200_VERIFY), ("h800", ()), ("sm120", ()), ("sm120_user", DRAFT), ("h200_user_verify", H200_VERIFY),
    ("h200_no_bundled", ()), ("no_gpu", ())])
def test_auto_gate_follows_the_table_in_effect(gate, case, installed):
    rows = gate[case]
    assert set(rows) == {*DRAFT, *VERIFY}, rows
    for name, (state, detail) in rows.items():
        if name in installed:
            assert state in ("registered", "applied"), (name, rows)
        else:
            assert state == "skipped", (name, rows)
            assert ("lists no draft-head win" if name in DRAFT else "lists no") in detail, (name, detail)
