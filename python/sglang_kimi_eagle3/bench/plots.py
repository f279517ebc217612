"""PNG plots of a bench document (optional: matplotlib comes with the 'plot' extra)."""

from __future__ import annotations

import os

MARK = "sglang-kimi-eagle3 bench"  # PNG Software text: the plots bench wrote (outputs.check_plots reads it)


def _plt():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def _save(fig, path: str) -> str:
    """PNG bytes first, then one atomic write: an interrupted run never leaves half an image."""
    import io

    from ..validate import atomic_write_bytes

    buf = io.BytesIO()
    fig.savefig(buf, dpi=120, format="png", metadata={"Software": MARK})  # ours: a rerun may replace it
    return atomic_write_bytes(path, buf.getvalue(), "--plots")


def _wrap(*parts: str, chars: int = 100) -> str:
    """Title lines wrapped to `chars` (fontsize 8 on a 7.5-inch figure), never cut."""
    import textwrap

    return "\n".join(textwrap.fill(line, chars, break_on_hyphens=False) for p in parts if p for line in p.splitlines())


def tau_speedup_figure(doc: dict, caption: str = ""):
    """τ vs concurrency (top panel, 'tokens per verify') and, with a baseline, the speedup (bottom panel,
    'x the baseline's tok/s'): two quantities, two labelled axes."""
    plt = _plt()
    lv = [x for x in doc["levels"] if x.get("spec")]
    cs = [x["concurrency"] for x in lv]
    nan = float("nan")
    sp = [x["speedup"]["aggregate"] if x.get("speedup") else nan for x in lv]
    has_speedup = any(v == v for v in sp)  # any non-NaN
    fig, axes = plt.subplots(2 if has_speedup else 1, 1, figsize=(7.5, 6.4 if has_speedup else 4.2), sharex=True,
                             squeeze=False)
    ax = axes[0][0]
    ax.plot(cs, [x["spec"]["tau"] if x["spec"]["tau"] is not None else nan for x in lv], marker="o",
            label="τ (tokens per verify)")
    ax.set_ylabel("τ: tokens per verify")
    ax.set_ylim(bottom=1.0)  # τ >= 1 (one token per verify without speculation): no zoom into noise
    ax.set_title(_wrap(caption or "bench", "τ and speedup per concurrency"), fontsize=8)
    if has_speedup:
        ax2 = axes[1][0]
        ax2.plot(cs, sp, marker="s", label="aggregate tok/s vs baseline")
        spr = [x["speedup"]["per_request"] if x.get("speedup") and x["speedup"]["per_request"] else nan for x in lv]
        ax2.plot(cs, spr, marker="^", ls="--", label="per-request tok/s vs baseline")
        ax2.axhline(1.0, color="grey", ls=":", lw=1)
        ax2.set_ylabel("speedup (x the baseline)")
    for a in (row[0] for row in axes):
        a.set_xscale("log", base=2)
        a.set_xticks(cs, [str(c) for c in cs])
        a.legend(fontsize=8)
        a.grid(alpha=0.3)
    axes[-1][0].set_xlabel("concurrency (requests in flight)")
    fig.tight_layout()
    return fig


def acceptance_figure(doc: dict, caption: str = ""):
    """Acceptance α_i per draft position, one line per concurrency, and P(≥ i accepted) over all."""
    plt = _plt()
    lv = [x for x in doc["levels"] if x.get("spec")]
    nan = float("nan")
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    for x in lv:
        a = x["spec"]["alpha"]
        if a:
            ax.plot(range(1, len(a) + 1), [v if v is not None else nan for v in a], marker="o", label=f"c={x['concurrency']}")
    o = doc.get("overall") or {}
    if o.get("reach"):
        ax.plot(range(1, len(o["reach"]) + 1), [v if v is not None else nan for v in o["reach"]], color="black", lw=2,
                ls="--", label="all: P(≥ i accepted)")
    depth = max([len(x["spec"]["alpha"]) for x in lv] + [len(o.get("reach") or [])])
    ax.set_xticks(range(1, depth + 1))
    ax.set_xlabel("draft position i")
    ax.set_ylabel("acceptance")
    ax.set_ylim(0, 1.02)
    ax.set_title(_wrap(caption, "α_i = P(draft i accepted | 1..i-1 accepted), from spec_correct_drafts_histogram"),
                 fontsize=8)
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def plot_bench(doc: dict, outdir: str, caption: str = "") -> list[str]:
    """Writes tau_speedup.png (tau and speedup vs concurrency) and acceptance.png (acceptance by position).

    Returns the paths written, or one line starting 'skipped' when matplotlib is absent.
    """
    plt = _plt()
    if plt is None:
        return ["skipped the plots: matplotlib is not installed (pip install 'sglang-kimi-eagle3[plot]')"]
    os.makedirs(outdir, exist_ok=True)
    paths = []
    for name, make in (("tau_speedup", tau_speedup_figure), ("acceptance", acceptance_figure)):
        fig = make(doc, caption)
        paths.append(_save(fig, os.path.join(outdir, f"{name}.png")))
        plt.close(fig)
    return paths
