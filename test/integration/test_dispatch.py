"""dispatch.why_not's memoised verdict: resolved once per (hook, bucket, device) and resolved again whenever a
variable it reads changes or a table is re-read (tables.clear_cache). No GPU: a cuda:0 device object and a launch
table handed in through tables.launch_table."""

import pytest
import torch

from sglang_kimi_eagle3.integration import dispatch, launch_record
from sglang_kimi_eagle3.ops import arch, tables

HOOK = "verify_argmax_greedy"
OP = arch.TABLE_OP[HOOK]
CUDA0 = torch.device("cuda", 0)


@pytest.fixture
def lookups(monkeypatch):
    """Launch-table lookups counted; the table served is lookups["table"] (a win at n4_bs1)."""
    seen = {"n": 0, "table": {"ops": {OP: {"wins": ["n4_bs1"]}}}}

    def launch_table(device):
        seen["n"] += 1
        return seen["table"]

    monkeypatch.setattr(tables, "launch_table", launch_table)
    monkeypatch.setattr(launch_record, "_OURS", [True])
    monkeypatch.setenv("SGLANG_KIMI_EAGLE3_KERNELS", "auto")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    dispatch._VERDICTS.clear()
    return seen


def test_the_table_is_looked_up_once_per_key(lookups):
    assert [dispatch.why_not(HOOK, "n4_bs1", CUDA0) for _ in range(3)] == ["", "", ""]
    assert dispatch.why_not(HOOK, "n4_bs64", CUDA0) == dispatch.NO_WIN
    assert lookups["n"] == 2


def test_a_changed_variable_decides_again(lookups, monkeypatch):
    assert dispatch.why_not(HOOK, "n4_bs64", CUDA0) == dispatch.NO_WIN
    monkeypatch.setenv("SGLANG_KIMI_EAGLE3_KERNELS", "ours")
    assert dispatch.why_not(HOOK, "n4_bs64", CUDA0) == ""
    monkeypatch.setenv("SGLANG_KIMI_EAGLE3_KERNELS", "upstream")
    assert dispatch.why_not(HOOK, "n4_bs1", CUDA0) == dispatch.NO_WIN
    monkeypatch.setenv("SGLANG_KIMI_EAGLE3_TUNE_DIR", "/elsewhere")
    monkeypatch.setenv("SGLANG_KIMI_EAGLE3_KERNELS", "auto")
    assert dispatch.why_not(HOOK, "n4_bs1", CUDA0) == ""


def test_re_read_tables_decide_again(lookups):
    assert dispatch.why_not(HOOK, "n4_bs1", CUDA0) == ""
    lookups["table"] = {"ops": {}}
    assert dispatch.why_not(HOOK, "n4_bs1", CUDA0) == ""  # the memo holds until the tables are re-read
    tables.clear_cache()
    assert dispatch.why_not(HOOK, "n4_bs1", CUDA0) == dispatch.NO_WIN


def test_an_unindexed_cuda_device_is_not_memoised(lookups):
    for _ in range(2):
        assert dispatch.why_not(HOOK, "n4_bs1", torch.device("cuda")) == ""
    assert lookups["n"] == 2


def test_the_pre_check_and_the_launch_come_first(lookups, monkeypatch):
    assert dispatch.why_not(HOOK, "n4_bs1", CUDA0, "layout: x") == "layout: x"
    monkeypatch.setattr(launch_record, "_OURS", [False])
    assert dispatch.why_not(HOOK, "n4_bs1", CUDA0) == dispatch.NOT_OURS
    assert lookups["n"] == 0
