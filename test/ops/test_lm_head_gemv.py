"""lm_head_gemv against lm_head_gemv_ref (CPU: Triton interpreter; the same tests run compiled on a GPU)."""

import pytest
import torch

from sglang_kimi_eagle3.ops.lm_head_gemv import lm_head_gemv, lm_head_gemv_ref, semaphores

DEV = "cuda" if torch.cuda.is_available() else "cpu"
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
    return int(semaphores(torch.device(DEV), 1).abs().sum()) == 0


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
    out = lm_head_gemv(h, w, out_dtype=torch.float32, config={"BLOCK_K": 32, "PROGRAMS": 4})
    torch.testing.assert_close(out, lm_head_gemv_ref(h, w, torch.float32), atol=1e-4, rtol=1e-4, equal_nan=True)
    assert out[1].isnan().all() and not out[0].isnan().any()


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
