"""The adaptive config: candidate selection, and SGLang 0.5.23's own loader accepting what we write."""

import json

import pytest

from sglang_kimi_eagle3.cli import main as cli_main
from sglang_kimi_eagle3.planner.adaptive import adaptive_config, candidate_steps, launch_flags, write
from sglang_kimi_eagle3.planner.model import Prediction

asp = pytest.importorskip("sglang.srt.speculative.adaptive_spec_params")  # the real installed sglang


def P(steps, speedup, topk=1):
    return Prediction(1, steps, topk, steps + 1, 1.0, 1.0, 1.0, speedup)


def test_candidates_within_tolerance_and_no_spec_rules():
    preds = [P(0, 1.0), P(1, 1.5), P(2, 1.9), P(3, 2.0), P(4, 1.95), P(3, 9.0, topk=4)]  # trees ignored
    assert candidate_steps(preds, 0.97) == [3, 4]
    assert candidate_steps(preds, 0.5) == [0, 1, 2, 3, 4]  # 1.0 >= 0.5 * 2.0: plain decode is close enough
    assert candidate_steps([P(0, 1.0), P(1, 0.8), P(2, 0.6)], 0.97) == [0]  # nothing beats no speculation
    assert candidate_steps([P(0, 1.0), P(1, 1.01)], 0.97) == [0, 1]


def _plan(rows):
    return {bs: ([P(0, 1.0)] + [P(s, v) for s, v in sp], None) for bs, sp in rows.items()}


def test_written_config_loads_in_sglang_and_routes_by_batch_size(tmp_path):
    plan = _plan({1: [(3, 2.0), (5, 2.05)], 8: [(1, 1.2), (3, 1.25)], 64: [(1, 0.9)]})
    cfg = adaptive_config(plan, 0.97, {"command": "test"})
    path = write(cfg, str(tmp_path / "adaptive.json"))
    raw, slots = asp._load_adaptive_config(path)  # SGLang's validator
    assert sorted(slots) == [1, 8, 64]
    # slot 1: best 2.05 -> keep >= 1.99: [3, 5]; slot 8: best 1.25 -> keep >= 1.2125: [3]; slot 64: [0]
    assert slots[8]["candidate_steps"] == [3]
    assert asp.resolve_candidate_steps_from_config(path) == [0, 3, 5]
    params = asp.AdaptiveSpeculativeParams(initial_steps=5, cfg_path=path)
    assert params.get_steps_for_batch(1) == 5  # slot "1": candidates [3, 5]
    assert params.get_steps_for_batch(100) == 0  # slot "64": [0] = no speculation
    assert "--speculative-num-steps 5" in launch_flags(cfg, path)


def test_all_zero_config_says_do_not_speculate(tmp_path):
    cfg = adaptive_config(_plan({1: [(1, 0.9)], 8: [(1, 0.8)]}), 0.97, {})
    assert launch_flags(cfg, "x.json").startswith("(no batch size gains")


def test_plan_command_on_bundled_profile_writes_a_config_sglang_loads(tmp_path, capsys):
    out, full = tmp_path / "cfg.json", tmp_path / "plan.json"
    assert cli_main(["plan", "--profile", "kimi-k2.5_8xh200_tp8", "-o", str(out), "--json", str(full)]) == 0
    printed = capsys.readouterr().out
    assert "predicted speedup per batch size" in printed and "launch flags: --speculative-algorithm EAGLE3" in printed
    _, slots = asp._load_adaptive_config(str(out))
    assert sorted(slots) == [1, 2, 4, 8, 16, 32, 64, 128]
    doc = json.loads(full.read_text())
    best1 = doc["batch_sizes"]["1"]["best"]
    assert best1["steps"] in slots[1]["candidate_steps"]
    assert "_generated_by" in json.loads(out.read_text())


@pytest.mark.parametrize("argv,needle", [
    (["--steps", "0-2"], "--steps '0-2': expected comma-separated integers in [1, 64]"),
    (["--profile", "nope"], "not found"),
    (["--alpha", "0.5", "--preset", "lightseek-k25-mtbench"], "one acceptance source"),
    (["--acceptance", "0.5,x"], "comma-separated"),
    (["--preset", "nope"], "unknown acceptance preset"),
    (["--bench", "/nonexistent/bench.json"], "no such bench file"),
])
def test_plan_bad_input_is_one_line_exit_2(argv, needle, tmp_path, capsys):
    assert cli_main(["plan", "-o", str(tmp_path / "x.json")] + argv) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err


def test_recommendation_is_a_fixed_chain_when_one_is_close_to_the_best_everywhere():
    from sglang_kimi_eagle3.planner.adaptive import recommend

    # the H200 loop's q 0.9 shape: the best steps differ by batch size, but steps 2 stay within 3 % everywhere
    plan = _plan({1: [(1, 1.25), (2, 1.34), (3, 1.36)], 4: [(1, 1.07), (2, 1.07), (3, 1.05)],
                  16: [(1, 1.10), (2, 1.12), (3, 1.10)], 64: [(1, 1.19), (2, 1.24), (3, 1.24)]})
    rec = recommend(plan, 0.97)
    assert rec["kind"] == "fixed" and rec["steps"] == 2 and rec["draft_tokens"] == 3
    assert abs(rec["worst_vs_best"] - 1.34 / 1.36) < 1e-9
    # steps that really differ (5 at bs 1, 1 at bs 64): the adaptive file
    assert recommend(_plan({1: [(1, 1.2), (5, 2.0)], 64: [(1, 1.1), (5, 0.7)]}), 0.97) == {"kind": "adaptive"}
    # a chain that is close but loses to plain somewhere is no fixed recommendation (0 wins there)
    assert recommend(_plan({1: [(1, 1.5)], 64: [(1, 0.99)]}), 0.97) == {"kind": "adaptive"}
    assert recommend(_plan({1: [(1, 0.9)], 64: [(1, 0.5)]}), 0.97) == {"kind": "none"}


def test_the_measured_chain_is_recommended_over_one_only_predicted_as_good():
    """H200 run 7 (2026-12-01): plan recommended steps 2 from costs measured on steps 3 (predicted 0.98 of it);
    served, steps 2 ran 0.60-0.93x of steps 3. Within the tolerance, the measured chain is the recommendation."""
    from sglang_kimi_eagle3.planner.adaptive import recommend

    plan = _plan({1: [(1, 1.25), (2, 1.34), (3, 1.36)], 4: [(1, 1.07), (2, 1.07), (3, 1.05)],
                  16: [(1, 1.10), (2, 1.12), (3, 1.10)], 64: [(1, 1.19), (2, 1.24), (3, 1.24)]})
    rec = recommend(plan, 0.97, measured_steps=3)
    assert (rec["kind"], rec["steps"], rec["draft_tokens"], rec["measured"]) == ("fixed", 3, 4, True)
    assert recommend(plan, 0.97, measured_steps=None)["steps"] == 2  # no bench: the model's closest chain
    # a measured chain outside the tolerance somewhere does not win by being measured
    far = _plan({1: [(2, 1.34), (3, 1.20)], 64: [(2, 1.24), (3, 1.24)]})
    assert recommend(far, 0.97, measured_steps=3)["steps"] == 2


def test_plan_from_a_bench_recommends_the_chain_the_bench_ran(tmp_path, capsys):
    from pathlib import Path
    bench = Path(__file__).resolve().parents[2] / "benchmark/results/loop-h200-2026-12-01-derived/bench-q0.9.json"
    full = tmp_path / "p.json"
    assert cli_main(["plan", "--bench", str(bench), "--batch-sizes", "1,4,16,64", "-o", str(tmp_path / "a.json"),
                     "--json", str(full), "--no-sglang-check"]) == 0
    rec = json.loads(full.read_text())["recommendation"]
    assert (rec["steps"], rec["measured"]) == (3, True)  # the bench's fixed server ran 3/1/4
    assert "the chain the bench measured" in capsys.readouterr().out.replace("\n", " ")


def test_plan_prints_and_records_the_fixed_recommendation(tmp_path, capsys):
    from pathlib import Path
    bench = Path(__file__).resolve().parents[2] / "benchmark/results/loop-h200-2026-12-01-derived/bench-q0.9.json"
    out, full = tmp_path / "a.json", tmp_path / "p.json"
    assert cli_main(["plan", "--bench", str(bench), "--batch-sizes", "1,4,16,64", "-o", str(out), "--json", str(full),
                     "--no-sglang-check"]) == 0
    printed = capsys.readouterr().out
    rec = json.loads(full.read_text())["recommendation"]
    assert rec["kind"] == "fixed" and rec["launch_flags"] == (
        f"--speculative-algorithm EAGLE3 --speculative-num-steps {rec['steps']} --speculative-eagle-topk 1 "
        f"--speculative-num-draft-tokens {rec['steps'] + 1}")
    assert "recommended: fixed steps" in printed and "the adaptive file instead: " in printed
    assert next(ln for ln in printed.splitlines() if ln.startswith("launch flags: ")).startswith(
        f"launch flags: --speculative-algorithm EAGLE3 --speculative-num-steps {rec['steps']}")


def test_an_adaptive_recommendation_is_the_chain_this_plugin_serves_adaptively(tmp_path, capsys):
    """With the plugin a chain launch is served with adaptive steps by default; the written file, passed as
    --speculative-adaptive-config, would replace that table and controller with SGLang's own slot logic. So the
    recommended launch flags are the chain's (the file's follow as the alternative), and an `off` slot is said not to
    be free (SGLang's steps-0 off-state, not plain decoding)."""
    out, full = tmp_path / "a.json", tmp_path / "p.json"
    assert cli_main(["plan", "--alpha", "0.3", "-o", str(out), "--json", str(full), "--no-sglang-check"]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    rec = json.loads(full.read_text())["recommendation"]
    chain = "--speculative-algorithm EAGLE3 --speculative-num-steps 1 --speculative-eagle-topk 1 --speculative-num-draft-tokens 2"
    assert (rec["kind"], rec["steps"], rec["launch_flags"]) == ("adaptive", 1, chain), rec
    assert rec["file_flags"].endswith(f"--speculative-adaptive-config {out} --speculative-num-steps 1"), rec
    assert "launch the chain: launch flags: --speculative-algorithm EAGLE3 --speculative-num-steps 1" in printed, printed
    assert "the file instead (SGLang's own slot logic): " in printed and "steps-0 off-state there, which is not free" in printed
    # a fixed recommendation says that the plugin serves the chain adaptively, and how to keep it fixed
    assert cli_main(["plan", "--alpha", "0.9", "-o", str(out), "--no-sglang-check"]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "recommended: fixed steps" in printed and "SGLANG_KIMI_EAGLE3_ADAPTIVE=off keeps it fixed" in printed
    assert "not free" not in printed  # no slot is off


def test_with_the_plugins_adaptive_default_off_the_file_is_the_adaptive_launch(tmp_path, capsys, monkeypatch):
    """SGLANG_KIMI_EAGLE3_ADAPTIVE=off keeps a chain launch fixed: an adaptive recommendation is then the file's flags
    again, and a fixed one says nothing of adaptive serving (it said "with this plugin ... served that way")."""
    monkeypatch.setenv("SGLANG_KIMI_EAGLE3_ADAPTIVE", "off")
    out, full = tmp_path / "a.json", tmp_path / "p.json"
    assert cli_main(["plan", "--alpha", "0.3", "-o", str(out), "--json", str(full), "--no-sglang-check"]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    rec = json.loads(full.read_text())["recommendation"]
    assert rec["kind"] == "adaptive" and f"--speculative-adaptive-config {out}" in rec["launch_flags"], rec
    assert "With this plugin" not in printed and "launch flags: --speculative-algorithm EAGLE3 --speculative-eagle-topk 1" in printed
    assert cli_main(["plan", "--alpha", "0.9", "-o", str(out), "--json", str(full), "--no-sglang-check"]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    rec = json.loads(full.read_text())["recommendation"]
    assert "served with adaptive steps" not in printed and rec["kind"] == "fixed"
    assert rec["file_flags"].endswith(f"--speculative-adaptive-config {out} --speculative-num-steps {rec['steps']}"), rec
