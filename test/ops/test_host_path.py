"""The eager verify ops' host path: the one-pass tree guard rejects exactly what the rule-by-rule guard rejects,
memoised launch plans are keyed on their whole config, and the host integer helpers are Triton's own; the
compiled-launcher fast path (ops/_host.py) mirrors the installed Triton's calling convention, and the planned ops
write exactly what their binder paths write (on a GPU: compiled launchers against Triton's binder).

These paths run on every decode step of a live server (the verify ops are not in a CUDA graph), so they were
made cheaper: a boolean pass before the messages, plans computed once per shape, Triton's raw helpers. None of
that may change which calls our kernels take.
"""

import pytest
import torch
import triton

from kernel_device import device
from sglang_kimi_eagle3.ops import _host, _tree
from sglang_kimi_eagle3.ops._tree import MAX_DRAFT_TOKENS, cached_plan, check_tree_inputs
from sglang_kimi_eagle3.ops.arch import Unsupported
from sglang_kimi_eagle3.ops.tree_sampling import sampling_plan

DEV = device()
BS, N, S = 3, 4, 4


def _valid():
    i64 = torch.zeros((BS, N), dtype=torch.int64, device=DEV)
    return {"predicts": torch.zeros(BS * N, dtype=torch.int32, device=DEV),
            "accept_index": torch.zeros((BS, S), dtype=torch.int32, device=DEV),
            "accept_token_num": torch.zeros(BS, dtype=torch.int32, device=DEV),
            "candidates": i64, "retrive_index": i64.clone(), "retrive_next_token": i64.clone(),
            "retrive_next_sibling": i64.clone()}


def _noncontig(t):
    """The same shape and dtype, not contiguous."""
    wide = torch.zeros((*t.shape[:-1], t.shape[-1] * 2) if t.ndim > 1 else (t.shape[0] * 2,), dtype=t.dtype,
                       device=t.device)
    return wide[..., ::2]


NAMES = list(_valid())
# every way one argument can leave the contract: dtype, shape, contiguity
MUTATIONS = {
    "int32": lambda t: t.to(torch.int32) if t.dtype == torch.int64 else t.to(torch.int64),
    "float": lambda t: t.float(),
    "one-more-row": lambda t: torch.zeros((t.shape[0] + 1, *t.shape[1:]), dtype=t.dtype, device=t.device),
    "flat": lambda t: t.reshape(-1),
    "noncontiguous": _noncontig,
}


@pytest.mark.parametrize("mutation", list(MUTATIONS))
@pytest.mark.parametrize("name", NAMES)
def test_one_pass_guard_agrees_with_the_rule_by_rule_guard(name, mutation):
    args = _valid()
    args[name] = MUTATIONS[mutation](args[name])

    def verdict(fn):
        try:
            return fn(*args.values())
        except Unsupported as exc:
            return f"Unsupported: {exc}"

    slow = verdict(_tree._reject_tree_inputs)
    assert verdict(check_tree_inputs) == slow  # same acceptance and, on a rejection, the same message


def test_valid_inputs_and_limits():
    args = _valid()
    assert check_tree_inputs(*args.values()) == (BS, N, S)
    i64 = torch.zeros((1, MAX_DRAFT_TOKENS + 1), dtype=torch.int64, device=DEV)
    big = [torch.zeros(MAX_DRAFT_TOKENS + 1, dtype=torch.int32, device=DEV),
           torch.zeros((1, S), dtype=torch.int32, device=DEV), torch.zeros(1, dtype=torch.int32, device=DEV),
           i64, i64.clone(), i64.clone(), i64.clone()]
    with pytest.raises(Unsupported, match="at most"):
        check_tree_inputs(*big)


def test_cached_plan_is_keyed_on_the_whole_config():
    a = cached_plan(sampling_plan, 8, 4, 163840, {"num_warps": 8})
    assert a == sampling_plan(8, 4, 163840, {"num_warps": 8})
    assert cached_plan(sampling_plan, 8, 4, 163840, {"num_warps": 8}) is a  # computed once
    b = cached_plan(sampling_plan, 8, 4, 163840, {"num_warps": 4})
    assert b["sum_warps"] == 4 and a["sum_warps"] == 8
    c = cached_plan(sampling_plan, 8, 16, 163840, {"num_warps": 8})
    assert c == sampling_plan(8, 16, 163840, {"num_warps": 8}) and c != a
    # an unhashable config is planned every time, never keyed by identity
    assert cached_plan(sampling_plan, 8, 4, 163840, {"num_warps": 8, "x": [1]}) == a | {}


@pytest.mark.parametrize("n", [1, 2, 3, 15, 16, 17, 1000, 163840, 2**31 + 5])
def test_host_helpers_are_tritons(n):
    assert _host.next_power_of_2(n) == triton.next_power_of_2(n)
    for d in (1, 3, 16, 4096):
        assert _host.cdiv(n, d) == triton.cdiv(n, d)


# ---- the compiled-launcher fast path (ops/_host.py) ---------------------------------------------------------


def test_launcher_convention_of_the_installed_triton():
    """The fast path calls the compiled kernel exactly as the installed Triton's JITFunction.run does: this fails
    (and the reason names what changed) when a Triton release changes that calling convention."""
    import inspect

    from triton.compiler.compiler import CompiledKernel
    from triton.runtime.jit import JITFunction

    assert _host.convention_reason() == ""
    src = " ".join(inspect.getsource(JITFunction.run).split())
    assert _host.CONVENTION in src
    assert "launch_metadata = kernel.launch_metadata(grid, stream, *bound_args.values())" in src
    assert isinstance(inspect.getattr_static(CompiledKernel, "run"), property)
    # launch metadata only feeds the enter hook: with no hook registered the fast path passes None for all three
    assert "knobs.runtime.launch_enter_hook" in " ".join(inspect.getsource(CompiledKernel.launch_metadata).split())
    if triton.__version__.startswith("3.8"):
        from triton.backends.nvidia.driver import CudaLauncher

        params = list(inspect.signature(CudaLauncher.__call__).parameters)
        assert params == ["self", "gridX", "gridY", "gridZ", "stream", "function", "kernel_metadata",
                          "launch_metadata", "launch_enter_hook", "launch_exit_hook", "args"]
        for attr in ("function", "packed_metadata", "_run"):
            assert attr in inspect.getsource(CompiledKernel.__init__)


def test_hooks_idle_reads_tritons_hook_chains():
    from triton import knobs

    assert _host.hooks_idle()
    fn = lambda *a, **k: None  # noqa: E731
    rt = knobs.runtime
    if hasattr(rt.launch_enter_hook, "add"):  # Triton 3.8: HookChain
        rt.launch_enter_hook.add(fn)
        try:
            assert not _host.hooks_idle()
        finally:
            rt.launch_enter_hook.remove(fn)
    else:
        old, rt.launch_enter_hook = rt.launch_enter_hook, fn
        try:
            assert not _host.hooks_idle()
        finally:
            rt.launch_enter_hook = old
    assert _host.hooks_idle()


def test_fast_path_reason_is_recorded():
    reason = _host.fast_path_reason()
    if DEV.type == "cpu":
        assert "TRITON_INTERPRET" in reason
    else:
        assert reason == ""


def test_a_bad_convention_turns_the_fast_path_off(monkeypatch):
    monkeypatch.setattr(_host, "CONVENTION", "kernel.run(grid_0, stream, something_else)")
    assert "does not launch with" in _host.convention_reason()


def test_plan_is_built_once_per_key_and_a_failing_build_is_not_kept():
    calls = []

    def build():
        calls.append(1)
        return object()

    key = ("test-plan", object())
    a = _host.plan(key, build)
    assert _host.plan(key, build) is a and len(calls) == 1

    def bad():
        raise Unsupported("guard")

    for _ in range(2):
        with pytest.raises(Unsupported):
            _host.plan(("test-plan-bad",), bad)
    assert _host.plan(["unhashable"], build) is not a and len(calls) == 2


def test_tensor_key_sees_layout_dtype_device_and_alignment():
    t = torch.zeros(64, dtype=torch.float32, device=DEV)
    k = _host.tensor_key([t])
    assert _host.tensor_key([t.clone()]) == k
    assert _host.tensor_key([t[1:17]]) != _host.tensor_key([t[:16]])  # 4-byte offset: alignment (and shape)
    assert _host.tensor_key([t[4:20]])[0][-1] is True and _host.tensor_key([t[1:17]])[0][-1] is False
    assert _host.tensor_key([t.view(8, 8).t()]) != _host.tensor_key([t.view(8, 8)])  # strides
    assert _host.tensor_key([t.int()]) != k


def _sampling_case(bs, n, vocab, seed):
    import random

    from sglang_kimi_eagle3.ops.verify_greedy import random_tree_parents, tree_from_parents

    rng = random.Random(seed)
    g = torch.Generator().manual_seed(seed)
    ridx, nxt, sib = tree_from_parents([random_tree_parents(rng, n, 2, 3) for _ in range(bs)])
    w = torch.randint(0, 16, (bs, n, vocab), generator=g).float()  # dyadic: every fp32 sum exact in any order
    w.scatter_(2, torch.randint(0, vocab, (bs, n, 2), generator=g), 900.0)
    probs = w / 4096
    cand = probs.argmax(-1)
    cand[:, 1::2] = torch.randint(0, vocab, (bs, n // 2), generator=g)
    ins = [cand, ridx, nxt, sib, torch.rand(bs, n, generator=g), torch.rand(bs, generator=g), probs,
           torch.zeros_like(probs)]
    return [t.to(DEV) for t in ins]


def _outs(bs, n, s):
    return [torch.full((bs * n,), -7, dtype=torch.int32, device=DEV), torch.full((bs, s), -1, dtype=torch.int32, device=DEV),
            torch.full((bs,), -7, dtype=torch.int32, device=DEV)]


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("bs", [1, 3])
def test_planned_sampling_matches_the_binder_path_on_every_call(bs, fused):
    """tree_speculative_sampling (plan + Steps: compiled launchers from the second call on a GPU; one fused launch
    or the three kernels) writes exactly what launch_sampling (the three kernels through Triton's binder, fresh
    workspaces) writes, call after call, with new data each time (dyadic probabilities: no rounding anywhere)."""
    from sglang_kimi_eagle3.ops import tree_sampling as ts
    from sglang_kimi_eagle3.ops.arch import pdl_supported

    n, s, vocab = 4, 4, 9000  # three tiles of 4096: three programs per request (the counter) when fused
    cfg = {"num_warps": 4, "tiles_per_program": 1, "fused": fused}
    for call in range(3):
        ins = _sampling_case(bs, n, vocab, seed=call)
        a, b = _outs(bs, n, s), _outs(bs, n, s)
        ia, ib = [t.clone() for t in ins], [t.clone() for t in ins]
        ts.tree_speculative_sampling(*a, *ia, 1.0, 0.5, config=cfg)
        ts.launch_sampling(*b, *ib, 1.0, 0.5, s, cfg, pdl_supported(ins[0].device))
        for x, y in zip(a + [ia[7]], b + [ib[7]]):
            assert torch.equal(x, y), call


@pytest.mark.parametrize("bs", [1, 5])
def test_planned_argmax_verify_and_verify_greedy_match_the_binder_path(bs):
    from sglang_kimi_eagle3.ops import argmax_verify as av
    from sglang_kimi_eagle3.ops import verify_greedy as vg

    n, s, vocab = 4, 4, 5000
    for call in range(3):
        cand, ridx, nxt, sib = _sampling_case(bs, n, 8, seed=call)[:4]
        g = torch.Generator().manual_seed(call)
        logits = torch.randn(bs * n, vocab, generator=g).to(DEV)
        logits[:, 7] = 50.0 * (torch.arange(bs * n, device=DEV) % 2)  # some targets hit the candidates' tokens
        cand = torch.where(torch.arange(n, device=DEV) % 2 == 0, 7, cand)
        a, b = _outs(bs, n, s), _outs(bs, n, s)
        av.argmax_verify_greedy(*a, cand, ridx, nxt, sib, logits, config={"block": 256, "splits": 3})
        av.launch_binder(*b, cand, ridx, nxt, sib, logits, config={"block": 256, "splits": 3})
        assert all(torch.equal(x, y) for x, y in zip(a, b)), call
        tp = torch.argmax(logits, -1)
        a, b = _outs(bs, n, s), _outs(bs, n, s)
        vg.verify_tree_greedy(*a, cand, ridx, nxt, sib, tp)
        vg.launch_binder(*b, cand, ridx, nxt, sib, tp)
        assert all(torch.equal(x, y) for x, y in zip(a, b)), call


def test_a_plan_rejects_like_the_guard_and_reuses_its_workspaces():
    """The guard runs on the first call of a key: a bad call raises every time (never cached as a plan), a good
    one builds one plan whose workspaces every later call reuses."""
    from sglang_kimi_eagle3.ops import tree_sampling as ts

    bs, n, s, vocab = 2, 4, 4, 512
    ins = _sampling_case(bs, n, vocab, seed=0)
    bad = list(ins)
    bad[6] = bad[6].double()  # target_probs fp64
    for _ in range(2):
        with pytest.raises(Unsupported, match="target_probs"):
            ts.tree_speculative_sampling(*_outs(bs, n, s), *bad)
    before = dict(_host._PLANS)
    ts.tree_speculative_sampling(*_outs(bs, n, s), *ins)
    new = [p for k, p in _host._PLANS.items() if k not in before]
    assert len(new) == 1 and new[0].work.shape == (bs, 3)
    assert new[0].fused is not None  # the default config: tree sampling in one launch
    ws = new[0].work.data_ptr()
    ts.tree_speculative_sampling(*_outs(bs, n, s), *[t.clone() for t in ins])
    assert [p for k, p in _host._PLANS.items() if k not in before] == new and new[0].work.data_ptr() == ws
    with pytest.raises(ValueError, match="threshold"):  # value checks run on every call
        ts.tree_speculative_sampling(*_outs(bs, n, s), *ins, 1.5, 1.0)
