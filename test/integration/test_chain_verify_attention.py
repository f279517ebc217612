"""The premise of running a chain verify's attention as decodes (benchmark/kernels/bench_verify_attention.py): for a
chain of N tokens a request, SGLang's Triton EXTEND kernel with the chain's custom mask (the target verify's path for
an MLA model) computes what its DECODE kernel computes over N queries a request whose KV lengths run prefix + 1 ..
prefix + N. Both against an fp32 torch reference, MLA shapes (576-wide keys, 512-wide values, one KV head).

SGLang's own kernels on the kernel tests' device (test/kernel_device.py): compiled on a GPU, Triton's interpreter on
the CPU (fp32 pools there: the interpreter misreads bf16 pools through index tensors)."""

import kernel_device
import pytest
import torch
from benchmark.kernels import bench_verify_attention as bva


@pytest.mark.parametrize("prefix,n", [([5, 17], 3), ([1, 40, 9], 4), ([64], 2)])
def test_a_chain_verify_through_the_extend_kernel_is_n_decodes_a_request(prefix, n):
    dtype = torch.bfloat16 if kernel_device.ON_GPU else torch.float32
    c = bva.chain(prefix, n, heads=4, dtype=dtype, device=kernel_device.DEVICE_NAME, seed=sum(prefix) + n)
    ref = bva.reference(c).cpu()
    o_e, o_d = bva.extend(c).float().cpu(), bva.decode(c).float().cpu()
    # bf16 on a GPU (and TF32 dots), fp32 in the interpreter
    tol = dict(rtol=3e-2, atol=2e-2) if kernel_device.ON_GPU else dict(rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(o_e, ref, **tol)
    torch.testing.assert_close(o_d, ref, **tol)


def test_the_chains_mask_is_causal_over_its_own_tokens_only():
    """The builder's mask: every query sees the whole prefix, and the chain's tokens up to its own (a query that saw
    the next token would make the two kernels agree on a wrong attention)."""
    c = bva.chain([3, 2], 3, heads=1)
    mask, offs = bva.extend_args(c)[9], bva.extend_args(c)[11].tolist()
    first = mask[offs[0]:offs[1]].view(3, 6)
    assert first[:, :3].all() and first[:, 3:].tolist() == [[True, False, False], [True, True, False], [True, True, True]]
    assert bva.decode_args(c)[4].tolist() == [0, 4, 9, 15, 18, 22, 27]  # KV lengths prefix + 1 .. prefix + N
