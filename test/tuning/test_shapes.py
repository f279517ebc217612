"""tuning/shapes.py: the shapes a deployment runs, keyed exactly as the kernel hooks look them up."""

import pytest
from helpers import AQ_K2_DRAFT, KIMI_K25, LLAMA_8B, LLAMA_8B_DRAFT

from sglang_kimi_eagle3.configs import read_config
from sglang_kimi_eagle3.errors import UserError
from sglang_kimi_eagle3.integration.hooks.verify_kernels import shape_key as verify_key
from sglang_kimi_eagle3.ops import draft_topk as dt, lm_head_gemv as gemv, lm_head_topk as lt
from sglang_kimi_eagle3.tuning.shapes import (
    DRAFT_BS,
    QUICK_BS,
    VERIFY_BS,
    TuneShapes,
    bs_grid,
    from_configs,
    measurements,
    shard_rows,
    tree_of,
)


@pytest.mark.parametrize("vocab,tp,rows", [(32000, 8, 4000), (32000, 1, 32000), (163840, 8, 20480),
                                           (32001, 8, 4008),  # padded to 32064 (a multiple of 64), split 8 ways
                                           (100, 3, 64),  # 128 does not split 3 ways: padded to a multiple of 192
                                           (128256, 4, 32064)])
def test_shard_rows_follow_sglang_padding(vocab, tp, rows):
    assert shard_rows(vocab, tp) == rows


def test_embedded_default_shapes():
    s = from_configs(read_config(KIMI_K25), read_config(AQ_K2_DRAFT), tp=8, topk=1, steps=3, draft_tokens=4)
    assert (s.rows, s.hidden, s.draft_vocab, s.target_vocab, s.draft_tokens) == (4000, 7168, 32000, 163840, 4)
    assert s.draft_bs == DRAFT_BS and s.verify_bs == VERIFY_BS
    assert tree_of(s) == (1, 3)  # a chain of 4
    keys = {(m["op"], m["key"]) for m in measurements(s)}
    assert ("lm_head_gemv", "R4000:H7168:bs8") in keys and ("draft_topk", "V32000:k1:bs128") in keys
    assert ("argmax_verify", "n4_bs256") in keys and ("tree_sampling", "n4_bs1") in keys
    assert not any(k.startswith("V32000:k4") for _, k in keys)  # topk 1: no k=4 shapes


def test_keys_are_the_hooks_lookup_keys():
    """Every measured key is exactly what the hook asks `use_ours` for at that shape."""
    s = TuneShapes(hidden=4096, draft_vocab=32000, target_vocab=128256, tp=2, topk=4, steps=5, draft_tokens=12)
    for m in measurements(s):
        sh = m["shape"]
        want = {"lm_head_gemv": lambda: gemv.shape_key(sh["bs"], sh["R"], sh["H"]),
                "lm_head_topk": lambda: lt.shape_key(sh["bs"], sh["R"], sh["H"], sh["k"]),
                "draft_topk": lambda: dt.shape_key(sh["bs"], sh["V"], sh["k"])}.get(m["op"], lambda: verify_key(sh["bs"], sh["n"]))()
        assert m["key"] == want, m
    assert {m["shape"].get("k") for m in measurements(s) if m["op"] == "draft_topk"} == {1, 4}
    assert tree_of(s) == (4, 5)


def test_llama_tp1_and_batch_grid():
    s = from_configs(read_config(LLAMA_8B), read_config(LLAMA_8B_DRAFT), tp=1, topk=None, steps=None,
                     draft_tokens=None, max_bs=48)
    assert s.rows == shard_rows(s.draft_vocab, 1) and s.target_vocab == 128256
    assert (s.topk, s.steps, s.draft_tokens) == (1, 3, 4)  # unset flags: the embedded default's values
    assert s.draft_bs == (1, 8, 32, 64) and s.verify_bs == (1, 8, 32, 64)
    assert bs_grid(DRAFT_BS, 500) == DRAFT_BS and bs_grid(DRAFT_BS, 1) == (1,)
    q = from_configs(read_config(LLAMA_8B), read_config(LLAMA_8B_DRAFT), tp=1, topk=1, steps=3, draft_tokens=4,
                     max_bs=48, quick=True)
    assert q.draft_bs == (1, 32, 64) == q.verify_bs  # the quick sizes the cap reaches, and the cap's bucket
    for cap, want in ((None, QUICK_BS), (8, (1, 8)), (1, (1,)), (500, (1, 32, 128))):
        q = from_configs(read_config(LLAMA_8B), read_config(LLAMA_8B_DRAFT), tp=1, topk=1, steps=3, draft_tokens=4,
                         max_bs=cap, quick=True)
        assert q.draft_bs == want, cap


def test_bad_inputs_are_user_errors():
    with pytest.raises(UserError, match="speculative-draft-model-path"):
        from_configs(read_config(KIMI_K25), None, tp=8, topk=1, steps=3, draft_tokens=4)
    with pytest.raises(UserError, match="k <= 16"):
        TuneShapes(hidden=8, draft_vocab=64, target_vocab=64, tp=1, topk=17, steps=1, draft_tokens=2)
    with pytest.raises(UserError, match="tp"):
        TuneShapes(hidden=8, draft_vocab=64, target_vocab=64, tp=0, topk=1, steps=1, draft_tokens=2)
