"""The failing launch of issue 2, through SGLang 0.5.23's own code path, with and without the plugin.

Each launch is parsed by SGLang's prepare_server_args, resolved by resolve_once (on an emulated SM90
platform, since this machine has no GPU), published, and the target + draft ModelConfig are built as
TpModelWorker/EagleDraftWorker build them (see worker_path.py). One fresh interpreter per plugin state.
"""

import functools

import pytest

from helpers import AQ_K2_DRAFT, KIMI_K25, LLAMA_8B, LLAMA_8B_DRAFT, run_json
from worker_path import WORKER_PATH

pytestmark = pytest.mark.slow

KIMI = ["--model-path", str(KIMI_K25), "--trust-remote-code", "--tp-size", "8", "--mem-fraction-static", "0.85",
        "--host", "0.0.0.0", "--port", "8000", "--speculative-algorithm", "EAGLE3",
        "--speculative-draft-model-path", str(AQ_K2_DRAFT), "--speculative-num-steps", "3",
        "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]
LLAMA = ["--model-path", str(LLAMA_8B), "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path",
         str(LLAMA_8B_DRAFT), "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
         "--speculative-num-draft-tokens", "4"]
PAIRS = {"kimi": (KIMI, 262144, 131072), "llama": (LLAMA, 131072, 2048)}
P = "SGLANG_KIMI_EAGLE3_CONTEXT_POLICY"
OFF = {"SGLANG_KIMI_EAGLE3_PREFLIGHT": "off"}  # reach the draft worker's own check, past the launch preflight


def _cases():
    cases = {}
    for name, (argv, t_len, _d) in PAIRS.items():
        cases[f"{name}/auto"] = (argv, {})
        for pol in ("extend", "yarn", "cap", "strict"):
            cases[f"{name}/{pol}"] = (argv, {P: pol})
        cases[f"{name}/strict/worker"] = (argv, {P: "strict", **OFF})
        cases[f"{name}/flag-yarn"] = (argv + ["--speculative-draft-context-policy", "yarn"], {P: "cap"})
        cases[f"{name}/too-long"] = (argv + ["--context-length", str(t_len * 2)], {})
        cases[f"{name}/too-long/worker"] = (argv + ["--context-length", str(t_len * 2)], dict(OFF))
    return cases


@functools.lru_cache(maxsize=None)
def results(plugin: bool) -> dict:
    cases = _cases() if plugin else {k: v for k, v in _cases().items() if k.endswith("/auto")}  # no flag without it
    code = WORKER_PATH + f"\nprint(json.dumps(matrix({cases!r})))"
    env = {} if plugin else {"SGLANG_KIMI_EAGLE3": "0"}
    return run_json(code, timeout=600, **env)


@pytest.mark.parametrize("pair", PAIRS)
def test_without_the_plugin_sglang_refuses_the_draft(pair):
    r = results(False)[f"{pair}/auto"]
    assert not r["ok"] and r["stage"] == "draft" and r["type"] == "ValueError"
    assert "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN" in r["error"]


@pytest.mark.parametrize("pair", PAIRS)
@pytest.mark.parametrize("policy", ["auto", "extend"])
def test_extend_serves_the_target_length_and_sizes_the_draft_rope(pair, policy):
    _argv, t_len, d_len = PAIRS[pair]
    r = results(True)[f"{pair}/{policy}"]
    assert r["ok"], r
    assert r["target_ctx"] == r["draft_ctx"] == t_len
    margin = 3 * 4 * 2 + 256  # steps * draft tokens * safety factor + rope margin, SGLang's defaults
    assert r["draft_mpe"] == (t_len + margin + 127) // 128 * 128
    assert r["draft_rope"]["rope_type"] == "default"  # the draft's RoPE itself is untouched
    assert r["env_overwrite_after"] is None


@pytest.mark.parametrize("pair", PAIRS)
def test_yarn_rescales_the_draft_rope(pair):
    _argv, t_len, d_len = PAIRS[pair]
    for case in (f"{pair}/yarn", f"{pair}/flag-yarn"):  # env, and the launch_server flag (which beats the env)
        r = results(True)[case]
        assert r["ok"], (case, r)
        rope = r["draft_rope"]
        assert rope["rope_type"] == "yarn" and rope["factor"] == t_len / d_len
        assert rope["original_max_position_embeddings"] == d_len
        assert r["draft_mpe"] == t_len and r["draft_ctx"] == t_len


@pytest.mark.parametrize("pair", PAIRS)
def test_cap_serves_the_draft_length(pair):
    _argv, _t, d_len = PAIRS[pair]
    r = results(True)[f"{pair}/cap"]
    assert r["ok"], r
    assert r["target_ctx"] == r["draft_ctx"] == d_len
    assert r["draft_mpe"] == d_len


@pytest.mark.parametrize("pair", PAIRS)
def test_strict_refuses_at_launch_and_in_the_worker(pair):
    launch = results(True)[f"{pair}/strict"]
    assert not launch["ok"] and launch["type"] == "PreflightFailed" and "strict" in launch["error"]
    worker = results(True)[f"{pair}/strict/worker"]
    assert not worker["ok"] and worker["stage"] == "draft" and worker["type"] == "ValueError"
    for alternative in ("extend would serve", "cap would serve", "--speculative-draft-context-policy"):
        assert alternative in worker["error"]


@pytest.mark.parametrize("pair", PAIRS)
def test_an_over_long_context_on_the_target_still_fails(pair):
    for case in (f"{pair}/too-long", f"{pair}/too-long/worker"):
        r = results(True)[case]
        assert not r["ok"], case
        assert str(PAIRS[pair][1] * 2) in r["error"]
        assert r["env_overwrite_after"] is None
