"""Triton tree rejection sampling vs the JIT CUDA tree_speculative_sampling_target_only (CUDA only).

Identical accepted paths, accept counts, accepted predicts and draft_probs side effects on the same
inputs; with dyadic probabilities (every fp32 sum exact) the final draw is identical too. A chi-square
test checks the emitted tokens of both kernels against the law of SGLang's target-only rule.
"""

import random
import unittest
from unittest import mock

from sglang.test.ci.ci_register import register_cuda_ci

register_cuda_ci(est_time=120, stage="base-b", runner_config="1-gpu-small")
register_cuda_ci(est_time=120, stage="base-b", runner_config="1-gpu-5090")

import torch

HAS_CUDA = torch.cuda.is_available()


def _inputs(bs, n, vocab, topk, depth, seed, dyadic):
    from sglang.kernels.ops.speculative.tree_sampling_triton import (
        random_tree_parents,
        tree_from_parents,
    )

    rng = random.Random(seed)
    g = torch.Generator().manual_seed(seed)
    ridx, nxt, sib = tree_from_parents(
        [random_tree_parents(rng, n, topk, depth) for _ in range(bs)]
    )
    if dyadic:  # probabilities k / 2^10: every fp32 sum is exact, the draw must match bit for bit
        w = torch.randint(0, 4, (bs, n, vocab), generator=g).float()
        w[..., 0] += 1
        w = torch.floor(w / w.sum(-1, keepdim=True) * 1024) / 1024
        w[..., 0] += 1 - w.sum(-1)
        tp = w
        dp = torch.roll(w, 1, dims=-1)
    else:
        tp = torch.softmax(torch.randn(bs, n, vocab, generator=g) * 4, -1)
        dp = torch.softmax(torch.randn(bs, n, vocab, generator=g) * 4, -1)
    # draft tokens: often the target's argmax so that paths get accepted
    cand = torch.where(
        torch.rand(bs, n, generator=g) < 0.6,
        tp.argmax(-1),
        torch.randint(0, vocab, (bs, n), generator=g),
    )
    us = torch.rand(bs, n, generator=g)
    uf = torch.rand(bs, generator=g)
    return [t.cuda() for t in (cand, ridx, nxt, sib, us, uf, tp, dp)]


def _run(fn, bs, n, depth, inputs, **kw):
    cand, ridx, nxt, sib, us, uf, tp, dp = inputs
    p = torch.full((bs * n,), -7, dtype=torch.int32, device="cuda")
    a = torch.full((bs, depth + 1), -7, dtype=torch.int32, device="cuda")
    k = torch.full((bs,), -7, dtype=torch.int32, device="cuda")
    d = dp.clone()
    fn(p, a, k, cand, ridx, nxt, sib, us, uf, tp, d, **kw)
    return p, a, k, d


@unittest.skipUnless(HAS_CUDA, "needs a CUDA GPU")
class TestTreeSamplingTritonVsCuda(unittest.TestCase):
    def setUp(self):
        from sglang.kernels.ops.speculative.sampling import (
            tree_speculative_sampling_target_only,
        )
        from sglang.kernels.ops.speculative.tree_sampling_triton import (
            tree_speculative_sampling_triton,
        )

        self.cuda, self.triton = tree_speculative_sampling_target_only, tree_speculative_sampling_triton

    def _compare(self, bs, n, vocab, topk, depth, seed, dyadic, **kw):
        inputs = _inputs(bs, n, vocab, topk, depth, seed, dyadic)
        p1, a1, k1, d1 = _run(self.cuda, bs, n, depth, inputs, **kw)
        p2, a2, k2, d2 = _run(self.triton, bs, n, depth, inputs, **kw)
        self.assertTrue(torch.equal(a1, a2), "accept_index")
        self.assertTrue(torch.equal(k1, k2), "accept_token_num")
        self.assertTrue(torch.equal(d1, d2), "draft_probs side effect")
        # predicts: accepted draft tokens at every path node but the last, which holds the draw
        path = a1[a1 >= 0].long()
        last = a1.gather(1, k1.long()[:, None]).squeeze(1).long()
        inner = path[~torch.isin(path, last)]
        self.assertTrue(torch.equal(p1[inner], p2[inner]), "accepted predicts")
        same = (p1[last] == p2[last]).float().mean().item()
        if dyadic:
            self.assertEqual(same, 1.0, "final draw")
        else:  # CUB's scan vs a fixed tile order: only draws within fp32 rounding of a boundary differ
            self.assertGreaterEqual(same, 0.9, "final draw")
        return k1

    def test_chain_and_trees_match_the_cuda_kernel(self):
        for bs, n, topk, depth in ((1, 4, 1, 3), (7, 4, 1, 3), (64, 16, 4, 4), (3, 8, 2, 3)):
            for vocab in (163840, 1000):
                for dyadic in (True, False):
                    with self.subTest(bs=bs, n=n, vocab=vocab, dyadic=dyadic):
                        self._compare(bs, n, vocab, topk, depth, bs * 31 + n, dyadic)

    def test_thresholds(self):
        self._compare(16, 4, 32000, 1, 3, 5, True, threshold_single=0.5, threshold_acc=0.7)

    def test_emitted_tokens_follow_the_target_distribution(self):
        """Chi-square of the tokens each request emits (up to three, 36 bins) against the rule's law,
        for SGLang's kernel and this one. The inputs are what eagle_sample passes (draft_probs zero:
        target-only treats each draft token as a point mass); under that rule every emitted token
        follows the target row it is drawn from (emission_law in tree_sampling_triton, checked on CPU
        against a numpy port of the CUDA kernel). The coins are fixed (EMISSION_SEED): on them the
        reference passes (checked on CPU), so a kernel fails here only where it departs from the rule."""
        from scipy import stats

        from sglang.kernels.ops.speculative.tree_sampling_triton import (
            EMISSION_ROWS,
            EMISSION_SEED,
            emission_case,
            emission_counts,
            emitted_tokens,
        )

        rows = EMISSION_ROWS
        inputs, s, law = emission_case(rows, seed=EMISSION_SEED, device="cuda")
        pvals = {}
        for fn in (self.cuda, self.triton):  # both kernels before any assertion
            preds, acc, k, _ = _run(fn, rows, inputs[0].shape[1], s - 1, inputs)
            observed, expected = emission_counts(emitted_tokens(preds.cpu(), acc.cpu(), k.cpu()), law)
            pvals[fn.__name__] = stats.chisquare(observed, expected * rows).pvalue
        print("emitted-token chi-square p-values:", {name: f"{pv:.3g}" for name, pv in pvals.items()})
        for name, pval in pvals.items():
            self.assertGreaterEqual(pval, 1e-3, f"{name}: emitted tokens differ from the law (p = {pval:.2e})")

    def test_repeated_calls_relaunch_without_the_binder(self):
        """The default config on CUDA: the first call of an operand signature records its launch
        (replay_launches), later calls relaunch it on new tensors without Triton's binder, and every call
        matches the CUDA kernel bit for bit (dyadic probabilities)."""
        import triton.runtime.jit as jit

        from sglang.kernels.ops.speculative import tree_sampling_triton as ts

        if ts._replayed() is None:
            self.skipTest("kernels/ops/diffusion/common/fast_launch.py does not import here")
        binder_calls = []
        run = jit.JITFunction.run

        def counting(fn, *args, **kwargs):
            if not kwargs.get("warmup"):
                binder_calls.append(fn)
            return run(fn, *args, **kwargs)

        with mock.patch.object(jit.JITFunction, "run", counting):
            for seed in range(4):
                inputs = _inputs(5, 4, 163840, 1, 3, 100 + seed, True)
                want = _run(self.cuda, 5, 4, 3, inputs)
                got = _run(self.triton, 5, 4, 3, inputs)
                for name, x, y in zip(("predicts", "accept_index", "accept_token_num", "draft_probs"), want, got):
                    self.assertTrue(torch.equal(x, y), f"call {seed}: {name}")
                if seed == 0:
                    first = len(binder_calls)
        self.assertLessEqual(first, 1, "the first call: one launch through the binder, recorded")
        self.assertEqual(len(binder_calls), first, "a later call of the same signature went through the binder")

    def test_dispatcher_is_what_eagle_sample_calls(self):
        from sglang.kernels.ops.speculative import verify_sampling

        op = verify_sampling.tree_speculative_sampling_target_only
        self.assertIs(op.cuda_kernel, self.cuda)
        inputs = _inputs(4, 4, 163840, 1, 3, 11, True)
        self.assertTrue(
            all(torch.equal(x, y) for x, y in zip(_run(op, 4, 4, 3, inputs), _run(self.cuda, 4, 4, 3, inputs)))
        )


if __name__ == "__main__":
    unittest.main()
