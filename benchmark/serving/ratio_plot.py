"""Speed over plain decoding by load, merged from several e2e.py runs: one figure and one markdown table.

Each level (temperature, concurrency) of each run contributes the ratios its report holds (a server over the
baseline in the same rotated rounds: median, min, max, rounds). A level measured by two runs is refused: every
point of the figure comes from exactly one run, named in the table. The figure draws the medians with min-max bars
over a line at 1 (as fast as plain) and one at the floor (default 0.97).

    python benchmark/serving/ratio_plot.py RUN.json [RUN.json ...] \\
        --ratio "ours/plain=q 0.3 drafter" --ratio "ours_q2/plain=q 0.9 drafter" \\
        --caption "one H100, ..." --plot docs/img/never_slower.png [--md table.md]

Needs matplotlib (the `plot` extra) only with --plot. Bad input: one line naming the file or flag, exit 2.
"""

from __future__ import annotations

import argparse
import io
import math
import os
import sys
import textwrap

from sglang_kimi_eagle3.errors import UserError, run_script
from sglang_kimi_eagle3.validate import atomic_write_bytes, atomic_write_text, check_output_file, read_json_object

SCHEMA_PREFIX = "sglang-kimi-eagle3-e2e/"
METRICS = ("aggregate", "window", "per_request")


def parse_ratio(text: str) -> tuple[str, str]:
    """'ours/plain=q 0.3 drafter' -> ('ours/plain', 'q 0.3 drafter'); the label defaults to the key."""
    key, _, label = text.partition("=")
    key = key.strip()
    if key.count("/") != 1 or not all(key.split("/")):
        raise UserError(f"--ratio {text!r}: expected SERVER/BASELINE[=LABEL], e.g. ours/plain=ours, q 0.3 drafter")
    return key, (label.strip() or key)


def load_levels(paths: list[str], keys: list[str], temperature: float, metric: str) -> dict:
    """{key: {concurrency: (spread, path)}} for the levels at `temperature`; a level in two runs is refused."""
    out: dict = {k: {} for k in keys}
    seen: set = set()
    for path in paths:
        doc = read_json_object(path, "give a JSON file written by benchmark/serving/e2e.py --json", "e2e run")
        if not str(doc.get("schema", "")).startswith(SCHEMA_PREFIX):
            raise UserError(f"{path}: not an e2e.py run (schema {doc.get('schema')!r}, expected {SCHEMA_PREFIX}N)")
        levels = (doc.get("report") or {}).get("levels")
        if not isinstance(levels, list):
            raise UserError(f"{path}: no report levels (an e2e run stopped before its first round?)")
        for lv in levels:
            if not isinstance(lv, dict) or lv.get("temperature") != temperature:
                continue
            c = lv.get("concurrency")
            for key in keys:
                spread = ((lv.get("ratios") or {}).get(key) or {}).get(metric)
                if not spread or not isinstance(spread.get("median"), (int, float)):
                    continue
                if c in out[key]:
                    raise UserError(f"{path}: {key} at c {c}, T {temperature:g} is also in {out[key][c][1]}; "
                                    "give one run per level")
                out[key][c] = (spread, path)
                seen.add(key)
    missing = [k for k in keys if k not in seen]
    if missing:
        raise UserError(f"--ratio {missing[0]}: in no level at temperature {temperature:g} of "
                        f"{', '.join(paths)}; each run's report names its ratios (e.g. ours/plain)")
    return out


def markdown(levels: dict, labels: dict, metric: str, floor: float) -> str:
    cs = sorted({c for by_c in levels.values() for c in by_c})
    head = "| over plain (" + metric.replace("_", " ") + ") | " + " | ".join(f"c {c}" for c in cs) + " |"
    lines = [head, "| --- |" + " ---: |" * len(cs)]
    for key, by_c in levels.items():
        cells = []
        for c in cs:
            if c not in by_c:
                cells.append("-")
                continue
            s = by_c[c][0]
            med = f"{s['median']:.3f}"
            cells.append((f"**{med}**" if s["median"] >= floor else med)
                         + f" [{s['min']:.3f}-{s['max']:.3f}] ({s.get('n', '?')})")
        lines.append(f"| {labels[key]} | " + " | ".join(cells) + " |")
    sources = sorted({p for by_c in levels.values() for _, p in by_c.values()})
    lines.append("")
    lines.append(f"Medians over rotated rounds [min-max] (rounds); bold: at or above {floor:g}. From "
                 + ", ".join(f"`{os.path.basename(p)}`" for p in sources) + ".")
    return "\n".join(lines) + "\n"


def plot_png(levels: dict, labels: dict, metric: str, floor: float, caption: str) -> bytes:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UserError("--plot: matplotlib is not installed; pip install -e '.[plot]'") from None
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    cs = sorted({c for by_c in levels.values() for c in by_c})
    top = 1.0
    for key, by_c in levels.items():
        xs = sorted(by_c)
        sp = [by_c[c][0] for c in xs]
        med = [s["median"] for s in sp]
        top = max([top] + [s["max"] for s in sp])
        ax.errorbar(xs, med, yerr=[[m - s["min"] for m, s in zip(med, sp)], [s["max"] - m for m, s in zip(med, sp)]],
                    marker="o", capsize=3, label=labels[key])
    ax.axhline(1.0, color="black", lw=0.8, label="plain decoding")
    ax.axhline(floor, color="grey", lw=0.8, ls="--", label=f"{floor:g} of plain")
    ax.set_xscale("log", base=2)
    ax.set_xticks(cs, [str(c) for c in cs])
    ax.set_ylim(min(floor - 0.05, 0.9), math.ceil(top * 10 + 0.5) / 10)
    ax.set_xlabel("concurrency (requests in flight)")
    ax.set_ylabel(f"tok/s over plain ({metric.replace('_', ' ')})")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    title = textwrap.wrap(caption, 110) + ["median over rotated rounds, bars min-max"]
    ax.set_title("\n".join(title), fontsize=8)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, dpi=110, format="png")
    plt.close(fig)
    return buf.getvalue()


def run(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", help="e2e.py --json files")
    ap.add_argument("--ratio", action="append", required=True, help="SERVER/BASELINE[=LABEL], repeatable")
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--metric", choices=METRICS, default="aggregate")
    ap.add_argument("--floor", type=float, default=0.97)
    ap.add_argument("--caption", default="")
    ap.add_argument("--plot", help="PNG to write")
    ap.add_argument("--md", help="markdown table to write (also printed)")
    a = ap.parse_args(argv)
    if not (math.isfinite(a.floor) and 0 < a.floor <= 2):
        raise UserError(f"--floor {a.floor}: expected a ratio in (0, 2], e.g. 0.97")
    ratios = [parse_ratio(r) for r in a.ratio]
    keys, labels = [k for k, _ in ratios], dict(ratios)
    for flag, path in (("--plot", a.plot), ("--md", a.md)):
        if path:
            check_output_file(path, flag)
    levels = load_levels(a.runs, keys, a.temperature, a.metric)
    md = markdown(levels, labels, a.metric, a.floor)
    print(md, end="")
    if a.md:
        atomic_write_text(a.md, md, "--md")
    if a.plot:
        print(f"wrote {atomic_write_bytes(a.plot, plot_png(levels, labels, a.metric, a.floor, a.caption), '--plot')}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_script(run, argv, "ratio_plot.py")


if __name__ == "__main__":
    sys.exit(main())
