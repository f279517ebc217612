"""EAGLE-3 through this plugin on real GPUs: starts, matches greedy outputs, reaches tau, does not slow
concurrency 1 down, and every hook is applied. Variables: test/gpu/gpu_env.py; how to run: docs/gpu-ci.md."""

from __future__ import annotations

from gpu_env import from_env

ENV, _ = from_env()


def _need(runs, role):
    assert role in runs, f"the {role} server did not run: {runs['errors'].get(role)} (logs in {runs['log_dir']})"
    return runs[role]


def test_speculative_server_starts_and_answers(runs):
    spec = _need(runs, "spec")
    s = spec["summary"]
    assert s["ok"] == s["requests"], f"failed requests: {s['errors']} (first: {s['first_error']})"
    assert spec["info"].get("speculative_algorithm") == "EAGLE3", spec["info"]


def test_plain_server_starts_and_answers(runs):
    s = _need(runs, "plain")["summary"]
    assert s["ok"] == s["requests"], f"failed requests: {s['errors']} (first: {s['first_error']})"


def test_greedy_outputs_equal_with_and_without_eagle3(runs):
    spec, plain = _need(runs, "spec"), _need(runs, "plain")
    a = {r.prompt_id: r.output_ids for r in spec["results"] if r.ok}
    b = {r.prompt_id: r.output_ids for r in plain["results"] if r.ok}
    common = sorted(set(a) & set(b))
    assert common, "no prompt answered by both servers"
    diverged = {}
    for pid in common:
        if a[pid] != b[pid]:
            first = next((i for i, (x, y) in enumerate(zip(a[pid], b[pid])) if x != y), min(len(a[pid]), len(b[pid])))
            diverged[pid] = first
    matched = 1 - len(diverged) / len(common)
    assert matched >= ENV.match_min, (f"{len(diverged)}/{len(common)} greedy outputs differ (first differing token "
                                      f"per prompt: {diverged}); GPU_CI_MATCH_MIN={ENV.match_min}")


def test_mean_tau_above_threshold(runs):
    import pytest

    if ENV.min_tau is None:
        pytest.skip("set GPU_CI_MIN_TAU to check the drafter's mean acceptance length")
    s = _need(runs, "spec")["summary"]
    assert s["no_spec"] == 0, f"{s['no_spec']} answers carried no spec fields: is speculation on?"
    assert s["tau"] is not None and s["tau"] >= ENV.min_tau, (
        f"mean tau {s['tau']} < GPU_CI_MIN_TAU {ENV.min_tau}; per position {s['alpha']}")


def test_speedup_at_concurrency_1_is_at_least_1(runs):
    spec, plain = _need(runs, "spec")["summary"], _need(runs, "plain")["summary"]
    ratio = spec["agg_tok_s"] / plain["agg_tok_s"]
    assert ratio >= 1.0, (f"EAGLE-3 at concurrency 1: {spec['agg_tok_s']:.1f} tok/s vs {plain['agg_tok_s']:.1f} "
                          f"without (x{ratio:.2f}); tau {spec['tau']}")


def test_every_hook_applied(runs):
    status = runs.get("status")
    assert status, f"no status table: {runs['errors'].get('spec')}"
    rows = status["hooks"]
    assert rows, "the plugin recorded no hooks: was it loaded (entry point installed, SGLANG_PLUGINS)?"
    # a deliberate skip because upstream already has the behaviour is fine; any other skip (kill switch,
    # "not built in this version") must be allowed by name in GPU_CI_ALLOW_SKIPPED
    # launch_step is a resolution step: in a fresh `status` process it is "registered" / "installed (runs at
    # the next argument resolution ...)" until a launch resolves, which is its healthy state there
    def fine(r):
        if r["name"] == "launch_step" and r["state"] == "registered" and r.get("status", "").startswith("installed"):
            return True
        return r["state"] == "applied" or (r["state"] == "skipped" and
                                           ("upstream already" in r["detail"] or r["name"] in ENV.allow_skipped))

    bad = [r for r in rows if not fine(r)]
    assert not bad, "hooks not applied:\n" + "\n".join(f"  {r['name']}: {r['state']} ({r['detail']})" for r in bad)
