"""PNG plots of a bench document (optional: matplotlib comes with the 'plot' extra)."""

from __future__ import annotations

import os


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
    fig.savefig(buf, dpi=120, format="png")
    return atomic_write_bytes(path, buf.getvalue(), "--plots")


def plot_bench(doc: dict, outdir: str, caption: str = "") -> list[str]:
    """Writes tau_speedup.png (tau and speedup vs concurrency) and acceptance.png (acceptance by position).

    Returns the paths written, or one line starting 'skipped' when matplotlib is absent.
    """
    plt = _plt()
    if plt is None:
        return ["skipped the plots: matplotlib is not installed (pip install 'sglang-kimi-eagle3[plot]')"]
    os.makedirs(outdir, exist_ok=True)
    lv = [x for x in doc["levels"] if x.get("spec")]
    cs = [x["concurrency"] for x in lv]
    nan = float("nan")
    paths = []

    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    ax.plot(cs, [x["spec"]["tau"] if x["spec"]["tau"] is not None else nan for x in lv], marker="o", label="τ (tokens per verify)")
    sp = [x["speedup"]["aggregate"] if x.get("speedup") else nan for x in lv]
    if any(v == v for v in sp):  # any non-NaN
        ax.plot(cs, sp, marker="s", label="speedup (aggregate tok/s vs baseline)")
        spr = [x["speedup"]["per_request"] if x.get("speedup") and x["speedup"]["per_request"] else nan for x in lv]
        ax.plot(cs, spr, marker="^", ls="--", label="speedup (per-request tok/s)")
        ax.axhline(1.0, color="grey", ls=":", lw=1)
    ax.set_xscale("log", base=2)
    ax.set_xticks(cs, [str(c) for c in cs])
    ax.set_xlabel("concurrency (requests in flight)")
    ax.set_title(caption or "bench", fontsize=8)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    paths.append(_save(fig, os.path.join(outdir, "tau_speedup.png")))
    plt.close(fig)

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
    ax.set_title((caption + "\n" if caption else "") + "α_i = P(draft i accepted | 1..i-1 accepted), from spec_correct_drafts_histogram",
                 fontsize=8)
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    paths.append(_save(fig, os.path.join(outdir, "acceptance.png")))
    plt.close(fig)
    return paths
