"""Live: SGLang serves the seed's model path (the tiny Kimi-K2.5 target as KimiK25ForConditionalGeneration, its
routed experts compressed-tensors INT4, with an EAGLE-3 drafter of half the target's positions) through this
plugin, for three targets (INT4 wrapper, bf16 wrapper, text-only DeepseekV3ForCausalLM): greedy token ids of the
EAGLE-3 chain and tree equal the target's alone, the planted drafter's accept length is what it was built to
give (a lost aux-hidden-state capture shows as ~1), our kernels are counted in the scheduler, the kill switch
gives SGLang's own context error, and drafters built with --draft-agreement q are accepted per position at ~q.

Builds its own random-weight models (sglang_kimi_eagle3.tiny: no download), so it needs only a CUDA GPU and
SGLang 0.5.23. The servers start concurrently, on demand for the collected tests (tiny_runs.py: roles and
variables; GPU_CI_TARGETS picks the targets); how to run: docs/gpu-ci.md.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import tiny_runs as T
from gpu_env import gpu_count
from tiny_runs import MAX_NEW_TOKENS, N_PROMPTS, child_env, log_dir, models, run

pytestmark = [pytest.mark.gpu, pytest.mark.slow,
              pytest.mark.skipif(gpu_count() == 0, reason="live tiny test: no CUDA device visible (nvidia-smi -L)")]


def _params(names):
    """pytest params of these roles; those whose target GPU_CI_TARGETS leaves out are skipped, with the reason."""
    return [pytest.param(n, id=n, marks=[pytest.mark.skip(reason=why)] if (why := T.skip_reason(n)) else [])
            for n in names]


TARGETS = list(T.TARGETS)
MAIN = T.main_target()
SPEC = [f"{s}-{t}" for t in TARGETS for s in ("chain", "tree")]
AGREE = [f"agree-{q:g}" for q in T.AGREEMENTS]


@pytest.fixture(scope="module", autouse=True)
def _servers(request):
    """Queue every server the collected tests of this file need (they start GPU_CI_PARALLEL at a time); stop
    whatever is still up at the end (or on an interrupt)."""
    here = Path(__file__)
    T.start(T.needed([i for i in request.session.items if Path(str(i.fspath)) == here]))
    yield
    T.stop_all()


def _served(name: str) -> dict:
    r = run(name)
    assert r["ok"], f"the {name} server failed: {r['error']}\nlog {r['log']}, tail:\n{r['log_text'][-6000:]}"
    assert len(r["outputs"]) == N_PROMPTS and all(len(o["output_ids"]) == MAX_NEW_TOKENS for o in r["outputs"]), \
        f"{name}: expected {N_PROMPTS} answers of {MAX_NEW_TOKENS} tokens"
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
    """hook -> calls that ran our kernel in the TP-0 scheduler (the runtime status file)."""
    from sglang_kimi_eagle3.integration.hooks.runtime_status import KERNEL_HOOKS

    assert status, "no plugin status file from the scheduler (runtime_status hook: SGLANG_KIMI_EAGLE3_STATUS_DIR)"
    return {h["name"]: sum(h["counters"]["ours"].values()) for h in status["hooks"] if h["name"] in KERNEL_HOOKS}


def _histogram(outputs) -> list[int]:
    """Verify steps by number of accepted drafts, summed over the answers (SGLang's spec_correct_drafts_histogram)."""
    total: list[int] = []
    for o in outputs:
        h = o["meta_info"].get("spec_correct_drafts_histogram") or []
        total += [0] * (len(h) - len(total))
        for k, n in enumerate(h):
            total[k] += n
    return total


@pytest.mark.parametrize("role", _params(f"plain-{t}" for t in TARGETS))
def test_plain_target_follows_its_planted_rule_as_the_real_class(role):
    from sglang_kimi_eagle3.tiny import successor

    r, t = _served(role), T.role(role).target
    succ = successor(models(t)[0])
    pairs = [(o["output_ids"][k - 1], o["output_ids"][k]) for o in r["outputs"] for k in range(1, MAX_NEW_TOKENS)]
    hit = sum(succ[p] == q for p, q in pairs) / len(pairs)
    assert hit >= 0.95, f"only {hit:.1%} of greedy steps follow the built successor map: is this the tiny target?"
    cls = T.TARGETS[t][1]
    assert f"type={cls}" in r["log_text"], f"{role}: SGLang did not log building {cls} (Load weight end ... type=)"
    if t == "int4":  # SGLang's compressed-tensors W4A16 MoE method (on SM90: its Marlin kernel), not a bf16 path
        assert "Using CompressedTensorsWNA16" in r["log_text"], "the INT4 experts did not take SGLang's WNA16 MoE method"


@pytest.mark.parametrize("role", _params(f"chain-{t}" for t in TARGETS))
def test_speculative_server_starts_with_our_context_policy(role):
    log = _served(role)["log_text"]
    assert "draft context policy" in log and "extend" in log, "the plugin did not log its context decision"
    # SGLang's own check never fired (with the global override it would have logged this as a warning)
    assert T.REFUSED_LINE not in log
    assert "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN" not in child_env({}, log_dir())
    assert f"type={T.TARGETS[T.role(role).target][1]}" in log


@pytest.mark.parametrize("role", _params(["refused"]))
def test_kill_switch_gives_sglangs_own_context_error(role):
    r = run(role)
    assert not r["ok"], "with SGLANG_KIMI_EAGLE3=0 the draft's shorter context must stop the launch"
    log = r["log_text"]
    assert "ValueError" in log and T.REFUSED_LINE in log, log[-4000:]
    assert "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN" in log


@pytest.mark.parametrize("role", _params(SPEC + ["upstream"] + AGREE))
def test_greedy_ids_equal_the_target_alone(role):
    diff = _first_differences(_served(role), _served(T.role(role).plain))
    assert not diff, f"{role}: {len(diff)}/{N_PROMPTS} prompts differ from the plain target (first position: {diff})"


@pytest.mark.parametrize("role", _params(SPEC + ["upstream"]))
def test_accept_length_is_the_planted_drafters(role):
    """The planted drafter is always right: accept length 4.00 for steps 3. A drafter that never gets the target's
    aux hidden states (a capture lost in the wrapper) proposes noise: ~1."""
    outs, want = _served(role)["outputs"], T.role(role).expected_tau
    missing = [i for i, o in enumerate(outs) if "spec_accept_length" not in o["meta_info"]]
    assert not missing, f"{role}: no spec_accept_length in meta_info of prompts {missing}"
    assert all(o["meta_info"].get("spec_verify_ct", 0) > 0 for o in outs)
    tau = sum(o["meta_info"]["spec_accept_length"] for o in outs) / len(outs)
    assert abs(tau - want) <= 0.25, f"{role}: mean accept length {tau:.2f}, the planted drafter gives {want:.2f}"


@pytest.mark.parametrize("role", _params(AGREE))
def test_draft_agreement_q_is_accepted_per_position_at_q(role):
    """Drafter built with --draft-agreement q: given draft position k-1 was accepted, position k is accepted at ~q
    (SGLang's per-request spec_correct_drafts_histogram, pooled over 24 answers of 192 tokens), and the mean
    accept length is 1 + q + q^2 + q^3. (A drafter always right, or never, gives 1.0 or 0.0 at every position.)"""
    r, q = _served(role), T.role(role).agreement
    outs = r["long_outputs"]
    h = _histogram(outs)
    assert h and sum(h) > 0, f"{role}: no spec_correct_drafts_histogram in meta_info"
    reach = [sum(h[k:]) for k in range(len(h))]  # verify steps whose first k drafts were accepted
    rates = {k: reach[k] / reach[k - 1] for k in range(1, len(reach)) if reach[k - 1] >= 30}
    assert len(h) == 4 and set(rates) == {1, 2, 3}, f"{role}: histogram {h}"
    for k, a in rates.items():
        tol = max(0.08, 3.5 * (q * (1 - q) / reach[k - 1]) ** 0.5)
        assert abs(a - q) <= tol, f"{role}: position {k} accepted at {a:.3f} given {k - 1}, built for {q} (histogram {h})"
    tau = sum(o["meta_info"]["spec_accept_length"] for o in outs) / len(outs)
    assert abs(tau - T.role(role).expected_tau) <= 0.3, f"{role}: mean accept length {tau:.2f}"


@pytest.mark.parametrize("role", _params(SPEC + AGREE))
def test_our_kernels_ran_in_the_scheduler(role):
    """Our kernel hooks ran in the serving scheduler (its status file), none failed, and every greedy verify (SGLang's
    eagle_sample, hooked at both call sites) is counted: ours or SGLang's, with the reason."""
    status = _served(role)["status"]
    ours = _ours(status)
    failed = [h["name"] for h in status["hooks"] if h["state"] == "failed"]
    assert not failed, f"hooks failed in the scheduler: {failed}"
    hooks = {h["name"]: h for h in status["hooks"]}
    c = hooks["verify_argmax_greedy"]["counters"]
    calls = sum(c["ours"].values()) + sum(n for per in c["sglang"].values() for n in per.values())
    assert calls > 0, f"{role}: no greedy verify counted in the status file: {hooks['verify_argmax_greedy']}"
    if role.startswith("chain"):
        assert sum(ours.values()) > 0, f"no call of ours in the scheduler: {ours}"


@pytest.mark.parametrize("role", _params(SPEC + AGREE))
def test_every_tp_rank_applied_the_leads_hooks(role):
    """At TP > 1 every rank's scheduler loads the hooks: rank r writes port<P>-tp<r>.json, and its hooks are in the
    lead's states (none failed there either). At TP 1 there is no other rank: nothing to compare."""
    r = _served(role)
    tp = T.tp()
    if tp < 2:
        pytest.skip("TP 1: no other rank")
    ranks = r.get("rank_status") or {}
    assert sorted(ranks) == [f"tp{i}" for i in range(1, tp)], f"{role}: rank files {sorted(ranks)}"
    lead = {h["name"]: h["state"] for h in r["status"]["hooks"]}
    for rank, snap in ranks.items():
        mine = {h["name"]: h["state"] for h in snap["hooks"]}
        assert mine == lead, f"{role} {rank}: hooks {mine}, lead {lead}"


@pytest.mark.parametrize("role", _params(["defer"]))
def test_the_off_states_draft_extend_deferred_through_sglangs_own(role):
    """SGLANG_KIMI_EAGLE3_OFFSTATE_EXTEND=defer in the steps-0 off-state for good: the stashed rows went through
    SGLang's real draft extend as one-token-row batches (flushes counted, none failed), greedy ids equal the target's
    alone."""
    r = _served(role)
    assert _first_differences(r, _served(T.role(role).plain)) == {}
    hooks = {h["name"]: h for h in r["status"]["hooks"]}
    row = hooks["deferred_extend"]
    assert row["state"] == "applied", f"{role}: deferred_extend {row['state']}: {row['detail']}"
    flushes = int(re.search(r"(\d+) flushes", row["detail"]).group(1))
    assert flushes >= 1, row["detail"]
    assert not [h["name"] for h in r["status"]["hooks"] if h["state"] == "failed"]


@pytest.mark.parametrize("role", _params(["upstream"]))
def test_upstream_mode_runs_only_sglangs_kernels(role):
    ours = _ours(_served(role)["status"])
    assert sum(ours.values()) == 0, f"SGLANG_KIMI_EAGLE3_KERNELS=upstream still ran ours: {ours}"


@pytest.mark.parametrize("role", _params([f"chain-{MAIN}"]))
def test_bench_runs_against_the_live_server(role):
    assert T.role(role).bench
    b = _served(role)["bench"]
    assert b["rc"] == 0, f"bench exit {b['rc']}:\n{b['stdout']}\n{b['stderr']}"
    levels = b["json"]["levels"]
    assert [lv["concurrency"] for lv in levels] == [1, 4]
    for lv in levels:
        s = lv["spec"]
        assert s["ok"] == s["requests"] > 0 and s["tau"] is not None and s["tau"] > 1.0, s
        st = s["streaming"]  # streamed: TTFT per request; 32 tokens (--ignore-eos) give at most 31 token gaps each
        assert st["requests"] == s["ok"] and st["ttft_s"]["p50"] > 0 and s["ok"] <= st["itl_s"]["n"] <= 31 * s["ok"], st
        assert st["ttft_s"]["p99"] <= st["e2e_s"]["p99"] and st["itl_s"]["p50"] > 0, st
