"""Triton draft top-k vs torch.topk / softmax + torch.topk on the GPU (the worker's topk > 1 path)."""

import unittest

from sglang.test.ci.ci_register import register_cuda_ci

register_cuda_ci(est_time=60, stage="base-b", runner_config="1-gpu-small")
register_cuda_ci(est_time=60, stage="base-b", runner_config="1-gpu-5090")

import torch

HAS_CUDA = torch.cuda.is_available()


@unittest.skipUnless(HAS_CUDA, "needs a CUDA GPU")
class TestDraftTopkVsTorch(unittest.TestCase):
    def test_probs_topk_equals_torch_topk(self):
        from sglang.kernels.ops.speculative.draft_topk import draft_probs_topk

        g = torch.Generator(device="cuda").manual_seed(0)
        for bs in (1, 7, 32, 128):
            for vocab in (4000, 32000, 32001):
                for k in (2, 4, 8):
                    logits = torch.randn(bs, vocab, device="cuda", generator=g, dtype=torch.bfloat16)
                    probs = torch.softmax(logits.float(), -1)
                    vals, ids = draft_probs_topk(probs, k)
                    ref_vals, _ = torch.topk(probs, k, dim=-1)
                    self.assertTrue(torch.equal(vals, ref_vals), (bs, vocab, k))
                    self.assertTrue(torch.equal(probs.gather(1, ids), vals))

    def test_fused_softmax_topk_matches_softmax_then_topk(self):
        from sglang.kernels.ops.speculative.draft_topk import draft_softmax_topk

        logits = torch.randn(64, 32000, device="cuda") * 4
        probs, ids = draft_softmax_topk(logits, 4)
        ref = torch.softmax(logits, -1)
        torch.testing.assert_close(probs, torch.topk(ref, 4, dim=-1).values, rtol=1e-6, atol=0)
        torch.testing.assert_close(ref.gather(1, ids), probs, rtol=1e-6, atol=0)

    def test_cuda_graph_replay(self):
        from sglang.kernels.ops.speculative.draft_topk import draft_probs_topk

        probs = torch.softmax(torch.randn(32, 32000, device="cuda"), -1)
        draft_probs_topk(probs, 4)  # eager first: allocates the row counters
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            vals, ids = draft_probs_topk(probs, 4)
        probs.copy_(torch.softmax(torch.randn(32, 32000, device="cuda"), -1))
        graph.replay()
        self.assertTrue(torch.equal(vals, torch.topk(probs, 4, dim=-1).values))

    def test_worker_uses_the_dispatcher(self):
        from sglang.srt.speculative import eagle_worker_v2 as worker

        probs = torch.softmax(torch.randn(8, 32000, device="cuda"), -1)
        vals, ids = worker.fast_topk(probs, 4, dim=-1)
        self.assertTrue(torch.equal(vals, torch.topk(probs, 4, dim=-1).values))


if __name__ == "__main__":
    unittest.main()
