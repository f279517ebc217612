"""`sglang-kimi-eagle3 check` end to end: real SGLang parser and resolution, in subprocesses (the embedded default,
SM100's resolution, a drafter of the wrong algorithm). Other pairs: test_check_pairs.py; bad input:
test_check_bad_input.py (split so that the suite's workers share these slow files)."""

import pytest
from helpers import check_findings, clean_env, python, run_check

pytestmark = pytest.mark.slow


def test_embedded_default_says_so_first_and_reports_the_context_decision_without_errors():
    cp = run_check("--verbose")  # the full table: info rows (the context decision) and every hook's state
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    lines = cp.stdout.splitlines()
    assert lines[0].startswith("Checking the embedded default: Kimi-K2.5 INT4 + AQ-MedAI Kimi-K2 EAGLE-3 drafter")
    assert "sm120" in lines[1] and "embedded default" in lines[1]
    assert "auto -> extend" in cp.stdout and "0 error(s)" in cp.stdout
    # the launch table `auto` reads on the target GPU: SM120's has no measured win
    assert "Kernel launch table for this GPU: SGLANG_KIMI_EAGLE3_KERNELS=auto; bundled sm120.draft_head.json " \
           "(compile-verified only" in " ".join(cp.stdout.split())
    # the same hook states as `status` (which binds the draft worker's lazy top-k the same way); under auto the
    # draft-head hooks install only where the table in effect on this machine's GPU lists a win: none without a GPU,
    # and none on the H200 either (its bundled draft-head table keeps its GPU-time wins as `graph_wins` only, since
    # they lost end to end; the H200 suite of 2026-12-02 caught this test still expecting `applied` there).
    # test/integration/test_auto_gate.py has the per-device cases.
    assert "draft_worker_topk=skipped" in "".join(cp.stdout.split()), cp.stdout
    assert "Traceback" not in cp.stderr
    # SGLang's import logs this on a box without a GPU, the README's first command included: check is about the
    # target GPU, named by --for-gpu or the embedded default, so that line said nothing true
    assert "Cannot detect CUDA architecture" not in cp.stderr, cp.stderr


def test_status_on_a_box_without_a_gpu_prints_no_stray_line_of_sglangs_import():
    cp = python(["-m", "sglang_kimi_eagle3.cli", "status"], env=clean_env(COLUMNS="200"))
    assert cp.returncode == 0, cp.stdout[-2000:] + cp.stderr[-2000:]
    assert "Cannot detect CUDA architecture" not in cp.stderr, cp.stderr  # its own line says what this GPU runs


def test_sm100_resolution_catches_the_inherited_trtllm_mla_backend():
    # On SM100 SGLang resolves Kimi's attention to trtllm_mla; the MHA drafter would inherit it (SGLang #23490)
    cp = run_check("--for-gpu", "B200", "--json")
    assert cp.returncode == 1
    errs = [f for f in check_findings(cp) if f["severity"] == "error"]
    assert [f["check"] for f in errs] == ["attention_backend"] and "trtllm_mla" in errs[0]["found"]
    assert errs[0]["fix"] == "--speculative-draft-attention-backend flashinfer"


def test_eagle3_drafter_with_eagle_is_an_error_listed_with_everything_else():
    cp = run_check("--model-path", "kimi-k2.5", "--trust-remote-code", "--tp-size", "8", "--speculative-algorithm", "EAGLE",
               "--speculative-draft-model-path", "aq-medai/kimi-k2-eagle3", "--speculative-num-steps", "3",
               "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4", "--for-gpu", "sm90", "--json")
    assert cp.returncode == 1
    f = check_findings(cp)
    assert any(x["severity"] == "error" and x["check"] == "algorithm" and "#21272" in x["expected"] for x in f)
    assert any(x["check"] == "context" for x in f)  # the other checks still ran


def test_json_model_override_args_reach_both_configs_as_sglang_applies_them():
    # SGLang applies --json-model-override-args to the target's and the draft's config (ModelConfig.from_server_args):
    # a top-level max_position_embeddings lifts the Llama drafter's 131072 (Kimi's own limit sits in text_config)
    cp = run_check("--json", "--json-model-override-args", '{"max_position_embeddings": 262144}')
    ctx = [f["found"] for f in check_findings(cp) if f["check"] == "context"]
    assert ctx and "covers 262144 positions" in ctx[0] and "nothing to reconcile" in ctx[0], ctx
    # a text_config object merges into a sub-config, and the drafter has none: SGLang would take the object as the
    # drafter's whole language config, so check refuses it in one line that names the flag
    cp = run_check("--json-model-override-args", '{"text_config": {"max_position_embeddings": 65536}}')
    assert cp.returncode == 2, cp.stdout[-2000:] + cp.stderr[-2000:]
    last = cp.stderr.strip().splitlines()[-1]
    assert "text_config.num_attention_heads" in last and "--json-model-override-args" in last and "Traceback" not in cp.stderr


def test_overrides_merge_into_sub_configs_and_rope_and_replace_everything_else():
    from sglang_kimi_eagle3.configs import apply_overrides

    outer = {"text_config": {"a": 1, "b": 2}, "rope_scaling": {"factor": 2, "type": "yarn"}, "eagle_config": {"x": 1}, "n": 3}
    got = apply_overrides(outer, {"text_config": {"b": 5}, "rope_scaling": {"factor": 4}, "eagle_config": {"y": 2}, "n": 7})
    assert got == {"text_config": {"a": 1, "b": 5}, "rope_scaling": {"factor": 4, "type": "yarn"}, "eagle_config": {"y": 2},
                   "n": 7}
    assert outer["text_config"] == {"a": 1, "b": 2}  # the file's dict is not changed


@pytest.mark.parametrize("flag", ["--ep-size", "--dcp-size"])
def test_an_expert_or_decode_context_width_that_does_not_divide_tp_is_refused(flag):
    """SGLang resolves --ep-size 3 / --dcp-size 3 at TP 8 and then fails as the ranks start: the MoE EP groups it builds
    from tp // ep leave ranks 6 and 7 in none (an assertion), and initialize_model_parallel raises for a DCP width
    that does not divide TP. check said 'would start'."""
    cp = run_check("--model-path", "kimi-k2.5", "--trust-remote-code", "--tp-size", "8", flag, "3", "--json")
    assert cp.returncode == 1, cp.stdout[-2000:] + cp.stderr[-2000:]
    errs = [f["found"] for f in check_findings(cp) if f["severity"] == "error" and f["check"] == "tensor_parallel"]
    assert f"{flag} 3 with --tp-size 8" in errs, check_findings(cp)


def test_a_bare_assertion_of_sglangs_resolution_is_shown_with_the_condition_it_checks():
    """SGLang's resolution refuses --attn-dp-size 3 at TP 8 with a bare `assert cfg.tp_size % cfg.attn_dp_size == 0`:
    the finding read 'AssertionError:' and named nothing to fix."""
    cp = run_check("--model-path", "kimi-k2.5", "--trust-remote-code", "--tp-size", "8", "--attn-dp-size", "3", "--json")
    assert cp.returncode == 1, cp.stdout[-2000:] + cp.stderr[-2000:]
    errs = [f["found"] for f in check_findings(cp) if f["severity"] == "error" and f["check"] == "sglang"]
    assert len(errs) == 1 and "assert cfg.tp_size % cfg.attn_dp_size == 0" in errs[0], errs
    assert "parallel_hook.py" in errs[0], errs


def test_a_config_file_is_read_as_launch_server_reads_it(tmp_path):
    """SGLang's `--config FILE` (YAML) merges its options before the command line's; check ignored it and checked the
    embedded default (TP 8) instead of the file's launch."""
    cfg = tmp_path / "launch.yaml"
    cfg.write_text("model-path: kimi-k2.5\ntrust-remote-code: true\ntp-size: 3\nspeculative-algorithm: EAGLE3\n"
                   "speculative-draft-model-path: aq-medai/kimi-k2-eagle3\n")
    cp = run_check("--config", str(cfg), "--for-gpu", "sm90", "--json")
    assert cp.returncode == 1, cp.stdout[-2000:] + cp.stderr[-2000:]
    errs = [f["found"] for f in check_findings(cp) if f["severity"] == "error" and f["check"] == "tensor_parallel"]
    assert "target has 64 attention heads, tp 3" in errs, check_findings(cp)
