"""The series' kernel files are generated from `ops/` at export time: the repository holds each kernel
once. A PR's new file names the pieces it takes with `# @ops MODULE: names`; the exported file carries
their source exactly as in `sglang_kimi_eagle3/ops/MODULE.py`, the PR folder holds no copy of it, and a
line that names a missing piece, or a piece that needs a name the generated module lacks, stops the
export with exit 2 naming the PR and the file (`--check` too).
"""

import ast
import shutil
from pathlib import Path

import pytest

from sglang_kimi_eagle3 import cli, upstream_export

pytestmark = pytest.mark.slow

KERNEL_FILES = {"02": "python/sglang/kernels/ops/speculative/tree_sampling_triton.py",
                "03": "python/sglang/kernels/ops/speculative/draft_topk.py"}


def _definitions(text: str) -> dict[str, str]:
    lines = text.splitlines()
    out = {}
    for node in ast.parse(text).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            start = node.decorator_list[0].lineno if node.decorator_list else node.lineno
            out[node.name] = "\n".join(lines[start - 1:node.end_lineno])
    return out


def _directives(text: str) -> list[tuple[str, list[str]]]:
    return [(m.group(1), m.group(2).split(", ")) for m in upstream_export.OPS_DIRECTIVE.finditer(text)]


def test_exported_kernel_files_carry_the_ops_source(exported):
    prs = {p.num: p for p in upstream_export.load_series()}
    ops_root = Path(upstream_export.__file__).parent / "ops"
    for num, rel in KERNEL_FILES.items():
        template = (prs[num].folder / rel).read_text()
        directives = _directives(template)
        assert directives, f"PR {num}: {rel} takes nothing from ops/"
        out = (exported / "tree" / rel).read_text()
        assert "# @ops" not in out
        got = _definitions(out)
        for module, names in directives:
            ops = _definitions((ops_root / f"{module}.py").read_text())
            for name in names:
                assert got[name] == ops[name], f"PR {num}: {name} differs from ops/{module}.py"
        # the whole file: the PR's own text with each `# @ops` line replaced by those pieces, two blank lines apart
        expected = template
        for module, names in directives:
            ops = _definitions((ops_root / f"{module}.py").read_text())
            expected = expected.replace(f"# @ops {module}: {', '.join(names)}", "\n\n\n".join(ops[n] for n in names), 1)
        assert out == expected
        assert out == upstream_export.render_new_file(prs[num], rel)
        compile(out, rel, "exec")


def test_the_series_holds_no_copy_of_an_ops_definition():
    ops = {}
    for f in sorted((Path(upstream_export.__file__).parent / "ops").glob("*.py")):
        for name, src in _definitions(f.read_text()).items():
            ops.setdefault(src, f"ops/{f.name}:{name}")
    for pr in upstream_export.load_series():
        for rel in pr.new_files:
            if rel.endswith(".py"):
                for name, src in _definitions((pr.folder / rel).read_text()).items():
                    assert src not in ops, f"{pr.name}/{rel}: {name} is a copy of {ops[src]}; use `# @ops` instead"


def _series_copy(tmp_path, monkeypatch, old: str, new: str) -> Path:
    root = tmp_path / "series"
    shutil.copytree(upstream_export.series_root(), root)
    f = root / "02-tree-sampling-triton" / KERNEL_FILES["02"]
    text = f.read_text()
    assert old in text
    f.write_text(text.replace(old, new))
    monkeypatch.setattr(upstream_export, "series_root", lambda: root)
    return root


def test_a_missing_ops_definition_exits_2_naming_the_pr_and_the_file(tmp_path, monkeypatch, capsys):
    _series_copy(tmp_path, monkeypatch, "# @ops _tree: pick, take,", "# @ops _tree: pick, no_such_helper, take,")
    out = tmp_path / "out"
    assert cli.main(["upstream", "export", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "PR 02-tree-sampling-triton" in err and KERNEL_FILES["02"] in err and "no top-level no_such_helper" in err
    assert len(err.strip().splitlines()) == 1
    assert not out.exists()
    assert cli.main(["upstream", "export", "--check"]) == 2
    assert "no_such_helper" in capsys.readouterr().err


def test_a_piece_needing_a_name_the_module_lacks_exits_2(tmp_path, monkeypatch, capsys):
    """ops/_tree.py's pick reads a module constant the PR's file does not define."""
    ops = tmp_path / "ops"
    shutil.copytree(upstream_export.OPS_DIR, ops)
    old = "    return tl.sum(tl.where(offs[None, :] == idx[:, None], vec, 0), axis=1)"
    text = (ops / "_tree.py").read_text()
    assert old in text
    (ops / "_tree.py").write_text(text.replace(old, old.replace("vec, 0)", "vec, ZERO_CONST)")))
    monkeypatch.setattr(upstream_export, "OPS_DIR", ops)
    assert cli.main(["upstream", "export", "--check"]) == 2
    err = capsys.readouterr().err
    assert "PR 02-tree-sampling-triton" in err and "ZERO_CONST (used by pick)" in err
