"""The host path of the eager ops: launch plans memoised per call signature, launches at the launcher floor.

SGLang runs the tree-verification ops outside its CUDA graphs, so every decode step pays their host time. Through
`kernel[grid](...)` each launch re-binds its arguments, re-specialises them and rebuilds the cache key (Triton's
binder, ~32 µs per launch on the H200's host against ~13 µs for the compiled kernel's own C launcher), and the
op around it re-ran its guards, looked its config up and allocated its workspaces on every call. Here:

  plan(key, build, *args)
                    the op's launch plan for one call signature, built once (build(*args): no closure per call):
                    `key` (op_key) is the op's own facts (config, table) plus, per tensor, shape, strides, dtype,
                    device (type and index) and 16-byte alignment (everything the input guard reads and everything
                    Triton specialises a pointer on), so the full guard, the config lookup, the launch geometry and
                    the workspaces (allocated once per plan, reused: one stream per device, as SGLang runs these
                    ops) come from the first call of a key, and every later call is one key and one dict lookup.
                    The key is most of a planned call's host time (~40 tensor attribute reads): `t.device` stays,
                    as `t.get_device()` (an int, cheaper to hash and compare) drops the device type, and the exact
                    int forms (`is_cuda` with `get_device()`) cost as much as `t.device`.
  Step              one kernel of a plan with its grid and launch options. The first call launches through
                    Triton's binder (`kernel[grid](*args, **opts)`, which compiles and returns the compiled
                    kernel); later calls hand the same arguments straight to the compiled kernel's C launch (Triton
                    3.8's driver.c `launch`), with the values its launcher `compiled.run` (a CudaLauncher) would
                    hand it for the call JITFunction.run makes:
                        compiled.run(gx, gy, gz, stream, compiled.function, compiled.packed_metadata,
                                     launch_metadata, launch_enter_hook, launch_exit_hook, *every_argument)
                    (every parameter, constexprs included, in signature order: the C launch drops the constexprs
                    itself). The direct call skips CudaLauncher.__call__'s Python (~1.1 µs a launch on a slow host:
                    two closures, the driver lookup, the scratch allocators, all for a kernel without scratch):
                        launch(gx, gy, gz, stream, function, cooperative, pdl, packed_metadata, None, None, None,
                               None, None, arg_annotations, kernel_signature, args)
                    (no launch metadata or hook, no global or profile scratch buffer). The plan's key pins every
                    specialisation input (integer values, pointer alignment, dtypes), so the compiled kernel of the
                    first call is the one Triton's binder would pick for every later call of that plan.

The fast path is off, with a recorded reason (`fast_path_reason()`), under TRITON_INTERPRET=1 (no compiled launcher:
the CPU tests run the binder path and so the same math), when the installed Triton's `JITFunction.run` does not
launch with exactly that call (checked on its source: Triton 3.4 to 3.8 do), and for any launch while a launch hook
is registered (a profiler: the binder path calls it). The direct C launch is off (`direct_reason()`), the Step
calling `compiled.run(...)` instead, under SGLANG_KIMI_EAGLE3_DIRECT_LAUNCH=0, where CudaLauncher.__call__ does not
launch with LAUNCHER_CONVENTION (checked on its source: Triton 3.8 does), and per kernel (`direct_fallbacks()`)
where compiled.run does more than that call: a global or profile scratch buffer, gsan, tensor descriptors (a wrapped
launch), a launcher of another class; before a Step keeps the C launch, CudaLauncher.__call__ runs once on a copy of
the launcher whose launch records, and the recorded values must be the direct call's. test/ops/test_host_path.py
checks both conventions on the installed Triton.

Also the host integer helpers: Triton 3.8 wraps `triton.cdiv` / `triton.next_power_of_2` as ConstexprFunctions
(~10 µs a call from host code); these are the same arithmetic, for host code only (kernels keep triton.cdiv).
"""

from __future__ import annotations

import copy
import inspect
import os

from ..base import env_raw

# The launch statement of Triton's JITFunction.run this fast path mirrors (whitespace folded).
CONVENTION = ("kernel.run(grid_0, grid_1, grid_2, stream, kernel.function, kernel.packed_metadata, launch_metadata, "
              "knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook, *bound_args.values())")
# The launch statement of Triton 3.8's CudaLauncher.__call__ (compiled.run) the direct launch mirrors (whitespace folded),
# its parameters, and what else of its body the direct launch relies on: a scratch buffer of size 0 is None, the kernel
# arguments go to the launch as received (gsan off).
LAUNCHER_CONVENTION = ("self.launch(gridX, gridY, gridZ, stream, function, self.launch_cooperative_grid, self.launch_pdl, "
                       "kernel_metadata, launch_metadata, launch_enter_hook, launch_exit_hook, global_scratch, "
                       "profile_scratch, self.arg_annotations, self.kernel_signature, kernel_args)")
LAUNCHER_PARAMS = ("self", "gridX", "gridY", "gridZ", "stream", "function", "kernel_metadata", "launch_metadata",
                   "launch_enter_hook", "launch_exit_hook", "args")
LAUNCHER_BODY = ("def allocate_scratch(size, align, allocator): if size > 0:",
                 "return alloc_fn(alloc_size, align, stream) return None",
                 "def allocate_default_profile_scratch(size, align): if size > 0:",
                 "return active_driver.allocate_default_profile_scratch(alloc_size, align, stream) return None",
                 "kernel_args = args if self.gsan_enabled:")
LAUNCHER_ATTRS = ("launch", "launch_cooperative_grid", "launch_pdl", "arg_annotations", "kernel_signature",
                  "global_scratch_size", "profile_scratch_size", "gsan_enabled")
MAX_PLANS = 4096  # plans kept (a serving process sees a handful of batch sizes); beyond, the oldest are dropped


def cdiv(x: int, y: int) -> int:
    """ceil(x / y) for ints (triton.cdiv)."""
    return (x + y - 1) // y


def next_power_of_2(n: int) -> int:
    """The smallest power of 2 >= n, for 1 <= n <= 2**64 (triton.next_power_of_2, the same bit steps)."""
    n -= 1
    n |= n >> 1
    n |= n >> 2
    n |= n >> 4
    n |= n >> 8
    n |= n >> 16
    n |= n >> 32
    n += 1
    return n


# ---- is the compiled-launcher fast path usable with this Triton ----------------------------------------------

_interpret_raw = env_raw("TRITON_INTERPRET")  # one C call (~0.08 µs against ~0.33 µs for env_reader's tuple)
_ON = (b"1", "1")


def interpreted() -> bool:
    """TRITON_INTERPRET=1 (read per call: tests switch it; a plan key holds it)."""
    return _interpret_raw() in _ON


def _source(fn) -> str:
    """The source of `fn`, whitespace folded (what the convention checks read)."""
    return " ".join(inspect.getsource(fn).split())


def convention_reason() -> str:
    """"" when the installed Triton launches compiled kernels with CONVENTION, else why not (one line)."""
    try:
        import triton
        from triton import knobs
        from triton.compiler.compiler import CompiledKernel
        from triton.runtime.jit import JITFunction
    except Exception as exc:  # pragma: no cover - an incomplete Triton install
        return f"triton does not import its launch machinery ({type(exc).__name__}: {exc})"
    version = getattr(triton, "__version__", "?")
    try:
        src = _source(JITFunction.run)
    except (OSError, TypeError) as exc:
        return f"triton {version}: the source of JITFunction.run is not readable ({exc})"
    if CONVENTION not in src:
        return f"triton {version}: JITFunction.run does not launch with `{CONVENTION}`"
    if "bound_args, specialization, options = binder(*args, **kwargs)" not in src:
        return f"triton {version}: JITFunction.run binds its arguments differently"
    if not isinstance(inspect.getattr_static(CompiledKernel, "run", None), property):
        return f"triton {version}: CompiledKernel.run is not the launcher property"
    rt = getattr(knobs, "runtime", None)
    if rt is None or not hasattr(rt, "launch_enter_hook") or not hasattr(rt, "launch_exit_hook"):
        return f"triton {version}: knobs.runtime has no launch_enter_hook / launch_exit_hook"
    return ""


_REASON: list = []  # [reason] once probed


def fast_path_reason() -> str:
    """"" when Steps launch through the compiled launcher after their first call, else why they do not."""
    if interpreted():
        return "TRITON_INTERPRET=1: the interpreter has no compiled launcher (kernel[grid] path)"
    if not _REASON:
        _REASON.append(convention_reason())
    return _REASON[0]


def hooks_idle(rt=None) -> bool:
    """No launch hook registered (Triton 3.8: empty HookChains; before: None), so the binder would pass
    launch_metadata=None and call no hook: the fast path may pass None for all three."""
    if rt is None:
        from triton import knobs

        rt = knobs.runtime
    for h in (rt.launch_enter_hook, rt.launch_exit_hook):
        if h is not None and getattr(h, "calls", True):
            return False
    return True


# ---- the direct C launch: compiled.run's Python wrapper skipped ------------------------------------------------


def _launcher_class():
    from triton.backends.nvidia.driver import CudaLauncher

    return CudaLauncher


def launcher_reason(cls=None) -> str:
    """"" when `cls.__call__` (default: the installed Triton's CudaLauncher, what compiled.run is) hands its C launch
    exactly what the direct launch hands it: LAUNCHER_CONVENTION, with LAUNCHER_PARAMS and LAUNCHER_BODY (checked
    on its source, whitespace folded: Triton 3.8 does); else why not (one line)."""
    import triton

    version = getattr(triton, "__version__", "?")
    try:
        cls = _launcher_class() if cls is None else cls
        src = _source(cls.__call__)
        params = tuple(inspect.signature(cls.__call__).parameters)
    except Exception as exc:  # no NVIDIA backend, or its source is not readable
        return f"triton {version}: CudaLauncher.__call__ is not readable ({type(exc).__name__}: {exc})"
    if params != LAUNCHER_PARAMS:
        return f"triton {version}: CudaLauncher.__call__ takes ({', '.join(params)}), not ({', '.join(LAUNCHER_PARAMS)})"
    if LAUNCHER_CONVENTION not in src:
        return f"triton {version}: CudaLauncher.__call__ does not launch with `{LAUNCHER_CONVENTION}`"
    missing = [part for part in LAUNCHER_BODY if part not in src]
    if missing:
        return f"triton {version}: CudaLauncher.__call__ has no `{missing[0]}`"
    return ""


# On unless SGLANG_KIMI_EAGLE3_DIRECT_LAUNCH=0: on the H200 (2026-12-04, the serving stack, Triton 3.8) the planned ops
# wrote exactly what their binder paths write through it (test/ops/test_host_path.py, compiled) and it saved 2-3 µs a
# call against compiled.run (benchmark/kernels/bench_host.py, `ours_direct` against `ours`); 0: Steps keep compiled.run.
ENV_DIRECT = "SGLANG_KIMI_EAGLE3_DIRECT_LAUNCH"
SWITCHED_OFF = f"{ENV_DIRECT}=0 (the direct C launch switched off: Steps launch through compiled.run)"


def direct_enabled() -> bool:
    return os.environ.get(ENV_DIRECT) != "0"


_LAUNCHER: list = []  # [launcher_reason()] once probed
_DIRECT_OFF: dict = {}  # kernel name -> why a Step of it launches through compiled.run instead (its first such Step)


def direct_reason() -> str:
    """"" when Steps call the compiled kernel's C launch directly after their first call (a kernel that needs a
    scratch buffer, gsan or tensor descriptors still goes through compiled.run: direct_fallbacks()), else why not."""
    reason = fast_path_reason()
    if reason:
        return reason
    if not direct_enabled():
        return SWITCHED_OFF
    if not _LAUNCHER:
        _LAUNCHER.append(launcher_reason())
    return _LAUNCHER[0]


def direct_fallbacks() -> dict:
    """{kernel name: why its Steps launch through compiled.run, not the C launch} for the kernels launched so far."""
    return dict(_DIRECT_OFF)


def direct_launch(launcher, function, meta, grid: tuple, args: tuple, raw_launch):
    """(launch, gridX, gridY, gridZ, function, cooperative, pdl, meta, arg_annotations, kernel_signature): what the
    direct launch hands `raw_launch` (Triton's C launch) around the stream and the arguments, exactly what
    `launcher.__call__` (a CudaLauncher, LAUNCHER_CONVENTION) hands it for the same call; or why the direct launch
    does not apply to this compiled kernel (one line). Checked by running that __call__ once on a copy of the
    launcher whose launch records its arguments (nothing launches, the launcher itself is untouched)."""
    cls = _launcher_class()
    if type(launcher).__call__ is not cls.__call__:
        return f"compiled.run is a {type(launcher).__name__}, not Triton's CudaLauncher"
    missing = [a for a in LAUNCHER_ATTRS if not hasattr(launcher, a)]
    if missing:
        return f"the CudaLauncher has no {', '.join(missing)}"
    if launcher.gsan_enabled:
        return "gsan instrumentation (the launcher appends its state pointer and synchronises)"
    if launcher.global_scratch_size or launcher.profile_scratch_size:
        return "the kernel takes a global or profile scratch buffer (allocated per launch)"
    if raw_launch is None or launcher.launch is not raw_launch:
        return "the launcher's launch is wrapped (tensor descriptors), not Triton's C launch"
    const = (launcher.launch_cooperative_grid, launcher.launch_pdl, meta)
    sig = (launcher.arg_annotations, launcher.kernel_signature)
    seen = []
    try:
        shadow = copy.copy(launcher)
        shadow.launch = lambda *a: seen.append(a)
        cls.__call__(shadow, *grid, 0, function, meta, None, None, None, *args)
    except Exception as exc:
        return f"CudaLauncher.__call__ failed on a recording launch ({type(exc).__name__}: {exc})"
    want = (*grid, 0, function, *const, None, None, None, None, None, *sig)
    got = seen[0] if len(seen) == 1 else ()
    if got[:-1] != want or type(got[-1]) is not tuple or [id(a) for a in got[-1]] != [id(a) for a in args]:
        return "CudaLauncher.__call__ hands its launch other values than the direct launch would"
    return (raw_launch, *grid, function, *const, *sig)


_DRIVER: list = []  # [get_current_stream, get_current_device, knobs.runtime, C launch] of the installed Triton, resolved once


def _driver():
    if not _DRIVER:
        from triton import knobs
        from triton.runtime.driver import driver

        utils = getattr(driver.active, "utils", None)
        _DRIVER.extend((driver.active.get_current_stream, driver.active.get_current_device, knobs.runtime,
                        getattr(utils, "launch", None)))
    return _DRIVER


_NEVER = object()  # a hook chain no knobs.runtime holds
STEPS_BUILT = [0]  # Steps built in this process (a launch plan's kernels): the status reports the launch path after one


class Step:
    """One kernel launch of a plan: the @triton.jit function, its grid and launch options, and (after the
    first call, where the fast path applies) the compiled kernel's C launch and its constant arguments (`direct`),
    else its launcher (`handle`). Call it with every kernel parameter positionally, constexprs included, in
    signature order."""

    __slots__ = ("fn", "grid", "opts", "handle", "direct", "fast")

    def __init__(self, fn, grid: tuple, **opts):
        self.fn = fn
        g = tuple(int(x) for x in grid) + (1, 1)
        self.grid = g[:3]
        self.opts = opts
        self.handle = None  # (launcher, function, packed_metadata, device) after the first call
        self.direct = None  # direct_launch(...) + (device, get_stream, get_device, runtime knobs, enter hook, exit hook)
        self.fast = not fast_path_reason()
        STEPS_BUILT[0] += 1

    def launch(self, args: tuple) -> bool:
        """The kept launch (the C launch, else compiled.run) with `args` as given, where a pointer argument may be
        the tensor's data_ptr() as an int (the C launch then neither calls data_ptr() nor cuPointerGetAttribute on
        it); False, launching nothing, before a first call kept a launch, under a launch hook or on another device:
        the caller then calls the Step with the tensors (the binder path)."""
        d = self.direct
        if d is not None:
            launch, gx, gy, gz, function, coop, pdl, meta, ann, sig, device, get_stream, get_device, rt, enter, leave = d
            dev = get_device()
            # no hook registered: the hook chains of the first call, still in place and empty (else hooks_idle)
            if dev == device and ((rt.launch_enter_hook is enter and rt.launch_exit_hook is leave and not enter.calls
                                   and not leave.calls) or hooks_idle(rt)):
                # CudaLauncher.__call__'s launch with no scratch buffer and no hook (direct_launch)
                launch(gx, gy, gz, get_stream(dev), function, coop, pdl, meta, None, None, None, None, None, ann, sig,
                       args)
                return True
        h = self.handle
        if h is not None:
            get_stream, get_device, rt, _ = _DRIVER
            dev = get_device()
            if dev == h[3] and hooks_idle(rt):
                g = self.grid
                h[0](g[0], g[1], g[2], get_stream(dev), h[1], h[2], None, None, None, *args)
                return True
        return False

    def __call__(self, *args):
        """Launch with every argument as the kernel takes it (tensors for pointers): the kept launch, else the binder
        (which on the first call keeps the launch)."""
        if self.launch(args):
            return
        kernel = self.fn[self.grid](*args, **self.opts)
        if self.fast and self.handle is None and self.direct is None:
            self._keep(kernel, args)

    def _keep(self, kernel, args: tuple) -> None:
        """Keep the compiled kernel's C launch (direct_launch) or, where that does not apply, its launcher (only a
        loaded CompiledKernel: not an async-compile future)."""
        if hasattr(kernel, "result") and not hasattr(kernel, "packed_metadata"):
            return
        function = getattr(kernel, "function", None)
        meta = getattr(kernel, "packed_metadata", None)
        if function is None or meta is None:
            return
        get_stream, get_device, rt, raw_launch = _driver()
        device = get_device()
        if not _LAUNCHER:
            _LAUNCHER.append(launcher_reason())
        launcher = kernel.run
        direct = (SWITCHED_OFF if not direct_enabled() else
                  _LAUNCHER[0] or direct_launch(launcher, function, meta, self.grid, args, raw_launch))
        if isinstance(direct, tuple):
            enter, leave = (h if isinstance(getattr(h, "calls", None), list) else _NEVER
                            for h in (rt.launch_enter_hook, rt.launch_exit_hook))
            self.direct = (*direct, device, get_stream, get_device, rt, enter, leave)
            return
        _DIRECT_OFF.setdefault(getattr(self.fn, "__name__", repr(self.fn)), direct)
        self.handle = (launcher, function, meta, device)


# ---- plans ------------------------------------------------------------------------------------------------

_PLANS: dict = {}
_RETIRED: list = []  # dropped plans: a CUDA graph captured with their workspaces may still replay them


def tensor_key(tensors) -> tuple:
    """What a plan depends on of its tensors: shape, strides, dtype, device (type and index) and 16-byte alignment
    of each (op_key holds the same, built inline)."""
    return tuple([(t.shape, t.stride(), t.dtype, t.device, not t.data_ptr() & 15) for t in tensors])


def op_key(op: str, table, config: dict | None, tensors) -> tuple:
    """The plan key of one op call: the op, the interpreter flag, the launch table (by identity), the explicit
    config and the tensors (tensor_key, inline: a call less). An unhashable config value makes the key unhashable:
    planned on every call (plan)."""
    return op_key_ptrs(op, table, config, tensors)[0]


def op_key_ptrs(op: str, table, config: dict | None, tensors) -> tuple[tuple, list]:
    """(op_key, the tensors' data_ptr() values): the key reads every pointer for its alignment anyway, and a planned
    op hands the same ints to Step.launch (int_pointers), so a call reads each pointer once."""
    ptrs = [t.data_ptr() for t in tensors]
    if config is None:
        cfg_key = None
    else:
        try:
            cfg_key = tuple(sorted(config.items()))
        except TypeError:  # an unhashable value
            cfg_key = [config]
    return (op, _interpret_raw() in _ON, id(table), cfg_key,
            tuple([(t.shape, t.stride(), t.dtype, t.device, not q & 15) for t, q in zip(tensors, ptrs)])), ptrs


# Pointer arguments as ints on the kept launches (the plan's workspaces' pointers read once, the call's tensors' from
# op_key_ptrs): Triton's C launch takes an int pointer as it is, where for a tensor it calls data_ptr() and then
# cuPointerGetAttribute (a driver call) per pointer argument. SGLANG_KIMI_EAGLE3_INT_POINTERS=0 (read when a plan is
# built) hands the tensors instead.
ENV_INT_POINTERS = "SGLANG_KIMI_EAGLE3_INT_POINTERS"


def int_pointers() -> bool:
    """Plans built now hand their kept launches pointer ints (default), not tensors."""
    return os.environ.get(ENV_INT_POINTERS) != "0"


def plan(key, build, *args):
    """build(*args) once per key (an unhashable key: every call). A build that raises (a guard) is not kept."""
    try:
        hit = _PLANS.get(key)
    except TypeError:
        return build(*args)
    if hit is None:
        if len(_PLANS) >= MAX_PLANS:
            _RETIRED.append(_PLANS.pop(next(iter(_PLANS))))
        hit = _PLANS[key] = build(*args)
    return hit


def clear_plans() -> None:
    """Forget every plan (the next call of each key rebuilds it: guards, config, workspaces); their
    workspaces stay allocated (a captured CUDA graph may point at them)."""
    _RETIRED.extend(_PLANS.values())
    _PLANS.clear()
