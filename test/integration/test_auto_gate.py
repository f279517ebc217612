"""The `auto` install gate of the draft-head hooks reads the launch table in effect on this process's GPU:
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
from sglang_kimi_eagle3 import hookstatus
print(json.dumps({r.name: [r.state, r.detail] for r in hookstatus.rows() if r.name.startswith("draft_")}))
"""
H200 = ["NVIDIA H200", [9, 0]]
H100 = ["NVIDIA H100 80GB HBM3", [9, 0]]
RTX = ["NVIDIA RTX PRO 6000 Blackwell Server Edition", [12, 0]]


def _user_table(folder, device):
    """A table as `tune` writes it for `device`, with one draft_topk win (no driver/triton stamp: applies)."""
    folder.mkdir(parents=True, exist_ok=True)
    doc = {"device": device[0], "cc": f"{device[1][0]}.{device[1][1]}", "ops": {
        "draft_topk": {"default": {}, "rules": [], "wins": ["bs1_v32000_k4"], "measured": {"bs1_v32000_k4": {}}}}}
    (folder / (device[0].replace(" ", "_") + ".json")).write_text(json.dumps(doc))
    return folder


@pytest.fixture(scope="module")
def gate(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gate")
    empty = tmp / "no-bundled"
    empty.mkdir()
    cases = {
        "h200": (H200, {}),  # the bundled table measured on the H200 lists draft-head wins
        "h100": (H100, {}),  # same architecture, not measured there: no wins
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


@pytest.mark.parametrize("case,installed", [("h200", True), ("h100", False), ("sm120", False),
                                            ("sm120_user", True), ("h200_no_bundled", False), ("no_gpu", False)])
def test_auto_gate_follows_the_table_in_effect(gate, case, installed):
    rows = gate[case]
    assert len(rows) == 4, rows
    states = {s for s, _ in rows.values()}
    if installed:
        assert states <= {"registered", "applied"}, rows
    else:
        assert states == {"skipped"}, rows
        assert all("lists no draft-head win" in d for _, d in rows.values()), rows
