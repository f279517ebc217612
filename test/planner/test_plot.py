"""`plan --plot`'s figure, read through matplotlib's objects: the title whole and inside the figure, the
extrapolated steps marked (dashed, hollow, in the legend), the best line on top and distinct."""

import pytest

from sglang_kimi_eagle3.planner import costs, profiles, sources
from sglang_kimi_eagle3.planner.model import search, settings
from sglang_kimi_eagle3.planner.plot import BEST_ZORDER, TITLE_CHARS, plan_figure

plt = pytest.importorskip("matplotlib.pyplot")


@pytest.fixture(scope="module")
def fig_and_source():
    profile = profiles.load(profiles.DEFAULT_PROFILE)
    acc = sources.from_preset(profile.acceptance_preset)
    plan, _ = search(acc, costs.from_profile(profile), [1, 2, 4, 8, 16, 32, 64, 128], settings(range(1, 8), [1], None))
    subtitle = f"profile {profile.title}\n{acc.source}"
    fig = plan_figure(plan, subtitle)
    yield fig, subtitle, plan
    plt.close(fig)


def _lines(ax):
    return [ln for ln in ax.get_lines() if len(ln.get_xdata())]


def test_title_is_whole_and_inside_the_figure(fig_and_source):
    fig, subtitle, _ = fig_and_source
    ax = fig.axes[0]
    title = ax.get_title()
    assert " ".join(subtitle.split()) in " ".join(title.split())  # nothing cut
    assert all(len(line) <= TITLE_CHARS for line in title.splitlines())
    fig.canvas.draw()
    box, page = ax.title.get_window_extent(fig.canvas.get_renderer()), fig.bbox
    assert box.x0 >= page.x0 and box.x1 <= page.x1 and box.y1 <= page.y1, (box, page)


def test_extrapolated_steps_are_dashed_hollow_and_explained(fig_and_source):
    fig, _, plan = fig_and_source
    ax = fig.axes[0]
    extrapolated = {p.steps for preds, _ in plan.values() for p in preds if p.extrapolated}
    assert extrapolated  # the preset measures 4 positions; steps 5-7 are extrapolated
    by_label = {ln.get_label(): ln for ln in _lines(ax)}
    for s in range(1, 8):
        if s in extrapolated:
            ln = by_label[f"steps {s}*"]
            assert ln.get_linestyle() == "--" and ln.get_markerfacecolor() == "none"
        else:
            ln = by_label[f"steps {s}"]
            assert ln.get_linestyle() == "-" and ln.get_markerfacecolor() != "none"
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(t.startswith("* dashed, hollow: acceptance") and "extrapolated" in t for t in legend)


def test_best_is_on_top_and_distinct(fig_and_source):
    fig, _, plan = fig_and_source
    ax = fig.axes[0]
    best = next(ln for ln in _lines(ax) if ln.get_label().startswith("best"))
    others = [ln for ln in _lines(ax) if ln is not best]
    assert best.get_zorder() == BEST_ZORDER > max(ln.get_zorder() for ln in others)
    assert best.get_alpha() in (None, 1.0) and best.get_color() == "black" and best.get_marker() == "D"
    assert all(ln.get_color() != "black" for ln in others if ln.get_label().startswith("steps"))
    assert list(best.get_ydata()) == [plan[b][1].speedup for b in sorted(plan)]
    assert any(t.get_text().startswith("best") for t in ax.get_legend().get_texts())
    assert ax.get_xlabel() and ax.get_ylabel() == "predicted speedup over no speculation"
