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


# ---- the direct C launch (ops/_host.direct_launch): CudaLauncher.__call__ skipped ------------------------------

# the direct launch mirrors Triton 3.8's CudaLauncher; an older Triton keeps compiled.run (the reason recorded)
from_38 = pytest.mark.skipif(tuple(int(x) for x in triton.__version__.split(".")[:2]) < (3, 8),
                             reason="the direct C launch mirrors Triton 3.8's CudaLauncher.__call__")


@from_38
def test_direct_launch_convention_of_the_installed_triton():
    """The direct launch hands Triton's C launch what the installed Triton's CudaLauncher.__call__ (compiled.run)
    hands it: this fails (and the reason names what changed) when a Triton release changes that call."""
    assert _host.launcher_reason() == ""
    # on a GPU: "" unless switched off (SGLANG_KIMI_EAGLE3_DIRECT_LAUNCH=0)
    on_gpu = "" if _host.direct_enabled() else _host.SWITCHED_OFF
    assert _host.direct_reason() == (on_gpu if DEV.type == "cuda" else _host.fast_path_reason())


@pytest.mark.parametrize("old,new,why", [
    ("self.kernel_signature, kernel_args)", "self.kernel_signature, *kernel_args)", "does not launch with"),
    ("global_scratch, profile_scratch,", "profile_scratch, global_scratch,", "does not launch with"),
    ("if size > 0:", "if size >= 0:", "has no `def allocate_scratch"),
    ("return None", "return b''", "has no `return alloc_fn"),
    ("kernel_args = args", "kernel_args = list(args)", "has no `kernel_args = args"),
])
@from_38
def test_a_changed_launcher_turns_the_direct_launch_off(monkeypatch, old, new, why):
    """A CudaLauncher.__call__ that launches otherwise (its source edited through the source getter) is refused."""
    from triton.backends.nvidia.driver import CudaLauncher

    real = _host._source
    assert old in real(CudaLauncher.__call__)
    monkeypatch.setattr(_host, "_source", lambda fn: real(fn).replace(old, new))
    assert why in _host.launcher_reason()


class _LauncherOfAnotherTriton:  # Triton 3.4's shape: no metadata or hooks in the call
    def __call__(self, gridX, gridY, gridZ, stream, function, *args):
        self.launch(gridX, gridY, gridZ, stream, function, self.launch_cooperative_grid, self.launch_pdl, *args)


def test_a_launcher_of_another_shape_turns_the_direct_launch_off():
    assert "CudaLauncher.__call__ takes (self, gridX, gridY, gridZ, stream, function, args)" in \
        _host.launcher_reason(_LauncherOfAnotherTriton)


def _cuda_launcher(c_launch, **change):
    """A CudaLauncher as Triton 3.8 builds one for a kernel without scratch, tensor descriptors or gsan (its C launch:
    `c_launch`), with `change` applied."""
    from triton.backends.nvidia.driver import CudaLauncher

    la = object.__new__(CudaLauncher)
    la.__dict__.update(launch=c_launch, arg_annotations=["annotations"], kernel_signature=b"signature", num_ctas=1,
                       global_scratch_size=0, global_scratch_align=1, profile_scratch_size=0, profile_scratch_align=1,
                       launch_cooperative_grid=False, launch_pdl=True, gsan_enabled=False)
    la.__dict__.update(change)
    return la


class _Binder:
    """A @triton.jit function for Step: its binder (`fn[grid](*args, **opts)`) counts the call and returns the
    compiled kernel `kernel` (launching nothing)."""

    __name__ = "fake_kernel"

    def __init__(self, kernel):
        self.kernel, self.binds = kernel, 0

    def __getitem__(self, grid):
        def run(*args, **opts):
            self.binds += 1
            return self.kernel

        return run


@pytest.fixture
def c_launch(monkeypatch):
    """Triton's driver with a recording C launch (no GPU needed): `calls` holds what each launch received."""
    import types

    from triton import knobs

    calls = []

    def launch(*a):  # driver.c launchKernel's place
        calls.append(a)

    monkeypatch.setenv(_host.ENV_DIRECT, "1")  # the default (test_the_direct_launch_is_on_unless_switched_off)
    state = types.SimpleNamespace(calls=calls, launch=launch, device=0)
    monkeypatch.setattr(triton.runtime.driver, "_active", types.SimpleNamespace(utils=types.SimpleNamespace(launch=launch)))
    monkeypatch.setattr(_host, "_DRIVER", [lambda dev: 1000 + dev, lambda: state.device, knobs.runtime, launch])
    monkeypatch.setattr(_host, "_LAUNCHER", [])
    monkeypatch.setattr(_host, "_DIRECT_OFF", {})
    return state


def _same(a, b) -> bool:
    """The same positional values: tensors the same objects, the rest equal and of one type (tuples element-wise)."""
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a is b or (not isinstance(a, torch.Tensor) and type(a) is type(b) and a == b)


def _step(c_launch, **change):
    import types

    kernel = types.SimpleNamespace(run=_cuda_launcher(c_launch.launch, **change), function=0xF00, packed_metadata=(4, 1, 0))
    step = _host.Step(_Binder(kernel), (3, 2), num_warps=4)
    step.fast = True  # as on a GPU (the interpreter turns it off)
    return step


ARGS = (torch.zeros(2), torch.zeros(3, dtype=torch.int64), 7, 1, 16, True)  # pointers, integers, constexprs


@from_38
def test_the_direct_launch_hands_the_c_launch_what_compiled_run_does(c_launch, monkeypatch):
    """Call for call, the direct launch passes Triton's C launch exactly the positional values CudaLauncher.__call__
    (the compiled.run path) passes it: grid, stream, function, launch flags, metadata, no hook, no scratch, the
    launcher's annotations and signature, the arguments themselves."""
    direct = _step(c_launch)
    direct(*ARGS)  # the binder, which keeps the C launch
    assert direct.direct is not None and direct.handle is None and direct.fn.binds == 1 and not c_launch.calls
    direct(*ARGS)
    assert direct.fn.binds == 1 and len(c_launch.calls) == 1
    via_direct = c_launch.calls[-1]

    monkeypatch.setattr(_host, "direct_launch", lambda *a: "off in this test")
    run = _step(c_launch)
    run(*ARGS)
    run(*ARGS)  # compiled.run(...): CudaLauncher.__call__ -> the C launch
    assert run.direct is None and run.handle is not None and run.fn.binds == 1
    via_run = c_launch.calls[-1]
    assert _same(via_direct, via_run), (via_direct, via_run)
    assert via_direct[:4] == (3, 2, 1, 1000) and via_direct[-1][0] is ARGS[0]
    assert _host.direct_fallbacks() == {"fake_kernel": "off in this test"}


@from_38
def test_the_direct_launch_steps_aside_for_hooks_and_another_device(c_launch):
    from triton import knobs

    step = _step(c_launch)
    step(*ARGS)
    step(*ARGS)
    assert step.fn.binds == 1
    hook = lambda *a, **k: None  # noqa: E731
    knobs.runtime.launch_enter_hook.add(hook)  # a profiler: the binder path calls it
    try:
        step(*ARGS)
        assert step.fn.binds == 2
    finally:
        knobs.runtime.launch_enter_hook.remove(hook)
    c_launch.device = 1
    step(*ARGS)
    assert step.fn.binds == 3
    c_launch.device = 0
    step(*ARGS)
    assert step.fn.binds == 3


@pytest.mark.parametrize("change,why", [
    ({"global_scratch_size": 8}, "scratch buffer"), ({"profile_scratch_size": 8}, "scratch buffer"),
    ({"gsan_enabled": True}, "gsan"), ({"launch": lambda *a: None}, "wrapped"), ({"kernel_signature": None}, "has no"),
])
@from_38
def test_a_kernel_compiled_run_does_more_for_keeps_compiled_run(c_launch, change, why):
    """Scratch buffers, gsan, tensor descriptors (a wrapped launch), a launcher missing an attribute (None here:
    deleted): compiled.run, with the reason recorded per kernel."""
    step = _step(c_launch, **change)
    la = step.fn.kernel.run
    for name in [k for k, v in change.items() if v is None]:
        delattr(la, name)
    assert why in _host.direct_launch(la, 0xF00, (4, 1, 0), (3, 2, 1), ARGS, c_launch.launch)
    step(*ARGS)  # the binder: keeps compiled.run (not called here: it would allocate scratch, run gsan ...)
    assert step.direct is None and step.handle is not None and step.handle[0] is la
    assert why in _host.direct_fallbacks()["fake_kernel"]


def _launcher_handing(c_launch, hand):
    """A CudaLauncher (its class's __call__ handing the launch `hand(self, grid, stream, function, metadata, args)`)
    whose C launch is `c_launch`; the class stands in for Triton's (_host._launcher_class) while the test runs."""
    from triton.backends.nvidia.driver import CudaLauncher

    class Other(CudaLauncher):
        def __call__(self, gridX, gridY, gridZ, stream, function, kernel_metadata, launch_metadata, launch_enter_hook,
                     launch_exit_hook, *args):
            self.launch(*hand(self, (gridX, gridY, gridZ), stream, function, kernel_metadata, args))

    la = object.__new__(Other)
    la.__dict__.update(vars(_cuda_launcher(c_launch.launch)))
    return la


def _hand(s, grid, stream, function, meta, args):  # Triton 3.8's, no scratch, no hook
    return (*grid, stream, function, s.launch_cooperative_grid, s.launch_pdl, meta, None, None, None, None, None,
            s.arg_annotations, s.kernel_signature, args)


OTHER_HANDS = {
    "flags swapped": lambda s, g, st, f, m, a: (*g, st, f, s.launch_pdl, s.launch_cooperative_grid, *_hand(s, g, st, f, m, a)[7:]),
    "a scratch buffer": lambda s, g, st, f, m, a: (*_hand(s, g, st, f, m, a)[:11], b"", *_hand(s, g, st, f, m, a)[12:]),
    "the arguments as a list": lambda s, g, st, f, m, a: (*_hand(s, g, st, f, m, a)[:-1], list(a)),
    "the arguments copied": lambda s, g, st, f, m, a: (*_hand(s, g, st, f, m, a)[:-1], tuple(x.clone() if
                                                                                        isinstance(x, torch.Tensor) else x for x in a)),
    "no stream": lambda s, g, st, f, m, a: (*g, *_hand(s, g, st, f, m, a)[4:]),
    "another signature": lambda s, g, st, f, m, a: (*_hand(s, g, st, f, m, a)[:-2], b"other", a),
}


@pytest.mark.parametrize("other", list(OTHER_HANDS))
@from_38
def test_the_recording_check_refuses_a_launcher_handing_other_values(c_launch, monkeypatch, other):
    """Before a Step keeps the C launch, the launcher's own __call__ runs once with a recording launch: values other
    than the direct call's keep compiled.run (whatever the source check said); the same values pass."""
    for hand, ok in ((OTHER_HANDS[other], False), (_hand, True)):
        la = _launcher_handing(c_launch, hand)
        monkeypatch.setattr(_host, "_launcher_class", lambda: type(la))
        got = _host.direct_launch(la, 0xF00, (4, 1, 0), (3, 2, 1), ARGS, c_launch.launch)
        assert isinstance(got, tuple) if ok else "other values" in got


def test_a_refused_launcher_convention_keeps_compiled_run(c_launch, monkeypatch):
    monkeypatch.setattr(_host, "_LAUNCHER", ["triton 9.9: CudaLauncher.__call__ does not launch with `...`"])
    step = _step(c_launch)
    step(*ARGS)
    step(*ARGS)
    assert step.direct is None and step.handle is not None and step.fn.binds == 1
    assert "does not launch with" in _host.direct_fallbacks()["fake_kernel"]


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


class _Facts:
    """What a plan key reads of a tensor (shape, stride(), dtype, device, data_ptr(); get_device() and is_cuda as
    torch has them), for devices this machine may not have."""

    def __init__(self, shape=(8, 8), stride=(8, 1), dtype=torch.float32, device="cuda:0", ptr=0x7F0000001000):
        self.shape, self._stride, self.dtype, self.device, self._ptr = torch.Size(shape), stride, dtype, torch.device(device), ptr
        self.is_cuda = self.device.type == "cuda"

    def stride(self):
        return self._stride

    def data_ptr(self):
        return self._ptr

    def get_device(self):
        return -1 if self.device.index is None else self.device.index


@pytest.mark.parametrize("change", [
    {"device": "cuda:1"}, {"device": "xpu:0"}, {"device": "meta"}, {"ptr": 0x7F0000001004}, {"ptr": 0x7F0000001008},
    {"stride": (1, 8)}, {"stride": (16, 1)}, {"shape": (8, 9)}, {"dtype": torch.bfloat16},
])
def test_a_plan_is_per_device_alignment_layout_and_dtype(change):
    """Two calls whose tensors differ in one fact the guard or Triton's specialisation reads (device type or index,
    16-byte alignment, strides, shape, dtype) get two plans; the same facts (another address, 16-byte aligned) one."""
    others = [_Facts(shape=(4,), stride=(1,), dtype=torch.int32), _Facts(shape=(4, 4), stride=(4, 1), dtype=torch.int64)]
    base, same, changed = _Facts(), _Facts(ptr=0x7F0000009000), _Facts(**change)
    key = lambda t: _host.op_key("test-facts", None, None, [*others, t])  # noqa: E731
    assert key(base) == key(same) and key(base) != key(changed)
    assert key(changed)[-1] == _host.tensor_key([*others, changed])  # op_key's inline copy of tensor_key
    for t in (base, changed):  # the planned ops' key: op_key's, and the pointers it read
        assert _host.op_key_ptrs("test-facts", None, None, [*others, t]) == (key(t), [x._ptr for x in [*others, t]])
    a = _host.plan(key(base), object)
    assert _host.plan(key(same), object) is a and _host.plan(key(changed), object) is not a


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


@pytest.fixture(params=["compiled.run", "direct"])
def launch_path(request, monkeypatch):
    """The planned ops' two launch paths after a plan's first call on a GPU: the compiled kernel's launcher, and
    Triton's C launch itself (the default; SGLANG_KIMI_EAGLE3_DIRECT_LAUNCH=0 keeps compiled.run). Plans are
    built afresh under the setting and dropped after. Yields a check that the plans built meanwhile launch that way
    (on a GPU with the fast path; the interpreter has one path)."""
    monkeypatch.setenv(_host.ENV_DIRECT, "1" if request.param == "direct" else "0")
    _host.clear_plans()

    def check():
        if _host.fast_path_reason() or (request.param == "direct" and _host.direct_reason()):
            return
        steps = [st for p in _host._PLANS.values() for st in vars(p).values() if isinstance(st, _host.Step)]
        assert steps
        for st in steps:
            if request.param == "direct":
                assert st.direct is not None or getattr(st.fn, "__name__", repr(st.fn)) in _host.direct_fallbacks(), st.fn
            else:
                assert st.direct is None and st.handle is not None, st.fn

    yield check
    _host.clear_plans()


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("bs", [1, 3])
def test_planned_sampling_matches_the_binder_path_on_every_call(bs, fused, launch_path):
    """tree_speculative_sampling (plan + Steps: compiled launchers, or Triton's C launch itself, from the second call
    on a GPU; one fused launch or the three kernels) writes exactly what launch_sampling (the three kernels through
    Triton's binder, fresh workspaces) writes, call after call, with new data each time (dyadic probabilities: no
    rounding anywhere)."""
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
        if fused:  # the upstream PR's one launch through the binder, its workspaces reused from the second call on
            c, ic = _outs(bs, n, s), [t.clone() for t in ins]
            ts.launch_sampling_fused(*c, *ic, 1.0, 0.5, s, cfg)
            for x, y in zip(c + [ic[7]], b + [ib[7]]):
                assert torch.equal(x, y), call
    launch_path()


@pytest.mark.parametrize("bs", [1, 5])
def test_planned_argmax_verify_and_verify_greedy_match_the_binder_path(bs, launch_path):
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
    launch_path()


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


@from_38
def test_the_direct_launch_is_on_unless_switched_off(c_launch, monkeypatch):
    """Unset (or 1) a Step keeps the C launch; SGLANG_KIMI_EAGLE3_DIRECT_LAUNCH=0 keeps compiled.run, and says why."""
    monkeypatch.delenv(_host.ENV_DIRECT)
    step = _step(c_launch)
    step(*ARGS)
    assert step.direct is not None and step.handle is None
    monkeypatch.setenv(_host.ENV_DIRECT, "0")
    step = _step(c_launch)
    step(*ARGS)
    assert step.direct is None and step.handle is not None
    assert _host.direct_fallbacks() == {"fake_kernel": _host.SWITCHED_OFF}
    if not _host.fast_path_reason():
        assert _host.direct_reason() == _host.SWITCHED_OFF


@from_38
def test_bench_hosts_ours_and_ours_direct_plans_launch_each_their_way(c_launch, monkeypatch):
    """benchmark/kernels/bench_host.py's `ours` and `ours_direct` separate the direct launch's saving in one run: a plan
    first called through planned_with(False) keeps compiled.run and one through planned_with(True) the C launch,
    whatever the process's setting, which each call leaves as it found it."""
    import os
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from benchmark.kernels.bench_host import planned_with

    for process in ("1", None):
        if process is None:
            monkeypatch.delenv(_host.ENV_DIRECT)
        monkeypatch.delenv(_host.ENV_INT_POINTERS, raising=False)
        run, direct = _step(c_launch), _step(c_launch)
        seen = []
        env = lambda: (os.environ.get(_host.ENV_DIRECT), os.environ.get(_host.ENV_INT_POINTERS))  # noqa: E731
        via_run = planned_with(False, lambda: (seen.append(env()), run(*ARGS)))
        via_direct = planned_with(True, lambda: (seen.append(env()), direct(*ARGS)))
        via_tensors = planned_with(True, lambda: seen.append(env()), False)
        for _ in range(2):
            via_run()
            via_direct()
            via_tensors()
        assert run.handle is not None and run.direct is None
        assert direct.direct is not None and direct.handle is None
        assert seen == [("0", "1"), ("1", "1"), ("1", "0")] + [(process, None)] * 3
        assert env() == (process, None)


def _op_calls():
    """{name: (call, inputs)} of every planned op and launch shape: tree sampling in one launch and in three, argmax +
    verify in one and in two, verify_greedy."""
    from sglang_kimi_eagle3.ops import argmax_verify as av
    from sglang_kimi_eagle3.ops import tree_sampling as ts
    from sglang_kimi_eagle3.ops import verify_greedy as vg

    bs, n, s = 3, 4, 4
    samp = _sampling_case(bs, n, 9000, seed=1)
    tree = samp[:4]
    logits = torch.randn(bs * n, 5000, generator=torch.Generator().manual_seed(2)).to(DEV)
    tp = torch.argmax(logits, -1)
    out = _outs(bs, n, s)
    scfg = {"num_warps": 4, "tiles_per_program": 1}
    acfg = {"block": 256, "splits": 3}
    return {
        "sampling-1": lambda: ts.tree_speculative_sampling(*out, *samp, 1.0, 0.5, config=dict(scfg, fused=True)),
        "sampling-3": lambda: ts.tree_speculative_sampling(*out, *samp, 1.0, 0.5, config=dict(scfg, fused=False)),
        "argmax-1": lambda: av.argmax_verify_greedy(*out, *tree, logits, config=dict(acfg, fused=True)),
        "argmax-2": lambda: av.argmax_verify_greedy(*out, *tree, logits, config=dict(acfg, fused=False)),
        "greedy": lambda: vg.verify_tree_greedy(*out, *tree, tp, config={"rows_per_program": 1}),
    }


@pytest.mark.parametrize("op", ["sampling-1", "sampling-3", "argmax-1", "argmax-2", "greedy"])
def test_kept_launches_take_the_same_arguments_with_pointers_as_ints(op, monkeypatch):
    """Once a plan's Steps keep a launch, each planned op hands it every argument in the kernel's order with the
    tensors' pointers as ints (SGLANG_KIMI_EAGLE3_INT_POINTERS, default): position for position what the same plan
    hands it with int pointers off (the tensors), an int where that has a tensor equal to its data_ptr(). The
    launches recorded (a C launch that launches nothing), the first call real (the binder; compiled on a GPU)."""
    from triton import knobs

    monkeypatch.delenv(_host.ENV_INT_POINTERS, raising=False)
    _host.clear_plans()
    try:
        call = _op_calls()[op]
        call()
        (p,) = _host._PLANS.values()
        steps = [st for st in vars(p).values() if isinstance(st, _host.Step)]
        assert p.ints and steps
        seen = []
        for st in steps:  # a kept direct launch that records (what Step.launch hands Triton's C launch)
            st.handle = None
            st.direct = (lambda *a: seen.append(a[-1]), *st.grid, 0xF00, False, False, (4, 1, 0), [], b"", 0,
                         lambda dev: 1000, lambda: 0, knobs.runtime, _host._NEVER, _host._NEVER)
        call()
        as_ints = list(seen)
        seen.clear()
        p.ints = False
        call()
        as_tensors = list(seen)
    finally:
        _host.clear_plans()
    assert len(as_ints) == len(as_tensors) == len(steps)
    for a, t in zip(as_ints, as_tensors):
        assert len(a) == len(t)
        for x, y in zip(a, t):
            if isinstance(y, torch.Tensor):
                assert type(x) is int and x == y.data_ptr(), (op, x, y.shape)
            else:
                assert type(x) is type(y) and x == y, (op, x, y)
        assert any(isinstance(y, torch.Tensor) for y in t)


def test_int_pointers_are_read_when_a_plan_is_built(monkeypatch):
    """SGLANG_KIMI_EAGLE3_INT_POINTERS=0 gives a plan built then the tensors (the path before); unset or 1, ints."""
    from sglang_kimi_eagle3.ops import verify_greedy as vg

    for value, want in (("0", False), ("1", True), (None, True)):
        if value is None:
            monkeypatch.delenv(_host.ENV_INT_POINTERS, raising=False)
        else:
            monkeypatch.setenv(_host.ENV_INT_POINTERS, value)
        _host.clear_plans()
        _op_calls()["greedy"]()
        (p,) = _host._PLANS.values()
        assert p.ints is want
    _host.clear_plans()
