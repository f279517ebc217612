"""`check`'s human output (pure: no sglang import), at the terminal's width (terminal.py).

Default, compact: the header, each error and warning with what was found, what is expected and the fix,
one line counting the info rows, and the verdict. `--verbose`: the header with every hook's state, the
full table of findings (info rows included), the verdict. `--json` does not come through here.
"""

from __future__ import annotations

from collections import Counter

from rich.markup import escape

from ..preflight import summary

STYLE = {"error": "bold red", "warning": "yellow", "info": "dim"}
ACTIONABLE = ("error", "warning")


def _hooks_line(hooks, verbose: bool) -> str:
    if verbose:
        return "Plugin hooks: " + ", ".join(f"{r.name}={r.state}" for r in hooks)
    n = Counter(r.state for r in hooks)
    failed = [r.name for r in hooks if r.state == "failed"]
    counts = ", ".join(f"{v} {k}" for k, v in n.items())
    return (f"Plugin hooks: {counts or 'none'}" + (f" ({', '.join(failed)})" if failed else "")
            + "; `check --verbose` or `status` lists each")


def _finding(con, f) -> None:
    from rich.table import Table

    con.print(f"\n[{STYLE[f.severity]}]{f.severity}[/] [bold]{escape(f.check)}[/]")
    grid = Table.grid(padding=(0, 2))
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    for label, text in (("found", f.found), ("expected", f.expected), ("fix", f.fix)):
        if text:
            grid.add_row(f"  {label}", escape(text))
    con.print(grid)


def _table(con, findings) -> None:
    from rich.table import Table

    table = Table(show_lines=True, expand=True)
    table.add_column("severity\ncheck", overflow="fold")
    for col, ratio in (("found", 7), ("expected", 4), ("fix", 4)):
        table.add_column(col, ratio=ratio, overflow="fold")
    for f in findings:
        table.add_row(f"[{STYLE[f.severity]}]{f.severity}[/]\n{escape(f.check)}", escape(f.found), escape(f.expected),
                      escape(f.fix))
    con.print(table)


def print_check(res: dict, verdict: str, verbose: bool, note: str | None = None, console=None) -> None:
    """res: commands/check.run()'s result; verdict: the last line's ending (who, what launch_server would do)."""
    from ..terminal import console as make_console

    con = console or make_console()
    gpu, findings = res["gpu"], res["findings"]
    con.print(escape(f"Checking {res['title']}"))
    con.print(escape(f"Target GPU: {gpu.name} (sm{gpu.sm}; {gpu.how})"))
    con.print(escape(_hooks_line(res["hooks"], verbose)))
    con.print(escape(f"Kernel launch table for this GPU: {res['table']}"))
    if note:
        con.print(f"[yellow]note: {escape(note)}[/]")
    if verbose:
        _table(con, findings)
    else:
        for f in sorted((f for f in findings if f.severity in ACTIONABLE), key=lambda f: ACTIONABLE.index(f.severity)):
            _finding(con, f)
        info = [f.check for f in findings if f.severity not in ACTIONABLE]
        if info:
            names = ", ".join(f"{c} x{k}" if k > 1 else c for c, k in Counter(info).items())
            con.print(escape(f"\n{len(info)} info row(s), nothing to fix: {names} (`check --verbose` shows them)"))
    con.print(escape(f"{summary(findings)}: {verdict}."))
