"""`plan`: every bad input is one exit-2 line before any computing, the search space is bounded, and the
written config always satisfies SGLang's loader rules. Pure (`--no-sglang-check`); SGLang's own loader is
exercised in test/integration/test_adaptive_check.py."""

import json
import math

import pytest

from sglang_kimi_eagle3.cli import main as cli_main
from sglang_kimi_eagle3.planner import profiles

BUNDLED = json.loads((profiles.DIR / f"{profiles.DEFAULT_PROFILE}.json").read_text())
NAN = float("nan")


def profile_with(tmp_path, section, key, value):
    doc = json.loads(json.dumps(BUNDLED))
    if key is None:
        doc[section] = value
    elif section is None:
        doc[key]["value"] = value
    else:
        doc[section][key]["value"] = value
    p = tmp_path / "profile.json"
    p.write_text(json.dumps(doc))
    return str(p)


def write(tmp_path, name, content):
    p = tmp_path / name
    p.write_bytes(content if isinstance(content, bytes) else json.dumps(content).encode())
    return str(p)


GOOD_COSTS = {"target_us": {"1": {"1": 100, "4": 120}, "64": {"1": 300, "4": 500}}, "draft_us": {"1": 10, "64": 30}}
GOOD_LEVEL = {"concurrency": 1, "spec": {"histogram": [1, 2, 3], "tau": 2.0, "tok_s_per_req_mean": 50.0, "agg_tok_s": 50.0},
              "baseline": {"tok_s_per_req_mean": 30.0, "agg_tok_s": 30.0}}

# (id, argv (with {tmp}-files made by `make`), needle of the one-line message)
CASES = [
    ("steps_abc", ["--steps", "abc"], "--steps 'abc'"),
    ("steps_negative", ["--steps", "-3"], "--steps '-3'"),
    ("steps_half_range", ["--steps", "1-a"], "--steps '1-a'"),
    ("steps_reversed", ["--steps", "5-1"], "--steps '5-1'"),
    ("steps_empty", ["--steps", ""], "--steps ''"),
    ("steps_huge_range", ["--steps", "1-2000000"], "--steps '1-2000000'"),
    ("batch_sizes_huge_range", ["--batch-sizes", "1-3000000"], "--batch-sizes '1-3000000'"),
    ("batch_sizes_zero", ["--batch-sizes", "0,1"], "--batch-sizes '0,1'"),
    ("batch_sizes_empty_item", ["--batch-sizes", "1,,2"], "--batch-sizes '1,,2'"),
    ("topk_zero", ["--topk", "0"], "--topk '0'"),
    ("draft_tokens_impossible", ["--topk", "2", "--draft-tokens", "50"], "no (steps, topk, draft tokens) setting"),
    ("tolerance_negative", ["--tolerance", "-1"], "--tolerance '-1': expected a finite number > 0 and <= 1"),
    ("tolerance_2", ["--tolerance", "2"], "--tolerance '2'"),
    ("tolerance_nan", ["--tolerance", "nan"], "--tolerance 'nan'"),
    ("tolerance_zero", ["--tolerance", "0"], "--tolerance '0'"),
    ("acceptance_empty", ["--acceptance", ""], "--acceptance ''"),
    ("acceptance_blank", ["--acceptance", " "], "--acceptance ' '"),
    ("acceptance_nan", ["--acceptance", "0.8,nan"], "--acceptance '0.8,nan'"),
    ("acceptance_above_1", ["--acceptance", "1.5"], "in [0, 1]"),
    ("acceptance_negative", ["--acceptance-conditional", "-0.1"], "--acceptance-conditional"),
    ("acceptance_trailing_comma", ["--acceptance", "0.8,"], "--acceptance '0.8,'"),
    ("cumulative_rising", ["--acceptance-cumulative", "0.3,0.5"], "cannot rise"),
    ("two_conventions", ["--acceptance-cumulative", "0.5", "--acceptance-conditional", "0.5"], "one acceptance source"),
    ("alpha_nan", ["--alpha", "nan"], "--alpha 'nan'"), ("alpha_2", ["--alpha", "2"], "--alpha '2'"),
    ("ratio_negative", ["--draft-cost-ratio", "-1", "--alpha", "0.7"], "--draft-cost-ratio '-1'"),
    ("ratio_nan", ["--draft-cost-ratio", "nan", "--alpha", "0.7"], "--draft-cost-ratio 'nan'"),
    ("ratio_inf", ["--draft-cost-ratio", "inf", "--alpha", "0.7"], "--draft-cost-ratio 'inf'"),
    ("ratio_text", ["--draft-cost-ratio", "cheap", "--alpha", "0.7"], "--draft-cost-ratio 'cheap'"),
    ("ratio_overflow", ["--draft-cost-ratio", "1e308", "--alpha", "0.7"], "inf us for a speculation round at batch size 1, "
     "steps 2; expected a finite time > 0 - check --draft-cost-ratio, the cost table or the profile"),
    ("context_negative", ["--context", "-1"], "--context '-1'"), ("context_text", ["--context", "long"], "--context"),
    ("profile_bandwidth_nan", ["--profile", "{p:hardware.mem_GBps=nan}"], "'hardware.mem_GBps.value'"),
    ("profile_bandwidth_negative", ["--profile", "{p:hardware.mem_GBps=-5}"], "finite number > 0"),
    ("profile_bandwidth_zero", ["--profile", "{p:hardware.mem_GBps=0}"], "'hardware.mem_GBps.value' = 0"),
    ("profile_bandwidth_string", ["--profile", "{p:hardware.mem_GBps='fast'}"], "'fast' (string)"),
    ("profile_efficiency_2", ["--profile", "{p:hardware.mem_efficiency=2}"], "<= 1"),
    ("profile_layers_list", ["--profile", "{p:target.layers=[61]}"], "'target.layers.value'"),
    ("profile_overhead_negative", ["--profile", "{p:draft.tail_us=-1}"], "'draft.tail_us.value'"),
    ("profile_experts_per_token", ["--profile", "{p:target.experts_per_token=1000}"], "experts_per_token"),
    ("profile_context_string", ["--profile", "{p:.context_tokens='2k'}"], "'context_tokens.value'"),
    ("profile_verify_empty", ["--profile", "{p:.verify_us={}}"], "'verify_us.value'"),
    ("profile_verify_key", ["--profile", "{p:.verify_us={'abc': 1}}"], "key 'abc'"),
    ("profile_verify_value", ["--profile", "{p:.verify_us={'4': 'x'}}"], "'verify_us.value.4'"),
    ("profile_hardware_list", ["--profile", "{p:hardware=[1]}"], "section 'hardware'"),
    ("profile_non_utf8", ["--profile", "{f:bad.json=b'{\"name\": \"\\xff\"}'}"], "not UTF-8"),
    ("profile_list", ["--profile", "{f:bad.json=[1, 2]}"], "top level"),
    ("profile_folder", ["--profile", "{tmp}"], "--profile {tmp}: not a hardware profile file: it is a folder"),
    ("costs_string_values", ["--costs", "{f:c.json={'target_us': {'1': 'x'}, 'draft_us': {'1': 1}}}"], "'target_us.1'"),
    ("costs_zero_target", ["--costs", "{f:c.json={'target_us': {'1': 0}, 'draft_us': {'1': 1}}}"], "0 us"),
    ("costs_negative", ["--costs", "{f:c.json={'target_us': {'1': 10}, 'draft_us': {'1': -1}}}"], "'draft_us.1'"),
    ("costs_nan", ["--costs", "{f:c.json=b'{\"target_us\": {\"1\": NaN}, \"draft_us\": {\"1\": 1}}'}"], "'target_us.1'"),
    ("costs_overflow", ["--costs", "{f:c.json={'target_us': {'1': 1e308}, 'draft_us': {'1': 1e308}}}"],
     "expected a finite time > 0 - check --draft-cost-ratio, the cost table or the profile"),
    ("costs_bad_key", ["--costs", "{f:c.json={'target_us': {'one': 10}, 'draft_us': {'1': 1}}}"], "key 'one'"),
    ("costs_list", ["--costs", "{f:c.json=[1]}"], "not a cost table file: expected a JSON object, found [1]"),
    ("costs_table_list", ["--costs", "{f:c.json={'target_us': [1], 'draft_us': {'1': 1}}}"], "'target_us'"),
    ("costs_rows_string", ["--costs", "{f:c.json={'rows': 'x'}}"], "'rows'"),
    ("costs_rows_bad_us", ["--costs", "{f:c.json={'rows': [{'op': 'target_pass', 'us': 'x'}]}}"], "'rows[0].us'"),
    ("costs_non_utf8", ["--costs", "{f:c.json=b'\\xfe\\xfd'}"], "not UTF-8"),
    ("costs_missing", ["--costs", "{tmp}/nope.json"], "no such cost table file"),
    ("bench_levels_string", ["--bench", "{f:b.json={'levels': 'x'}}"], "'levels'"),
    ("bench_tau_string", ["--bench", "{f:b.json={'levels': [{'concurrency': 1, 'spec': {'tau': 'x'}}]}}"], "spec.tau"),
    ("bench_hist_negative", ["--bench", "{f:b.json={'levels': [{'concurrency': 1, 'spec': {'histogram': [-1]}}]}}"],
     "histogram[0]"),
    ("bench_tok_zero", ["--bench", "{f:b.json={'levels': [{'concurrency': 1, 'spec': {'tok_s_per_req_mean': 0}}]}}"],
     "tok_s_per_req_mean"),
    ("bench_steps_string", ["--bench", "{f:b.json={'levels': [GOOD_LEVEL], 'servers': {'spec': {'speculative_num_steps': 'x'}}}}"],
     "speculative_num_steps"),
    ("bench_steps_huge", ["--bench", "{f:b.json={'levels': [GOOD_LEVEL], 'servers': {'spec': {'speculative_num_steps': 10**9}}}}"],
     "speculative_num_steps"),
    ("bench_non_utf8", ["--bench", "{f:b.json=b'\\x80'}"], "not UTF-8"),
    ("bench_setting_steps_huge", ["--bench", "{f:b.json={'levels': [GOOD_LEVEL], 'setting': {'steps': 10**18, 'topk': 1, "
                                 "'draft_tokens': 4}}}"], "'setting.steps' = 1000000000000000000"),  # was MemoryError
    ("bench_setting_topk_string", ["--bench", "{f:b.json={'levels': [GOOD_LEVEL], 'setting': {'steps': 3, 'topk': 'x', "
                                  "'draft_tokens': 4}}}"], "'setting.topk'"),
    ("bench_setting_list", ["--bench", "{f:b.json={'levels': [GOOD_LEVEL], 'setting': [3]}}"], "'setting'"),
    ("bench_info_vs_drafts", ["--bench", "{f:b.json={'levels': [GOOD_LEVEL], 'overall': {'drafts_per_verify': 5}, "
                              "'servers': {'spec': {'speculative_num_steps': 3}}}}"], "averaged 5 drafts a verify"),
    ("bench_hist_past_steps", ["--bench", "{f:b.json={'levels': [{'concurrency': 1, 'spec': {'histogram': [1, 2, 3, 4, 5]}}], "
                               "'servers': {'spec': {'speculative_num_steps': 3}}}}"], "more than the 3 drafts"),
    ("all_skipped", ["--topk", "2", "--bench", "{f:b.json={'levels': [GOOD_LEVEL], 'servers': {'spec': {"
                     "'speculative_num_steps': 2, 'speculative_eagle_topk': 4, 'speculative_num_draft_tokens': 8}}}}"],
     "nothing could be evaluated"),
    ("all_skipped_tree_past_the_search", ["--topk", "2", "--bench", "{f:b.json={'levels': [GOOD_LEVEL], 'servers': {'spec': {"
                                          "'speculative_num_steps': 2, 'speculative_eagle_topk': 100, "
                                          "'speculative_num_draft_tokens': 8}}}}"],
     "plan searches steps <= 64, topk <= 64"),  # it suggested --topk 100, which plan refuses
    ("out_is_json", ["-o", "{tmp}/x.json", "--json", "{tmp}/x.json"], "--json {tmp}/x.json is the -o file"),
    ("plot_is_json", ["--json", "{tmp}/x.json", "--plot", "{tmp}/x.json"], "--plot {tmp}/x.json is the --json file"),
    ("json_is_bench", ["--bench", "{f:b.json={'levels': [GOOD_LEVEL]}}", "--json", "{tmp}/b.json"],
     "is the --bench file (an input of this run)"),
    ("out_proc", ["-o", "/proc/plan.json"], "cannot create files"),
    ("out_folder", ["-o", "{tmp}"], "is a folder"),
    ("out_missing_folder", ["-o", "{tmp}/no/such/x.json"], "does not exist"),
    ("out_device", ["-o", "/dev/full"], "is a device"),
    ("out_foreign_file", ["-o", "{f:foreign.json={'mine': 1}}"], "not written by `plan`; pass --force"),
    ("json_proc", ["--json", "/proc/plan-all.json"], "--json"),
    ("plot_folder", ["--plot", "{tmp}"], "--plot"),
]


def materialise(arg: str, tmp_path) -> str:
    """{tmp}; {p:section.key=value} (the bundled profile with one value changed); {f:name=content}."""
    arg = arg.replace("{tmp}", str(tmp_path))
    if arg.startswith("{p:"):
        where, val = arg[3:-1].split("=", 1)
        section, _, key = where.partition(".")
        value = eval(val, {"nan": NAN})  # noqa: S307 - test table literals
        if isinstance(value, dict) and key == "verify_us":
            return profile_with(tmp_path, None, key, value)
        return profile_with(tmp_path, section or None, key or None, value)
    if arg.startswith("{f:"):
        name, val = arg[3:-1].split("=", 1)
        return write(tmp_path, name, eval(val, {"GOOD_LEVEL": GOOD_LEVEL}))  # noqa: S307
    return arg


@pytest.mark.parametrize("case,argv,needle", CASES, ids=[c[0] for c in CASES])
def test_bad_plan_input_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys, case, argv, needle):
    argv = [materialise(a, tmp_path) for a in argv]
    out = [] if "-o" in argv else ["-o", str(tmp_path / "cfg.json")]
    before = sorted(p.name for p in tmp_path.iterdir())
    rc = cli_main(["plan", "--no-sglang-check", *out, *argv])
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    line = err.splitlines()[-1]
    assert line.startswith("sglang-kimi-eagle3: error:") and needle.replace("{tmp}", str(tmp_path)) in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written, no temp file left
    assert not capsys.readouterr().out  # refused before printing anything


def test_measured_costs_are_held_at_the_measured_range_and_it_says_so(tmp_path, capsys):
    """A bench run at concurrency 1-4 whose per-request rate rises with c: extending t1 linearly to bs 128 went
    below 0 us and told the user to 'check the profile'. Now costs are held at c=4's and the plan names the
    batch sizes past the measurement and how to measure them."""
    levels = [{"concurrency": c, "spec": {"histogram": [2, 3, 5], "tau": 2.2, "tok_s_per_req_mean": base * 1.5,
                                          "agg_tok_s": base * 1.5 * c},
               "baseline": {"tok_s_per_req_mean": base, "agg_tok_s": base * c}}
              for c, base in ((1, 30.0), (2, 40.0), (4, 60.0))]
    bench = write(tmp_path, "run.json", {"levels": levels, "servers": {"spec": {"speculative_num_steps": 2}}})
    rc = cli_main(["plan", "--no-sglang-check", "-o", str(tmp_path / "cfg.json"), "--bench", bench,
                   "--json", str(tmp_path / "all.json")])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    flat = " ".join(cap.out.split())
    assert "batch sizes 8,16,32,64,128 lie outside the measured 1-4" in flat and "not extrapolated" in flat
    assert "sglang-kimi-eagle3 bench --concurrency 1,2,4,8,16,32,64,128" in flat
    doc = json.loads((tmp_path / "all.json").read_text())
    b128, b4 = doc["batch_sizes"]["128"]["best"], doc["batch_sizes"]["4"]["best"]
    assert b128["base_us"] == pytest.approx(b4["base_us"]) and b4["base_us"] > 0


@pytest.mark.parametrize("edit,needle", [
    (lambda d: d.update(hardwre=d["hardware"]), "unknown key 'hardwre' in the profile (did you mean 'hardware'?)"),
    (lambda d: d["hardware"].update(mem_GBs={"value": 1, "source": "x"}), "unknown key 'mem_GBs' in section 'hardware'"),
    (lambda d: d["target"]["layers"].update(sorce="typo"), "unknown key 'sorce' in target.layers"),
])
def test_unknown_profile_keys_are_refused(tmp_path, capsys, edit, needle):
    doc = json.loads(json.dumps(BUNDLED))
    edit(doc)
    prof = write(tmp_path, "p.json", doc)
    assert cli_main(["plan", "--no-sglang-check", "-o", str(tmp_path / "cfg.json"), "--profile", prof]) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"{prof}: not a hardware profile file: " in line and needle in line, line


def test_cumulative_and_conditional_acceptance_give_their_own_tau(tmp_path, capsys):
    assert cli_main(["plan", "--no-sglang-check", "-o", str(tmp_path / "a.json"),
                     "--acceptance-cumulative", "0.645,0.393,0.240", "--steps", "3", "--batch-sizes", "1"]) == 0
    out = capsys.readouterr().out
    assert "tau 2.28 at 3 steps" in out and "conditional 0.645, 0.609, 0.611" in out
    assert cli_main(["plan", "--no-sglang-check", "-o", str(tmp_path / "b.json"),
                     "--acceptance", "0.645,0.393,0.240", "--steps", "3", "--batch-sizes", "1"]) == 0
    cap = capsys.readouterr()
    assert "tau 1.96 at 3 steps" in cap.out
    assert "read as CONDITIONAL rates (tau 1.96)" in cap.err and "--acceptance-cumulative gives tau 2.28" in cap.err


@pytest.mark.parametrize("tolerance", ["1", "0.0001", "0.5"])
def test_every_slot_has_candidates_at_any_valid_tolerance(tmp_path, tolerance):
    from sglang_kimi_eagle3.planner.adaptive import check

    out = tmp_path / "cfg.json"
    assert cli_main(["plan", "--no-sglang-check", "-o", str(out), "--tolerance", tolerance]) == 0
    cfg = json.loads(out.read_text())
    check(cfg)
    assert all(v["candidate_steps"] for k, v in cfg.items() if k.isdigit())


def test_overwrite_rules(tmp_path, capsys):
    out = tmp_path / "cfg.json"
    assert cli_main(["plan", "--no-sglang-check", "-o", str(out), "--batch-sizes", "1"]) == 0
    assert cli_main(["plan", "--no-sglang-check", "-o", str(out), "--batch-sizes", "1,2"]) == 0  # our own file: replaced
    assert sorted(k for k in json.loads(out.read_text()) if k.isdigit()) == ["1", "2"]
    out.write_text("my notes")
    assert cli_main(["plan", "--no-sglang-check", "-o", str(out)]) == 2
    assert out.read_text() == "my notes"
    assert cli_main(["plan", "--no-sglang-check", "-o", str(out), "--force"]) == 0
    assert "_generated_by" in json.loads(out.read_text())


def test_nan_or_zero_predictions_never_reach_the_file():
    from sglang_kimi_eagle3.planner.adaptive import candidate_steps
    from sglang_kimi_eagle3.planner.model import Prediction

    nan_preds = [Prediction(1, 0, 1, 1, 1.0, 1.0, 1.0, 1.0), Prediction(1, 3, 1, 4, 2.0, 1.0, 1.0, math.nan)]
    assert candidate_steps(nan_preds, 0.97) == [0]
    preds = [Prediction(1, 0, 1, 1, 1.0, 1, 1, 1.0), Prediction(1, 2, 1, 3, 2.0, 1, 1, 1.5)]
    assert candidate_steps(preds, 1.0) == [2]


def test_file_size_limit_leaves_no_partial_plan_json(tmp_path):
    """`ulimit -f 1` (or a full disk): exit 2 with one line; nothing half-written, no temp file left."""
    import subprocess
    import sys

    from helpers import ROOT, clean_env

    full = tmp_path / "plan.json"
    earlier = {"command": "sglang-kimi-eagle3 plan", "batch_sizes": {}}  # plan's own: a rerun may replace it
    full.write_text(json.dumps(earlier))
    # --kv-tokens: a pool that holds all eight default batch sizes, so -o (written first) is over the 1 KB limit
    cmd = (f"ulimit -f 1; exec {sys.executable} -m sglang_kimi_eagle3.cli plan --no-sglang-check "
           f"--kv-tokens 1000000 -o {tmp_path / 'cfg.json'} --json {full}")
    cp = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=60, env=clean_env(), cwd=str(ROOT))
    assert cp.returncode == 2, cp.stderr
    last = cp.stderr.strip().splitlines()[-1]
    assert last.startswith("sglang-kimi-eagle3: error: -o ") and "could not be written (File too large)" in last
    assert json.loads(full.read_text()) == earlier
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.json"]
