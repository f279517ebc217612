"""The status words an operator reads (hookstatus.status_word; pure, no SGLang): install state, call-site
verification and this process's counters together, so `applied` alone can never read as `active`."""

import pytest

from sglang_kimi_eagle3.status import hookstatus


@pytest.fixture(autouse=True)
def clean():
    hookstatus.clear()
    yield
    hookstatus.clear()


def test_kernel_hook_words_follow_the_counters_and_the_call_sites():
    row = hookstatus.record("draft_topk1", "sglang...draft_topk1_postprocess", "applied")
    assert hookstatus.status_word(row, [], kernel=True) == "installed, SGLang kernel for this GPU/shapes"
    assert "ours where the launch table records a win (2 shape(s))" in hookstatus.status_word(row, [], True, 2)
    hookstatus.count("draft_topk1", "sglang", "V163840:k1:bs1", "launch table: no win for this shape")
    assert hookstatus.status_word(row, [], True, 2) == "installed, SGLang kernel for this GPU/shapes"
    hookstatus.count("draft_topk1", "ours", "V32000:k1:bs8")
    assert hookstatus.status_word(row, [], True, 2) == "active"
    assert hookstatus.status_word(row, ["eagle_worker_v2.draft_topk1_postprocess"], True).startswith(
        "failed (not bound at eagle_worker_v2.draft_topk1_postprocess")
    assert hookstatus.counters()["draft_topk1"] == {
        "ours": {"V32000:k1:bs8": 1}, "sglang": {"launch table: no win for this shape": {"V163840:k1:bs1": 1}}}


def test_other_words():
    assert hookstatus.status_word(hookstatus.record("a", "t", "skipped", "SGLANG_KIMI_EAGLE3=0")) == "skipped (SGLANG_KIMI_EAGLE3=0)"
    assert hookstatus.status_word(hookstatus.record("b", "t", "failed", "boom")) == "failed (boom)"
    assert hookstatus.status_word(hookstatus.record("c", "t", "applied")) == "active"
    assert hookstatus.status_word(hookstatus.record("d", "t", "registered", "runs at resolve_once")) == \
        "installed (runs at resolve_once)"
