"""`sglang-kimi-eagle3 check` end to end on other launches: the Llama pair's context, an unknown flag, and the
plugin switched off (SGLang's own refusal)."""

import json

import pytest
from helpers import check_findings, run_check

pytestmark = pytest.mark.slow


def test_llama_pair_reports_its_2048_vs_131072_context():
    cp = run_check("--model-path", "llama-3.1-8b-instruct", "--speculative-algorithm", "EAGLE3",
               "--speculative-draft-model-path", "llama-3.1-8b-eagle3", "--for-gpu", "H200", "--json")
    assert cp.returncode == 0
    ctx = [x for x in check_findings(cp) if x["check"] == "context"]
    assert ctx and "2048" in ctx[0]["found"] and "131072" in ctx[0]["found"] and ctx[0]["severity"] == "warning"
    assert "NVIDIA_H200.draft_head.json (measured on NVIDIA H200" in json.loads(cp.stdout)["kernel_table"]


def test_unknown_flag_gets_sglangs_error_in_one_line():
    cp = run_check("--model-path", "kimi-k2.5", "--no-such-flag")
    assert cp.returncode == 2
    assert cp.stderr.strip().splitlines()[-1].startswith("sglang-kimi-eagle3: error:")
    assert "unrecognized arguments: --no-such-flag" in cp.stderr and "Traceback" not in cp.stderr
    assert len([ln for ln in cp.stderr.splitlines() if "error" in ln]) == 1


def test_plugin_switched_off_check_shows_sglangs_own_refusal_and_says_the_plugin_is_off():
    # without the plugin, the 131072-position drafter beside the 262144 target is SGLang's context error
    cp = run_check(SGLANG_KIMI_EAGLE3="0")
    assert cp.returncode == 1, cp.stdout[-2000:] + cp.stderr[-2000:]
    assert "NoneType: None" not in cp.stdout
    assert "with this plugin switched off (SGLANG_KIMI_EAGLE3=0), launch_server would refuse to start" in cp.stdout
