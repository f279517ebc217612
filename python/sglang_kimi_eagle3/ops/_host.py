"""The host path of the eager ops: launch plans memoised per call signature, launches at the launcher floor.

SGLang runs the tree-verification ops outside its CUDA graphs, so every decode step pays their host time. Through
`kernel[grid](...)` each launch re-binds its arguments, re-specialises them and rebuilds the cache key (Triton's
binder, ~32 µs per launch on the H200's host against ~13 µs for the compiled kernel's own C launcher), and the
op around it re-ran its guards, looked its config up and allocated its workspaces on every call. Here:

  plan(key, build)  the op's launch plan for one call signature, built once: `key` is the op's own facts
                    (config, table) plus `tensor_key` of its tensors (shape, strides, dtype, device, 16-byte
                    alignment: everything the input guard reads and everything Triton specialises a pointer on),
                    so the full guard, the config lookup, the launch geometry and the workspaces (allocated
                    once per plan, reused: one stream per device, as SGLang runs these ops) come from the first
                    call of a key, and every later call is one dict lookup.
  Step              one kernel of a plan with its grid and launch options. The first call launches through
                    Triton's binder (`kernel[grid](*args, **opts)`, which compiles and returns the compiled
                    kernel); later calls hand the same arguments straight to the compiled kernel's launcher
                    with the calling convention of `JITFunction.run`:
                        compiled.run(gx, gy, gz, stream, compiled.function, compiled.packed_metadata,
                                     launch_metadata, launch_enter_hook, launch_exit_hook, *every_argument)
                    (every parameter, constexprs included, in signature order: the launcher drops the
                    constexprs itself). The plan's key pins every specialisation input (integer values,
                    pointer alignment, dtypes), so the compiled kernel of the first call is the one Triton's
                    binder would pick for every later call of that plan.

The fast path is off, with a recorded reason (`fast_path_reason()`), under TRITON_INTERPRET=1 (no compiled
launcher: the CPU tests run the binder path and so the same math), when the installed Triton's `JITFunction.run`
does not launch with exactly that call (checked on its source: Triton 3.4 to 3.8 do), and for any launch while a
launch hook is registered (a profiler: the binder path calls it). test/ops/test_host_path.py checks the
convention on the installed Triton.

Also the host integer helpers: Triton 3.8 wraps `triton.cdiv` / `triton.next_power_of_2` as ConstexprFunctions
(~10 µs a call from host code); these are the same arithmetic, for host code only (kernels keep triton.cdiv).
"""

from __future__ import annotations

import inspect

from ..base import env_reader

# The launch statement of Triton's JITFunction.run this fast path mirrors (whitespace folded).
CONVENTION = ("kernel.run(grid_0, grid_1, grid_2, stream, kernel.function, kernel.packed_metadata, launch_metadata, "
              "knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook, *bound_args.values())")
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

_interpret_var = env_reader("TRITON_INTERPRET")


def interpreted() -> bool:
    """TRITON_INTERPRET=1 (read per call: tests switch it; a plan key holds it)."""
    return _interpret_var()[0] in (b"1", "1")


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
        src = " ".join(inspect.getsource(JITFunction.run).split())
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


_DRIVER: list = []  # [get_current_stream, get_current_device, knobs.runtime] of the installed Triton, resolved once


def _driver():
    if not _DRIVER:
        from triton import knobs
        from triton.runtime.driver import driver

        _DRIVER.extend((driver.active.get_current_stream, driver.active.get_current_device, knobs.runtime))
    return _DRIVER


class Step:
    """One kernel launch of a plan: the @triton.jit function, its grid and launch options, and (after the
    first call, where the fast path applies) the compiled kernel's launcher. Call it with every kernel
    parameter positionally, constexprs included, in signature order."""

    __slots__ = ("fn", "grid", "opts", "handle", "fast")

    def __init__(self, fn, grid: tuple, **opts):
        self.fn = fn
        g = tuple(int(x) for x in grid) + (1, 1)
        self.grid = g[:3]
        self.opts = opts
        self.handle = None  # (launcher, function, packed_metadata, device) after the first call
        self.fast = not fast_path_reason()

    def __call__(self, *args):
        h = self.handle
        if h is not None:
            get_stream, get_device, rt = _DRIVER
            dev = get_device()
            if dev == h[3] and hooks_idle(rt):
                g = self.grid
                h[0](g[0], g[1], g[2], get_stream(dev), h[1], h[2], None, None, None, *args)
                return
        kernel = self.fn[self.grid](*args, **self.opts)
        if self.fast and h is None:
            self._keep(kernel)

    def _keep(self, kernel) -> None:
        """Keep the compiled kernel's launcher (only a loaded CompiledKernel: not an async-compile future)."""
        if hasattr(kernel, "result") and not hasattr(kernel, "packed_metadata"):
            return
        function = getattr(kernel, "function", None)
        meta = getattr(kernel, "packed_metadata", None)
        if function is None or meta is None:
            return
        get_device = _driver()[1]
        self.handle = (kernel.run, function, meta, get_device())


# ---- plans ------------------------------------------------------------------------------------------------

_PLANS: dict = {}
_RETIRED: list = []  # dropped plans: a CUDA graph captured with their workspaces may still replay them


def tensor_key(tensors) -> tuple:
    """What a plan depends on of its tensors: shape, strides, dtype, device and 16-byte alignment of each."""
    return tuple((t.shape, t.stride(), t.dtype, t.device, not t.data_ptr() & 15) for t in tensors)


def op_key(op: str, table, config: dict | None, tensors) -> tuple:
    """The plan key of one op call: the op, the interpreter flag, the launch table (by identity), the explicit
    config and the tensors (tensor_key). An unhashable config value makes the key unhashable: planned on every
    call (plan)."""
    try:
        cfg_key = tuple(sorted(config.items())) if config is not None else None
    except TypeError:  # an unhashable value
        cfg_key = [config]
    return (op, interpreted(), id(table), cfg_key, tensor_key(tensors))


def plan(key, build):
    """build() once per key (an unhashable key: every call). A build that raises (a guard) is not kept."""
    try:
        hit = _PLANS.get(key)
    except TypeError:
        return build()
    if hit is None:
        if len(_PLANS) >= MAX_PLANS:
            _RETIRED.append(_PLANS.pop(next(iter(_PLANS))))
        hit = _PLANS[key] = build()
    return hit


def clear_plans() -> None:
    """Forget every plan (the next call of each key rebuilds it: guards, config, workspaces); their
    workspaces stay allocated (a captured CUDA graph may point at them)."""
    _RETIRED.extend(_PLANS.values())
    _PLANS.clear()
