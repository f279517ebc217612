"""The planner against the published end-to-end points: docs/planner.md's calibration table is what the code
predicts, and the before/after errors it states are the model's."""

import statistics
from pathlib import Path

from sglang_kimi_eagle3.planner import calibration, profiles

DOC = Path(__file__).resolve().parents[2] / "docs" / "planner.md"


def _doc_table() -> str:
    text = DOC.read_text()
    return text.split("<!-- calibration table: begin -->\n", 1)[1].split("\n<!-- calibration table: end -->", 1)[0]


def test_the_documented_table_is_the_models_prediction():
    assert _doc_table() == calibration.markdown()


def test_every_published_point_names_a_bundled_profile_and_a_source():
    for pt in calibration.POINTS:
        assert pt.profile in profiles.names() and pt.source
    assert all(why for _, why in calibration.NOT_PREDICTED)


def test_calibrated_speedups_have_median_error_near_zero_and_the_old_profile_overshot():
    speedups = [p for p in calibration.POINTS if p.tau is not None]
    after = [err for _, _, err in calibration.rows(speedups)]
    assert abs(statistics.median(after)) < 1.0 and statistics.fmean(map(abs, after)) < 5.0

    def before(_name):  # the only H200 profile before: Kimi-K2.5 INT4, no draft forward overhead
        p = profiles.load("kimi-k2.5_8xh200_tp8")
        p.draft.pass_overhead_us = 0.0
        return p

    old = [round(err, 1) for _, _, err in calibration.rows(speedups, before)]
    assert old == [41.0, 23.5, 22.1, 27.5, 19.2, 18.6]  # as docs/planner.md states them
    assert "+41.0, +23.5, +22.1, +27.5, +19.2, +18.6 %" in DOC.read_text()
