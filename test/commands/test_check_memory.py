"""`check` and memory, end to end: SGLang's own resolution of --mem-fraction-static for the named GPU."""

import json
import re

import pytest
from helpers import check_findings, run_check

pytestmark = pytest.mark.slow


def test_tp4_on_the_embedded_default_fails_on_memory_with_numbers_and_the_suggested_tp_passes():
    cp = run_check("--tp-size", "4", "--json")
    assert cp.returncode == 1, cp.stdout[-3000:] + cp.stderr[-3000:]
    out = json.loads(cp.stdout)
    assert out["title"].endswith("- with --tp-size 4")
    errs = [f for f in out["findings"] if f["severity"] == "error"]
    assert [f["check"] for f in errs] == ["memory"], errs
    assert re.search(r"weights 14\d\.\d GiB per GPU at --tp-size 4", errs[0]["found"])
    assert "RTX PRO 6000 Blackwell (96 GB): 95.6 GiB" in errs[0]["found"]
    fix = errs[0]["fix"].split(" (")[0]
    assert fix == "--tp-size 8"
    cp = run_check(*fix.split(), "--json")  # the fix, applied: the embedded default at TP 8 again
    assert cp.returncode == 0 and not [f for f in check_findings(cp) if f["severity"] == "error"]


def test_without_the_fraction_sglang_derives_it_for_the_named_gpu_not_for_this_machine():
    def fraction(gpu):
        cp = run_check("--for-gpu", gpu, "--model-path", "kimi-k2.5", "--trust-remote-code", "--tp-size", "8",
                  "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "aq-medai/kimi-k2-eagle3",
                  "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens",
                  "4", "--json")
        mem = [f for f in check_findings(cp) if f["check"] == "memory"]
        m = re.search(r"static pool (0\.\d+) \(SGLang's default for this GPU\)", mem[0]["found"])
        assert m, mem
        return float(m.group(1))

    rtx, h200 = fraction("RTX PRO 6000"), fraction("H200")
    # memory_hook.handle_gpu_memory_settings: (capacity - reserve) / capacity, times the VLM factor
    assert 0.7 < rtx < h200 < 0.9, (rtx, h200)
