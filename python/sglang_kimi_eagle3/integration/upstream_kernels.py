"""SGLang's own kernel modules, importable where its full stack is absent (e.g. the lent GPU machine).

`import sglang` runs sglang/__init__.py, which pulls in the whole server (FastAPI, tokenizers,
sgl_kernel...). The kernel modules (`sglang.kernels.ops.speculative.*`) need only torch and triton
(and nvcc for the JIT CUDA ones). Where the full package imports, this is a plain import; otherwise
an empty parent package pointing at the installed sglang folder ($SITE/sglang, or where Python finds
it) is registered first, so the kernel modules import without that __init__.

Used by `tune` and the benchmarks.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import types

SPEC_MODULES = ("tree", "topk1", "eagle", "sampling", "spec_tree")


def _sglang_dir() -> str | None:
    site = os.environ.get("SITE")
    if site and os.path.isdir(os.path.join(site, "sglang")):
        return os.path.join(site, "sglang")
    try:
        spec = importlib.util.find_spec("sglang")
    except (ImportError, ValueError):
        return None
    locs = list(spec.submodule_search_locations or []) if spec else []
    return locs[0] if locs else None


def _stub_parent(path: str) -> None:
    for name in [m for m in sys.modules if m == "sglang" or m.startswith("sglang.")]:
        del sys.modules[name]  # a half-imported full package: start over with the bare parent
    pkg = types.ModuleType("sglang")
    pkg.__path__ = [path]
    sys.modules["sglang"] = pkg


def sglang_module(name: str):
    """Import `sglang.<name>` (e.g. 'kernels.ops.speculative.tree') without running sglang/__init__
    where that cannot run. $SITE (a folder holding sglang/) takes precedence, as on the device machine."""
    if "sglang" not in sys.modules:
        site = os.environ.get("SITE")
        if site and os.path.isdir(os.path.join(site, "sglang")):
            _stub_parent(os.path.join(site, "sglang"))
        else:
            try:
                importlib.import_module("sglang")
            except Exception:
                path = _sglang_dir()
                if path is None:
                    raise
                _stub_parent(path)
    return importlib.import_module(f"sglang.{name}")


def spec_ops() -> types.SimpleNamespace:
    """SGLang's speculative kernel modules that import here (attribute per module; missing ones are absent, and
    `import_errors` maps each to why: "ExcType: message", so a caller's error can name the cause)."""
    mods, errors = {}, {}
    for n in SPEC_MODULES:
        try:
            mods[n] = sglang_module(f"kernels.ops.speculative.{n}")
        except Exception as e:  # one that needs a missing dependency: the others stay usable
            errors[n] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}".rstrip(": ")
    return types.SimpleNamespace(**mods, import_errors=errors)
