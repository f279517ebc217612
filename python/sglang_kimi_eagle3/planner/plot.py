"""PNG of the planner's predictions (optional: matplotlib comes with the 'plot' extra)."""

from __future__ import annotations

import textwrap

TITLE = "PLANNER PREDICTION (model, not measured)"
TITLE_CHARS = 110  # characters per title line at fontsize 8 over the axes of a 9-inch figure: wrapped, never cut
BEST_ZORDER = 5  # above the per-steps lines (matplotlib's default for lines is 2)
MARK = "sglang-kimi-eagle3 plan"  # PNG Software text: the plots plan wrote (commands/plan.py replaces only those)


def wrap_title(*parts: str, chars: int = TITLE_CHARS) -> str:
    """Title lines, each part wrapped to `chars` characters (its own line breaks kept)."""
    return "\n".join(textwrap.fill(line, chars, break_on_hyphens=False) for p in parts if p for line in p.splitlines())


def plan_figure(plan, subtitle: str):
    """The figure: predicted speedup vs batch size, one line per topk-1 steps value. Steps whose acceptance is
    extrapolated past the measured depth are dashed with hollow markers (legend: "*"); the best setting per
    batch size is drawn on top in black."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bss = sorted(plan)
    steps = sorted({p.steps for preds, _ in plan.values() for p in preds if p.topk == 1 and p.steps})
    fig, ax = plt.subplots(figsize=(9, 4.8))
    any_extrapolated = False
    for s in steps:
        pts = [next((p for p in plan[b][0] if p.topk == 1 and p.steps == s), None) for b in bss]
        measured = [p.speedup if p is not None and not p.extrapolated else float("nan") for p in pts]
        extra = [p.speedup if p is not None and p.extrapolated else float("nan") for p in pts]
        color = None
        if any(v == v for v in measured):
            (line,) = ax.plot(bss, measured, marker="o", ms=3.5, label=f"steps {s}")
            color = line.get_color()
        if any(v == v for v in extra):
            any_extrapolated = True
            kw = {"color": color} if color else {}
            ax.plot(bss, extra, marker="o", ms=4, ls="--", mfc="none", label=f"steps {s}*" if color is None else None,
                    **kw)
    ax.plot(bss, [plan[b][1].speedup for b in bss], color="black", lw=1.8, ls=":", marker="D", ms=5, mfc="white",
            mec="black", zorder=BEST_ZORDER, label="best per batch size\n(the adaptive config's pick)")
    ax.axhline(1.0, color="grey", ls="--", lw=1, zorder=1)
    if any_extrapolated:
        ax.plot([], [], color="grey", ls="--", marker="o", mfc="none",
                label="* dashed, hollow: acceptance\nextrapolated past the\nmeasured depth (optimistic)")
    ax.set_xscale("log", base=2)
    ax.set_xticks(bss, [str(b) for b in bss])
    ax.set_xlabel("batch size (requests decoding together)")
    ax.set_ylabel("predicted speedup over no speculation")
    ax.set_title(wrap_title(TITLE, subtitle), fontsize=8)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)  # outside: no data hidden
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def plot_plan(plan, path: str, subtitle: str) -> str:
    """Writes plan_figure(...) as a PNG at `path` (atomically); returns a one-line message."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return "skipped the plot: matplotlib is not installed (pip install 'sglang-kimi-eagle3[plot]')"
    import io

    import matplotlib.pyplot as plt

    from ..validate import atomic_write_bytes

    fig = plan_figure(plan, subtitle)
    buf = io.BytesIO()
    fig.savefig(buf, dpi=120, format="png", metadata={"Software": MARK})
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue(), "--plot")
    return f"wrote {path}"
