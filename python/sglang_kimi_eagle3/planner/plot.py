"""PNG of the planner's predictions (optional: matplotlib comes with the 'plot' extra)."""

from __future__ import annotations


def plot_plan(plan, path: str, subtitle: str) -> str:
    """Predicted speedup vs batch size, one line per topk-1 steps value; returns a one-line message."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "skipped the plot: matplotlib is not installed (pip install 'sglang-kimi-eagle3[plot]')"
    bss = sorted(plan)
    steps = sorted({p.steps for preds, _ in plan.values() for p in preds if p.topk == 1 and p.steps})
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for s in steps:
        ys = [next((p.speedup for p in plan[b][0] if p.topk == 1 and p.steps == s), float("nan")) for b in bss]
        ax.plot(bss, ys, marker="o", ms=3, label=f"steps {s}")
    ax.plot(bss, [plan[b][1].speedup for b in bss], color="black", lw=2.5, alpha=0.35, label="best")
    ax.axhline(1.0, color="grey", ls="--", lw=1)
    ax.set_xscale("log", base=2)
    ax.set_xticks(bss, [str(b) for b in bss])
    ax.set_xlabel("batch size (requests decoding together)")
    ax.set_ylabel("predicted speedup over no speculation")
    ax.set_title("PLANNER PREDICTION (model, not measured)\n" + subtitle, fontsize=8)
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    import io

    from ..validate import atomic_write_bytes

    buf = io.BytesIO()
    fig.savefig(buf, dpi=120, format="png")
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue(), "--plot")
    return f"wrote {path}"
