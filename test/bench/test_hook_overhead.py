"""benchmark/host/hook_overhead: it runs against the installed SGLang and this plugin's hooks as they are (a hook
whose target, wrapper or reading shape changed breaks it here, not on the next lease), and it has a row for every
step_clock target and for each hook that runs per off-state decode step."""

import json
import subprocess
import sys

import pytest
from helpers import ROOT, clean_env

from sglang_kimi_eagle3.integration.hooks import step_clock

pytestmark = pytest.mark.slow


def test_a_short_run_measures_every_per_step_hook(tmp_path):
    out = tmp_path / "ho.json"
    cp = subprocess.run([sys.executable, "-m", "benchmark.host.hook_overhead", "--bs", "1", "--calls", "20",
                         "--repeats", "1", "--cycles", "1", "--no-children", "--json", str(out)],
                        capture_output=True, text=True, timeout=600, env=clean_env(), cwd=str(ROOT))
    assert cp.returncode == 0, cp.stderr[-3000:]
    res = json.loads(out.read_text())
    keys = {r["key"] for r in res["rows"]}
    assert set(step_clock.TARGETS) <= keys, set(step_clock.TARGETS) - keys
    assert {"offstate_graph_target", "verify_greedy", "adaptive_control"} <= keys, keys
    assert res["meta"]["sglang"] == "0.5.23" and res["total_graph"]["1"] > 0
    assert "TOTAL off-state, CUDA graphs (default)" in cp.stdout
    tick = [v for k, v in res["extra"].items() if k.startswith("step_clock.tick")]
    assert len(tick) == 1 and tick[0] > 0  # the writer's poll over a full row (every part of it filled: the bench asserts)
