"""TritonAttnBackend's one-token TARGET_VERIFY as a DECODE over seq_lens + 1, on CUDA with compiled Triton kernels:
the CPU test's cases (test_triton_one_token_verify_cpu.py) on the GPU, where the extend and decode kernels run their
dots in TF32 (against each other and against torch: within 5e-3; the hooked verify still equals forward_decode)."""

import os

os.environ["TRITON_INTERPRET"] = "0"  # compiled kernels, before triton is imported (the CPU file sets it to 1)

import unittest

import torch
from test_triton_one_token_verify_cpu import TestTritonOneTokenVerifyCpu

from sglang.test.ci.ci_register import register_cuda_ci

register_cuda_ci(est_time=30, stage="base-b", runner_config="1-gpu-small")
register_cuda_ci(est_time=30, stage="base-b", runner_config="1-gpu-5090")


@unittest.skipUnless(torch.cuda.is_available(), "needs a CUDA GPU")
class TestTritonOneTokenVerifyCuda(TestTritonOneTokenVerifyCpu):
    DEVICE = "cuda"
    TOL = dict(rtol=5e-3, atol=5e-3)


del TestTritonOneTokenVerifyCpu  # the CPU cases run from their own file

if __name__ == "__main__":
    unittest.main()
