"""Triton tree rejection sampling vs its plain-torch reference under TRITON_INTERPRET=1 (CPU),
and the dispatch rule (which kernel a call gets)."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton compiles anything

import importlib.util
import random
import unittest
from pathlib import Path
from unittest import mock

import torch

from sglang.test.ci.ci_register import register_cpu_ci

register_cpu_ci(est_time=60, suite="base-a-test-cpu")


class TestTreeSamplingTritonCpu(unittest.TestCase):
    def _case(self, bs, n, vocab, topk, depth, seed, **kw):
        from sglang.kernels.ops.speculative import tree_sampling_triton as ts

        rng = random.Random(seed)
        g = torch.Generator().manual_seed(seed)
        if bs:
            ridx, nxt, sib = ts.tree_from_parents(
                [ts.random_tree_parents(rng, n, topk, depth) for _ in range(bs)]
            )
        else:
            ridx = nxt = sib = torch.empty((0, n), dtype=torch.int64)
        w = torch.randint(0, 4, (bs, n, vocab), generator=g).float()
        w[..., 0] += 1
        tp = torch.floor(w / w.sum(-1, keepdim=True) * 256) / 256  # dyadic: exact fp32 sums
        tp[..., 0] += 1 - tp.sum(-1)
        dp = torch.roll(tp, 1, dims=-1).contiguous()
        cand = torch.where(
            torch.rand(bs, n, generator=g) < 0.6,
            tp.argmax(-1),
            torch.randint(0, vocab, (bs, n), generator=g),
        )
        us, uf = torch.rand(bs, n, generator=g), torch.rand(bs, generator=g)
        outs = []
        for fn in (ts.tree_speculative_sampling_triton, ts.tree_speculative_sampling_ref):
            p = torch.full((bs * n,), -7, dtype=torch.int32)
            a = torch.full((bs, depth + 1), -7, dtype=torch.int32)
            k = torch.full((bs,), -7, dtype=torch.int32)
            d = dp.clone()
            fn(p, a, k, cand, ridx, nxt, sib, us, uf, tp, d, **kw)
            outs.append((p, a, k, d))
        for name, x, y in zip(("predicts", "accept_index", "accept_token_num", "draft_probs"), *outs):
            self.assertTrue(torch.equal(x, y), name)
        return outs[0]

    def test_chain_matches_the_reference(self):
        self._case(3, 4, 300, 1, 3, 0)

    def test_tree_over_several_tiles_matches_the_reference(self):
        _, _, k, _ = self._case(2, 8, 5000, 3, 3, 1)  # 5000 > one 4096-entry tile
        self.assertTrue(bool((k >= 0).all()))

    def test_thresholds_match_the_reference(self):
        self._case(4, 4, 64, 1, 3, 2, threshold_single=0.3, threshold_acc=0.5)

    def test_emitted_tokens_follow_the_target_distribution(self):
        """Chi-square of the emitted tokens (up to three per request, 36 bins) against the rule's law:
        a small case of the CUDA test's construction, so that CPU CI checks the construction itself."""
        from scipy import stats

        from sglang.kernels.ops.speculative import tree_sampling_triton as ts

        rows = 6000
        (cand, ridx, nxt, sib, us, uf, tp, dp), s, law = ts.emission_case(rows, seed=0)
        p = torch.zeros(rows * cand.shape[1], dtype=torch.int32)
        a = torch.full((rows, s), -1, dtype=torch.int32)
        k = torch.zeros(rows, dtype=torch.int32)
        cfg = {"walk_rows_per_program": 128, "rows_per_program": 512, "sample_rows_per_program": 512}
        ts.tree_speculative_sampling_triton(p, a, k, cand, ridx, nxt, sib, us, uf, tp, dp, config=cfg)
        observed, expected = ts.emission_counts(ts.emitted_tokens(p, a, k), law)  # raises off the law's support
        self.assertGreater(float(expected.min()) * rows, 5, "chi-square needs >= 5 expected per bin")
        pval = stats.chisquare(observed, expected * rows).pvalue
        self.assertGreaterEqual(pval, 1e-3, f"emitted tokens differ from the rule's law (p = {pval:.2e})")
        # power on these counts: a 10% shift of the mass toward the most likely sequence is rejected
        shifted = 0.9 * expected + 0.1 * (expected == expected.max()).double()
        self.assertLess(stats.chisquare(observed, shifted * rows).pvalue, 1e-3, "chi-square too weak")

    def test_benchmark_inputs_are_valid_at_large_batch(self):
        """bench_tree_sampling_triton.py's inputs at bs 128 and 256, both shapes: within the kernels'
        contract (its check_inputs, which rejects a bad index), and the walk on them matches the
        reference (small vocabulary; the interpreter raises on an out-of-range load)."""
        from sglang.kernels.ops.speculative import tree_sampling_triton as ts

        path = Path(__file__).resolve().parents[3] / "benchmark/kernels/speculative/bench_tree_sampling_triton.py"
        spec = importlib.util.spec_from_file_location("bench_tree_sampling_triton", path)
        bench = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(bench)
        for n in bench.SHAPES:
            for bs in (128, 256):
                with self.subTest(n=n, bs=bs):
                    inputs, out = bench.setup(bs, n, 1000, device="cpu")
                    bench.check_inputs(inputs, out())
        inputs, out = bench.setup(128, 16, 1000, device="cpu")
        bad = list(inputs)
        bad[0] = bad[0].clone()
        bad[0][5, 3] = 1000  # a candidate past the vocabulary
        with self.assertRaisesRegex(ValueError, "candidates"):
            bench.check_inputs(bad, out())
        bad = list(inputs)
        bad[2] = bad[2].clone()
        bad[2][7, 1] = 0  # a link back to the root
        with self.assertRaisesRegex(ValueError, "linked twice"):
            bench.check_inputs(bad, out())
        results = []
        cfg = {"walk_rows_per_program": 32, "rows_per_program": 128, "sample_rows_per_program": 128}  # interpreter speed
        for fn, kw in ((ts.tree_speculative_sampling_triton, {"config": cfg}), (ts.tree_speculative_sampling_ref, {})):
            p, a, k = out()
            fn(p, a, k, *inputs[:-1], inputs[-1].clone(), **kw)
            results.append((a, k))
        self.assertTrue(torch.equal(results[0][0], results[1][0]), "accept_index")
        self.assertTrue(torch.equal(results[0][1], results[1][1]), "accept_token_num")
        self.assertTrue(bool((results[0][1] > 0).any()), "some drafts accepted")

    def test_empty_batch(self):
        self._case(0, 4, 64, 1, 3, 3)

    def test_dispatch_rule(self):
        from sglang.kernels.ops.speculative import tree_sampling_triton as ts

        env = ts.ENV_BACKEND
        cpu = torch.device("cpu")
        with mock.patch.dict(os.environ, {env: "auto"}):
            self.assertFalse(ts.use_triton(8, 4, 163840, cpu))  # not CUDA: the CUDA kernel path
        with mock.patch.dict(os.environ, {env: "triton"}):
            self.assertTrue(ts.use_triton(8, 4, 163840, cpu))
        with mock.patch.dict(os.environ, {env: "cuda"}):
            self.assertFalse(ts.use_triton(8, 4, 163840, cpu))
        with mock.patch.object(ts, "_capability_major", lambda d: 9):
            cuda = torch.device("cuda", 0)
            with mock.patch.dict(os.environ, {env: "auto"}):
                self.assertTrue(ts.use_triton(128, 16, 163840, cuda))  # measured win on SM90
                self.assertFalse(ts.use_triton(128, 32, 163840, cuda))  # N > 16: not measured
                self.assertFalse(ts.use_triton(512, 4, 163840, cuda))  # bs > 256: not measured
                self.assertFalse(ts.use_triton(8, 4, 32000, cuda))  # vocab not measured
        with mock.patch.object(ts, "_capability_major", lambda d: 12):
            with mock.patch.dict(os.environ, {env: "auto"}):
                self.assertFalse(ts.use_triton(8, 4, 163840, torch.device("cuda", 0)))  # SM120: no table

    def test_dispatcher_hands_unsupported_calls_to_the_cuda_kernel(self):
        from sglang.kernels.ops.speculative import tree_sampling_triton as ts

        seen = []
        op = ts.tree_speculative_sampling_dispatch(lambda *a: seen.append(len(a)))
        self.assertIsNone(ts.tree_speculative_sampling_dispatch(None))
        t = torch.zeros(2, 4, 8)
        with mock.patch.dict(os.environ, {ts.ENV_BACKEND: "triton"}):
            op(*([torch.zeros(1)] * 9), t, t)  # malformed tree inputs: Unsupported -> CUDA kernel
        self.assertEqual(seen, [14])


if __name__ == "__main__":
    unittest.main()
