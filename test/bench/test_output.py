"""`bench` against protocol stubs at COLUMNS=80 (the real CLI): every line fits, the table keeps whole
headers and numbers; its plots read through matplotlib's objects: τ and speedup on two labelled axes,
titles whole and inside the figure."""

import json

import pytest
from stub_server import ProtocolStub, StubConfig

from sglang_kimi_eagle3.bench.plots import acceptance_figure, tau_speedup_figure
from sglang_kimi_eagle3.cli import main as cli_main

FAST = ["--concurrency", "1,4", "--max-new-tokens", "16", "--min-requests", "4", "--rounds", "1", "--warmup", "0",
        "--categories", "chat", "--no-progress"]
CAPTION = "PROTOCOL STUB: synthetic acceptance (0.8/0.6/0.45) and synthetic timing, no model, no GPU - " * 2


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "run.json"
    mp = pytest.MonkeyPatch()
    mp.setenv("COLUMNS", "80")
    import io
    from contextlib import redirect_stdout

    buf = io.StringIO()
    try:
        with ProtocolStub(StubConfig(alphas=[0.8, 0.6, 0.45], pass_ms=0.2)) as s, \
                ProtocolStub(StubConfig(alphas=None, pass_ms=0.2)) as b, redirect_stdout(buf):
            rc = cli_main(["bench", "--url", s, "--baseline-url", b, "--json", str(out)] + FAST)
    finally:
        mp.undo()
    return rc, buf.getvalue(), json.loads(out.read_text())


def test_bench_output_fits_80_columns_with_whole_headers(bench_run):
    rc, out, _ = bench_run
    assert rc == 0, out
    long = [ln for ln in out.splitlines() if len(ln) > 80]
    assert not long, long
    for header in ("tok/s/req", "agg tok/s", "α3", "base tok/s/req", "speedup agg", "speedup/req"):
        assert header in out, header
    assert "…" not in out
    assert sum(ln.startswith("┃ c ") or ln.startswith("┃  c ") for ln in out.splitlines()) >= 2  # split, key kept


@pytest.fixture()
def figs(bench_run):
    plt = pytest.importorskip("matplotlib.pyplot")
    _, _, doc = bench_run
    made = [tau_speedup_figure(doc, CAPTION), acceptance_figure(doc, CAPTION)]
    yield made
    for f in made:
        plt.close(f)


def test_tau_and_speedup_are_two_labelled_axes(figs, bench_run):
    fig = figs[0]
    tau_ax, sp_ax = fig.axes
    assert "τ" in tau_ax.get_ylabel() and "speedup" in sp_ax.get_ylabel()
    assert [ln.get_label() for ln in tau_ax.get_lines()] == ["τ (tokens per verify)"]
    labels = [ln.get_label() for ln in sp_ax.get_lines() if not ln.get_label().startswith("_")]
    assert labels and all("baseline" in label for label in labels)
    taus = [lv["spec"]["tau"] for lv in bench_run[2]["levels"]]
    assert list(tau_ax.get_lines()[0].get_ydata()) == taus
    assert sp_ax.get_xlabel().startswith("concurrency")


def test_titles_are_whole_and_inside_the_figure(figs):
    for fig in figs:
        ax = fig.axes[0]
        assert " ".join(CAPTION.split()) in " ".join(ax.get_title().split())
        fig.canvas.draw()
        box, page = ax.title.get_window_extent(fig.canvas.get_renderer()), fig.bbox
        assert box.x0 >= page.x0 and box.x1 <= page.x1 and box.y1 <= page.y1, (box, page)


def test_without_a_baseline_one_tau_axis(bench_run):
    plt = pytest.importorskip("matplotlib.pyplot")
    doc = json.loads(json.dumps(bench_run[2]))
    for lv in doc["levels"]:
        lv["speedup"] = None
    fig = tau_speedup_figure(doc)
    try:
        assert len(fig.axes) == 1 and "τ" in fig.axes[0].get_ylabel()
    finally:
        plt.close(fig)


def test_one_line_says_whether_speculation_was_ever_slower_than_the_baseline(bench_run):
    from sglang_kimi_eagle3.bench.report import speedup_line

    _, out, doc = bench_run
    assert "aggregate tok/s over the baseline: " in " ".join(out.split()), out
    lv = lambda c, x: {"concurrency": c, "speedup": None if x is None else {"aggregate": x}}  # noqa: E731
    assert speedup_line({"levels": [lv(1, 1.5), lv(8, 0.95), lv(32, 1.04)]}) == (
        "aggregate tok/s over the baseline: 0.95x (c 8) to 1.50x (c 1); below 1.00 at c 8 (0.95x): speculation is "
        "slower than the baseline there")
    assert speedup_line({"levels": [lv(1, 1.2), lv(4, 1.1)]}).endswith("never below the baseline at the levels measured")
    assert speedup_line({"levels": [lv(1, 0.9)]}).startswith("aggregate tok/s over the baseline: 0.90x (c 1); below")
    assert speedup_line({"levels": [lv(1, None)]}) is None
    assert speedup_line({"levels": [lv(1, 1.5), lv(8, 0.996)]}).endswith("never below the baseline at the levels measured")
