"""docs/metrics.md and docs/grafana-spec.json name only metrics that exist: ours, and SGLang's own gauges."""

import importlib.util
import json
import re
from pathlib import Path

from helpers import ROOT

from sglang_kimi_eagle3.integration.hooks import metrics

NAME = re.compile(r"\b(sglang(?:_kimi_eagle3)?:[a-z_]+)")


def _sglang_metric_names() -> set[str]:
    src = Path(importlib.util.find_spec("sglang").origin).parent / "srt" / "observability" / "metrics_collector.py"
    return set(re.findall(r'name="(sglang:[a-z_]+)"', src.read_text()))


def test_the_dashboard_and_the_doc_name_real_metrics():
    ours = {metrics.CALLS + "_total", metrics.STATE}
    sglang = _sglang_metric_names()
    assert {"sglang:spec_accept_length", "sglang:spec_accept_rate", "sglang:spec_num_steps"} <= sglang
    dash = json.loads((ROOT / "docs" / "grafana-spec.json").read_text())
    exprs = " ".join(t["expr"] for p in dash["panels"] for t in p["targets"])
    doc = (ROOT / "docs" / "metrics.md").read_text()
    for text in (exprs, doc):
        names = set(NAME.findall(text))
        assert names - ours - sglang == set(), names - ours - sglang
        assert ours <= names and "sglang:spec_accept_length" in names
