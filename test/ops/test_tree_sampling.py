"""tree_speculative_sampling (Triton, vocab-parallel) against tree_speculative_sampling_ref (SGLang's walk).

Probabilities and coins are dyadic (k/4096, k/1024) so every fp32 sum is exact in any order: then the
final draw is order-independent and must match the reference bit for bit, like everything else.
A separate case with softmax probabilities checks the accepted path exactly and the draw up to
fp32 rounding of the CDF: a differing draw must have u within BOUNDARY_REL of a CDF boundary.
"""

import random

import pytest
import torch

from kernel_device import device, on
from sglang_kimi_eagle3.ops.tree_sampling import TILE, tree_speculative_sampling, tree_speculative_sampling_ref
from sglang_kimi_eagle3.ops.verify_greedy import random_tree_parents, tree_from_parents
from tree_checks import BOUNDARY_REL, draw_at_boundary, draw_mismatches

DEV = device()

SENTINEL = -7


def make_case(seed, bs, n, topk, depth, vocab, p_hot=0.6, dyadic=True, draft="zeros"):
    rng = random.Random(seed)
    g = torch.Generator().manual_seed(seed)
    parents = [random_tree_parents(rng, n, topk, depth) for _ in range(bs)]
    ridx, nxt, sib = tree_from_parents(parents, rng.choice(["asc", "desc"]))
    if dyadic:
        w = torch.randint(0, 16, (bs, n, vocab), generator=g).float()
        hot = torch.randint(0, vocab, (bs, n, 3), generator=g)
        w.scatter_(2, hot, torch.randint(200, 1500, (bs, n, 3), generator=g).float())
        probs = w / 4096  # exact in fp32
        coins = torch.randint(0, 1024, (bs, n), generator=g).float() / 1024
        final = torch.randint(0, 1024, (bs,), generator=g).float() / 1024
    else:
        probs = torch.softmax(torch.randn(bs, n, vocab, generator=g) * 4, -1)
        coins, final = torch.rand(bs, n, generator=g), torch.rand(bs, generator=g)
    top = probs.topk(3, -1).indices
    cand = torch.tensor([[int(top[b, parents[b][i], rng.randrange(3)]) if i and rng.random() < p_hot
                          else rng.randrange(vocab) for i in range(n)] for b in range(bs)], dtype=torch.int64)
    dp = torch.zeros_like(probs) if draft == "zeros" else torch.randint(0, 8, probs.shape, generator=g).float() / 4096
    return list(on(cand, ridx, nxt, sib, coins, final, probs, dp)), depth + 1


def outputs(bs, n, s):
    return list(on(torch.full((bs * n,), SENTINEL, dtype=torch.int32), torch.full((bs, s), -1, dtype=torch.int32),
                   torch.full((bs,), SENTINEL, dtype=torch.int32)))


def run_both(inputs, s, thresholds=(1.0, 1.0), config=None):
    bs, n = inputs[0].shape
    ref, ours = outputs(bs, n, s), outputs(bs, n, s)
    ref_in = [t.clone() for t in inputs]
    our_in = [t.clone() for t in inputs]
    tree_speculative_sampling_ref(*ref, *ref_in, *thresholds)
    tree_speculative_sampling(*ours, *our_in, *thresholds, config=config)
    return ref + [ref_in[7]], ours + [our_in[7]]  # + draft_probs (mutated)


def assert_same(ref, ours, skip_final=None):
    names = ("predicts", "accept_index", "accept_token_num", "draft_probs")
    for name, a, b in zip(names, ref, ours):
        if name == "predicts" and skip_final is not None:
            a, b = a.clone(), b.clone()
            a[skip_final] = b[skip_final] = 0
        same = (a == b) | (a.isnan() & b.isnan()) if a.is_floating_point() else a == b  # NaN written as NaN
        bad = (~same).nonzero().tolist()
        assert not bad, f"{name} differs at {bad[:8]}: ref {[a[tuple(i)].item() for i in bad[:8]]}, ours {[b[tuple(i)].item() for i in bad[:8]]}"


def final_slots(ref):
    """Flat predicts slot of each request's last accepted node."""
    ai, an = ref[1], ref[2]
    return ai[torch.arange(len(an), device=an.device), an.long()].long()


SHAPES = [(1, 4, 1, 3, 50), (6, 4, 1, 3, 37), (4, 16, 4, 4, 64), (3, 23, 3, 6, 29), (2, 64, 8, 8, 40)]


@pytest.mark.parametrize("thresholds", [(1.0, 1.0), (0.25, 0.5), (0.3, 0.7)])
@pytest.mark.parametrize("bs,n,topk,depth,vocab", SHAPES)
def test_dyadic_trees_match_ref_exactly(bs, n, topk, depth, vocab, thresholds):
    inputs, s = make_case(bs * 7 + n, bs, n, topk, depth, vocab)
    ref, ours = run_both(inputs, s, thresholds, config={"walk_rows_per_program": 2, "rows_per_program": 2})
    assert_same(ref, ours)


def test_accepts_and_rejects_are_both_exercised():
    inputs, s = make_case(3, 16, 8, 2, 4, 40)
    ref, ours = run_both(inputs, s)
    assert_same(ref, ours)
    assert 0 < int(ref[2].sum()) < 16 * (s - 1)
    assert int(ref[3].count_nonzero()) > 0  # some rejected entries were written into draft_probs


def test_nonzero_draft_probs_and_several_tiles():
    vocab = 2 * TILE + 808  # three tiles, the last partial
    inputs, s = make_case(5, 3, 4, 2, 2, vocab, draft="random")
    ref, ours = run_both(inputs, s, config={"tiles_per_program": 2})  # two tiles per program, the last short
    assert_same(ref, ours)


def test_nan_probabilities():
    inputs, s = make_case(8, 5, 8, 2, 3, 30)
    probs, cand = inputs[6], inputs[0]
    probs[0, 0, cand[0, 1:]] = float("nan")  # root row: NaN at the children's tokens (rejected)
    probs[1, :, :] = float("nan")  # a whole request
    probs[2, 0, 7] = float("nan")  # a NaN that only the residual draw sees (relu -> 0)
    ref, ours = run_both(inputs, s)
    assert_same(ref, ours)


def test_all_accept_draws_bonus_from_target_and_reject_at_root():
    inputs, s = make_case(9, 4, 4, 1, 3, 32)
    probs, cand = inputs[6], inputs[0]
    inputs[4].zero_()  # coin 0 < any positive prob: every child with q > 0 is accepted
    probs[:, :, cand[:, 1:].unique()] += 1 / 64
    inputs[7].fill_(1.0)  # draft probs are ignored for the bonus token (after S-1 accepts)
    ref, ours = run_both(inputs, s)
    assert_same(ref, ours)
    assert ours[2].tolist() == [3] * 4
    inputs, s = make_case(9, 4, 4, 1, 3, 32)
    inputs[4].fill_(1023 / 1024)
    inputs[6][:, :, inputs[0][:, 1:].unique()] = 0.0  # q == 0: never accepted
    ref, ours = run_both(inputs, s)
    assert_same(ref, ours)
    assert ours[2].tolist() == [0] * 4


def test_final_draw_edges():
    inputs, s = make_case(12, 4, 4, 1, 3, 40)
    inputs[5][:] = torch.tensor([0.0, 1.0 - 2**-24, 0.5, 0.25], device=DEV)  # u at 0 and at the very top
    inputs[6][3, 0, :] = 0.0  # request 3: no residual mass at the root -> V-1 if the walk stops there
    inputs[4][3, 0] = 1.0
    ref, ours = run_both(inputs, s)
    assert_same(ref, ours)


def test_softmax_probs_path_exact_draw_up_to_rounding():
    """Softmax probabilities: the path and side effects exactly; a final draw may differ from the
    float64-CDF reference only where u is within fp32 rounding of a boundary between the two tokens."""
    inputs, s = make_case(21, 24, 16, 4, 4, 300, dyadic=False)
    ref, ours = run_both(inputs, s)
    slots = final_slots(ref)
    assert_same(ref, ours, skip_final=slots)
    bad = draw_mismatches(ours[:3], ref[:3], inputs[6], ours[3], inputs[5], s)
    assert all(d <= BOUNDARY_REL for *_, d in bad), f"draws differ away from a CDF boundary: {bad}"
    assert len(bad) <= 1, f"{len(bad)} of 24 draws at a rounding boundary: u is not that unlucky"


def test_boundary_check_rejects_a_wrong_draw():
    """The rounding allowance above cannot excuse a draw that is plainly wrong."""
    q = torch.tensor([0.25, 0.25, 0.5])
    assert draw_at_boundary(q, q, False, 0.5, 1, 2) < 1e-9  # u = 0.5 sits on the boundary after token 1
    assert draw_at_boundary(q, q, False, 0.1, 0, 2) > 0.1  # u = 0.1: tokens 0 and 2 are far apart in CDF


def test_deterministic_and_bs0():
    inputs, s = make_case(4, 5, 8, 2, 3, 33)
    a, b = run_both(inputs, s)[1], run_both(inputs, s)[1]
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    e = torch.empty((0, 4), dtype=torch.int64, device=DEV)
    ef = torch.empty((0, 4), dtype=torch.float32, device=DEV)
    tree_speculative_sampling(*outputs(0, 4, 4), e, e, e, e, ef, torch.empty(0, device=DEV),
                              torch.empty((0, 4, 8), device=DEV), torch.empty((0, 4, 8), device=DEV))


def test_guards():
    inputs, s = make_case(1, 2, 4, 1, 3, 16)
    bad = list(inputs)
    bad[6] = bad[6].double()
    with pytest.raises(ValueError, match="target_probs"):
        tree_speculative_sampling(*outputs(2, 4, s), *bad)
    with pytest.raises(ValueError, match="threshold"):
        tree_speculative_sampling(*outputs(2, 4, s), *inputs, 1.5, 1.0)


@pytest.mark.parametrize("bs", [1, 16, 17])
@pytest.mark.parametrize("config", [None, {"fused": False}])
def test_the_off_states_one_token_sampling(bs, config):
    """SGLang's steps-0 off-state samples one token per request from a one-node tree (N 1, no children,
    accept_index width 1): the shape our sampling hook takes on every sampled off-state step. The same writes as
    SGLang's walk (the draw included: dyadic probabilities), one launch and three."""
    inputs, s = make_case(bs + 11, bs, 1, 1, 0, 300)
    assert s == 1 and torch.equal(inputs[1].cpu(), torch.arange(bs).unsqueeze(1))
    assert int((inputs[2] != -1).sum()) == 0 and int((inputs[3] != -1).sum()) == 0
    ref, ours = run_both(inputs, s, config=config)
    assert_same(ref, ours)
    assert int(ours[2].sum()) == 0  # nothing to accept: the bonus draw only
