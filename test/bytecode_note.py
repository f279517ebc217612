"""The line the suite prints at its start where test processes would compile SGLang's imports again (test/conftest.py).

With PYTHONDONTWRITEBYTECODE set and no byte-code beside SGLang's sources (a venv installed with pip's --no-compile,
as .ci/run installs it), every process the suite starts compiles the roughly 9000 modules SGLang imports from source:
on the 2-core box a `check` subprocess then spends 19 of its 37 s in `compile` (2026-12-07, cProfile). Python still
reads byte-code that exists, so one `compileall` of the venv, or running without the variable, removes the cost.
No sglang import here (collection must work without SGLang)."""

import importlib.util
import os


def note(environ=os.environ, origin: str | None = None) -> str | None:
    """The line to print at the suite's start, or None. `origin`: SGLang's `__init__.py` (found without importing it)."""
    if not environ.get("PYTHONDONTWRITEBYTECODE"):
        return None
    if origin is None:
        spec = importlib.util.find_spec("sglang")
        origin = spec.origin if spec is not None else None
    if not origin or os.path.exists(importlib.util.cache_from_source(origin)):
        return None
    site = os.path.dirname(os.path.dirname(origin))
    return ("PYTHONDONTWRITEBYTECODE is set and SGLang has no byte-code: every test process compiles its imports from "
            f"source again (a slower suite); unset the variable, or run once: python -m compileall -q {site}")
