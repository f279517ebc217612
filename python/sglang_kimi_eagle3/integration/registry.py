"""Register our hooks with SGLang's HookRegistry and find out whether they really took effect.

`HookRegistry.register` only queues a hook; `load_plugins()` applies the queue after every plugin
ran, and logs-and-swallows any failure. So each hook is recorded as `registered` here, and
`refresh()` later resolves the upstream attribute and walks its wrapper chain (`__wrapped__`, set by
HookRegistry's wrappers) looking for our function: found -> `applied`, not found -> `failed` with
the reason. `refresh()` runs where a status is read: the launch-time preflight (build_deployment),
`sglang-kimi-eagle3 status`/`check`, and the scheduler's runtime status (runtime_status.status_rows),
which also verifies every call-site binding, not only the defining attribute.
"""

from __future__ import annotations

import pkgutil

from ..status import hookstatus

# hook name -> (target, our function)
_PENDING: dict[str, tuple[str, object]] = {}
# rows whose `failed` state refresh() itself recorded (not applied yet): the only failed rows it looks at again. A
# hook that fails at run time (its own `failed` row, e.g. a flush that SGLang's code refused) keeps it: its wrapper
# is still in the chain, and reading that as `applied` would hide the failure.
_APPLY_FAILED: set[str] = set()


# target -> the one AROUND function HookRegistry holds for our hooks that share that target (register(..., shared=)):
# SGLang warns on stderr at every plugin load when a target has several AROUND hooks, so ours go through one
_SHARED: dict[str, object] = {}


def register(name: str, target: str, fn, hook_type: str, shared: int | None = None) -> str:
    """Queue `fn` on `target` (hook_type: "before" | "after" | "around" | "replace"). `shared` (an AROUND that another
    of our hooks also puts on this target): every such fn goes into one dispatcher per target, lower `shared` outer."""
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    if shared is not None and hook_type == "around":
        disp = _SHARED.get(target)
        if disp is None:
            disp = _SHARED[target] = _dispatcher()
            HookRegistry.register(target, disp, HookType(hook_type))
        fns = disp._kimi_eagle3_fns  # a hook installed again (a second plugin load) replaces its own entry
        fns[:] = sorted([e for e in fns if e[1] != name] + [(shared, name, fn)], key=lambda e: e[0])
    else:
        HookRegistry.register(target, fn, HookType(hook_type))
    _PENDING[name] = (target, fn)
    hookstatus.record(name, target, "registered", f"{hook_type} hook queued for HookRegistry.apply_hooks")
    return "registered"


def _dispatcher():
    """One AROUND for several of ours: each gets the next (then SGLang's original) as its `original`."""
    fns: list = []

    def shared_around(original, *args, **kwargs):
        return _call(0, original, args, kwargs)

    def _call(i, original, args, kwargs):
        if i == len(fns) - 1:
            return fns[i][2](original, *args, **kwargs)
        return fns[i][2](lambda *a, **k: _call(i + 1, original, a, k), *args, **kwargs)

    shared_around._kimi_eagle3_fns = fns
    return shared_around


def _chain_contains(attr, fn) -> bool:
    """True if `attr` is (a wrapper chain around) a HookRegistry wrapper that calls `fn` (itself, or through the
    dispatcher of hooks sharing the target)."""
    seen = 0
    while attr is not None and seen < 32:
        func = getattr(attr, "__func__", attr)  # classmethod / staticmethod
        for cell in getattr(func, "__closure__", None) or ():
            try:
                held = cell.cell_contents
            except ValueError:  # empty cell
                continue
            if held is fn or any(f is fn for _r, _n, f in getattr(held, "_kimi_eagle3_fns", ())):
                return True
        attr = getattr(func, "__wrapped__", None)
        seen += 1
    return False


def _resolve(target: str):
    obj_path, attr_name = target.rsplit(".", 1)
    obj = pkgutil.resolve_name(obj_path)
    raw = obj.__dict__.get(attr_name) if isinstance(obj, type) else None
    return raw if raw is not None else getattr(obj, attr_name)


def _plugins_loaded() -> bool:
    import sglang.srt.plugins as plugins

    return bool(getattr(plugins, "_plugins_loaded", False))


def refresh() -> list[hookstatus.HookStatus]:
    """Turn every `registered` row into `applied` or `failed` by looking at the live attribute."""
    try:
        from sglang.srt.plugins.hook_registry import HookRegistry
    except Exception as exc:  # sglang missing or broken: say so on every pending row
        for name, (target, _fn) in _PENDING.items():
            _failed(name, target, f"cannot import sglang's HookRegistry: {exc}")
        return hookstatus.rows()
    for name, (target, fn) in _PENDING.items():
        row = hookstatus.get(name)
        if row is None or row.state not in ("registered", "failed") or (row.state == "failed" and name not in _APPLY_FAILED):
            continue
        _APPLY_FAILED.discard(name)
        try:
            attr = _resolve(target)
        except Exception as exc:
            _failed(name, target, f"target not found on the installed sglang: {type(exc).__name__}: {exc}")
            continue
        if _chain_contains(attr, fn):
            hookstatus.record(name, target, "applied", row.detail.replace(" queued for HookRegistry.apply_hooks", ""))
        elif target in HookRegistry._patched:
            _failed(name, target, "target was patched before our hook was queued (HookRegistry ignores late hooks)")
        elif _plugins_loaded():
            _failed(name, target, "HookRegistry.apply_hooks ran but did not patch it (SGLang logged 'Failed to apply hooks to ...')")
        else:
            hookstatus.record(name, target, "registered", "queued; load_plugins() has not applied hooks yet in this process")
    return hookstatus.rows()


def _failed(name: str, target: str, why: str) -> None:
    hookstatus.record(name, target, "failed", why)
    _APPLY_FAILED.add(name)
