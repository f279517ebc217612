"""Per-level summaries: what enters which average (errors and spec-less answers never silently)."""

import pytest

from sglang_kimi_eagle3.bench.client import RequestResult
from sglang_kimi_eagle3.bench.stats import pooled_histogram, speedup, summarize


def ok(tokens, latency, hist=None, steps=3):
    spec = None
    if hist is not None:
        verify = sum(hist)
        correct = sum(k * v for k, v in enumerate(hist))
        spec = {"accept_length": tokens / verify, "accept_rate": correct / (verify * steps), "verify_ct": verify,
                "num_correct": correct, "num_proposed": verify * steps, "histogram": hist}
    return RequestResult("p", "chat", True, latency_s=latency, completion_tokens=tokens, spec=spec)


def test_summary_hand_computed():
    rs = [ok(10, 1.0, [1, 1, 2]), ok(20, 2.0, [2, 2, 2, 1]), ok(30, 1.0),  # the last: no spec fields
          RequestResult("p", "chat", False, error="http_500", detail="boom", latency_s=0.1),
          RequestResult("p", "chat", False, error="timeout", latency_s=5.0)]
    s = summarize(rs, wall_s=4.0)
    assert (s["requests"], s["ok"], s["no_spec"]) == (5, 3, 1)
    assert s["errors"] == {"http_500": 1, "timeout": 1} and s["first_error"] == "http_500: boom"
    assert s["tokens"] == 60 and s["agg_tok_s"] == 15.0  # errors add no tokens, the wall clock is real
    assert s["tok_s_per_req_mean"] == pytest.approx((10 + 10 + 30) / 3)
    assert s["tau"] == pytest.approx(30 / 11)  # (10 + 20) tokens over (4 + 7) verifies; spec-less request left out
    assert s["accept_rate"] == pytest.approx((5 + 9) / 33)  # correct drafts 0+1+2*2 and 0+2+2*2+3
    assert s["drafts_per_verify"] == 3
    assert s["histogram"] == [3, 3, 4, 1]
    # alpha_1 = 8/11, alpha_2 = 5/8, alpha_3 = 1/5
    assert s["alpha"] == pytest.approx([8 / 11, 5 / 8, 1 / 5])


def test_all_failed_level_has_no_averages():
    s = summarize([RequestResult("p", "chat", False, error="connection")], wall_s=1.0)
    assert s["ok"] == 0 and s["agg_tok_s"] is None and s["tau"] is None and s["tok_s_per_req_mean"] is None


def test_speculation_off_level_reports_no_tau():
    s = summarize([ok(10, 1.0), ok(12, 1.0)], wall_s=1.0)
    assert s["no_spec"] == 2 and s["tau"] is None and s["alpha"] == [] and s["agg_tok_s"] == 22


def test_pooled_histogram_pads_ragged_lists():
    assert pooled_histogram([[1], [0, 2, 3], [4, 1]]) == [5, 3, 3]


def test_speedup_ratios_and_missing_sides():
    a = {"agg_tok_s": 30.0, "tok_s_per_req_mean": 12.0}
    b = {"agg_tok_s": 20.0, "tok_s_per_req_mean": 8.0}
    assert speedup(a, b) == {"aggregate": 1.5, "per_request": 1.5}
    assert speedup(a, None) is None and speedup(a, {"agg_tok_s": None}) is None
