"""The planner's adaptive-config rules against SGLang's own `_load_adaptive_config` (imports SGLang: one test)."""

import json

import pytest

from sglang_kimi_eagle3.cli import main as cli_main
from sglang_kimi_eagle3.planner.adaptive import check

CONFIGS = [
    ({"1": {"candidate_steps": [0, 3]}, "_generated_by": {}}, True),
    ({"1": {"candidate_steps": []}}, False),  # what `plan --tolerance 2` used to write
    ({"1": {"candidate_steps": ["3"]}}, False),
    ({"1": {"candidate_steps": [-1]}}, False),
    ({"1": {"candidate_steps": 3}}, False),
    ({"_generated_by": {}}, False),
    ({"1": {}}, False),
]


def test_planner_rules_match_sglangs_loader_and_plan_is_confirmed_by_it(tmp_path, capsys):
    pytest.importorskip("sglang")
    from sglang_kimi_eagle3.integration.adaptive_check import sglang_loader

    sglang_ok = sglang_loader()
    assert sglang_ok is not None, "SGLang is installed but its adaptive loader did not import"
    for i, (cfg, valid) in enumerate(CONFIGS):
        p = tmp_path / f"c{i}.json"
        p.write_text(json.dumps(cfg))
        assert (sglang_ok(str(p)) is None) == valid, cfg  # SGLang's verdict
        try:
            check(cfg)
            ours = True
        except AssertionError:
            ours = False
        assert ours == valid, cfg  # ours is the same
    out = tmp_path / "cfg.json"
    assert cli_main(["plan", "-o", str(out), "--tolerance", "1"]) == 0
    assert "SGLang's own _load_adaptive_config accepts it" in capsys.readouterr().out
    assert sglang_ok(str(out)) is None
