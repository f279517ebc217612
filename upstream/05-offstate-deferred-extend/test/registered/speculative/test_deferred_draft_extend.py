"""EAGLE's deferred steps-0 draft extend on CUDA with compiled Triton kernels: the CPU test's
cases (test_deferred_draft_extend_cpu.py) on the GPU, where the draft extend prepares its
inputs with its CUDA kernels (prepare_draft_extend_inputs, the fused layout) and attends
with the compiled extend kernel; every comparison stays bit for bit."""

import os

os.environ["TRITON_INTERPRET"] = (
    "0"  # compiled kernels, before triton is imported (the CPU file sets it to 1)
)

import unittest

import torch
from test_deferred_draft_extend_cpu import TestDeferredDraftExtendCpu

from sglang.test.ci.ci_register import register_cuda_ci

register_cuda_ci(est_time=30, stage="base-b", runner_config="1-gpu-small")
register_cuda_ci(est_time=30, stage="base-b", runner_config="1-gpu-5090")


@unittest.skipUnless(torch.cuda.is_available(), "needs a CUDA GPU")
class TestDeferredDraftExtendCuda(TestDeferredDraftExtendCpu):
    DEVICE = "cuda"


del TestDeferredDraftExtendCpu  # the CPU cases run from their own file

if __name__ == "__main__":
    unittest.main()
