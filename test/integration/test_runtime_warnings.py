"""Preflight says where the runtime hooks do not reach (issue 10): --use-ray (SGLang's Ray scheduler actors,
srt/ray/scheduler_actor.py, never call load_plugins()) and --enable-multi-layer-eagle (MultiLayerEagleWorkerV2
never calls draft_topk1_postprocess / renorm_draft_probs / the v2 worker's fast_topk). Warnings, not errors."""

import json

import pytest

from helpers import clean_env, python

pytestmark = pytest.mark.slow


def test_use_ray_and_multi_layer_eagle_are_warned_about():
    cp = python(["-m", "sglang_kimi_eagle3.cli", "check", "--model-path", "llama-3.1-8b-instruct",
                 "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "llama-3.1-8b-eagle3",
                 "--for-gpu", "H200", "--json", "--use-ray", "--enable-multi-layer-eagle"], timeout=300, env=clean_env())
    assert cp.returncode == 0, cp.stdout[-2000:] + cp.stderr[-2000:]
    plugin = [f for f in json.loads(cp.stdout)["findings"] if f["check"] == "plugin"]
    assert [f["severity"] for f in plugin] == ["warning", "warning"], plugin
    assert "--use-ray" in plugin[0]["found"] and "load_plugins()" in plugin[0]["found"]
    assert "draft_topk1" in plugin[1]["found"] and "verify hooks still do" in plugin[1]["found"]


def _slots_findings(*extra, **env):
    cp = python(["-m", "sglang_kimi_eagle3.cli", "check", "--model-path", "llama-3.1-8b-instruct",
                 "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "llama-3.1-8b-eagle3",
                 "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4",
                 "--for-gpu", "H200", "--json", *extra], timeout=300, env=clean_env(**env))
    assert cp.returncode == 0, cp.stdout[-2000:] + cp.stderr[-2000:]
    return [f for f in json.loads(cp.stdout)["findings"] if f["check"] == "request_slots"]


def test_an_operators_request_slots_say_up_to_where_the_off_state_defers_its_extend():
    """A deferred flush carries at most the request slots' rows, so above half of them every off-state step extends at
    once (live on an H100 with 128 slots at c 128: SGLang's extend every step, 2.3 % of a plain step's GPU time). An
    operator's --max-running-requests gets an info line saying so; SGLang's own default, or the per-step extend, none."""
    found = _slots_findings("--max-running-requests", "128")
    assert [f["severity"] for f in found] == ["info"], found
    assert "up to 64 running requests" in found[0]["found"] and "twice your peak batch" in found[0]["fix"]
    assert _slots_findings() == []  # SGLang sizes the slots itself
    assert _slots_findings("--max-running-requests", "128", SGLANG_KIMI_EAGLE3_OFFSTATE_EXTEND="keep") == []
