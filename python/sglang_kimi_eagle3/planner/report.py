"""The plan as a readable table (rich)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..terminal import console as terminal_console, fill, print_table


def print_plan(plan, cfg, acc, cost, profile, skipped, explain: bool, console: Console | None = None) -> None:
    con = console or terminal_console()
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold", no_wrap=True)
    head.add_column(overflow="fold")
    head.add_row("acceptance", escape(acc.source))
    head.add_row("costs", escape("\n".join([cost.name, *cost.notes])))
    if profile is not None:
        head.add_row("profile", escape(profile.title))
    con.print(head)
    chain_steps = sorted({p.steps for preds, _ in plan.values() for p in preds if p.topk == 1 and p.steps})
    t = Table(title="predicted speedup per batch size (model output, not a measurement); s<N>: speedup at N steps, topk 1",
              title_justify="left")
    for col in ("bs", "plain µs", "best (steps/topk/tokens)", "τ", "round µs", "speedup"):
        t.add_column(col, justify="right")
    for s in chain_steps:
        t.add_column(f"s{s}", justify="right")
    t.add_column("candidate_steps")
    extrapolated = False
    for bs, (preds, best) in sorted(plan.items()):
        by_steps = {p.steps: p for p in preds if p.topk == 1}
        cells = []
        for s in chain_steps:
            p = by_steps.get(s)
            extrapolated |= bool(p and p.extrapolated)
            mark = "*" if p and p.extrapolated else ""
            cells.append("" if p is None else f"{p.speedup:.2f}{mark}")
        setting = "off" if best.steps == 0 else f"{best.steps}/{best.topk}/{best.draft_tokens}"
        t.add_row(str(bs), f"{best.base_us:,.0f}", setting, f"{best.tau:.2f}", f"{best.round_us:,.0f}",
                  f"[bold]{best.speedup:.2f}[/bold]", *cells, str(cfg[str(bs)]["candidate_steps"]))
    print_table(con, t, keep=1)
    if extrapolated:
        con.print("* acceptance past the measured depth assumed equal to the last measured position (optimistic)")
    if skipped:
        con.print(f"skipped (no acceptance measured for these trees; run bench at that setting): "
                  f"{', '.join(f'steps {s}/topk {k}/{n} tokens' for s, k, n in skipped)}")
    if profile is not None:
        ass = profile.assumptions()
        con.print(f"{len(ass)} of the profile's numbers are assumptions: {', '.join(a.removeprefix('profile.') for a in ass)}"
                  + ("" if explain else " (--explain shows each with its reason)"))
        if explain:
            for k, v in profile.provenance.items():
                con.print(escape(fill(f"  {k}: {v}", con.width, hang=4)))
