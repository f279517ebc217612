"""Losslessness end to end: a test-only speculative loop with tiny random torch models.

Target: a random next-token model over the last two tokens. Draft: a deliberately poor one (another
random model, lightly mixed with the target so that trees get partly accepted). Each round the draft
expands a token tree (top-k children, breadth first), the target scores every node in its context,
and our kernels verify it.
  - greedy: the emitted tokens equal plain greedy decoding with the target, token for token;
  - sampling: the first emitted token of tree_speculative_sampling is distributed as the target's
    next-token distribution (chi-square), with a stated power against a 10% distortion.
"""

import math

import pytest
import torch
from scipy import stats

from sglang_kimi_eagle3.ops.argmax_verify import argmax_verify_greedy
from sglang_kimi_eagle3.ops.tree_sampling import tree_speculative_sampling
from sglang_kimi_eagle3.ops.verify_greedy import tree_from_parents, verify_tree_greedy
from kernel_device import device, on

DEV = device()  # the models run on the CPU; every kernel input is moved here


class TinyLM:
    """logits(context) = MLP(embedding of the last two tokens); deterministic per seed."""

    def __init__(self, vocab: int, seed: int, dim: int = 16, scale: float = 3.0):
        g = torch.Generator().manual_seed(seed)
        self.emb = torch.randn(vocab, dim, generator=g)
        self.w = torch.randn(2 * dim, dim, generator=g) / math.sqrt(2 * dim)
        self.out = torch.randn(dim, vocab, generator=g) * scale / math.sqrt(dim)

    def logits(self, contexts: list[list[int]]) -> torch.Tensor:
        last2 = torch.tensor([c[-2:] for c in contexts])
        h = torch.tanh(torch.cat([self.emb[last2[:, 0]], self.emb[last2[:, 1]]], -1) @ self.w)
        return h @ self.out


class PoorDraft:
    """Mostly another random model: 30% target, 70% noise in logit space."""

    def __init__(self, target: TinyLM, vocab: int, seed: int):
        self.target, self.other = target, TinyLM(vocab, seed + 999)

    def logits(self, contexts):
        return 0.3 * self.target.logits(contexts) + 0.7 * self.other.logits(contexts)


def draft_tree(draft, seq, topk, n):
    """Breadth-first top-k expansion from the last token: (tokens, parents) of n nodes, node 0 = seq[-1]."""
    tokens, parents, paths = [seq[-1]], [-1], [[]]
    frontier = 0
    while len(tokens) < n:
        top = draft.logits([seq + paths[frontier]]).topk(topk, -1).indices[0].tolist()
        for t in top:
            if len(tokens) < n:
                tokens.append(t)
                parents.append(frontier)
                paths.append(paths[frontier] + [t])
        frontier += 1
    return tokens, parents, paths


def greedy_decode(target, prompt, steps):
    seq = list(prompt)
    for _ in range(steps):
        seq.append(int(target.logits([seq]).argmax(-1)))
    return seq[len(prompt):]


def speculative_greedy(target, draft, prompts, steps, topk, n):
    """Rounds of draft-tree + one verify for the whole batch; returns each request's first `steps` tokens."""
    seqs = [list(p) for p in prompts]
    starts = [len(p) for p in prompts]
    accepted = 0
    while min(len(s) - st for s, st in zip(seqs, starts)) < steps:
        trees = [draft_tree(draft, s, topk, n) for s in seqs]
        bs = len(seqs)
        cand = torch.tensor([t[0] for t in trees], dtype=torch.int64)
        ridx, nxt, sib = tree_from_parents([t[1] for t in trees])
        logits = target.logits([s + p for s, t in zip(seqs, trees) for p in t[2]])  # [bs*n, V]
        cand, ridx, nxt, sib, logits = on(cand, ridx, nxt, sib, logits)
        outs = []
        for use_fused in (True, False):
            pred = torch.zeros(bs * n, dtype=torch.int32, device=DEV)
            acc = torch.full((bs, n), -1, dtype=torch.int32, device=DEV)
            num = torch.empty(bs, dtype=torch.int32, device=DEV)
            if use_fused:
                argmax_verify_greedy(pred, acc, num, cand, ridx, nxt, sib, logits, config={
                    "block": 16, "splits": 2, "rows_per_program": 256, "verify_rows_per_program": 16})
            else:
                verify_tree_greedy(pred, acc, num, cand, ridx, nxt, sib, logits.argmax(-1).reshape(bs, n),
                                   config={"rows_per_program": 16})
            outs.append((pred, acc, num))
        assert all(torch.equal(a, b) for a, b in zip(*outs)), "fused and unfused greedy verify disagree"
        pred, acc, num = outs[0]
        for b in range(bs):
            seqs[b] += pred[acc[b, : int(num[b]) + 1].long()].tolist()  # accepted drafts + bonus token
        accepted += int(num.sum())
    return [s[st:st + steps] for s, st in zip(seqs, starts)], accepted


@pytest.mark.parametrize("topk,n", [(1, 4), (2, 8), (3, 13)])
def test_greedy_speculative_equals_greedy_decoding(topk, n):
    vocab, steps = 24, 12
    prompts = [[seed % vocab, (7 * seed + 3) % vocab] for seed in range(16)]  # 16 requests/seeds
    accepted, matched = 0, 0
    for model_seed in (1, 2):
        target = TinyLM(vocab, model_seed)
        draft = PoorDraft(target, vocab, model_seed)
        spec, acc = speculative_greedy(target, draft, prompts, steps, topk, n)
        for p, got in zip(prompts, spec):
            assert got == greedy_decode(target, p, steps), f"prompt {p}: speculative output differs from greedy"
            matched += 1
        accepted += acc
    # the draft is poor but not useless: drafts were accepted (else the test would be vacuous)
    assert accepted >= 16, f"only {accepted} draft tokens accepted over 32 requests"
    assert matched == 32


def chi2_pvalue(counts, probs):
    return stats.chisquare(counts, probs / probs.sum() * counts.sum()).pvalue


def test_sampling_first_token_matches_target_distribution():
    """20000 draws of the first emitted token (one request each, same tree and probabilities,
    different uniform samples) against the target distribution q at the root.

    Power, stated: the alternative is a 10% distortion toward the draft, p' = 0.9 q + 0.1 d. With
    n = 20000 and this q, d the chi-square test at alpha = 1e-3 rejects p' with probability >= 0.999
    (noncentral chi-square, computed below and asserted), and it does reject an actual sample of p'.
    """
    vocab, n_samples, alpha = 8, 20000, 1e-3
    target = TinyLM(vocab, 5, scale=1.5)
    draft = PoorDraft(target, vocab, 5)
    ctx = [3, 1]
    tokens, parents, paths = draft_tree(draft, ctx, 3, 7)  # root + 3 draft children + 3 grandchildren
    q_rows = torch.softmax(target.logits([ctx + p for p in paths]), -1)  # [n, V] target probs per node
    q = q_rows[0].double() / q_rows[0].double().sum()
    d = torch.softmax(draft.logits([ctx]).double(), -1)[0]
    assert q.min() > 0.01, "every token must be expected often enough for the chi-square approximation"

    lam = n_samples * float(((0.9 * q + 0.1 * d - q) ** 2 / q).sum())
    crit = stats.chi2.ppf(1 - alpha, vocab - 1)
    power = stats.ncx2.sf(crit, vocab - 1, lam)
    assert power >= 0.999, f"test too weak: power {power:.4f} against a 10% distortion"
    g = torch.Generator().manual_seed(0)
    distorted = torch.multinomial((0.9 * q + 0.1 * d).float(), n_samples, replacement=True, generator=g)
    assert chi2_pvalue(torch.bincount(distorted, minlength=vocab).double(), q) < alpha

    bs, n = n_samples, len(tokens)
    ridx, nxt, sib = tree_from_parents([parents] * bs)
    cand = torch.tensor(tokens, dtype=torch.int64).expand(bs, n).contiguous()
    probs = q_rows.float().expand(bs, n, vocab).contiguous()
    coins = torch.rand(bs, n, generator=g)
    final = torch.rand(bs, generator=g)
    ridx, nxt, sib, cand, probs, coins, final = on(ridx, nxt, sib, cand, probs, coins, final)
    pred = torch.zeros(bs * n, dtype=torch.int32, device=DEV)
    acc = torch.full((bs, 3), -1, dtype=torch.int32, device=DEV)
    num = torch.empty(bs, dtype=torch.int32, device=DEV)
    tree_speculative_sampling(pred, acc, num, cand, ridx, nxt, sib, coins, final, probs, torch.zeros_like(probs),
                              config={"walk_rows_per_program": 128, "rows_per_program": 1024,
                                      "sample_rows_per_program": 1024})
    first = pred[ridx[:, 0]].long().cpu()  # the token emitted right after the context
    assert 0.05 < (num > 0).float().mean() < 0.95, "both accepted drafts and residual draws must occur"
    p = chi2_pvalue(torch.bincount(first, minlength=vocab).double(), q)
    assert p >= alpha, f"first-token distribution differs from the target's (chi-square p = {p:.2e})"
