"""One (op, shape) measurement on the GPU: inputs, our launcher per candidate config, SGLang's
kernel, and the exactness check between them (torch + our ops; SGLang's kernels are passed in as
`sg`, a namespace of its modules: integration/upstream_kernels.spec_ops()).

What SGLang runs at each hook boundary (sglang 0.5.23):
  lm_head_gemv   torch.matmul (bf16 out under TP, where an all-gather follows; else .float())
  lm_head_topk   its whole draft tail: matmul, .float(), top-1 kernel / softmax + torch.topk, d2t
  draft_topk     k=1: sglang.kernels.ops.speculative.topk1.draft_topk1_postprocess; k>1: torch.topk
  argmax_verify  torch.argmax + tree.verify_tree_greedy (JIT CUDA)
  verify_greedy  tree.verify_tree_greedy
  tree_sampling  sampling.tree_speculative_sampling_target_only (JIT CUDA)
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import torch

from . import search
from .timing import copies_past_l2

DEV = "cuda"


@dataclass
class Case:
    items: list  # rotated past the L2: fn(item) per call
    ours: object  # cfg -> fn(item)
    sglang: object  # fn(item)
    candidates: list
    check: object  # cfg -> (exact: bool, detail: str)
    upstream: str
    extra: dict = field(default_factory=dict)


def _bf16_hidden(bs, H, seed):
    g = torch.Generator(device=DEV).manual_seed(seed)
    return torch.randn(bs, H, device=DEV, generator=g).bfloat16()


_WEIGHTS: dict = {}


def weights(R: int, H: int) -> list:
    if (R, H) not in _WEIGHTS:
        _WEIGHTS.clear()
        torch.cuda.empty_cache()

        def make(i):
            g = torch.Generator(device=DEV).manual_seed(100 + i)
            return (torch.randn(R, H, device=DEV, generator=g) * 0.02).bfloat16()
        _WEIGHTS[(R, H)] = copies_past_l2(make, R * H * 2)
    return _WEIGHTS[(R, H)]


def clear() -> None:
    _WEIGHTS.clear()
    torch.cuda.empty_cache()


def sglang_tail(h, w, k, hot, pos, sg_topk1):
    """SGLang 0.5.23's draft tail per step (as benchmark/tune_draft_head.py)."""
    logits = (h @ w.t()).float()
    if k == 1:
        return hot[sg_topk1(logits, pos)[1]]
    p, i = torch.softmax(logits, -1).topk(k, dim=-1)
    return p, hot[i]


def _rel_err(x, exact):
    return float((x.double() - exact).norm() / exact.norm().clamp_min(1e-30))


def lm_head_gemv(m, sg, cc, sms, quick, tp) -> Case:
    from ..ops import lm_head_gemv as gemv

    R, H, bs = m["shape"]["R"], m["shape"]["H"], m["shape"]["bs"]
    ws, h = weights(R, H), _bf16_hidden(bs, H, 1)
    if tp > 1:  # the hook writes bf16 when the TP all-gather follows
        ours = lambda c: (lambda w: gemv.lm_head_gemv(h, w, config=c))  # noqa: E731
        up, name = (lambda w: h @ w.t()), "torch.matmul (bf16)"
    else:
        ours = lambda c: (lambda w: gemv.lm_head_gemv(h, w, out_dtype=torch.float32, round_to=torch.bfloat16, config=c))  # noqa: E731
        up, name = (lambda w: (h @ w.t()).float()), "torch.matmul + .float()"

    def check(c):
        w = ws[0]
        exact = h.double() @ w.double().t()
        e_ours, e_up = _rel_err(ours(c)(w), exact), _rel_err(up(w), exact)
        return e_ours <= 1.5 * e_up + 1e-6, f"rel err vs fp64 {e_ours:.2e} (SGLang {e_up:.2e})"
    return Case(ws, ours, up, search.gemv(bs, R, cc, quick), check, name)


def lm_head_topk(m, sg, cc, sms, quick, tp, gemv_best=None) -> Case:
    from ..ops import lm_head_topk as lt

    R, H, bs, k = (m["shape"][x] for x in ("R", "H", "bs", "k"))
    ws, h = weights(R, H), _bf16_hidden(bs, H, 2)
    hot = torch.randint(0, 163840, (R,), device=DEV)
    pos = torch.zeros(bs, dtype=torch.long, device=DEV)
    kw = {"probs": "one", "positions": pos} if k == 1 else {"probs": "softmax"}
    ours = lambda c: (lambda w: lt.lm_head_topk(h, w, k, hot_token_id=hot, config=c, **kw))  # noqa: E731
    up = lambda w: sglang_tail(h, w, k, hot, pos, sg.topk1.draft_topk1_postprocess)  # noqa: E731
    # the GEMV's best tiles plus the grid's first three (the fused epilogue can favour another tile:
    # 128-row tiles won lm_head_topk at bs 32 on the H200 while 64-row ones won the GEMV)
    tiles = list(gemv_best or []) + search.gemv(bs, R, cc, quick)[:3]
    cands = [search.fused(c, cc) for i, c in enumerate(tiles) if c not in tiles[:i]]

    def check(c):
        # different accumulation order -> a bf16 logit may round differently: ids may differ only
        # between near-ties (exact logits within 2 bf16 ulps)
        w = ws[0]
        exact = h.double() @ w.double().t()
        ours_ids = lt.lm_head_topk(h, w, k, probs="one" if k == 1 else "softmax", config=c).ids
        sg_ids = (h @ w.t()).float().topk(k, dim=-1).indices
        eo, es = exact.gather(1, ours_ids), exact.gather(1, sg_ids)
        ulp = torch.ldexp(torch.ones_like(es), torch.frexp(es.abs().clamp_min(1e-30))[1] - 8)
        ok = bool(((eo - es).abs() <= 2 * ulp).all())
        same = float((ours_ids == sg_ids).float().mean())
        return ok, f"ids identical {same:.3f}, rest near-ties: {ok}"
    return Case(ws, ours, up, cands, check, "SGLang draft tail (matmul, .float(), top-k, d2t)")


def draft_topk(m, sg, cc, sms, quick, tp) -> Case:
    from ..ops import draft_topk as dt

    V, bs, k = m["shape"]["V"], m["shape"]["bs"], m["shape"]["k"]
    g = torch.Generator(device=DEV).manual_seed(3)
    base = torch.randn(bs, V, device=DEV, generator=g) * 3
    if k > 1:
        base = torch.softmax(base, -1)
    items = copies_past_l2(lambda i: base.clone(), base.numel() * 4)
    pos = torch.zeros(bs, dtype=torch.long, device=DEV)
    if k == 1:
        topk1 = sg.topk1.draft_topk1_postprocess
        ours = lambda c: (lambda x: dt.draft_topk1(x, pos, config=c))  # noqa: E731
        up, name = (lambda x: topk1(x, pos)), "SGLang draft_topk1_postprocess"
    else:
        ours = lambda c: (lambda x: dt.topk_rows(x, k, config=c))  # noqa: E731
        up, name = (lambda x: torch.topk(x, k, dim=-1)), "torch.topk (SGLang fast_topk)"

    def check(c):
        x = base.clone()
        x[0, 5] = float("nan")
        if k == 1:
            pa, pb = torch.arange(bs, device=DEV), torch.arange(bs, device=DEV)
            ta = torch.zeros(bs, 3, dtype=torch.long, device=DEV)
            tb = ta.clone()
            va, ia = dt.draft_topk1(x, pa, ta, 1, config=c)
            vb, ib = sg.topk1.draft_topk1_postprocess(x, pb, tb, 1)
            ok = torch.equal(ia, ib) and torch.equal(va, vb) and torch.equal(pa, pb) and torch.equal(ta, tb)
            return bool(ok), f"ids/probs/positions/draft tokens equal SGLang's (NaN row included): {bool(ok)}"
        x = base
        v, i = dt.topk_rows(x, k, config=c)
        tv, ti = torch.topk(x, k, dim=-1)
        ok = torch.equal(v, tv) and torch.equal(x.gather(1, i), v)
        return bool(ok), f"values equal torch.topk, ids hold them: {bool(ok)}; ids identical {float((i == ti).float().mean()):.3f}"
    return Case(items, ours, up, search.topk(V, quick), check, name)


# ------------------------------------------------------------------------------------ verify


def _tree(bs, n, topk, depth, seed=0):
    from ..ops.verify_greedy import random_tree_parents, tree_from_parents

    rng = random.Random(seed * 7919 + bs * 31 + n)
    parents = [random_tree_parents(rng, n, topk, depth) for _ in range(bs)]
    ridx, nxt, sib = tree_from_parents(parents, device=DEV)
    return ridx, nxt, sib, torch.tensor(parents, device=DEV).clamp_min(0), depth + 1


def _follow(choice, par, p_follow, V, seed):
    g = torch.Generator(device=DEV).manual_seed(seed)
    bs, n = par.shape
    rnd = torch.randint(0, V, (bs, n), device=DEV, generator=g)
    keep = torch.rand((bs, n), device=DEV, generator=g) < p_follow
    return torch.where(keep, torch.gather(choice, 1, par), rnd)


def _outs(bs, n, s):
    return (torch.zeros(bs * n, dtype=torch.int32, device=DEV), torch.full((bs, s), -1, dtype=torch.int32, device=DEV),
            torch.zeros(bs, dtype=torch.int32, device=DEV))


def _greedy(m, tree_shape):
    bs, n, V = m["shape"]["bs"], m["shape"]["n"], m["shape"]["vocab"]
    ridx, nxt, sib, par, s = _tree(bs, n, *tree_shape)
    g = torch.Generator(device=DEV).manual_seed(1)
    logits = torch.randn(bs * n, V, device=DEV, generator=g)
    cand = _follow(torch.argmax(logits, -1).view(bs, n), par, 0.7, V, 2)
    return bs, n, s, (cand, ridx, nxt, sib), logits


def argmax_verify(m, sg, cc, sms, quick, tp, tree_shape) -> Case:
    from ..ops.argmax_verify import argmax_verify_greedy

    bs, n, s, tree, logits = _greedy(m, tree_shape)
    items = copies_past_l2(lambda i: logits if i == 0 else logits.clone(), logits.numel() * 4)
    o = _outs(bs, n, s)
    ours = lambda c: (lambda lg: argmax_verify_greedy(*o, *tree, lg, config=c))  # noqa: E731
    up = lambda lg: sg.tree.verify_tree_greedy(*o, *tree, torch.argmax(lg, -1).view(bs, n))  # noqa: E731

    def check(c):
        lg = logits.clone()
        lg[0, 7] = float("nan") if bs * n > 1 else lg[0, 7]
        ref, mine = _outs(bs, n, s), _outs(bs, n, s)
        sg.tree.verify_tree_greedy(*ref, *tree, torch.argmax(lg, -1).view(bs, n))
        argmax_verify_greedy(*mine, *tree, lg, config=c)
        ok = all(torch.equal(a, b) for a, b in zip(ref, mine))
        return ok, f"predicts/accept_index/accept_num equal SGLang's: {ok}; accepted/request {float(ref[2].float().mean()):.2f}"
    return Case(items, ours, up, search.argmax_verify(bs * n, sms, quick), check, "torch.argmax + SGLang verify_tree_greedy")


def verify_greedy(m, sg, cc, sms, quick, tp, tree_shape) -> Case:
    from ..ops.verify_greedy import verify_tree_greedy

    bs, n, s, tree, logits = _greedy(m, tree_shape)
    tp_ = torch.argmax(logits, -1).view(bs, n)
    del logits
    items = copies_past_l2(lambda i: tp_.clone(), tp_.numel() * 8, cap=16)
    o = _outs(bs, n, s)
    ours = lambda c: (lambda t: verify_tree_greedy(*o, *tree, t, config=c))  # noqa: E731
    up = lambda t: sg.tree.verify_tree_greedy(*o, *tree, t)  # noqa: E731

    def check(c):
        ref, mine = _outs(bs, n, s), _outs(bs, n, s)
        sg.tree.verify_tree_greedy(*ref, *tree, tp_)
        verify_tree_greedy(*mine, *tree, tp_, config=c)
        ok = all(torch.equal(a, b) for a, b in zip(ref, mine))
        return ok, f"outputs equal SGLang's: {ok}"
    return Case(items, ours, up, search.verify_greedy(n, quick), check, "SGLang verify_tree_greedy")


def tree_sampling(m, sg, cc, sms, quick, tp, tree_shape) -> Case:
    from ..ops.tree_sampling import tree_speculative_sampling

    bs, n, V = m["shape"]["bs"], m["shape"]["n"], m["shape"]["vocab"]
    ridx, nxt, sib, par, s = _tree(bs, n, *tree_shape)
    g = torch.Generator(device=DEV).manual_seed(3)
    logits = torch.randn(bs, n, V, device=DEV, generator=g)
    logits.scatter_add_(2, torch.randint(0, V, (bs, n, 2), device=DEV, generator=g), torch.full((bs, n, 2), 13.0, device=DEV))
    probs = torch.softmax(logits, -1)
    del logits
    top = probs.topk(3, -1).indices
    which = torch.randint(0, 3, (bs, n, 1), device=DEV, generator=g)
    cand = _follow(torch.gather(top, 2, which).squeeze(2), par, 0.6, V, 4)
    coins = torch.rand(bs, n, device=DEV, generator=g)
    final = torch.rand(bs, device=DEV, generator=g)
    tree = (cand, ridx, nxt, sib, coins, final)
    items = copies_past_l2(lambda i: probs if i == 0 else probs.clone(), probs.numel() * 4)
    o, d = _outs(bs, n, s), torch.zeros_like(probs)
    ours = lambda c: (lambda p: tree_speculative_sampling(*o, *tree, p, d, 1.0, 1.0, True, config=c))  # noqa: E731
    up = lambda p: sg.sampling.tree_speculative_sampling_target_only(*o, *tree, p, d, 1.0, 1.0, True)  # noqa: E731

    def check(c):
        ref, mine = _outs(bs, n, s), _outs(bs, n, s)
        d_ref, d_mine = torch.zeros_like(probs), torch.zeros_like(probs)
        sg.sampling.tree_speculative_sampling_target_only(*ref, *tree, probs, d_ref, 1.0, 1.0, True)
        tree_speculative_sampling(*mine, *tree, probs, d_mine, 1.0, 1.0, True, config=c)
        slots = ref[1].gather(1, ref[2].long().unsqueeze(1)).squeeze(1).long()
        p_ref, p_mine = ref[0].clone(), mine[0].clone()
        same_final = float((p_ref[slots] == p_mine[slots]).float().mean())
        p_ref[slots], p_mine[slots] = 0, 0
        ok = (torch.equal(ref[1], mine[1]) and torch.equal(ref[2], mine[2]) and torch.equal(d_ref, d_mine)
              and torch.equal(p_ref, p_mine))
        return bool(ok), f"accept path/draft probs equal SGLang's: {bool(ok)}; final draw equal {same_final:.3f}"
    return Case(items, ours, up, search.tree_sampling(n, quick), check,
                "SGLang tree_speculative_sampling_target_only")


BUILDERS = {"lm_head_gemv": lm_head_gemv, "lm_head_topk": lm_head_topk, "draft_topk": draft_topk,
            "argmax_verify": argmax_verify, "verify_greedy": verify_greedy, "tree_sampling": tree_sampling}
