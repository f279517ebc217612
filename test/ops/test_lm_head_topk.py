"""Fused lm_head + top-k against lm_head_topk_ref, and the tensor-parallel shard emulation: W split into
shards (equal and unequal), each shard's local (max, sum-exp, top-k) merged by `combine`, must give the
single-GPU answer (issues 4 and 7; the multi-GPU measurement is benchmark/multi_gpu/bench_tp_topk.py).

Inputs are multiples of 1/8 and 1/64, so every logit is exact in fp32 whatever the summation order and
the bf16-rounded logits equal the reference's bit for bit: ids must match exactly, ties included
(there are many: logits sit on a 1/512 grid before bf16 rounding)."""

import pytest
import torch

from sglang_kimi_eagle3.ops.lm_head_gemv import semaphores
from sglang_kimi_eagle3.ops.lm_head_topk import combine, lm_head_topk, lm_head_topk_ref

from kernel_device import device

DEV = device()  # the session device (CUDA, else CPU + Triton interpreter)
# (bs, R, H, config): bs 0/1/odd/two batch blocks, R not a multiple of BLOCK_R, H 7168 and small
SHAPES = [
    (0, 40, 64, {}),
    (1, 300, 7168, {}),
    (5, 300, 256, {"BLOCK_R": 16, "BLOCK_K": 64, "PROGRAMS": 7}),
    (17, 90, 96, {"BLOCK_R": 16, "BLOCK_K": 32, "BLOCK_B": 16, "PROGRAMS": 4}),
    (3, 1000, 64, {"BLOCK_R": 32, "BLOCK_K": 64, "PROGRAMS": 1}),
]
# shard layouts x shapes x k for the TP emulation (a full product would be slow in the interpreter)
TP_CASES = [(SHAPES[1], 8, 1), (SHAPES[1], "uneven", 4), (SHAPES[2], 2, 8), (SHAPES[2], 3, 4),
            (SHAPES[3], "uneven", 8), (SHAPES[3], 8, 4), (SHAPES[4], 8, 4), (SHAPES[4], "uneven", 1)]


def _inputs(bs, R, H, dtype=torch.bfloat16, seed=0):
    gen = torch.Generator().manual_seed(seed)
    h = (torch.randint(-4, 5, (bs, H), generator=gen) / 8).to(dtype)
    w = (torch.randint(-8, 9, (R, H), generator=gen) / 64).to(dtype)
    return h.to(DEV), w.to(DEV)


def _sems_clear():
    """The counters the kernels just used are back at 0 (the buffer they use: keyed like DEV)."""
    return int(semaphores(DEV, 1).abs().sum()) == 0


@pytest.mark.parametrize("bs,R,H,cfg", SHAPES)
@pytest.mark.parametrize("k,dtype", [(1, torch.bfloat16), (3, torch.float16), (4, torch.bfloat16), (8, torch.bfloat16)])
def test_softmax_topk_matches_ref(bs, R, H, cfg, k, dtype):
    h, w = _inputs(bs, R, H, dtype, seed=bs + R + k)
    out = lm_head_topk(h, w, k, config=cfg)
    rp, ri = lm_head_topk_ref(h, w, k)
    assert torch.equal(out.ids, ri) and out.ids.shape == (bs, k) and out.ids.dtype == torch.long
    torch.testing.assert_close(out.probs, rp, atol=1e-7, rtol=2e-5)
    assert _sems_clear()


@pytest.mark.parametrize("bs,R,H,cfg", SHAPES)
def test_top1_contract_with_d2t_and_positions(bs, R, H, cfg):
    h, w = _inputs(bs, R, H, seed=11 + bs)
    d2t = (torch.arange(R) * 5 + 7).to(DEV)
    pos = torch.arange(bs, device=DEV)
    out = lm_head_topk(h, w, 1, probs="one", hot_token_id=d2t, positions=pos, config=cfg)
    assert torch.equal(out.ids, lm_head_topk_ref(h, w, 1, probs="one", hot_token_id=d2t)[1])
    assert (out.probs == 1.0).all() and torch.equal(pos, torch.arange(bs, device=DEV) + 1)


@pytest.mark.parametrize("shape,n,k", TP_CASES)
def test_tp_shards_combine_to_single_gpu(shape, n, k):
    """Emulate TP: shard s owns rows [start_s, end_s) of W (vocab-parallel lm_head)."""
    bs, R, H, cfg = shape
    h, w = _inputs(bs, R, H, seed=3 * bs + R)
    if n == "uneven":
        cuts = [0, R // 5, R // 5 + 1, R // 2, R]  # includes a 1-row shard
    else:
        step = -(-R // n)
        cuts = list(range(0, R, step)) + [R]
    shards = []
    for a, b in zip(cuts[:-1], cuts[1:]):
        kk = min(k, b - a)  # a shard smaller than k contributes all its rows
        shards.append(lm_head_topk(h, w[a:b], kk, probs=None, id_offset=a, config=cfg))
    d2t = torch.randperm(10 * R, generator=torch.Generator().manual_seed(R))[:R].to(DEV)
    probs, ids = combine(shards, k, hot_token_id=d2t)
    single = lm_head_topk(h, w, k, hot_token_id=d2t, config=cfg)
    rp, ri = lm_head_topk_ref(h, w, k, hot_token_id=d2t)
    assert torch.equal(ids, ri) and torch.equal(single.ids, ri)
    torch.testing.assert_close(probs, rp, atol=1e-7, rtol=2e-5)
    torch.testing.assert_close(single.probs, rp, atol=1e-7, rtol=2e-5)


def test_nan_and_inf_rows_single_and_sharded():
    """A hidden row with NaN or +inf makes the softmax NaN: NaN probs and ids 0..k-1, on one GPU and
    after combining shards (every shard sees the bad row); the top-1 contract treats NaN as -1e30."""
    h, w = _inputs(4, 120, 64, seed=2)
    h[1, 3] = float("nan")
    h[2, 5] = float("inf")
    k = 4
    single = lm_head_topk(h, w, k, config={"BLOCK_R": 16, "BLOCK_K": 32})
    rp, ri = lm_head_topk_ref(h, w, k)
    assert torch.equal(single.ids, ri)
    torch.testing.assert_close(single.probs, rp, equal_nan=True, atol=1e-7, rtol=2e-5)
    assert single.probs[1].isnan().all() and single.ids[1].tolist() == [0, 1, 2, 3]
    shards = [lm_head_topk(h, w[a:a + 40], k, probs=None, id_offset=a, config={"BLOCK_R": 16, "BLOCK_K": 32})
              for a in (0, 40, 80)]
    probs, ids = combine(shards, k)
    assert torch.equal(ids, ri)
    torch.testing.assert_close(probs, rp, equal_nan=True, atol=1e-7, rtol=2e-5)
    one = lm_head_topk(h, w, 1, probs="one", config={"BLOCK_R": 16, "BLOCK_K": 32})
    assert torch.equal(one.ids, lm_head_topk_ref(h, w, 1, probs="one")[1])


@pytest.mark.parametrize("kwargs", [{"k": 0}, {"k": 9, "rows": 8}, {"k": 17}, {"k": 1, "probs": "bad"}])
def test_guards(kwargs):
    h, w = _inputs(2, kwargs.get("rows", 40), 64)
    with pytest.raises(ValueError):
        lm_head_topk(h, w, kwargs["k"], probs=kwargs.get("probs", "softmax"))
