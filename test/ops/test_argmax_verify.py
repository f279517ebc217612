"""argmax_verify_greedy (split argmax + walk) against argmax_verify_greedy_ref (torch.argmax + SGLang's walk)."""

import random

import pytest
import torch

from sglang_kimi_eagle3.ops.argmax_verify import argmax_verify_greedy, argmax_verify_greedy_ref
from sglang_kimi_eagle3.ops.verify_greedy import random_tree_parents, tree_from_parents
from kernel_device import device, on

DEV = device()

SENTINEL = -7  # predicts entries the walk must not touch keep this


def outputs(bs, n, s):
    return on(torch.full((bs * n,), SENTINEL, dtype=torch.int32), torch.full((bs, s), -1, dtype=torch.int32),
              torch.full((bs,), SENTINEL, dtype=torch.int32))


def assert_same(ref, ours):
    for name, a, b in zip(("predicts", "accept_index", "accept_token_num"), ref, ours):
        assert torch.equal(a, b), f"{name} differs:\nref  {a.tolist()}\nours {b.tolist()}"

# split argmax configs: several splits, splits that do not divide the vocab, several rows per program (the two
# kernels), one launch (the default: fused) with one split, several, and splits from min_programs
CONFIGS = [
    {"block": 16, "splits": 1},
    {"block": 16, "splits": 3, "rows_per_program": 4},
    {"block": 32, "min_programs": 64, "rows_per_program": 2, "verify_rows_per_program": 4},
    {"block": 64, "splits": 3},
    {"block": 64, "min_programs": 8, "chunk": 32},
]


def case(seed, bs, n, topk, depth, vocab, dtype=torch.float32, p_match=0.7):
    """Tree + logits; candidates follow the parent's argmax with p_match (so paths get accepted)."""
    rng = random.Random(seed)
    g = torch.Generator().manual_seed(seed)
    parents = [random_tree_parents(rng, n, topk, depth) for _ in range(bs)]
    ridx, nxt, sib = tree_from_parents(parents)
    logits = (torch.randn(bs * n, vocab, generator=g) * 3).to(dtype)
    am = torch.argmax(logits, -1)
    cand = torch.tensor([[int(am[b * n + parents[b][i]]) if i and rng.random() < p_match else rng.randrange(vocab)
                          for i in range(n)] for b in range(bs)], dtype=torch.int64)
    return (*on(cand, ridx, nxt, sib, logits), depth + 1)


def run_both(cand, ridx, nxt, sib, logits, s, config):
    bs, n = cand.shape
    ref, ours = outputs(bs, n, s), outputs(bs, n, s)
    argmax_verify_greedy_ref(*ref, cand, ridx, nxt, sib, logits)
    argmax_verify_greedy(*ours, cand, ridx, nxt, sib, logits, config=config)
    return ref, ours


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("bs,n,topk,depth,vocab", [(1, 4, 1, 3, 100), (5, 4, 1, 3, 77), (3, 16, 4, 4, 131), (2, 64, 8, 8, 40)])
def test_random_trees_match_ref(config, bs, n, topk, depth, vocab):
    c = case(bs * 1000 + n, bs, n, topk, depth, vocab)
    assert_same(*run_both(*c, config))


def all_accept_chain(logits, n):
    """A chain whose candidates are the previous row's argmax: every row ends on the path, so
    predicts holds argmax(row) for every row and the test sees each one."""
    rows = logits.shape[0]
    bs = rows // n
    ridx, nxt, sib = tree_from_parents([[-1] + list(range(n - 1))] * bs, device=logits.device)
    am = torch.argmax(logits, -1).reshape(bs, n)
    cand = torch.zeros((bs, n), dtype=torch.int64, device=logits.device)
    cand[:, 1:] = am[:, :-1]
    return cand, ridx, nxt, sib


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("config", CONFIGS[:2])
def test_argmax_semantics_ties_nan_inf_signed_zero(dtype, config):
    n, vocab = 4, 70
    x = torch.randn(3 * n, vocab, generator=torch.Generator().manual_seed(1))
    x[0, 5] = x[0, 50] = 9.0  # tie across splits -> 5
    x[1, 20] = x[1, 21] = 9.0  # tie in one split -> 20
    x[2, 33] = float("nan")  # NaN is the maximum
    x[3, 10], x[3, 60] = float("nan"), float("nan")  # first NaN -> 10
    x[4] = float("-inf")  # all -inf -> 0
    x[5, 44] = float("inf")
    x[5, 66] = float("inf")  # first +inf -> 44
    x[6] = -1.0
    x[6, 17] = -0.0
    x[6, 3] = 0.0  # -0.0 == +0.0: the lower index (3) wins
    x[7] = -1.0
    x[7, 2] = -0.0
    x[7, 40] = 0.0  # -> 2
    x[8, vocab - 1] = 50.0  # last column (vocab not a multiple of the block)
    x[9] = float("nan")  # all NaN -> 0
    logits = x.to(dtype).to(DEV)
    cand, ridx, nxt, sib = all_accept_chain(logits, n)
    ref, ours = outputs(3, n, n), outputs(3, n, n)
    argmax_verify_greedy_ref(*ref, cand, ridx, nxt, sib, logits)
    argmax_verify_greedy(*ours, cand, ridx, nxt, sib, logits, config=config)
    assert_same(ref, ours)
    got = ours[0].tolist()
    assert got[:10] == [5, 20, 33, 10, 0, 44, 3, 2, vocab - 1, 0]
    assert ours[2].tolist() == [3, 3, 3]


def test_strided_rows_and_bs0():
    c = case(9, 3, 4, 1, 3, 64)
    wide = torch.zeros(12, 80, device=DEV)
    wide[:, :64] = c[4]
    view = wide[:, :64]  # row stride 80
    ref, ours = outputs(3, 4, 4), outputs(3, 4, 4)
    argmax_verify_greedy_ref(*ref, *c[:4], view)
    argmax_verify_greedy(*ours, *c[:4], view, config=CONFIGS[1])
    assert_same(ref, ours)
    e = torch.empty((0, 4), dtype=torch.int64, device=DEV)
    argmax_verify_greedy(*outputs(0, 4, 4), e, e, e, e, torch.empty((0, 64), device=DEV))


def test_untouched_entries_keep_their_values():
    c = case(4, 4, 8, 2, 3, 50, p_match=0.0)  # nothing accepted: only the root slots are written
    ref, ours = run_both(*c, CONFIGS[0])
    assert_same(ref, ours)
    written = (ours[0] != SENTINEL).nonzero().flatten().tolist()
    assert written == [0, 8, 16, 24]


def test_guards():
    c = case(1, 2, 4, 1, 3, 20)
    with pytest.raises(ValueError, match="logits"):
        argmax_verify_greedy(*outputs(2, 4, 4), *c[:4], c[4][:7])
    with pytest.raises(ValueError, match="logits"):
        argmax_verify_greedy(*outputs(2, 4, 4), *c[:4], c[4].double())


@pytest.mark.parametrize("config", [CONFIGS[3], CONFIGS[4], {"block": 16, "splits": 3, "fused": False}])
def test_retrive_index_across_requests(config):
    """retrive_index may name rows of other requests (the contract's flat row indices; SGLang's trees never do): the
    fused launch walks such a request after every request's partials are in (its global counter), so the outputs
    still match the reference; a second call on the same plan (counters and flags reset) too."""
    bs, n, vocab = 3, 4, 90
    c = case(21, bs, n, 1, 3, vocab, p_match=0.9)
    cand, ridx, nxt, sib, logits, s = c
    ridx = ridx.clone()
    ridx[0] = ridx[0] + n  # request 0 reads request 1's rows, request 1 reads request 2's
    ridx[1] = ridx[1] + n
    am = torch.argmax(logits, -1)
    cand = cand.clone()
    cand[0, 1:] = am[ridx[0, :-1]]  # a chain that accepts on the rows it reads
    for _ in range(2):
        assert_same(*run_both(cand, ridx, nxt, sib, logits, s, config))


def test_the_default_config_is_one_launch_up_to_fused_max_bs():
    from sglang_kimi_eagle3.ops import _host
    from sglang_kimi_eagle3.ops.argmax_verify import FUSED_MAX_BS

    for bs, fused in ((2, True), (FUSED_MAX_BS, True), (FUSED_MAX_BS + 1, False)):
        c = case(5, bs, 4, 1, 3, 300)
        before = dict(_host._PLANS)
        assert_same(*run_both(*c, None))
        new = [p for k, p in _host._PLANS.items() if k not in before]
        assert len(new) == 1 and (new[0].fused is not None) == fused, bs
        if fused:
            assert new[0].sem.tolist() == [0] * (2 * bs + 1)  # every counter and flag back to 0


@pytest.mark.parametrize("bs", [1, 16, 17])
@pytest.mark.parametrize("config", [None, {"block": 64, "splits": 3}, {"block": 64, "splits": 3, "fused": False}])
def test_the_off_states_one_token_verify(bs, config):
    """SGLang's steps-0 off-state verifies one token per request (EAGLEWorkerV2._build_trivial_verify_input: N 1,
    retrieve_index arange(bs), no children, accept_index width 1): the shape our greedy hook takes on every off-state
    step where the table lists a win. The same writes as torch.argmax + SGLang's walk, in one launch (up to
    FUSED_MAX_BS) and in two, the table's config (None) included."""
    vocab = 1000
    g = torch.Generator().manual_seed(bs)
    logits = on(torch.randn(bs, vocab, generator=g))
    cand = on(torch.randint(0, vocab, (bs, 1), generator=g))
    ridx = on(torch.arange(bs, dtype=torch.int64).unsqueeze(1))
    nxt = on(torch.full((bs, 1), -1, dtype=torch.int64))
    sib = nxt.clone()
    ref, ours = run_both(cand, ridx, nxt, sib, logits, 1, config)
    assert_same(ref, ours)
    assert torch.equal(ours[0].long(), torch.argmax(logits, -1)) and torch.equal(ours[2], torch.zeros_like(ours[2]))


@pytest.mark.parametrize("config", [None, CONFIGS[0], CONFIGS[2], {"block": 64, "splits": 3, "fused": False}])
@pytest.mark.parametrize("bs,n,topk,depth,vocab", [(1, 4, 1, 3, 100), (5, 4, 1, 3, 77), (3, 16, 4, 4, 131),
                                                   (17, 4, 1, 3, 50), (4, 1, 1, 0, 60)])
def test_init_writes_sglangs_starting_values_into_any_buffer(config, bs, n, topk, depth, vocab):
    """init=True (the greedy hook's call: torch.empty buffers): from buffers of any content, the same outputs as
    SGLang's eagle_sample from its own (predicts zeros, accept_index -1), every entry; one launch and two."""
    cand, ridx, nxt, sib, logits, s = case(bs * 31 + n, bs, n, topk, depth, vocab)
    ref = on(torch.zeros(bs * n, dtype=torch.int32), torch.full((bs, s), -1, dtype=torch.int32),
             torch.zeros(bs, dtype=torch.int32))
    argmax_verify_greedy_ref(*ref, cand, ridx, nxt, sib, logits)
    for garbage in (SENTINEL, 12345):
        ours = on(torch.full((bs * n,), garbage, dtype=torch.int32), torch.full((bs, s), garbage, dtype=torch.int32),
                  torch.full((bs,), garbage, dtype=torch.int32))
        argmax_verify_greedy(*ours, cand, ridx, nxt, sib, logits, config=config, init=True)
        assert_same(ref, ours)
    assert int(ref[2].sum()) > 0 or n == 1  # some paths accepted: both kinds of entries checked


@pytest.mark.parametrize("config", [None, {"block": 64, "splits": 3, "fused": False}])
@pytest.mark.parametrize("init", [False, True])
@pytest.mark.parametrize("bs,n,topk,depth,vocab", [(1, 4, 1, 3, 100), (5, 4, 1, 3, 77), (3, 16, 4, 4, 131),
                                                   (4, 1, 1, 0, 60)])
def test_lens_writes_the_accept_lengths_and_nothing_else_changes(config, init, bs, n, topk, depth, vocab):
    """lens=True (the greedy hook's call with HOOK_LENS): accept_token_num holds drafts accepted + 1, what
    eagle_sample returns as accept_lens, and predicts / accept_index are what they are without it; one launch and
    two, with and without init."""
    cand, ridx, nxt, sib, logits, s = case(bs * 29 + n, bs, n, topk, depth, vocab)
    ref = on(torch.zeros(bs * n, dtype=torch.int32), torch.full((bs, s), -1, dtype=torch.int32),
             torch.zeros(bs, dtype=torch.int32))
    argmax_verify_greedy_ref(*ref, cand, ridx, nxt, sib, logits)
    start = SENTINEL if init else None
    ours = on(torch.full((bs * n,), start if init else 0, dtype=torch.int32),
              torch.full((bs, s), start if init else -1, dtype=torch.int32), torch.full((bs,), -9, dtype=torch.int32))
    argmax_verify_greedy(*ours, cand, ridx, nxt, sib, logits, config=config, init=init, lens=True)
    assert torch.equal(ours[0], ref[0]) and torch.equal(ours[1], ref[1]), (ours, ref)
    assert torch.equal(ours[2], ref[2] + 1), (ours[2], ref[2])
    assert int(ref[2].sum()) > 0 or n == 1  # some paths accepted


def test_init_refuses_a_wider_accept_index_than_the_tree():
    from sglang_kimi_eagle3.ops.arch import Unsupported

    cand, ridx, nxt, sib, logits, _ = case(3, 2, 4, 1, 3, 50)
    with pytest.raises(Unsupported, match="init"):
        argmax_verify_greedy(*outputs(2, 4, 5), cand, ridx, nxt, sib, logits, init=True)
    argmax_verify_greedy(*outputs(2, 4, 5), cand, ridx, nxt, sib, logits)  # without init: SGLang's contract
