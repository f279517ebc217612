"""lm_head_gemv against lm_head_gemv_ref (CPU: Triton interpreter; the same tests run compiled on a GPU)."""

import pytest
import torch
import triton
import triton.language as tl

from sglang_kimi_eagle3.ops.lm_head_gemv import lm_head_gemv, lm_head_gemv_ref, round_16bit, semaphores

from kernel_device import device

DEV = device()  # the session device (CUDA, else CPU + Triton interpreter)
# (dtype, atol, rtol) for random data: one 16-bit rounding step of the output
TOL = [(torch.bfloat16, 2e-2, 1.6e-2), (torch.float16, 2e-3, 2e-3)]
# (bs, R, H, config): batch 0/1/odd, R not a multiple of BLOCK_R, H small / not a multiple of
# BLOCK_K / 7168; stream-K programs that split row blocks (2-5 partials) or own whole ones; several
# batch blocks
SHAPES = [
    (0, 50, 64, {}),
    (1, 100, 256, {"PROGRAMS": 3, "BLOCK_K": 64}),
    (5, 70, 200, {"PROGRAMS": 5, "BLOCK_K": 32, "BLOCK_R": 32}),
    (3, 130, 7168, {}),
    (17, 65, 64, {"BLOCK_K": 64, "PROGRAMS": 1}),
    (33, 40, 128, {"BLOCK_K": 32, "BLOCK_B": 32, "PROGRAMS": 3}),
]


def _exact_inputs(bs, R, H, dtype, gen):
    """Multiples of 1/8 and 1/64: every product and partial sum is exact in fp32, so the kernel's
    result must equal the reference bit for bit whatever its summation order."""
    h = (torch.randint(-4, 5, (bs, H), generator=gen) / 8).to(dtype)
    w = (torch.randint(-8, 9, (R, H), generator=gen) / 64).to(dtype)
    return h.to(DEV), w.to(DEV)


def _sems_clear():
    """The counters the kernels just used are back at 0 (the buffer they use: keyed like DEV)."""
    return int(semaphores(DEV, 1).abs().sum()) == 0


@pytest.mark.parametrize("bs,R,H,cfg", SHAPES)
@pytest.mark.parametrize("dtype,atol,rtol", TOL)
def test_random_matches_ref(bs, R, H, cfg, dtype, atol, rtol):
    gen = torch.Generator().manual_seed(bs * 1000 + R)
    h = torch.randn(bs, H, generator=gen).to(dtype).to(DEV)
    w = (torch.randn(R, H, generator=gen) * 0.05).to(dtype).to(DEV)
    out = lm_head_gemv(h, w, config=cfg)
    assert out.dtype == dtype and out.shape == (bs, R)
    torch.testing.assert_close(out.float(), lm_head_gemv_ref(h, w).float(), atol=atol, rtol=rtol)
    fp32 = lm_head_gemv(h, w, out_dtype=torch.float32, config=cfg)
    torch.testing.assert_close(fp32, lm_head_gemv_ref(h, w, torch.float32), atol=1e-4, rtol=1e-4)
    assert _sems_clear()


@pytest.mark.parametrize("bs,R,H,cfg", SHAPES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_exact_inputs_bitwise(bs, R, H, cfg, dtype):
    h, w = _exact_inputs(bs, R, H, dtype, torch.Generator().manual_seed(7 + bs))
    for out_dtype, round_to in ((None, None), (torch.float32, dtype), (torch.float32, None)):
        out = lm_head_gemv(h, w, out_dtype=out_dtype, round_to=round_to, config=cfg)
        assert torch.equal(out, lm_head_gemv_ref(h, w, out_dtype, round_to)), (out_dtype, round_to)
    assert _sems_clear()


def test_out_buffer_written_and_returned():
    h, w = _exact_inputs(4, 90, 128, torch.bfloat16, torch.Generator().manual_seed(1))
    out = torch.full((4, 90), float("nan"), device=DEV)  # poisoned: every element must be written
    ret = lm_head_gemv(h, w, out=out, round_to=torch.bfloat16, config={"PROGRAMS": 3, "BLOCK_K": 64})
    assert ret is out and torch.equal(out, lm_head_gemv_ref(h, w, torch.float32, torch.bfloat16))


def test_nan_and_inf_rows():
    gen = torch.Generator().manual_seed(3)
    h = torch.randn(4, 96, generator=gen).bfloat16().to(DEV)
    w = (torch.randn(50, 96, generator=gen) * 0.1).bfloat16().to(DEV)
    h[1, 5] = float("nan")
    h[2, 7] = float("inf")
    h[3] = float("-inf")
    for out_dtype, round_to in ((torch.float32, None), (torch.bfloat16, None), (torch.float32, torch.bfloat16)):
        out = lm_head_gemv(h, w, out_dtype=out_dtype, round_to=round_to, config={"BLOCK_K": 32, "PROGRAMS": 4})
        ref = lm_head_gemv_ref(h, w, out_dtype, round_to)
        torch.testing.assert_close(out.float(), ref.float(), atol=1e-4 if round_to is None and out_dtype == torch.float32
                                   else 2e-2, rtol=1e-4 if out_dtype == torch.float32 and round_to is None else 1.6e-2,
                                   equal_nan=True)
        assert out[1].isnan().all() and not out[0].isnan().any(), (out_dtype, round_to)


def test_deterministic_across_calls():
    gen = torch.Generator().manual_seed(5)
    h = torch.randn(3, 512, generator=gen).bfloat16().to(DEV)
    w = torch.randn(70, 512, generator=gen).bfloat16().to(DEV)
    cfg = {"PROGRAMS": 5, "BLOCK_K": 64}
    a = lm_head_gemv(h, w, out_dtype=torch.float32, config=cfg)
    assert torch.equal(a, lm_head_gemv(h, w, out_dtype=torch.float32, config=cfg))


@pytest.mark.parametrize("bad", ["dtype", "shape", "stride", "out"])
def test_guards(bad):
    h = torch.zeros(2, 64, dtype=torch.bfloat16, device=DEV)
    w = torch.zeros(10, 64, dtype=torch.bfloat16, device=DEV)
    kwargs = {}
    if bad == "dtype":
        w = w.half()
    elif bad == "shape":
        w = w[:, :32]
    elif bad == "stride":
        h = torch.zeros(64, 2, dtype=torch.bfloat16, device=DEV).t()
    else:
        kwargs["out"] = torch.empty(2, 11, device=DEV)
    with pytest.raises(ValueError):
        lm_head_gemv(h, w, **kwargs)


def test_semaphore_check_reads_the_kernels_buffer():
    """_sems_clear must inspect the counters the kernels use ('cuda' and 'cuda:0' are one buffer), and
    a counter left non-zero must be seen."""
    h, w = _exact_inputs(3, 130, 64, torch.bfloat16, torch.Generator().manual_seed(2))
    lm_head_gemv(h, w, config={"PROGRAMS": 3, "BLOCK_K": 32})
    buf = semaphores(h.device, 1)
    assert semaphores(torch.device(DEV.type), 1) is buf
    buf[5] = 1
    try:
        assert not _sems_clear()
    finally:
        buf[5] = 0
    assert _sems_clear()


@triton.jit
def _round_kernel(out_ptr, x_ptr, n, ROUND: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, round_16bit(x, ROUND), mask=offs < n)


def test_round_16bit_keeps_every_nan():
    """The GPU's canonical NaN (0x7FFFFFFF: what an MMA gives for inf * 0 or a NaN input) must stay NaN
    through the bf16 rounding; it used to carry into the sign bit and come out as -0.0, so a compiled
    lm_head_topk gave numbers for a NaN hidden row (issue 11). Other values round like torch's cast."""
    bits = torch.tensor([0x7FFFFFFF, -1, 0x7FC00000, 0x7F800001, 0xFFC00000 - 2**32, 0x7F800000,
                         0xFF800000 - 2**32, 0x3F800000, 0x3F808000, 0x3F818000, 0x7F7FFFFF, 0x00000001], dtype=torch.int64)
    x = bits.to(torch.int32).view(torch.float32).to(DEV)
    out = torch.empty_like(x)
    _round_kernel[(1,)](out, x, x.numel(), ROUND=1, BLOCK=16)
    ref = x.to(torch.bfloat16).float()
    assert torch.equal(out.isnan(), x.isnan()), f"NaN lost: {out.tolist()}"
    keep = ~x.isnan()
    assert torch.equal(out[keep], ref[keep])
