"""verify_tree_greedy (Triton) against verify_tree_greedy_ref (SGLang's walk): exact on chains and trees."""

import random

import pytest
import torch

from kernel_device import device, on
from sglang_kimi_eagle3.ops.verify_greedy import random_tree_parents, tree_from_parents, verify_tree_greedy, verify_tree_greedy_ref

DEV = device()

SENTINEL = -7  # predicts entries the walk must not touch keep this


def make_case(seed: int, bs: int, n: int, topk: int, depth: int, vocab: int = 50, p_match: float = 0.6,
              sibling_order: str = "asc", permute_rows: bool = False):
    """Tree tensors, target_predict and candidates that match the parent's target with p_match."""
    rng = random.Random(seed)
    parents = [random_tree_parents(rng, n, topk, depth) for _ in range(bs)]
    ridx, nxt, sib = tree_from_parents(parents, sibling_order)
    if permute_rows:  # retrive_index are flat rows into target_predict: any permutation is valid
        perm = list(range(bs * n))
        rng.shuffle(perm)
        ridx = torch.tensor(perm, dtype=torch.int64).reshape(bs, n)
    tp = torch.tensor([rng.randrange(vocab) for _ in range(bs * n)], dtype=torch.int64).reshape(bs, n)
    flat = tp.reshape(-1)
    cand = torch.empty((bs, n), dtype=torch.int64)
    for b in range(bs):
        for i in range(n):
            p = parents[b][i]
            hit = p >= 0 and rng.random() < p_match
            cand[b, i] = flat[ridx[b, p]] if hit else rng.randrange(vocab)
    return (*on(cand, ridx, nxt, sib, tp), max(depth, 1) + 1)


def outputs(bs, n, s):
    return on(torch.full((bs * n,), SENTINEL, dtype=torch.int32), torch.full((bs, s), -1, dtype=torch.int32),
              torch.full((bs,), SENTINEL, dtype=torch.int32))


def run_both(cand, ridx, nxt, sib, tp, s, config=None):
    bs, n = cand.shape
    ref, ours = outputs(bs, n, s), outputs(bs, n, s)
    verify_tree_greedy_ref(*ref, cand, ridx, nxt, sib, tp)
    verify_tree_greedy(*ours, cand, ridx, nxt, sib, tp, config=config)
    return ref, ours


def assert_same(ref, ours):
    for name, a, b in zip(("predicts", "accept_index", "accept_token_num"), ref, ours):
        assert torch.equal(a, b), f"{name} differs:\nref  {a.tolist()}\nours {b.tolist()}"


# (bs, N, topk, depth): chains (topk 1), SGLang-like trees, deep/wide trees up to 64 tokens
SHAPES = [(1, 4, 1, 3), (5, 4, 1, 3), (3, 16, 1, 15), (6, 8, 2, 3), (4, 16, 4, 4), (3, 23, 3, 6), (2, 64, 8, 8),
          (2, 64, 2, 8)]


@pytest.mark.parametrize("bs,n,topk,depth", SHAPES)
def test_random_trees_match_ref(bs, n, topk, depth):
    accepted = 0
    for seed, order in ((bs * 100 + n, "asc"), (bs * 100 + n + 1, "desc")):
        case = make_case(seed, bs, n, topk, depth, p_match=0.75, sibling_order=order)
        ref, ours = run_both(*case)
        assert_same(ref, ours)
        accepted += int(ref[2].sum())
    assert accepted > 0, "no case accepted anything: the walk was not exercised"


@pytest.mark.parametrize("config", [{"rows_per_program": 4, "num_warps": 2}, {"rows_per_program": 2, "num_warps": 1}])
def test_several_requests_per_program(config):
    case = make_case(7, 9, 8, 2, 4)  # 9 requests: the last program is partly masked
    assert_same(*run_both(*case, config=config))


def test_permuted_retrive_index_is_a_flat_row_index():
    case = make_case(11, 4, 8, 2, 3, permute_rows=True)
    assert_same(*run_both(*case))


def test_all_accept_and_reject_at_root():
    cand, ridx, nxt, sib, tp, s = make_case(3, 4, 6, 1, 5, p_match=1.0)  # chains, every draft matches
    ref, ours = run_both(cand, ridx, nxt, sib, tp, s)
    assert_same(ref, ours)
    assert ours[2].tolist() == [5] * 4 and (ours[1] >= 0).all()
    cand2 = cand.clone()
    cand2[:, 1:] = (tp.reshape(-1)[ridx[:, :-1]] + 1) % 50  # every child misses its parent's target
    ref, ours = run_both(cand2, ridx, nxt, sib, tp, s)
    assert_same(ref, ours)
    assert ours[2].tolist() == [0] * 4 and (ours[1][:, 1:] == -1).all()
    assert ours[0].reshape(4, 6)[:, 0].tolist() == tp[:, 0].tolist()  # bonus token at the root


def test_accept_limited_by_accept_index_width():
    cand, ridx, nxt, sib, tp, s = make_case(5, 3, 8, 1, 7, p_match=1.0)
    ref, ours = run_both(cand, ridx, nxt, sib, tp, 3)  # S = 3 < depth + 1: at most 2 accepts
    assert_same(ref, ours)
    assert ours[2].tolist() == [2, 2, 2]


def test_single_token_tree():
    cand, ridx, nxt, sib, tp, _ = make_case(1, 3, 1, 1, 0)
    ref, ours = run_both(cand, ridx, nxt, sib, tp, 1)
    assert_same(ref, ours)


def test_bs0_and_bs1():
    empty = torch.empty((0, 4), dtype=torch.int64, device=DEV)
    verify_tree_greedy(*outputs(0, 4, 4), empty, empty, empty, empty, empty)  # no launch, no error
    assert_same(*run_both(*make_case(2, 1, 4, 1, 3)))


def test_guards_reject_wrong_dtypes():
    cand, ridx, nxt, sib, tp, s = make_case(1, 2, 4, 1, 3)
    with pytest.raises(ValueError, match="candidates"):
        verify_tree_greedy(*outputs(2, 4, s), cand.int(), ridx, nxt, sib, tp)
    with pytest.raises(ValueError, match="predicts"):
        verify_tree_greedy(torch.zeros(8, dtype=torch.int64, device=DEV), *outputs(2, 4, s)[1:], cand, ridx, nxt, sib, tp)
    with pytest.raises(ValueError, match="target_predict"):
        verify_tree_greedy(*outputs(2, 4, s), cand, ridx, nxt, sib, tp.int())


def test_second_and_third_sibling_accepted():
    """Root with three children; only the third (then, below it, the second of two) matches."""
    parents = [[-1, 0, 0, 0, 3, 3]]
    ridx, nxt, sib = tree_from_parents(parents, device=DEV)
    tp = torch.tensor([[7, 1, 2, 9, 4, 5]], device=DEV)
    cand = torch.tensor([[0, 8, 6, 7, 3, 9]], device=DEV)  # node 3 == tp[root] 7; node 5 == tp[3] 9
    ref, ours = run_both(cand, ridx, nxt, sib, tp, 4)
    assert_same(ref, ours)
    assert ours[1].tolist() == [[0, 3, 5, -1]] and ours[2].tolist() == [2]


def test_more_than_64_draft_tokens_is_refused():
    cand, ridx, nxt, sib, tp, s = make_case(1, 1, 65, 8, 8)
    with pytest.raises(ValueError, match="at most 64"):
        verify_tree_greedy(*outputs(1, 65, s), cand, ridx, nxt, sib, tp)
