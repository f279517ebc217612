"""Live: SGLang serves the tiny Kimi-K2.5-architecture target with its EAGLE-3 drafter (half the target's
positions, the seed's mismatch) through this plugin, and greedy token ids equal the target's alone.

Builds its own random-weight models (sglang_kimi_eagle3.tiny: no download), so it needs only a CUDA GPU
and SGLang 0.5.23; servers and variables: tiny_runs.py; how to run: docs/gpu-ci.md.
"""

from __future__ import annotations

import pytest

from gpu_env import gpu_count
from tiny_runs import MAX_NEW_TOKENS, N_PROMPTS, child_env, log_dir, models, run

pytestmark = [pytest.mark.gpu, pytest.mark.slow,
              pytest.mark.skipif(gpu_count() == 0, reason="live tiny test: no CUDA device visible (nvidia-smi -L)")]


def _served(role: str) -> dict:
    r = run(role)
    assert r["ok"], f"the {role} server failed: {r['error']}\nlog {r['log']}, tail:\n{r['log_text'][-6000:]}"
    assert len(r["outputs"]) == N_PROMPTS and all(len(o["output_ids"]) == MAX_NEW_TOKENS for o in r["outputs"]), \
        f"{role}: expected {N_PROMPTS} answers of {MAX_NEW_TOKENS} tokens"
    return r


def _first_differences(a: dict, b: dict) -> dict[int, int]:
    """prompt index -> first differing position, for prompts whose greedy ids differ."""
    out = {}
    for i, (x, y) in enumerate(zip(a["outputs"], b["outputs"])):
        x, y = x["output_ids"], y["output_ids"]
        if x != y:
            out[i] = next(k for k, (p, q) in enumerate(zip(x, y)) if p != q)
    return out


def _ours(status: dict | None) -> dict[str, int]:
    """hook -> calls that ran our kernel in the TP-0 scheduler (issue 10's status file)."""
    from sglang_kimi_eagle3.integration.runtime_status import KERNEL_HOOKS

    assert status, "no plugin status file from the scheduler (runtime_status hook: SGLANG_KIMI_EAGLE3_STATUS_DIR)"
    return {h["name"]: sum(h["counters"]["ours"].values()) for h in status["hooks"] if h["name"] in KERNEL_HOOKS}


def test_plain_target_follows_its_planted_rule():
    from sglang_kimi_eagle3.tiny import successor

    r, succ = _served("plain"), successor(models()[0])
    pairs = [(o["output_ids"][k - 1], o["output_ids"][k]) for o in r["outputs"] for k in range(1, MAX_NEW_TOKENS)]
    hit = sum(succ[p] == q for p, q in pairs) / len(pairs)
    assert hit >= 0.95, f"only {hit:.1%} of greedy steps follow the built successor map: is this the tiny target?"


def test_speculative_server_starts_with_our_context_policy():
    r = _served("chain")
    log = r["log_text"]
    assert "draft context policy" in log and "extend" in log, "the plugin did not log its context decision"
    # SGLang's own check never fired (with the global override it would have logged this as a warning)
    assert "is greater than the derived context_length" not in log
    assert "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN" not in child_env({}, log_dir())


def test_kill_switch_gives_sglangs_own_context_error():
    r = run("refused")
    assert not r["ok"], "with SGLANG_KIMI_EAGLE3=0 the draft's shorter context must stop the launch"
    log = r["log_text"]
    assert "ValueError" in log and "is greater than the derived context_length" in log, log[-4000:]
    assert "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN" in log


@pytest.mark.parametrize("role", ["chain", "tree", "upstream"])
def test_greedy_ids_equal_the_target_alone(role):
    diff = _first_differences(_served(role), _served("plain"))
    assert not diff, f"{role}: {len(diff)}/{N_PROMPTS} prompts differ from the plain target (first position: {diff})"


@pytest.mark.parametrize("role", ["chain", "tree"])
def test_spec_fields_in_meta_info_and_the_drafter_is_accepted(role):
    outs = _served(role)["outputs"]
    missing = [i for i, o in enumerate(outs) if "spec_accept_length" not in o["meta_info"]]
    assert not missing, f"{role}: no spec_accept_length in meta_info of prompts {missing}"
    assert all(o["meta_info"].get("spec_verify_ct", 0) > 0 for o in outs)
    tau = sum(o["meta_info"]["spec_accept_length"] for o in outs) / len(outs)
    # the planted drafter proposes the target's next token (tiny/weights.py); 1.0 would mean never accepted
    assert tau >= 1.5, f"{role}: mean accept length {tau:.2f}: drafts are not being accepted"


def test_our_kernels_ran_in_the_scheduler():
    r = _served("chain")
    ours = _ours(r["status"])
    failed = [h["name"] for h in r["status"]["hooks"] if h["state"] == "failed"]
    assert not failed, f"hooks failed in the scheduler: {failed}"
    assert sum(ours.values()) > 0, f"no call of ours in the scheduler: {ours}"


@pytest.mark.parametrize("role", ["chain", "tree"])
def test_every_greedy_verify_is_counted(role):
    """The greedy verify goes through SGLang's eagle_sample, hooked at both its call sites: its calls (ours or
    SGLang's, with the reason) are in the file written while serving, not only what graph capture saw."""
    hooks = {h["name"]: h for h in _served(role)["status"]["hooks"]}
    c = hooks["verify_argmax_greedy"]["counters"]
    calls = sum(c["ours"].values()) + sum(n for per in c["sglang"].values() for n in per.values())
    assert calls > 0, f"{role}: no greedy verify counted in the status file: {hooks['verify_argmax_greedy']}"


def test_upstream_mode_runs_only_sglangs_kernels():
    ours = _ours(_served("upstream")["status"])
    assert sum(ours.values()) == 0, f"SGLANG_KIMI_EAGLE3_KERNELS=upstream still ran ours: {ours}"


def test_bench_runs_against_the_live_server():
    b = _served("chain")["bench"]
    assert b["rc"] == 0, f"bench exit {b['rc']}:\n{b['stdout']}\n{b['stderr']}"
    levels = b["json"]["levels"]
    assert [lv["concurrency"] for lv in levels] == [1, 4]
    for lv in levels:
        s = lv["spec"]
        assert s["ok"] == s["requests"] > 0 and s["tau"] is not None and s["tau"] > 1.0, s
