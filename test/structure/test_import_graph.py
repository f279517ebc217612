"""The package's modules form no import circle (imports inside functions included).

Each module's imports are read with `ast` (no module is imported): `import a.b`, `from .x import y`
(`y` a submodule -> that module; else the package `x`), at any depth of the module's code. A circle
means two modules each reach into the other: one of them should be split so the lower one is a leaf.
"""

import ast
from pathlib import Path

import pytest

PKG = "sglang_kimi_eagle3"
ROOT = Path(__file__).resolve().parents[2] / "python" / PKG


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_package(mods: dict[str, Path], name: str) -> bool:
    return name in mods and mods[name].name == "__init__.py"


def _base(mods, module: str, level: int, target: str | None) -> str:
    if level == 0:
        return target or ""
    pkg = module if _is_package(mods, module) else module.rsplit(".", 1)[0]
    for _ in range(level - 1):
        pkg = pkg.rsplit(".", 1)[0]
    return f"{pkg}.{target}" if target else pkg


def imports_of(mods: dict[str, Path], module: str) -> set[str]:
    tree = ast.parse(mods[module].read_text(), str(mods[module]))
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _base(mods, module, node.level, node.module)
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
        else:
            continue
        for name in names:
            while name and name not in mods:  # `import pkg.mod.attr` -> the deepest module named
                name = name.rsplit(".", 1)[0] if "." in name else ""
            if name and name != module:
                out.add(name)
    return out


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle (a list of modules, first == last), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def test_the_graph_reader_sees_a_circle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_no_import_circle_among_the_package_modules():
    mods = _modules()
    assert f"{PKG}.integration.plugin" in mods
    graph = {m: imports_of(mods, m) for m in mods}
    assert f"{PKG}.status.hookstatus" in graph[f"{PKG}.integration.hooks.runtime_status"]  # the reader sees real edges
    cycle = find_cycle(graph)
    if cycle:
        pytest.fail("import circle: " + " -> ".join(c.removeprefix(PKG + ".") for c in cycle))


# Where sglang may be imported: integration/ (hooks, their leaves, the preflight adapters), and the commands that
# parse launch_server flags or load SGLang's plugins, inside their functions. Every other module stays pure.
SGLANG_ALLOWED = (f"{PKG}.integration", f"{PKG}.commands.check", f"{PKG}.commands.status", f"{PKG}.commands.tune")


def imports_sglang(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                 [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
        if any(n.split(".")[0] == "sglang" for n in names):
            return True
    return False


def test_only_integration_and_the_sglang_commands_import_sglang():
    mods = _modules()
    assert imports_sglang(mods[f"{PKG}.integration.hooks.launch_step"])  # the reader sees a real import
    outside = sorted(m for m, p in mods.items()
                     if not any(m == a or m.startswith(a + ".") for a in SGLANG_ALLOWED) and imports_sglang(p))
    assert not outside, "sglang imported outside integration/ and commands/{check,status,tune}: " + ", ".join(outside)
