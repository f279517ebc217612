"""`sglang-kimi-eagle3 status`: this plugin's hook table, as a launch_server process would have it.

Calls SGLang's own `load_plugins()` (entry-point discovery, our register(), HookRegistry.apply_hooks),
then confirms every queued hook against the live attribute and checks the installed Kimi-K2.5 class.
Exit 0 when no hook failed, 1 otherwise.
"""

from __future__ import annotations

import json
import sys
import warnings

from .. import TESTED_SGLANG, __version__
from ..status import hookstatus


def collect(check_model_class: bool = True) -> list[hookstatus.HookStatus]:
    import logging

    from sglang.srt.plugins import load_plugins

    from .. import enabled
    from ..integration.registry import refresh

    logging.getLogger("sglang_kimi_eagle3").setLevel(logging.WARNING)
    from . import quiet_sglang_arch_warning

    quiet_sglang_arch_warning()
    load_plugins()
    if check_model_class and enabled() and hookstatus.get("delegation") is not None:
        from ..integration.hooks.delegation import ensure_for_installed_sglang

        ensure_for_installed_sglang()
    if check_model_class:
        from ..integration.hooks.draft_head_kernels import bind_worker_topk_outside_a_server

        bind_worker_topk_outside_a_server()
    return refresh()


def main(argv: list[str]) -> int:
    if any(a in ("-h", "--help") for a in argv):
        from ..terminal import echo

        echo("usage: sglang-kimi-eagle3 status [--json] [--no-model-class]\n       sglang-kimi-eagle3 status --running "
             "[PORT|FILE] [--json]\n\nLoads SGLang's plugins the way launch_server does and prints every hook of this "
             "plugin: active / installed, SGLang kernel for this GPU/shapes / skipped (why) / failed (error).\n\n"
             "--running: the table a serving TP-0 scheduler wrote after capturing its CUDA graphs (call sites "
             "verified, table in effect, call counters), from $SGLANG_KIMI_EAGLE3_STATUS_DIR (default "
             "~/.cache/sglang-kimi-eagle3/run).")
        return 0
    if "--running" in argv:  # `status --running F --json` and `status --json --running F` alike
        i = argv.index("--running")
        return show_running(argv[:i] + argv[i + 1:])
    unknown = [a for a in argv if a not in ("--json", "--no-model-class")]
    if unknown:
        from ..errors import UserError

        raise UserError(f"status: unknown argument {unknown[0]!r}; status takes --json and --no-model-class (see --help)")
    from ..base import env_errors
    from ..errors import UserError

    bad = env_errors()
    if bad:  # as `check` and the launch step: one line naming the variable, exit 2 (docs/hooks.md "Switches")
        raise UserError(bad[0])
    from ..integration.adaptive_default import named_profile

    named_profile()  # a missing or malformed SGLANG_KIMI_EAGLE3_ADAPTIVE_PROFILE, as a launch refuses it (read only here)
    warnings.filterwarnings("ignore")
    rows = collect(check_model_class="--no-model-class" not in argv)
    from importlib.metadata import version

    sglang_version = version("sglang")
    from ..integration.hooks.runtime_status import status_rows, table_in_effect

    words = {r["name"]: r["status"] for r in status_rows(import_modules="--no-model-class" not in argv)}
    if "--json" in argv:
        from ..versions import version_note

        json.dump({"plugin": __version__, "sglang": sglang_version, "tested_sglang": TESTED_SGLANG,
                   "version_note": version_note(sglang_version),
                   "kernel_table": table_in_effect(),
                   "hooks": [{**d, "status": words.get(d["name"], d["state"])} for d in hookstatus.as_dicts()]},
                  sys.stdout, indent=1)
        print()
    else:
        from rich.table import Table

        from ..terminal import console

        con = console()
        from ..versions import version_note

        con.print(f"sglang-kimi-eagle3 {__version__} on sglang {sglang_version} (tested with {TESTED_SGLANG})")
        if version_note(sglang_version):
            con.print(f"[yellow]note: {version_note(sglang_version)}[/]")
        con.print(f"Kernel launch table on this machine: {table_in_effect()}")
        if not rows:
            con.print("[red]SGLang's load_plugins() did not run this plugin: is it installed in this environment, "
                      "and not excluded by SGLANG_PLUGINS?[/]")
            return 1
        table = Table(show_lines=False)
        for col in ("hook", "state", "status", "upstream target"):
            table.add_column(col, overflow="fold")
        color = {"applied": "green", "skipped": "cyan", "failed": "bold red", "registered": "yellow"}
        for r in rows:
            table.add_row(r.name, f"[{color[r.state]}]{r.state}[/]", words.get(r.name, r.detail), r.target)
        con.print(table)
    return 1 if not rows or any(w.startswith("failed") for w in words.values()) else 0


def show_running(argv: list[str]) -> int:
    """Print the status file a serving TP-0 scheduler wrote (integration/hooks/runtime_status.py). No sglang import.
    The file is read and checked in full (status/snapshot.load) before anything is printed."""
    from pathlib import Path

    from ..errors import UserError
    from ..integration.hooks.runtime_status import format_snapshot, status_dir
    from ..status.snapshot import load

    unknown = [a for a in argv if a.startswith("-") and a != "--json"]
    if unknown:
        raise UserError(f"status --running: unknown argument {unknown[0]!r}; it takes one PORT or FILE and --json")
    args = [a for a in argv if a != "--json"]
    if len(args) > 1:
        raise UserError(f"status --running takes one PORT or FILE, got {' '.join(args)}")
    where = status_dir()
    hint = f"`sglang-kimi-eagle3 status --running` reads the newest in {where}"
    if args and not args[0].strip():  # `--running "$PORT"` with PORT unset: not the folder '.'
        raise UserError(f"status --running {args[0]!r} is empty; give a PORT or FILE, or leave it out for the newest "
                        f"in {where}")
    if not args:
        path = _newest_status_file(where)
    elif args[0].isdigit():
        path = where / f"port{args[0]}.json"
    else:
        path = Path(args[0])
    snap = load(path, hint)
    ranks = [_compare_rank(p, load(p, hint), snap) for p in rank_files(path)]
    if ranks:
        snap = {**snap, "other_ranks": ranks}
    if "--json" in argv:
        print(json.dumps(snap, indent=1))
    else:
        from ..terminal import echo

        echo(f"{path}:\n{format_snapshot(snap)}")
        for r in ranks:
            echo(f"  {r['rank']}: " + (f"the same hooks as the lead ({r['applied']} applied)" if not r["differs"] else
                                        "differs from the lead: " + "; ".join(r["differs"])) + f"  [{r['file']}]")
    failed = any(h["status"].startswith("failed") for h in snap["hooks"])
    return 1 if failed or any(r["differs"] for r in ranks) else 0


def rank_files(lead_path) -> list:
    """The other ranks' status files of the lead's server (runtime_status.status_path): <stem>[-pp<R>][-tp<R>].json."""
    import re

    pat = re.compile(re.escape(lead_path.stem) + r"(-pp\d+)?(-tp\d+)?\.json")
    try:
        return sorted(p for p in lead_path.parent.glob(lead_path.stem + "-*.json")
                      if (m := pat.fullmatch(p.name)) and (m.group(1) or m.group(2)) and p.is_file())
    except OSError:
        return []


def _compare_rank(path, snap: dict, lead: dict) -> dict:
    """Which hooks this rank's scheduler has in another state than the lead's (applied / skipped / failed ...)."""
    mine = {h["name"]: h.get("state") or h["status"].split()[0] for h in snap["hooks"]}
    theirs = {h["name"]: h.get("state") or h["status"].split()[0] for h in lead["hooks"]}
    differs = [f"{n}: {mine.get(n, 'absent')} here, {theirs.get(n, 'absent')} on the lead"
               for n in sorted(set(mine) | set(theirs)) if mine.get(n) != theirs.get(n)]
    rank = path.stem[len(path.stem.split("-")[0]):].lstrip("-").replace("-", ", ").replace("tp", "TP rank ").replace(
        "pp", "PP rank ").replace("dp", "DP ")
    return {"rank": rank, "file": str(path), "applied": sum(1 for v in mine.values() if v == "applied"),
            "differs": differs}


def _newest_status_file(where):
    """The most recently written lead port*.json in `where` (not another rank's); dangling links and non-files are
    passed over."""
    import os
    import re
    import stat

    from ..errors import UserError

    found, skipped = [], []
    if where.exists() and not where.is_dir():  # glob finds nothing in a file: say what it is
        raise UserError(f"{where}: is a file, not the status folder; set SGLANG_KIMI_EAGLE3_STATUS_DIR to the server's "
                        "status folder, or pass the status file itself (`status --running FILE`)")
    try:
        names = sorted(p for p in where.glob("port*.json") if not re.search(r"-(tp|pp)\d+\.json$", p.name))
    except OSError as exc:
        raise UserError(f"{where}: cannot list the status folder ({exc.strerror or exc})") from None
    for p in names:
        try:
            st = os.stat(p)
        except OSError:
            skipped.append(p.name)
            continue
        if stat.S_ISREG(st.st_mode):
            found.append((st.st_mtime, p))
        else:
            skipped.append(p.name)
    if not found:
        extra = f" (passed over {', '.join(skipped)}: broken links or not files)" if skipped else ""
        raise UserError(f"no status file in {where}{extra}: no EAGLE/EAGLE3 server with this plugin has captured its "
                        f"CUDA graphs here yet (or set SGLANG_KIMI_EAGLE3_STATUS_DIR to the server's directory)")
    return max(found)[1]
