"""`sglang-kimi-eagle3 upstream export`: the series applies to the installed SGLang 0.5.23, the patched
tree (plugin off) accepts the seed's launch shape on the tiny pair with `extend` and refuses it with
`strict` naming the flag, a moved anchor exits 2 naming the PR and the anchor, reruns are idempotent,
`--check` writes nothing, every new test file registers and parses with SGLang's own ut_parse_one_file,
and the series is found after a non-editable install.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT, pythonpath, run_python
from sglang_kimi_eagle3 import cli, upstream_export

pytestmark = pytest.mark.slow


def _digest(folder: Path) -> dict:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_export_applies_every_pr_to_the_installed_sglang(exported):
    prs = upstream_export.load_series()
    assert [p.name for p in prs] == ["01-draft-context-policy", "02-tree-sampling-triton", "03-draft-softmax-topk",
                                     "04-offstate-verify-decode", "05-offstate-deferred-extend",
                                     "06-adaptive-decode-reserve"]
    names = sorted(p.name for p in (exported / "patches").iterdir())
    assert names == ["0001-draft-context-policy.patch", "0002-tree-sampling-triton.patch", "0003-draft-softmax-topk.patch",
                     "0004-offstate-verify-decode.patch", "0005-offstate-deferred-extend.patch",
                     "0006-adaptive-decode-reserve.patch"]
    tree = exported / "tree"
    for pr in prs:
        for e in pr.edits:  # every edit's text is in the patched file
            text = (tree / e["file"]).read_text()
            assert (e.get("before") or e.get("after") or e["replace"]) in text, (pr.name, e["file"])
        for rel in pr.new_files:
            assert (tree / rel).read_text() == upstream_export.render_new_file(pr, rel)  # `# @ops` lines filled
    patch = (exported / "patches" / "0001-draft-context-policy.patch").read_text()
    assert "Subject: [PATCH 01/" not in patch and "Subject: [PATCH] [Spec] Add --speculative-draft-context-policy" in patch
    assert "+++ b/python/sglang/srt/configs/model_config.py" in patch
    assert "+++ b/test/registered/spec/test_draft_context_policy.py" in patch
    assert "## Motivation" in patch  # PR.md is the commit message
    assert "SGLang 0.5.23" in (exported / "SERIES.md").read_text()


def test_patches_apply_with_git_am_to_the_original_files(exported, tmp_path):
    """The patches, applied by git to SGLang's own files, give exactly the exported tree."""
    src = upstream_export.find_sglang()
    repo = tmp_path / "sglang"
    touched = sorted({e["file"] for p in upstream_export.load_series() for e in p.edits})
    for rel in touched:
        dst = repo / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src / rel[len("python/sglang/"):], dst)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "HOME": str(tmp_path)}
    run = lambda *a: subprocess.run(["git", *a], cwd=repo, env=env, check=True, capture_output=True, text=True)
    run("init", "-q")
    run("add", "-A")
    run("commit", "-qm", "base")
    run("am", "-q", *sorted(str(p) for p in (exported / "patches").iterdir()))
    assert len(run("log", "--oneline").stdout.splitlines()) == 7
    for p in repo.rglob("*"):
        if p.is_file() and ".git" not in p.parts:
            assert p.read_bytes() == (exported / "tree" / p.relative_to(repo)).read_bytes(), p


def test_rerun_is_idempotent(exported, tmp_path):
    out = tmp_path / "again"
    assert cli.main(["upstream", "export", "--out", str(out)]) == 0
    first = _digest(out / "patches"), (out / "SERIES.md").read_text()
    assert cli.main(["upstream", "export", "--out", str(out)]) == 0
    assert (_digest(out / "patches"), (out / "SERIES.md").read_text()) == first
    assert _digest(out / "patches") == _digest(exported / "patches")  # byte-identical to another run
    assert sorted(p.name for p in out.iterdir()) == [upstream_export.MANIFEST, "SERIES.md", "patches", "tree"]  # no temp


def test_check_verifies_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "nothing"
    assert cli.main(["upstream", "export", "--out", str(out), "--check"]) == 0
    assert "6 PRs" in capsys.readouterr().out
    assert not out.exists()


def test_only_applies_one_pr(tmp_path):
    assert cli.main(["upstream", "export", "--out", str(tmp_path), "--only", "02"]) == 0
    assert sorted(p.name for p in (tmp_path / "patches").iterdir()) == ["0002-tree-sampling-triton.patch"]
    spec = tmp_path / "tree" / "python" / "sglang" / "srt" / "arg_groups" / "fields" / "spec.py"
    assert "speculative_draft_context_policy" not in spec.read_text()


def test_pr_05_applies_alone_and_after_pr_03_on_the_same_worker_file(exported, tmp_path):
    """PR 03 and PR 05 both edit eagle_worker_v2.py: PR 05 alone gives the deferred extend without PR 03's top-k;
    the whole series gives both, and the worker imports from the patched tree (plugin off)."""
    assert cli.main(["upstream", "export", "--out", str(tmp_path), "--only", "05"]) == 0
    assert sorted(p.name for p in (tmp_path / "patches").iterdir()) == ["0005-offstate-deferred-extend.patch"]
    rel = Path("python/sglang/srt/speculative/eagle_worker_v2.py")
    alone, series = (tmp_path / "tree" / rel).read_text(), (exported / "tree" / rel).read_text()
    for text in (alone, series):
        assert "self.deferred_draft_extend.defer(batch, batch_output)" in text
        assert "self.deferred_draft_extend.flush(batch, restore=True)" in text
    assert "draft_probs_topk_dispatch" not in alone and "draft_probs_topk_dispatch" in series
    assert (tmp_path / "tree" / "python/sglang/srt/speculative/deferred_draft_extend.py").is_file()
    code = ("import sglang.srt.speculative.eagle_worker_v2 as ew; from sglang.srt.environ import envs; "
            "print(ew.__file__, type(ew.EAGLEWorkerV2.__dict__['deferred_draft_extend']).__name__, "
            "envs.SGLANG_SPEC_DEFER_ZERO_STEP_DRAFT_EXTEND.get())")
    for out in (tmp_path, exported):
        cp = run_python(code, timeout=400, SGLANG_KIMI_EAGLE3="0", PYTHONPATH=pythonpath(out / "tree" / "python"))
        assert cp.returncode == 0, cp.stderr[-3000:]
        path, kind, default = cp.stdout.split()[-3:]
        assert path.startswith(str(out / "tree" / "python")) and kind == "cached_property" and default == "0", cp.stdout


def _fake_sglang(tmp_path: Path, break_file: str, old: str, new: str) -> Path:
    """The files the series edits, copied from the installed SGLang, one anchor changed."""
    src = upstream_export.find_sglang()
    pkg = tmp_path / "sglang"
    (pkg / "srt").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    for pr in upstream_export.load_series():
        for e in pr.edits:
            rel = e["file"][len("python/sglang/"):]
            (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src / rel, pkg / rel)
    f = pkg / break_file
    text = f.read_text()
    assert old in text
    f.write_text(text.replace(old, new))
    return pkg


def test_a_moved_anchor_exits_2_naming_the_pr_and_the_anchor(tmp_path, capsys):
    pkg = _fake_sglang(tmp_path, "srt/configs/model_config.py",
                       "derived_context_len = get_context_length(self.hf_text_config)",
                       "derived_context_len = get_context_length(self.hf_config)")
    out = tmp_path / "out"
    assert cli.main(["upstream", "export", "--out", str(out), "--sglang-src", str(pkg)]) == 2
    err = capsys.readouterr().err
    assert "PR 01-draft-context-policy" in err and "anchor not found" in err
    assert "python/sglang/srt/configs/model_config.py" in err
    assert "derived_context_len = get_context_length(self.hf_text_config)" in err
    assert len(err.strip().splitlines()) == 1
    assert not out.exists()  # nothing written
    # --check says the same
    assert cli.main(["upstream", "export", "--check", "--sglang-src", str(pkg)]) == 2
    assert "PR 01-draft-context-policy" in capsys.readouterr().err


def test_a_duplicated_anchor_is_refused_too(tmp_path, capsys):
    anchor = "    SGLANG_SPEC_EXPANSION_SAFETY_FACTOR = EnvInt(2)\n"
    pkg = _fake_sglang(tmp_path, "srt/environ.py", anchor, anchor + anchor)
    assert cli.main(["upstream", "export", "--check", "--sglang-src", str(pkg)]) == 2
    err = capsys.readouterr().err
    assert "PR 02-tree-sampling-triton" in err and "found 2 times" in err


def test_bad_arguments_exit_2(capsys):
    assert cli.main(["upstream", "export"]) == 2
    assert cli.main(["upstream", "export", "--check", "--only", "09"]) == 2
    assert cli.main(["upstream", "export", "--check", "--sglang-src", "/nonexistent"]) == 2
    err = capsys.readouterr().err
    assert "--out DIR is required" in err and "--only 09" in err and "--sglang-src /nonexistent" in err


def test_a_users_files_in_the_out_folder_are_never_replaced(tmp_path, capsys):
    """Data loss: DIR/patches/MINE.txt (or a file of the user's inside tree/, or a SERIES.md) is refused (exit 2,
    naming it), not swapped away with the export's own patches/; after the user moves it, export runs, and a
    rerun over its own outputs still runs; Python's __pycache__ in the tree does not count as the user's."""
    out = tmp_path / "out dir" / "v 1"
    (out / "patches").mkdir(parents=True)
    (out / "patches" / "MINE.txt").write_text("mine")
    assert cli.main(["upstream", "export", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert str(out / "patches" / "MINE.txt") in err and "move it away" in err and len(err.strip().splitlines()) == 1
    assert (out / "patches" / "MINE.txt").read_text() == "mine"
    assert sorted(p.name for p in out.iterdir()) == ["patches"]  # nothing half-written
    shutil.move(out / "patches", tmp_path / "kept")
    assert cli.main(["upstream", "export", "--out", str(out)]) == 0
    cache = out / "tree" / "python" / "sglang" / "__pycache__" / "x.cpython-311.pyc"
    cache.parent.mkdir(exist_ok=True)
    cache.write_bytes(b"")
    assert cli.main(["upstream", "export", "--out", str(out)]) == 0  # its own outputs are replaced
    for theirs in (out / "tree" / "NOTES.md", out / "patches" / "0009-mine.patch"):
        theirs.write_text("mine")
        assert cli.main(["upstream", "export", "--out", str(out)]) == 2
        assert str(theirs) in capsys.readouterr().err and theirs.read_text() == "mine"
        theirs.unlink()
    other = tmp_path / "other"
    other.mkdir()
    (other / "SERIES.md").write_text("mine")
    assert cli.main(["upstream", "export", "--out", str(other)]) == 2
    assert (other / "SERIES.md").read_text() == "mine" and sorted(p.name for p in other.iterdir()) == ["SERIES.md"]


def test_a_users_file_named_like_the_manifest_is_never_replaced(tmp_path, capsys):
    """Data loss: DIR/.sglang-kimi-eagle3-export.json that export did not write (any JSON of the user's, or a
    folder of that name) is refused, exit 2 in one line naming it, before any work; export's own manifest is not."""
    name = upstream_export.MANIFEST
    for content in ('{"files": ["patches/x"]}\n', "notes\n", '{"written_by": "me"}\n'):
        out = tmp_path / "o"
        out.mkdir()
        (out / name).write_text(content)
        assert cli.main(["upstream", "export", "--out", str(out)]) == 2, content
        err = capsys.readouterr().err
        assert str(out / name) in err and "move it away" in err and len(err.strip().splitlines()) == 1, err
        assert (out / name).read_text() == content and sorted(p.name for p in out.iterdir()) == [name]
        shutil.rmtree(out)
    out = tmp_path / "o"
    (out / name).mkdir(parents=True)
    assert cli.main(["upstream", "export", "--out", str(out)]) == 2
    assert str(out / name) in capsys.readouterr().err and (out / name).is_dir()


def test_out_that_is_a_file_or_read_only_or_unexpandable_exits_2(tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("kept")
    ro = Path("/sys/kernel")  # sysfs: read-only even for root
    cases = [(str(f), "is a file, not a folder"), (str(f / "sub"), "is a file, not a folder"),
             ("~nosuchuser-kimi/out", "cannot expand '~'"), ("", "is empty")]
    try:
        (ro / "kimi-probe").mkdir()
        (ro / "kimi-probe").rmdir()
    except OSError:
        cases.append((str(ro), "cannot create files in"))
    for out, words in cases:
        assert cli.main(["upstream", "export", "--out", out]) == 2, out
        err = capsys.readouterr().err
        assert words in err and len(err.strip().splitlines()) == 1, (out, err)
    assert f.read_text() == "kept" and sorted(p.name for p in tmp_path.iterdir()) == ["file"]


SEED_SHAPE = r'''
import json, os, sys, tempfile
from pathlib import Path
from sglang_kimi_eagle3.tiny.spec import TinySpec, draft_config, target_config
from sglang_kimi_eagle3.tiny.launch import spec_args
import sglang
from sglang.srt.configs.model_config import ModelConfig
from sglang.srt.server_args import prepare_server_args
from sglang.srt.plugins import load_plugins
load_plugins()  # as launch_server does: with SGLANG_KIMI_EAGLE3=0 the plugin must change nothing
d = Path(tempfile.mkdtemp())
s = TinySpec()
for name, cfg in (("target", target_config(s)), ("draft", draft_config(s))):
    (d / name).mkdir()
    (d / name / "config.json").write_text(json.dumps(cfg))
out = {"sglang": sglang.__file__}
for policy in ("extend", "strict"):
    argv = ["--model-path", str(d / "target"), "--device", "cpu", *spec_args(str(d / "draft"), "chain"),
            "--speculative-draft-context-policy", policy]
    try:
        sa = prepare_server_args(argv)
        sa.resolve_once()
        t = ModelConfig.from_server_args(sa)
        dr = ModelConfig.from_server_args(sa, model_path=str(d / "draft"), is_draft_model=True, context_length=t.context_len)
        out[policy] = {"ok": True, "target": t.context_len, "draft": dr.context_len,
                       "draft_positions": s.draft_max_position_embeddings, "mpe": dr.hf_text_config.max_position_embeddings}
    except Exception as e:
        out[policy] = {"ok": False, "error": f"{type(e).__name__}: {e}"}
print(json.dumps(out))
'''


def test_patched_tree_accepts_the_seed_shape_with_extend_and_refuses_it_with_strict(exported):
    cp = run_python(SEED_SHAPE, timeout=400, SGLANG_KIMI_EAGLE3="0",
                    PYTHONPATH=pythonpath(exported / 'tree' / 'python', ROOT / 'python'))
    assert cp.returncode == 0, cp.stderr[-4000:]
    r = json.loads(cp.stdout.strip().splitlines()[-1])
    assert r["sglang"].startswith(str(exported / "tree" / "python")), r  # the patched tree, not the installed one
    ext = r["extend"]
    assert ext["ok"], ext
    assert ext["target"] == ext["draft"] == 2 * ext["draft_positions"]  # draft positions half the target's
    assert ext["mpe"] >= ext["target"] and ext["mpe"] % 128 == 0
    strict = r["strict"]
    assert not strict["ok"] and strict["error"].startswith("ValueError")
    assert "--speculative-draft-context-policy extend" in strict["error"], strict


def test_every_new_test_file_registers_and_parses_with_sglangs_parser():
    from sglang.test.ci.ci_register import HWBackend, ut_parse_one_file

    seen = {}
    for pr in upstream_export.load_series():
        tests = [r for r in pr.new_files if r.startswith("test/registered/")]
        assert tests, pr.name
        for rel in tests:
            regs, has_main = ut_parse_one_file(str(pr.folder / rel))
            assert regs and has_main, rel
            seen[rel] = regs
            compile((pr.folder / rel).read_text(), rel, "exec")
        for rel in pr.new_files:
            compile((pr.folder / rel).read_text(), rel, "exec")
            assert "sglang_kimi_eagle3" not in (pr.folder / rel).read_text(), rel  # self-contained upstream code
    backends = {(r.backend, r.runner_config) for regs in seen.values() for r in regs}
    assert (HWBackend.CUDA, "1-gpu-5090") in backends and (HWBackend.CPU, None) in backends
    kernel_tests = [rel for rel in seen if "tree_sampling" in rel or "draft_topk" in rel]
    for rel in kernel_tests:
        if not rel.endswith("_cpu.py"):
            assert {r.runner_config for r in seen[rel]} >= {"1-gpu-small", "1-gpu-5090"}, rel


def test_series_is_found_after_a_non_editable_install(tmp_path):
    src, target = tmp_path / "src", tmp_path / "site"
    src.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for name in ("python", "upstream"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    cp = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                         "--no-compile", "--target", str(target), str(src)], capture_output=True, text=True,
                        timeout=600, cwd=str(tmp_path))
    assert cp.returncode == 0, cp.stderr[-3000:]
    code = ("from sglang_kimi_eagle3 import upstream_export as u; r = u.series_root(); "
            "print(r, [p.name for p in u.load_series()], sum(len(p.new_files) for p in u.load_series()))")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    cp = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(tmp_path),
                        env={**env, "PYTHONPATH": str(target)})
    assert cp.returncode == 0, cp.stderr[-3000:]
    assert str(target) in cp.stdout and "05-offstate-deferred-extend" in cp.stdout, cp.stdout
    n_files = sum(len(p.new_files) for p in upstream_export.load_series())
    assert cp.stdout.split()[-1] == str(n_files)


def test_out_inside_the_sglang_package_it_copies_is_refused(tmp_path, capsys):
    """--out inside (or equal to) the package export copies: copytree copied its own scratch folder into itself
    until RecursionError (exit 3, minutes against a full copy of SGLang), leaving an empty DIR inside the package.
    The package here is the installed SGLang's entries linked into a folder (copied as links: seconds)."""
    import importlib.util

    pkg = tmp_path / "site" / "sglang"
    pkg.mkdir(parents=True)
    for entry in Path(importlib.util.find_spec("sglang").submodule_search_locations[0]).iterdir():
        (pkg / entry.name).symlink_to(entry)
    before = sorted(p.name for p in pkg.iterdir())
    for out in (pkg / "out", pkg, pkg / "new" / ".." / "x"):
        assert cli.main(["upstream", "export", "--out", str(out), "--sglang-src", str(tmp_path / "site")]) == 2, out
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"--out {out}: is inside the SGLang package export copies ({pkg})" in err[0], err
        assert sorted(p.name for p in pkg.iterdir()) == before


def _mirror(real: Path, pkg: Path, touched: set[str]) -> None:
    """pkg: real's entries linked, except the folders on a touched path (real folders) and the touched files (copies):
    a package whose every other entry is a link into the installed SGLang, which no export may write through."""
    pkg.mkdir(parents=True)
    for entry in real.iterdir():
        rel = entry.name
        inner = {t[len(rel) + 1:] for t in touched if t.startswith(rel + "/")}
        if inner:
            _mirror(entry, pkg / rel, inner)
        elif rel in touched:
            shutil.copy(entry, pkg / rel)
        else:
            (pkg / rel).symlink_to(entry)


def test_a_linked_folder_of_the_sglang_source_is_never_written_through(tmp_path, capsys):
    """--sglang-src whose package links a folder elsewhere (a symlinked checkout): the copied tree kept the link and
    the patched files were written through it into the linked source (the user's SGLang patched, its .pyc deleted).
    The package: the installed SGLang's entries, linked; srt/arg_groups (three edited files) links to a copy."""
    import importlib.util

    real = Path(importlib.util.find_spec("sglang").submodule_search_locations[0])
    prs = upstream_export.load_series()
    touched = {f[len("python/sglang/"):] for pr in prs for f in [e["file"] for e in pr.edits] + pr.new_files
               if f.startswith("python/sglang/")}
    pkg = tmp_path / "src" / "sglang"
    _mirror(real, pkg, touched)
    linked = tmp_path / "elsewhere" / "arg_groups"
    shutil.copytree(real / "srt" / "arg_groups", linked, symlinks=True)
    shutil.rmtree(pkg / "srt" / "arg_groups")
    (pkg / "srt" / "arg_groups").symlink_to(linked)
    before = _digest(linked)
    out = tmp_path / "out"
    assert cli.main(["upstream", "export", "--out", str(out), "--sglang-src", str(pkg)]) == 0, capsys.readouterr().err
    assert _digest(linked) == before  # the linked source untouched
    arg_groups = out / "tree" / "python" / "sglang" / "srt" / "arg_groups"
    assert not arg_groups.is_symlink() and arg_groups.is_dir()
    assert (arg_groups / "field_order.py").read_text() != (linked / "field_order.py").read_text()  # patched in the copy
    assert cli.main(["upstream", "export", "--out", str(out), "--sglang-src", str(pkg)]) == 0  # a rerun replaces it
    assert _digest(linked) == before
