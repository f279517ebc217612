"""Explicit fallback (issue 10, point 5): a kernel hook hands a call to SGLang only when the op's guard says
`ops.arch.Unsupported`; every other error (a broken launch table, a compile error, a bug) propagates.
Each fallback is counted with its reason. The hooks are called directly with a recording stand-in for the
upstream function (what HookRegistry passes as `orig`); the op launcher is replaced to raise on demand."""

import pytest

torch = pytest.importorskip("torch")

from sglang_kimi_eagle3.ops import arch  # noqa: E402
from sglang_kimi_eagle3.status import hookstatus  # noqa: E402


@pytest.fixture(autouse=True)
def ours(monkeypatch):
    monkeypatch.setenv("SGLANG_KIMI_EAGLE3_KERNELS", "ours")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    hookstatus.clear()
    yield
    hookstatus.clear()


def _raise(exc):
    def launcher(*args, **kwargs):
        raise exc
    return launcher


def _verify_args():
    cand = torch.zeros(2, 4, dtype=torch.long)
    return (torch.zeros(8, dtype=torch.int32), torch.full((2, 4), -1, dtype=torch.int32), torch.empty(2, dtype=torch.int32),
            cand, cand.clone(), cand.clone(), cand.clone(), cand.clone())


def test_verify_hook_falls_back_on_unsupported_only(monkeypatch):
    from sglang_kimi_eagle3.integration.hooks import verify_kernels as vk
    from sglang_kimi_eagle3.ops import verify_greedy

    calls = []

    def orig(*args):
        calls.append(args)
        return "sglang"

    monkeypatch.setattr(verify_greedy, "verify_tree_greedy", _raise(arch.Unsupported("retrieve_index must be int64, got 7")))
    assert vk.verify_tree_greedy_hook(orig, *_verify_args()) == "sglang" and len(calls) == 1
    reasons = hookstatus.counters()["verify_tree_greedy"]["sglang"]
    assert reasons == {"op guard: retrieve_index must be intN, got N": {"n4_bs8": 1}}, reasons
    monkeypatch.setattr(verify_greedy, "verify_tree_greedy", _raise(ValueError("launch table sm90: BLOCK 3 is not a power of 2")))
    with pytest.raises(ValueError, match="not a power of 2"):
        vk.verify_tree_greedy_hook(orig, *_verify_args())
    assert len(calls) == 1  # not handed to SGLang


def test_draft_topk1_hook_falls_back_on_unsupported_only(monkeypatch):
    from sglang_kimi_eagle3.integration.hooks import draft_head_kernels as dh
    from sglang_kimi_eagle3.ops import draft_topk

    x, pos = torch.randn(3, 40), torch.zeros(3, dtype=torch.long)
    monkeypatch.setattr(draft_topk, "draft_topk1", _raise(arch.Unsupported("vocab 40 too small")))
    assert dh._draft_topk1_postprocess(lambda *a: "sglang", x, pos) == "sglang"
    assert "op guard: vocab N too small" in hookstatus.counters()["draft_topk1"]["sglang"]
    monkeypatch.setattr(draft_topk, "draft_topk1", _raise(RuntimeError("triton compile error")))
    with pytest.raises(RuntimeError, match="compile error"):
        dh._draft_topk1_postprocess(lambda *a: "sglang", x, pos)
