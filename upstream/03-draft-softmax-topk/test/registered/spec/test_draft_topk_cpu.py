"""Triton draft top-k vs torch under TRITON_INTERPRET=1 (CPU), and the dispatch rule."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton compiles anything

import unittest
from unittest import mock

import torch

from sglang.test.ci.ci_register import register_cpu_ci

register_cpu_ci(est_time=40, suite="base-a-test-cpu")


class TestDraftTopkCpu(unittest.TestCase):
    def test_probs_topk_equals_torch_topk(self):
        from sglang.kernels.ops.speculative.draft_topk import draft_probs_topk

        g = torch.Generator().manual_seed(0)
        for bs, vocab, k, block in ((3, 1000, 4, None), (2, 5000, 8, 1024), (1, 37, 2, None)):
            probs = torch.softmax(torch.randn(bs, vocab, generator=g), -1)
            cfg = {"BLOCK": block, "num_warps": 4} if block else None
            vals, ids = draft_probs_topk(probs, k, config=cfg)  # block 1024: split over CTAs
            ref_vals, ref_ids = torch.topk(probs, k, dim=-1)
            self.assertTrue(torch.equal(vals, ref_vals), (bs, vocab, k))
            self.assertTrue(torch.equal(probs.gather(1, ids), vals))  # every id holds its value

    def test_ties_go_to_the_lowest_index_and_nan_ranks_first(self):
        from sglang.kernels.ops.speculative.draft_topk import draft_probs_topk

        x = torch.tensor([[0.1, 0.3, 0.3, 0.2, 0.3], [0.1, float("nan"), 0.5, 0.2, 0.0]])
        vals, ids = draft_probs_topk(x, 3)
        self.assertEqual(ids[0].tolist(), [1, 2, 4])
        self.assertEqual(ids[1, 0].item(), 1)
        self.assertTrue(torch.isnan(vals[1, 0]))

    def test_fused_softmax_topk(self):
        from sglang.kernels.ops.speculative.draft_topk import draft_softmax_topk

        g = torch.Generator().manual_seed(1)
        logits = torch.randn(4, 3000, generator=g) * 3
        probs, ids = draft_softmax_topk(logits, 4, config={"BLOCK": 1024, "num_warps": 4})
        ref_vals, ref_ids = torch.topk(torch.softmax(logits, -1), 4, dim=-1)
        self.assertTrue(torch.equal(ids, ref_ids))
        torch.testing.assert_close(probs, ref_vals, rtol=1e-6, atol=0)

    def test_empty_batch(self):
        from sglang.kernels.ops.speculative.draft_topk import draft_probs_topk

        vals, ids = draft_probs_topk(torch.empty(0, 100), 4)
        self.assertEqual(tuple(vals.shape), (0, 4))

    def test_dispatch_rule(self):
        from sglang.kernels.ops.speculative import draft_topk as dt

        env, cuda = dt.ENV_BACKEND, torch.device("cuda", 0)
        with mock.patch.dict(os.environ, {env: "auto"}):
            self.assertFalse(dt.use_triton(8, 32000, 4, torch.device("cpu")))
            with mock.patch.object(dt, "_capability_major", lambda d: 9):
                self.assertTrue(dt.use_triton(32, 32000, 4, cuda))  # measured win
                self.assertFalse(dt.use_triton(32, 32000, 8, cuda))  # k 8: not measured
                self.assertFalse(dt.use_triton(256, 32000, 4, cuda))  # bs 256: not measured
                self.assertFalse(dt.use_triton(32, 151936, 4, cuda))  # vocab not measured
            with mock.patch.object(dt, "_capability_major", lambda d: 12):
                self.assertFalse(dt.use_triton(32, 32000, 4, cuda))  # SM120: no table yet
        with mock.patch.dict(os.environ, {env: "triton"}):
            self.assertTrue(dt.use_triton(8, 32000, 4, torch.device("cpu")))

    def test_worker_fast_topk_goes_through_the_dispatcher(self):
        from sglang.srt.speculative import eagle_worker_v2 as worker

        probs = torch.softmax(torch.randn(3, 500), -1)
        with mock.patch.dict(os.environ, {"SGLANG_SPEC_DRAFT_TOPK_BACKEND": "triton"}):
            with mock.patch(
                "sglang.kernels.ops.speculative.draft_topk.draft_probs_topk",
                wraps=__import__("sglang.kernels.ops.speculative.draft_topk", fromlist=["x"]).draft_probs_topk,
            ) as spy:
                vals, ids = worker.fast_topk(probs, 4, dim=-1)
        self.assertEqual(spy.call_count, 1)
        self.assertTrue(torch.equal(vals, torch.topk(probs, 4, dim=-1).values))
        v1, i1 = worker.fast_topk(probs, 1, dim=-1)  # topk 1 stays torch.max
        self.assertTrue(torch.equal(i1, probs.argmax(-1, keepdim=True)))


if __name__ == "__main__":
    unittest.main()
