"""Launcher guards: a call outside an op's fast path raises arch.Unsupported (the one exception a
kernel hook falls back on); a programming error stays a plain ValueError (issue 10 point 5)."""

import pytest
import torch

from kernel_device import device
from sglang_kimi_eagle3.ops.arch import Unsupported, require_launchable
from sglang_kimi_eagle3.ops.draft_topk import draft_softmax_topk, draft_topk1
from sglang_kimi_eagle3.ops.lm_head_gemv import lm_head_gemv
from sglang_kimi_eagle3.ops.lm_head_topk import lm_head_topk
from sglang_kimi_eagle3.ops.tree_sampling import tree_speculative_sampling
from sglang_kimi_eagle3.ops.verify_greedy import verify_tree_greedy

DEV = device()


def _bf16(*shape):
    return torch.zeros(*shape, dtype=torch.bfloat16, device=DEV)


def _tree(bs, n, s):
    i64 = torch.zeros((bs, n), dtype=torch.int64, device=DEV)
    return [torch.zeros(bs * n, dtype=torch.int32, device=DEV), torch.zeros((bs, s), dtype=torch.int32, device=DEV),
            torch.zeros(bs, dtype=torch.int32, device=DEV), i64, i64.clone(), i64.clone(), i64.clone()]


@pytest.mark.parametrize("call", [
    lambda: lm_head_gemv(_bf16(2, 64), _bf16(10, 64).half()),  # dtype
    lambda: lm_head_gemv(_bf16(64, 2).t(), _bf16(10, 64)),  # stride
    lambda: lm_head_topk(_bf16(2, 64), _bf16(10, 32), 1),  # shape
    lambda: lm_head_topk(_bf16(2, 64), _bf16(40, 64), 17),  # k above the fast path
    lambda: draft_softmax_topk(torch.zeros(2, 10, dtype=torch.float64, device=DEV), 2),  # dtype
    lambda: draft_topk1(torch.zeros(2, 10, device=DEV), torch.zeros(3, dtype=torch.long, device=DEV)),  # positions
    lambda: verify_tree_greedy(*_tree(1, 65, 4), torch.zeros(65, dtype=torch.int64, device=DEV)),  # N > 64
    lambda: verify_tree_greedy(*_tree(1, 4, 4), torch.zeros(4, dtype=torch.int32, device=DEV)),  # target dtype
], ids=["gemv-dtype", "gemv-stride", "topk-shape", "topk-k17", "softmax-dtype", "topk1-positions", "verify-n65",
        "verify-target-dtype"])
def test_fast_path_guards_raise_unsupported(call):
    with pytest.raises(Unsupported):
        call()


def test_programming_errors_stay_plain_value_errors():
    with pytest.raises(ValueError) as e:
        lm_head_topk(_bf16(2, 64), _bf16(40, 64), 1, probs="bad")
    assert not isinstance(e.value, Unsupported)
    tree = _tree(1, 4, 4)
    f = torch.zeros((1, 4), device=DEV)
    with pytest.raises(ValueError) as e:
        tree_speculative_sampling(*tree, f, torch.zeros(1, device=DEV), torch.zeros((1, 4, 8), device=DEV),
                                  torch.zeros((1, 4, 8), device=DEV), 1.5, 1.0)
    assert not isinstance(e.value, Unsupported)


def test_cpu_tensors_without_the_interpreter_are_unsupported(monkeypatch):
    """Compiled Triton cannot read CPU memory: say so as Unsupported, not Triton's raw launch error."""
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(Unsupported, match="CUDA"):
        require_launchable("op", torch.zeros(2))
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    require_launchable("op", torch.zeros(2))  # the interpreter runs anywhere
    if DEV.type == "cuda":
        with pytest.raises(Unsupported, match="several devices"):
            require_launchable("op", torch.zeros(2), torch.zeros(2, device=DEV))
