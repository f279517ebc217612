"""benchmark/serving/ratio_plot.py on the H100 never-slower runs of 2026-12-06 (raw rows in benchmark/results/): the
levels of several runs merge into one table and figure, each point from exactly one run, and bad input is one line,
exit 2."""

import json
from pathlib import Path

import pytest
import ratio_plot

RESULTS = Path(__file__).resolve().parents[2] / "benchmark" / "results"
C1 = RESULTS / "never-slower-h100-2026-12-06-run33-deploy-q0.3-q0.9-c1.json"
C8_64 = RESULTS / "never-slower-h100-2026-12-06-run36-deploy-q0.3-q0.9-c8-c64.json"
RATIOS = ["--ratio", "ours/plain=q 0.3 drafter", "--ratio", "ours_q2/plain"]


def _spread(path, c, key, metric="aggregate"):
    levels = json.loads(path.read_text())["report"]["levels"]
    return next(lv for lv in levels if lv["concurrency"] == c and lv["temperature"] == 0)["ratios"][key][metric]


def test_levels_of_two_runs_merge_into_one_table(capsys):
    assert ratio_plot.main([str(C1), str(C8_64), *RATIOS]) == 0
    out = capsys.readouterr().out
    head, _, q03, q09 = out.splitlines()[:4]
    assert head == "| over plain (aggregate) | c 1 | c 8 | c 64 |"
    for line, key in ((q03, "ours/plain"), (q09, "ours_q2/plain")):
        cells = [x.strip() for x in line.strip("|").split("|")]
        assert cells[0] == ("q 0.3 drafter" if key == "ours/plain" else "ours_q2/plain")  # the label, or the key
        for cell, (path, c) in zip(cells[1:], ((C1, 1), (C8_64, 8), (C8_64, 64))):
            s = _spread(path, c, key)
            assert f"{s['median']:.3f}" in cell and f"[{s['min']:.3f}-{s['max']:.3f}] ({s['n']})" in cell, (c, cell)
            assert cell.startswith("**") == (s["median"] >= 0.97)
    assert C1.name in out and C8_64.name in out


def test_window_metric_reads_the_window_ratios(capsys):
    assert ratio_plot.main([str(C8_64), "--metric", "window", "--ratio", "ours/plain"]) == 0
    row = capsys.readouterr().out.splitlines()[2]
    assert f"{_spread(C8_64, 64, 'ours/plain', 'window')['median']:.3f}" in row


def test_a_level_in_two_runs_is_refused(capsys):
    assert ratio_plot.main([str(C8_64), str(C8_64), *RATIOS]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "at c 8, T 0 is also in" in err and "give one run per level" in err


@pytest.mark.parametrize("args, words", [
    (["--ratio", "fixed/plain"], "--ratio fixed/plain: in no level at temperature 0"),
    (["--ratio", "ours"], "expected SERVER/BASELINE[=LABEL]"),
    (["--ratio", "ours/plain", "--temperature", "0.7"], "in no level at temperature 0.7"),
    (["--ratio", "ours/plain", "--floor", "nan"], "--floor nan: expected a ratio in (0, 2]"),
])
def test_bad_flags_are_one_line_exit_2(capsys, args, words):
    assert ratio_plot.main([str(C8_64), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err, err


def test_a_file_that_is_not_an_e2e_run_is_refused(tmp_path, capsys):
    other = tmp_path / "bench.json"
    other.write_text(json.dumps({"schema": "sglang-kimi-eagle3-bench/1", "levels": []}))
    assert ratio_plot.main([str(other), *RATIOS]) == 2
    err = capsys.readouterr().err
    assert f"{other}: not an e2e.py run" in err
    assert ratio_plot.main([str(tmp_path / "missing.json"), *RATIOS]) == 2
    assert "no such e2e run file" in capsys.readouterr().err


def test_plot_and_markdown_are_written(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    png, md = tmp_path / "r.png", tmp_path / "r.md"
    assert ratio_plot.main([str(C1), str(C8_64), *RATIOS, "--plot", str(png), "--md", str(md),
                            "--caption", "a caption long enough to wrap " * 6]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert md.read_text() == capsys.readouterr().out.split("wrote ")[0]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temp file left
    # an output path that cannot be written: refused before anything is read
    assert ratio_plot.main([str(C8_64), *RATIOS, "--plot", str(tmp_path / "no" / "dir" / "x.png")]) == 2
