"""The premise of the cheap off-state design (docs/adaptive.md, "The off-state"): SGLang's steps-0 verify (one token
per request, an all-true mask) through its Triton EXTEND kernel computes the attention its DECODE kernel computes over
the same KV, the prefix plus the token's own slot (MLA shapes: 576-wide keys, 512-wide values, one KV head). Equal
within float rounding, not bit for bit (the reduction orders differ); both against an fp32 torch reference.

SGLang's own kernels, on the kernel tests' device (test/kernel_device.py): compiled on a GPU, Triton's interpreter on
the CPU. fp32 pools: the interpreter misreads bf16 pools through index tensors (garbage from both kernels alike)."""

import kernel_device
import pytest
import torch

H, DK, DV, SPLITS = 8, 576, 512, 4


@pytest.mark.parametrize("seq", [[1, 7, 33], [64, 2]])
def test_one_token_verify_through_the_extend_kernel_is_a_decode(seq):
    from sglang.kernels.ops.attention.decode_attention import decode_attention_fwd
    from sglang.kernels.ops.attention.extend_attention import extend_attention_fwd

    dev, f32, i32 = kernel_device.DEVICE_NAME, torch.float32, torch.int32
    g = torch.Generator().manual_seed(sum(seq))
    bs, tot = len(seq), sum(seq) + len(seq)
    kbuf = torch.randn(tot + 5, 1, DK, generator=g)
    vbuf = kbuf[..., :DV].contiguous()
    q = torch.randn(bs, H, DK, generator=g)
    perm = torch.randperm(tot + 5, generator=g)[:tot]
    idx, start = [], 0
    for s in seq:  # request r's prefix slots, then its verify token's slot (written before attention, as SGLang does)
        idx.append(perm[start:start + s + 1])
        start += s + 1
    sm = DK ** -0.5

    def cum(xs):
        return torch.tensor([0, *torch.cumsum(torch.tensor(xs), 0).tolist()], dtype=i32)

    o_d = torch.zeros(bs, H, DV)
    decode_attention_fwd(q.to(dev), kbuf.to(dev), vbuf.to(dev), o_dev := o_d.to(dev), cum([s + 1 for s in seq]).to(dev),
                         torch.cat(idx).to(dev), torch.empty(bs, H, SPLITS, DV, dtype=f32, device=dev),
                         torch.empty(bs, H, SPLITS, dtype=f32, device=dev), torch.full((bs,), SPLITS, dtype=i32, device=dev),
                         SPLITS, sm, 1.0, 1.0, has_mla=True)
    o_d = o_dev.cpu()
    k_ext = torch.stack([kbuf[i[-1]] for i in idx])
    o_e = torch.zeros(bs, H, DV).to(dev)
    extend_attention_fwd(q.to(dev), k_ext.to(dev), k_ext[..., :DV].contiguous().to(dev), o_e, kbuf.to(dev), vbuf.to(dev),
                         torch.arange(bs + 1, dtype=i32).to(dev), cum(seq).to(dev),
                         torch.cat([i[:-1] for i in idx]).to(dev), torch.ones(tot, dtype=torch.bool, device=dev), False,
                         cum([s + 1 for s in seq]).to(torch.int64).to(dev), 1, 1.0, 1.0, sm_scale=sm)
    o_e = o_e.cpu()
    ref = torch.stack([torch.softmax(q[r] @ kbuf[idx[r], 0].T * sm, -1) @ vbuf[idx[r], 0] for r in range(bs)])
    # Triton's tl.dot takes fp32 operands as TF32 on an NVIDIA GPU (errors up to about 2e-3 on the H200, 2026-12-03)
    tol = dict(rtol=1e-2, atol=5e-3) if kernel_device.ON_GPU else dict(rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(o_d, ref, **tol)
    torch.testing.assert_close(o_e, ref, **tol)
    torch.testing.assert_close(o_d, o_e, **tol)
