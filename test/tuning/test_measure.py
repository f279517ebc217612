"""tuning/measure.py on the session's device (test/kernel_device.py), small shapes: every op's inputs, our
launcher with a searched config, and the exactness check against SGLang's kernel. On the CPU (Triton
interpreter) the check runs where SGLang's runs on CPU (its Triton top-1; torch for the matmul and top-k);
the JIT CUDA tree kernels need a GPU, so the verify ops are checked against them only there."""

import pytest

from kernel_device import DEVICE_NAME, ON_GPU
from sglang_kimi_eagle3.integration.upstream_kernels import spec_ops
from sglang_kimi_eagle3.tuning import measure, timing

SMALL = {"BLOCK_R": 16, "BLOCK_K": 32, "num_stages": 1}


@pytest.fixture
def sg_ops(monkeypatch):
    """SGLang's kernels, with measure's tensors on the session device; a small L2 keeps the input copies few."""
    monkeypatch.setattr(measure, "DEV", DEVICE_NAME)
    monkeypatch.setattr(timing, "l2_bytes", lambda: 1 << 16)
    yield spec_ops()
    measure.clear()


@pytest.mark.parametrize("op,shape", [("lm_head_gemv", {"R": 64, "H": 128, "bs": 2}),
                                      ("lm_head_topk", {"R": 64, "H": 128, "bs": 2, "k": 4}),
                                      ("lm_head_topk", {"R": 64, "H": 128, "bs": 3, "k": 1}),
                                      ("draft_topk", {"V": 300, "bs": 3, "k": 4}),
                                      ("draft_topk", {"V": 300, "bs": 3, "k": 1})])
def test_draft_head_checks_pass_against_sglang(sg_ops, op, shape):
    case = measure.BUILDERS[op]({"op": op, "shape": shape}, sg_ops, (9, 0), 8, True, 8)
    cfg = {**case.candidates[0], **(SMALL if op.startswith("lm_head") else {})}
    exact, detail = case.check(cfg)
    assert exact, detail
    assert len(case.items) > 1  # rotated: several copies of the inputs
    case.ours(cfg)(case.items[-1]), case.sglang(case.items[-1])


def test_gemv_check_fails_on_a_wrong_result(sg_ops, monkeypatch):
    from sglang_kimi_eagle3.ops import lm_head_gemv as gemv

    case = measure.lm_head_gemv({"op": "lm_head_gemv", "shape": {"R": 64, "H": 128, "bs": 2}}, sg_ops, (9, 0), 8, True, 8)
    real = gemv.lm_head_gemv
    monkeypatch.setattr(gemv, "lm_head_gemv", lambda *a, **k: real(*a, **k) * 1.01)
    assert not case.check({**case.candidates[0], **SMALL})[0]


@pytest.mark.parametrize("op", ["argmax_verify", "verify_greedy", "tree_sampling"])
def test_verify_inputs_and_our_launchers(sg_ops, op):
    case = measure.BUILDERS[op]({"op": op, "shape": {"n": 4, "bs": 2, "vocab": 500}}, sg_ops, (9, 0), 8, True, 8,
                                tree_shape=(1, 3))
    assert len(case.candidates) >= 2
    for cfg in case.candidates:
        case.ours(cfg)(case.items[0])
    if ON_GPU:  # SGLang's JIT CUDA tree kernels exist here: every candidate is exact against them
        for cfg in case.candidates:
            exact, detail = case.check(cfg)
            assert exact, (cfg, detail)
