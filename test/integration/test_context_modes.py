"""All five context policies with SGLANG_KIMI_EAGLE3_PREFLIGHT=on|warn|off, on the worker path (issue 10).

One launch per (policy, mode), parsed and resolved by SGLang's own code and followed by the target and
draft ModelConfig as the scheduler builds them (worker_path.py). The policy lives in one place
(integration/hooks/context_policy.py): `cap` lowers the served context in the main process whatever the
preflight mode, so it works with preflight off; preflight only reports (and refuses on errors when on).
"""

import functools

import pytest
from helpers import AQ_K2_DRAFT, KIMI_K25, LLAMA_8B, LLAMA_8B_DRAFT, run_json
from worker_path import WORKER_PATH

pytestmark = pytest.mark.slow

LLAMA = ["--model-path", str(LLAMA_8B), "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path",
         str(LLAMA_8B_DRAFT), "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
         "--speculative-num-draft-tokens", "4"]
KIMI = ["--model-path", str(KIMI_K25), "--trust-remote-code", "--tp-size", "8", "--speculative-algorithm", "EAGLE3",
        "--speculative-draft-model-path", str(AQ_K2_DRAFT), "--speculative-num-steps", "3",
        "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]
POLICIES = ("auto", "strict", "extend", "yarn", "cap")
MODES = ("on", "warn", "off")


@functools.lru_cache(maxsize=None)
def results() -> dict:
    cases = {f"llama/{p}/{m}": (LLAMA, {"SGLANG_KIMI_EAGLE3_CONTEXT_POLICY": p, "SGLANG_KIMI_EAGLE3_PREFLIGHT": m})
             for p in POLICIES for m in MODES}
    cases.update({f"kimi/cap/{m}": (KIMI + ["--speculative-draft-context-policy", "cap"],
                                    {"SGLANG_KIMI_EAGLE3_PREFLIGHT": m}) for m in MODES})
    return run_json(WORKER_PATH + f"\nprint(json.dumps(matrix({cases!r})))", timeout=600)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("policy", ["auto", "extend", "yarn", "cap"])
def test_policies_that_serve_work_in_every_preflight_mode(policy, mode):
    r = results()[f"llama/{policy}/{mode}"]
    assert r["ok"], r
    if policy == "cap":
        assert r["target_ctx"] == r["draft_ctx"] == 2048 == r["draft_mpe"]
    else:
        assert r["target_ctx"] == r["draft_ctx"] == 131072
        assert r["draft_rope"]["rope_type"] == ("yarn" if policy == "yarn" else "default")
    assert r["env_overwrite_after"] is None
    # same outcome whatever the preflight mode: the policy does not depend on preflight
    assert r == results()[f"llama/{policy}/on"]


@pytest.mark.parametrize("mode", MODES)
def test_cap_by_flag_on_kimi_in_every_mode(mode):
    r = results()[f"kimi/cap/{mode}"]
    assert r["ok"], r
    assert r["target_ctx"] == r["draft_ctx"] == 131072


def test_strict_refuses_at_launch_with_preflight_on_and_in_the_draft_worker_otherwise():
    on = results()["llama/strict/on"]
    assert not on["ok"] and on["type"] == "PreflightFailed" and "strict" in on["error"], on
    for mode in ("warn", "off"):
        r = results()[f"llama/strict/{mode}"]
        assert not r["ok"] and r["stage"] == "draft" and r["type"] == "ValueError", (mode, r)
        assert "--speculative-draft-context-policy" in r["error"]
