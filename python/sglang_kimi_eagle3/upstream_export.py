"""`sglang-kimi-eagle3 upstream export`: the upstream patch series, generated against an SGLang tree.

The series lives in `upstream/` (repository root; installed as the package data
`sglang_kimi_eagle3.upstream_series`): one folder per PR, `NN-<slug>/`, holding `PR.md` (the PR text,
also the commit message), the new files laid out as in SGLang's repository (`python/sglang/...`,
`test/registered/...`, `benchmark/...`) and `edits.py` (EDITS: anchored edits to SGLang's own files).
SGLang's code is never stored here: export copies the installed package (found without importing it)
or `--sglang-src`, applies the PRs in order and writes

  DIR/tree/python/sglang        the patched package (PYTHONPATH=DIR/tree/python imports it)
  DIR/tree/test, DIR/tree/benchmark   the series' new test and benchmark files
  DIR/patches/NNNN-<slug>.patch one `git format-patch` commit per PR, paths as in SGLang's repository
  DIR/SERIES.md                 what was applied to what

A new file may carry, on a line of its own, `# @ops MODULE: name, name, ...`: export puts there the
source of those top-level functions and classes of `sglang_kimi_eagle3/ops/MODULE.py` (decorators
included, two blank lines apart), so a kernel exists once, in `ops/`, and the PR's file is generated
from it; a name that is missing, a copied piece that imports from the plugin, or a name it uses that
the generated module does not define stops the export (exit 2, naming the PR and the file).

Every edit is checked before anything is written: an anchor that is missing (or not unique) exits 2
naming the PR, the file and the anchor. Outputs are built beside DIR and renamed into place; the
same inputs give byte-identical patches (fixed author and date), so a rerun is idempotent.
DIR/.sglang-kimi-eagle3-export.json lists every file export wrote there: a rerun replaces tree/, patches/
and SERIES.md only when everything in them is on that list (Python's __pycache__ aside), else it exits 2
naming the first file it did not write; DIR that is a file, or a folder it cannot write in, exits 2 too.
Pure: copies and edits text, never imports sglang.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import importlib.util
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .errors import UserError
from .validate import expand_path, refuse_empty

SERIES_PACKAGE = "sglang_kimi_eagle3.upstream_series"
PR_DIR = re.compile(r"^(\d\d)-([a-z0-9][a-z0-9-]*)$")
NEW_FILE_ROOTS = ("python", "test", "benchmark")
AUTHOR = ("sglang-kimi-eagle3", "sglang-kimi-eagle3@users.noreply.github.com")
DATE = "2026-12-01T00:00:00+00:00"  # fixed: the same series gives the same patches
OPS = ("before", "after", "replace")
OPS_DIRECTIVE = re.compile(r"^# @ops (\w+): (\w+(?:, \w+)*)$", re.M)
OPS_DIR = Path(__file__).resolve().parent / "ops"  # the kernels' one copy (ships in the package)
MANIFEST = ".sglang-kimi-eagle3-export.json"  # in DIR: every path export wrote there (relative to DIR)
OUTPUTS = ("tree", "patches", "SERIES.md")  # what export replaces in DIR


class AnchorError(UserError):
    """An edit of the series no longer applies to the SGLang source."""


@dataclass(slots=True)
class PR:
    num: str
    slug: str
    folder: Path
    title: str
    message: str
    edits: list[dict]
    new_files: list[str] = field(default_factory=list)  # paths in SGLang's repo

    @property
    def name(self) -> str:
        return f"{self.num}-{self.slug}"


# ---- where things are -----------------------------------------------------------------------------


def series_root() -> Path:
    """The series: `upstream/` of this source checkout, else the installed package data."""
    checkout = Path(__file__).resolve().parents[2] / "upstream"
    if (checkout / "README.md").is_file():
        return checkout
    spec = importlib.util.find_spec(SERIES_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise UserError(f"the upstream series is not installed ({SERIES_PACKAGE} missing); reinstall sglang-kimi-eagle3")
    return Path(list(spec.submodule_search_locations)[0])


def find_sglang(path: str | None = None) -> Path:
    """The `sglang` package folder: PATH (a package folder, or a checkout holding python/sglang), else
    the installed one, located by importlib.util.find_spec without importing it."""
    if path:
        p = expand_path(path, "--sglang-src")
        for cand in (p, p / "python" / "sglang", p / "sglang"):
            if (cand / "__init__.py").is_file() and (cand / "srt").is_dir():
                return cand.resolve()
        raise UserError(f"--sglang-src {path}: no SGLang package there (expected sglang/__init__.py and sglang/srt/, "
                        "or a checkout with python/sglang/); pass the package folder or the repository root")
    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        raise UserError("SGLang is not installed in this environment; install sglang==0.5.23 or pass --sglang-src PATH")
    return Path(list(spec.submodule_search_locations)[0]).resolve()


def sglang_version(pkg: Path) -> str:
    """From the wheel's dist-info beside the package (or _version.py of a built checkout); no import."""
    for meta in sorted(pkg.parent.glob("sglang-*.dist-info/METADATA")):
        m = re.search(r"^Version: (\S+)$", meta.read_text(errors="replace"), re.M)
        if m:
            return m.group(1)
    text = (pkg / "_version.py").read_text() if (pkg / "_version.py").is_file() else ""
    m = re.search(r"__version__\s*=\s*(?:version\s*=\s*)?['\"]([^'\"]+)['\"]", text)
    return m.group(1) if m else "unknown"


# ---- reading the series ---------------------------------------------------------------------------


def _load_edits(pr_name: str, path: Path) -> list[dict]:
    if not path.is_file():
        return []
    scope: dict = {}
    exec(compile(path.read_text(), str(path), "exec"), scope)  # data file: plain dicts, no imports
    edits = scope.get("EDITS")
    if not isinstance(edits, list):
        raise UserError(f"{path}: expected a list EDITS; fix the series file")
    for i, e in enumerate(edits):
        ops = [op for op in OPS if op in e]
        if not isinstance(e, dict) or not e.get("file") or not e.get("anchor") or len(ops) != 1:
            raise UserError(f"{path}: EDITS[{i}] needs file, anchor and exactly one of {', '.join(OPS)}; fix PR {pr_name}")
    return edits


def load_series(root: Path | None = None, only: str | None = None) -> list[PR]:
    root = root or series_root()
    prs = []
    for d in sorted(p for p in root.iterdir() if p.is_dir() and PR_DIR.match(p.name)):
        num, slug = PR_DIR.match(d.name).groups()
        if not (d / "PR.md").is_file():
            raise UserError(f"{d}: PR.md is missing (the PR text and commit message); add it")
        text = (d / "PR.md").read_text()
        title = text.splitlines()[0].lstrip("# ").strip() if text.strip() else d.name
        body = "\n".join(text.splitlines()[1:]).strip("\n")
        new = sorted(str(f.relative_to(d)) for r in NEW_FILE_ROOTS if (d / r).is_dir()
                     for f in (d / r).rglob("*") if f.is_file() and "__pycache__" not in f.parts)
        prs.append(PR(num, slug, d, title, f"{title}\n\n{body}\n", _load_edits(d.name, d / "edits.py"), new))
    if not prs:
        raise UserError(f"{root}: no PR folders (NN-<slug>/); reinstall sglang-kimi-eagle3")
    if only is not None:
        keep = [p for p in prs if p.num == only.zfill(2) or p.name == only]
        if not keep:
            raise UserError(f"--only {only}: no such PR; the series has {', '.join(p.name for p in prs)}")
        prs = keep  # each PR is self-contained: it applies to SGLang's source alone
    return prs


# ---- new files generated from ops/ ----------------------------------------------------------------


def ops_definitions(module: str) -> dict[str, str]:
    """Top-level functions and classes of ops/MODULE.py: name -> source text, decorators included."""
    path = OPS_DIR / f"{module}.py"
    if not path.is_file():
        raise FileNotFoundError(path)
    text = path.read_text()
    lines = text.splitlines()
    out = {}
    for node in ast.parse(text).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            start = node.decorator_list[0].lineno if node.decorator_list else node.lineno
            out[node.name] = "\n".join(lines[start - 1:node.end_lineno])
    return out


def _undefined_names(tree: ast.Module, names: set[str]) -> dict[str, list[str]]:
    """Names that the functions `names` of a module read but neither the module nor the function defines."""
    module_level = set(dir(builtins))
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            module_level.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            module_level.update((a.asname or a.name).split(".")[0] for a in node.names)
        else:
            module_level.update(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    missing = {}
    for node in tree.body:
        if getattr(node, "name", None) not in names:
            continue
        local = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
        local |= {a.arg for n in ast.walk(node) if isinstance(n, ast.arguments)
                  for a in (*n.posonlyargs, *n.args, *n.kwonlyargs, n.vararg, n.kwarg) if a is not None}
        local |= {n.name for n in ast.walk(node) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
        used = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        if used - local - module_level:
            missing[node.name] = sorted(used - local - module_level)
    return missing


def render_new_file(pr: PR, rel: str) -> str:
    """A new file of the PR as it goes into SGLang: its `# @ops MODULE: names` lines replaced by the
    source of those definitions in ops/MODULE.py."""
    text = (pr.folder / rel).read_text()
    if not rel.endswith(".py") or not OPS_DIRECTIVE.search(text):
        return text
    where = f"upstream export: PR {pr.name}: {rel}"
    copied: set[str] = set()

    def expand(m: re.Match) -> str:
        module, names = m.group(1), m.group(2).split(", ")
        try:
            defs = ops_definitions(module)
        except FileNotFoundError:
            raise UserError(f"{where}: `{m.group(0)}`: there is no ops/{module}.py; fix the line") from None
        absent = [n for n in names if n not in defs]
        if absent:
            raise UserError(f"{where}: `{m.group(0)}`: ops/{module}.py has no top-level {', '.join(absent)}; "
                            "fix the line or the ops module")
        for n in names:
            if re.search(r"^\s*(from|import)\s+(\.|sglang_kimi_eagle3)", defs[n], re.M):
                raise UserError(f"{where}: ops/{module}.py {n} imports from the plugin; move that import out of it")
        copied.update(names)
        return "\n\n\n".join(defs[n] for n in names)

    out = OPS_DIRECTIVE.sub(expand, text)
    missing = _undefined_names(ast.parse(out), copied)
    if missing:
        raise UserError(f"{where}: the generated module does not define "
                        + "; ".join(f"{', '.join(v)} (used by {k})" for k, v in sorted(missing.items()))
                        + ": define them in the PR's file or copy them from ops/ too")
    return out


# ---- applying it ----------------------------------------------------------------------------------


def _short(anchor: str) -> str:
    line = next((s for s in anchor.splitlines() if s.strip()), anchor)
    return repr(line.strip()[:90])


def apply_edit(text: str, edit: dict, pr: PR) -> str:
    anchor, path = edit["anchor"], edit["file"]
    n = text.count(anchor)
    if n != 1:
        why = "not found" if n == 0 else f"found {n} times (must be unique)"
        raise AnchorError(f"upstream export: PR {pr.name}: anchor {why} in {path}: {_short(anchor)}; the SGLang source "
                          f"moved: update upstream/{pr.name}/edits.py")
    if "before" in edit:
        return text.replace(anchor, edit["before"] + anchor)
    if "after" in edit:
        return text.replace(anchor, anchor + edit["after"])
    return text.replace(anchor, edit["replace"])


def _src_file(pkg: Path, repo_path: str) -> Path:
    if not repo_path.startswith("python/sglang/"):
        raise UserError(f"edit of {repo_path}: only files under python/sglang/ can be edited; fix the series")
    return pkg / repo_path[len("python/sglang/"):]


def plan(pkg: Path, prs: list[PR]) -> tuple[dict[str, str | None], list[dict[str, str]]]:
    """Apply every PR in memory. Returns (original text per touched path, None for new files;
    the state of every touched path after each PR). Raises AnchorError on the first edit that fails."""
    base: dict[str, str | None] = {}
    current: dict[str, str] = {}
    states = []
    for pr in prs:
        for e in pr.edits:
            path = e["file"]
            if path not in current:
                f = _src_file(pkg, path)
                if not f.is_file():
                    raise AnchorError(f"upstream export: PR {pr.name}: {path} does not exist in {pkg} (edit anchored on "
                                      f"{_short(e['anchor'])}); update upstream/{pr.name}/edits.py")
                base[path] = current[path] = f.read_text()
            current[path] = apply_edit(current[path], e, pr)
        for rel in pr.new_files:
            if rel.startswith("python/sglang/") and _src_file(pkg, rel).is_file() and rel not in base:
                raise AnchorError(f"upstream export: PR {pr.name}: new file {rel} already exists in SGLang at {pkg}; "
                                  f"the change may be upstream already")
            base.setdefault(rel, None)
            current[rel] = render_new_file(pr, rel)
        states.append(dict(current))
    return base, states


# ---- writing --------------------------------------------------------------------------------------


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def _own_folders(tree: Path, rel: str) -> None:
    """Every folder on tree/rel made a real folder of the copy: a folder the source links elsewhere (kept a link by
    copytree(symlinks=True)) is replaced by a copy of what it links to, so no write reaches the linked source."""
    here = tree
    for part in Path(rel).parts[:-1]:
        here = here / part
        if here.is_symlink() and here.is_dir():
            target = here.resolve()
            here.unlink()
            shutil.copytree(target, here, symlinks=True)


def _swap_in(built: Path, dest: Path) -> None:
    """Rename `built` to `dest`, replacing what was there (the old one removed afterwards)."""
    old = dest.with_name(f".{dest.name}.old{os.getpid()}")
    if dest.exists():
        os.replace(dest, old)
    os.replace(built, dest)
    if old.exists():
        shutil.rmtree(old) if old.is_dir() else old.unlink()


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": AUTHOR[0], "GIT_AUTHOR_EMAIL": AUTHOR[1], "GIT_COMMITTER_NAME": AUTHOR[0],
           "GIT_COMMITTER_EMAIL": AUTHOR[1], "GIT_AUTHOR_DATE": DATE, "GIT_COMMITTER_DATE": DATE,
           "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(repo)}
    try:
        r = subprocess.run(["git", "-c", "core.autocrlf=false", "-c", "commit.gpgsign=false", *args], cwd=repo,
                           env=env, capture_output=True, text=True, check=True)
    except FileNotFoundError:
        raise UserError("git is not installed; export needs git to write the patches (install git)") from None
    except subprocess.CalledProcessError as exc:
        raise UserError(f"git {args[0]} failed while writing the patches: {exc.stderr.strip()[:300]}") from None
    return r.stdout


def make_patches(base: dict, states: list[dict], prs: list[PR], out: Path) -> list[Path]:
    """One commit per PR in a scratch repository holding only the touched files; format-patch each."""
    names = []
    with tempfile.TemporaryDirectory(prefix="kimi-eagle3-series-") as tmp:
        repo = Path(tmp)
        _git(repo, "init", "-q")
        for path, text in base.items():
            if text is not None:
                _write(repo / path, text)
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "--allow-empty", "-m", "base: SGLang source")
        for pr, state in zip(prs, states):
            i = int(pr.num)
            for path, text in state.items():
                _write(repo / path, text)
            _git(repo, "add", "-A")
            _git(repo, "commit", "-q", "--allow-empty", "-m", pr.message)
            patch = _git(repo, "format-patch", "-1", "HEAD", "--stdout", "--zero-commit", "--no-signature",
                         f"--start-number={i}", "--subject-prefix=PATCH")
            name = f"{i:04d}-{pr.slug}.patch"
            _write(out / name, patch)
            names.append(out / name)
    return names


def series_md(pkg: Path, prs: list[PR]) -> str:
    lines = ["# Upstream series for SGLang", "",
             f"Generated by `sglang-kimi-eagle3 upstream export` against SGLang {sglang_version(pkg)} (`{pkg}`).", "",
             "Apply to an SGLang checkout of that release: `git am patches/*.patch`. The patched package is in "
             "`tree/python/sglang` (`PYTHONPATH=tree/python`), the series' tests in `tree/test/registered/`.", "",
             "| # | PR | edits | files changed | files added |", "| --- | --- | ---: | --- | --- |"]
    for pr in prs:
        i = int(pr.num)
        changed = sorted({e["file"] for e in pr.edits})
        lines.append(f"| {i:04d} | {pr.title} (`{pr.name}`) | {len(pr.edits)} | "
                     f"{'<br>'.join(f'`{c}`' for c in changed) or '-'} | "
                     f"{'<br>'.join(f'`{n}`' for n in pr.new_files) or '-'} |")
    return "\n".join(lines) + "\n"


WRITTEN_BY = "sglang-kimi-eagle3 upstream export"


def _read_manifest(out: Path) -> set[str] | None:
    """The paths (relative to DIR) an earlier export recorded in DIR's manifest; empty when there is none;
    None when a file or folder of that name is there that export did not write (the user's: never replaced)."""
    path = out / MANIFEST
    if not os.path.lexists(path):
        return set()
    try:
        data = json.loads(path.read_text()) if path.is_file() and not path.is_symlink() else None
    except (OSError, ValueError):
        return None
    files = data.get("files") if isinstance(data, dict) and data.get("written_by") == WRITTEN_BY else None
    return {f for f in files if isinstance(f, str)} if isinstance(files, list) else None


def _written_before(out: Path) -> set[str]:
    return _read_manifest(out) or set()


def _listing(out: Path, name: str) -> list[str]:
    """Every file, link and folder under DIR/name, relative to DIR (name itself included)."""
    top = out / name
    if top.is_symlink() or not top.is_dir():
        return [name]
    found = [name]
    for root, dirs, files in os.walk(top):
        rel = os.path.relpath(root, out)
        found += [os.path.join(rel, n) for n in (*dirs, *files)]
    return found


def _foreign(out: Path) -> str | None:
    """A path under DIR's outputs that export would replace but did not write (a file before a folder), or None."""
    ours = _written_before(out)
    theirs = [rel for name in OUTPUTS if os.path.lexists(out / name) for rel in _listing(out, name)
              if rel not in ours and not (rel.startswith("tree") and "__pycache__" in Path(rel).parts)]  # Python's cache
    return next((rel for rel in theirs if not (out / rel).is_dir()), theirs[0] if theirs else None)


def _check_out(out: str) -> Path:
    """--out: a folder (created later, if missing) export can write in, holding nothing of the user's it would
    replace. Checked without creating anything: the nearest existing folder on its path takes a probe folder."""
    p = expand_path(out, "--out")
    if os.path.lexists(p) and not p.is_dir():
        raise UserError(f"--out {out}: is a file, not a folder (left as it is); give a folder path (created if missing)")
    here = next(q for q in (p, *p.parents) if os.path.lexists(q))
    if not here.is_dir():
        raise UserError(f"--out {out}: {here} is a file, not a folder; give a folder this user can write in")
    try:
        Path(tempfile.mkdtemp(prefix=".export-probe-", dir=here)).rmdir()
    except OSError as exc:
        raise UserError(f"--out {out}: cannot create files in {here} ({exc.strerror or exc}); give a folder this "
                        "user can write in") from None
    if _read_manifest(p) is None:
        raise UserError(f"--out {out}: {p / MANIFEST} was not written by upstream export (export keeps its list of "
                        "written files under that name): move it away, or give another --out")
    rel = _foreign(p)
    if rel is not None:
        raise UserError(f"--out {out}: {p / rel} was not written by upstream export (it is not listed in {p / MANIFEST}) "
                        f"and export replaces {', '.join(OUTPUTS)} there: move it away, or give another --out")
    return p


def _record(out: Path, files: set[str]) -> None:
    _write(out / MANIFEST, json.dumps({"written_by": WRITTEN_BY,
                                       "files": sorted(files)}, indent=0) + "\n")


def export(out: str | Path | None, src: str | None = None, only: str | None = None, check: bool = False) -> str:
    if not check:
        out = _check_out(out)  # before the long work: a file, a read-only folder, a user's file in the way
    pkg = find_sglang(src)
    if not check and (out.resolve() == pkg or pkg in out.resolve().parents):  # copytree would copy DIR into itself
        raise UserError(f"--out {out}: is inside the SGLang package export copies ({pkg}); give a folder outside it")
    prs = load_series(only=only)
    base, states = plan(pkg, prs)  # every anchor checked before anything is written
    n_edits = sum(len(p.edits) for p in prs)
    summary = f"{len(prs)} PRs ({', '.join(p.name for p in prs)}), {n_edits} edits apply to SGLang {sglang_version(pkg)} at {pkg}"
    if check:
        return summary
    try:
        _build(out, pkg, prs, base, states)
    except OSError as exc:  # a full disk, a folder made read-only meanwhile: the old outputs stay
        raise UserError(f"--out {out}: writing failed ({exc.strerror or exc}) at {exc.filename or out}; nothing of "
                        "this run was left there; free space or give another --out") from None
    return f"{summary}; wrote {out}/tree, {out}/patches ({len(prs)}), {out}/SERIES.md"


def _build(out: Path, pkg: Path, prs: list[PR], base: dict, states: list[dict]) -> None:
    """Build the outputs in a scratch folder inside DIR and rename them into place (the manifest first lists
    both the old and the new files, so an interrupted swap still leaves only listed files)."""
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".export-", dir=out))
    try:
        tree = work / "tree"
        shutil.copytree(pkg, tree / "python" / "sglang", symlinks=True)  # pycache kept: valid for unchanged files
        for path, text in states[-1].items():
            _own_folders(tree, path)
            _write(tree / path, text)
            cached = (tree / path).parent / "__pycache__"
            if cached.is_dir():  # a stale .pyc beside an edited file would still be valid by mtime+size luck
                for pyc in cached.glob(f"{(tree / path).stem}.*.pyc"):
                    pyc.unlink()
        patches = work / "patches"
        patches.mkdir()
        make_patches(base, states, prs, patches)
        _write(work / "SERIES.md", series_md(pkg, prs))
        new = {rel for name in OUTPUTS for rel in _listing(work, name)}
        old = {rel for name in OUTPUTS if os.path.lexists(out / name) for rel in _listing(out, name)}
        _record(out, old | new)
        _swap_in(tree, out / "tree")
        _swap_in(patches, out / "patches")
        os.replace(work / "SERIES.md", out / "SERIES.md")
        _record(out, new)
    finally:
        shutil.rmtree(work, ignore_errors=True)


USAGE = """usage: sglang-kimi-eagle3 upstream export --out DIR [--sglang-src PATH] [--only NN] [--check]

Generate the upstream SGLang patch series (upstream/NN-<slug>/) against the installed SGLang (or PATH):
DIR/tree/python/sglang (patched package), DIR/patches/NNNN-<slug>.patch, DIR/SERIES.md.
  --check     only verify that every edit applies (writes nothing)
  --only NN   apply PR NN alone (each PR applies to SGLang's source by itself)
Exit 2 when an edit no longer applies (the PR and the anchor are named)."""


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        from .terminal import echo

        echo(USAGE)
        return 0 if argv else 2
    if argv[0] != "export":
        raise UserError(f"upstream: unknown subcommand {argv[0]!r}; use `sglang-kimi-eagle3 upstream export --out DIR`")

    class _Parser(argparse.ArgumentParser):
        def error(self, message):  # one line, exit 2, through the CLI's UserError path
            raise UserError(f"upstream export: {message} (see --help)")

    p = _Parser(prog="sglang-kimi-eagle3 upstream export", add_help=True)
    p.add_argument("--out")
    p.add_argument("--sglang-src")
    p.add_argument("--only")
    p.add_argument("--check", action="store_true")
    a = p.parse_args(argv[1:])
    refuse_empty(a, sglang_src="--sglang-src", only="--only")  # --sglang-src '' would export the installed SGLang
    if a.out is None and not a.check:
        raise UserError("upstream export: --out DIR is required (or --check to only verify)")
    from .terminal import echo

    echo(export(a.out, a.sglang_src, a.only, a.check))
    return 0
