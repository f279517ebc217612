"""draft_topk ops against their references and, for the top-1 contract, against SGLang 0.5.23's own
Triton `draft_topk1_postprocess` (run by the same interpreter on CPU, compiled on a GPU)."""

import pytest
import torch

from sglang_kimi_eagle3.ops.draft_topk import (draft_softmax_topk, draft_softmax_topk_ref, draft_topk1, draft_topk1_ref,
                                               topk_rows, topk_rows_ref)
from sglang_kimi_eagle3.ops.lm_head_gemv import semaphores

from kernel_device import device

DEV = device()  # the session device (CUDA, else CPU + Triton interpreter)
# (bs, V, BLOCK): batch 0/1/odd, vocab 1, tiny, not a multiple of BLOCK, several splits per row
SHAPES = [(0, 10, 4096), (1, 1, 4096), (1, 5, 16), (3, 100, 4096), (5, 777, 128), (4, 4000, 1024), (2, 4096, 512)]
DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def _logits(bs, V, dtype, seed, specials=True):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(bs, V, generator=gen) * 3
    if specials and bs >= 4 and V >= 8:
        x[0, V // 2] = x[0].max() + 1  # a clear winner in the second half
        x[0, 1] = x[0, V // 2]  # ... tied with an earlier index: the earlier one wins
        x[1, 3] = float("nan")  # one NaN
        x[2] = float("nan")  # all NaN
        x[3, 2] = float("inf")
    if specials and bs >= 5 and V >= 8:
        x[4] = float("-inf")
    return x.to(dtype).to(DEV)


def _sems_clear():
    """The counters the kernels just used are back at 0 (the buffer they use: keyed like DEV)."""
    return int(semaphores(DEV, 1).abs().sum()) == 0


@pytest.fixture(scope="module")
def sglang_topk1():
    try:  # without sglang/__init__ where the serving stack cannot import (the lent H200)
        from sglang_kimi_eagle3.integration.upstream_kernels import sglang_module

        return sglang_module("kernels.ops.speculative.topk1").draft_topk1_postprocess
    except Exception as exc:
        pytest.skip(f"SGLang's topk1 kernel is not importable here: {type(exc).__name__}: {exc}"[:300])


@pytest.mark.parametrize("bs,V,block", SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_topk1_equals_sglang(bs, V, block, dtype, sglang_topk1):
    x = _logits(bs, V, dtype, seed=bs * 31 + V)
    pos = torch.arange(bs, device=DEV) * 7
    pos_up = pos.clone()
    toks = torch.full((bs, 3), -5, dtype=torch.long, device=DEV)
    toks_up = toks.clone()
    p, i = draft_topk1(x, pos, toks, 2, config={"BLOCK": block})
    p_up, i_up = sglang_topk1(x, pos_up, toks_up, 2)
    assert torch.equal(i, i_up) and torch.equal(p, p_up) and p.dtype == torch.float32 and i.dtype == torch.long
    assert torch.equal(pos, pos_up) and torch.equal(toks, toks_up)
    pos_ref, toks_ref = torch.arange(bs, device=DEV) * 7, torch.full((bs, 3), -5, dtype=torch.long, device=DEV)
    assert torch.equal(i, draft_topk1_ref(x, pos_ref, toks_ref, 2)[1].to(DEV))
    assert _sems_clear()


def test_topk1_without_tokens_and_with_d2t():
    x = _logits(5, 300, torch.float32, seed=11)
    d2t = (torch.arange(300) * 3 + 1000).to(DEV)
    pos = torch.zeros(5, dtype=torch.int32, device=DEV)
    p, i = draft_topk1(x, pos, hot_token_id=d2t, config={"BLOCK": 64})
    pos_ref = torch.zeros(5, dtype=torch.int32, device=DEV)
    assert torch.equal(i, draft_topk1_ref(x, pos_ref, hot_token_id=d2t)[1].to(DEV))
    assert pos.tolist() == [1] * 5 and (p == 1.0).all()


def test_topk1_signed_zero_ties():
    x = torch.zeros(2, 40, device=DEV)
    x[0, 0] = -0.0
    x[0, 30] = 0.0
    x[1] = -1.0
    x[1, 9] = -0.0
    x[1, 3] = 0.0
    _, i = draft_topk1(x, torch.zeros(2, dtype=torch.long, device=DEV), config={"BLOCK": 16})
    assert i.flatten().tolist() == [0, 3]


@pytest.mark.parametrize("bs,V,block,k", [(*s, k) for s in SHAPES for k in (1, 2, 4, 8) if k <= s[1]])
@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_topk_matches_ref(bs, V, block, k, dtype):
    x = _logits(bs, V, dtype, seed=bs * 17 + V + k)
    p, i = draft_softmax_topk(x, k, config={"BLOCK": block})
    rp, ri = draft_softmax_topk_ref(x, k)
    assert torch.equal(i, ri.to(DEV))
    torch.testing.assert_close(p, rp.to(DEV), atol=1e-7, rtol=2e-5, equal_nan=True)
    if bs >= 4 and V >= 8:  # NaN rows: NaN probabilities, ids 0..k-1 (a stable sort of the NaN softmax)
        assert p[2].isnan().all() and i[2].tolist() == list(range(k))
    assert _sems_clear()


def test_softmax_topk_d2t():
    x = _logits(3, 200, torch.float32, seed=5, specials=False)
    d2t = torch.randperm(5000)[:200].to(DEV)
    p, i = draft_softmax_topk(x, 4, hot_token_id=d2t, config={"BLOCK": 64})
    rp, ri = draft_softmax_topk_ref(x, 4, hot_token_id=d2t)
    assert torch.equal(i, ri) and torch.allclose(p, rp, rtol=2e-5)


@pytest.mark.parametrize("bs,V,block,k", [(*s, k) for s in SHAPES for k in (1, 3, 8) if k <= s[1]])
def test_topk_rows_matches_torch(bs, V, block, k):
    probs = torch.softmax(_logits(bs, V, torch.float32, seed=V + k), dim=-1)
    if bs >= 2:
        probs[1, 0] = probs[1].max()  # a tie with a later index
    v, i = topk_rows(probs, k, config={"BLOCK": block})
    rv, ri = topk_rows_ref(probs, k)
    assert torch.equal(i, ri) and torch.equal(v.isnan(), rv.isnan())
    torch.testing.assert_close(v, rv, equal_nan=True, atol=0, rtol=0)
    no_nan = ~probs.isnan().any(dim=1)
    if k > 1 and no_nan.any():  # torch.topk proper, where its order is defined (no NaN)
        tv, _ = torch.topk(probs[no_nan], k, dim=-1)
        torch.testing.assert_close(v[no_nan], tv, atol=0, rtol=0)


@pytest.mark.parametrize("fn,args", [(draft_softmax_topk, (0,)), (draft_softmax_topk, (17,)), (topk_rows, (11,))])
def test_guards_k(fn, args):
    with pytest.raises(ValueError):
        fn(torch.zeros(2, 10, device=DEV), *args)


def test_guards_topk1():
    x = torch.zeros(2, 10, device=DEV)
    with pytest.raises(ValueError):
        draft_topk1(x, torch.zeros(3, dtype=torch.long, device=DEV))
    with pytest.raises(ValueError):
        draft_topk1(x, torch.zeros(2, dtype=torch.long, device=DEV), torch.zeros(2, 2, dtype=torch.int32, device=DEV), 0)
    with pytest.raises(ValueError):
        draft_topk1(x, torch.zeros(2, dtype=torch.long, device=DEV), torch.zeros(2, 2, dtype=torch.long, device=DEV), 2)
