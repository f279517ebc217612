"""`sglang-kimi-eagle3 check` end to end: real SGLang parser and resolution, in subprocesses."""

import json
import subprocess

import pytest

from helpers import AQ_K2_DRAFT, clean_env, edited_copy, python

pytestmark = pytest.mark.slow


def check(*args, **env) -> subprocess.CompletedProcess:
    return python(["-m", "sglang_kimi_eagle3.cli", "check", *args], timeout=300, env=clean_env(COLUMNS="200", **env))


def findings(cp) -> list[dict]:
    return json.loads(cp.stdout)["findings"]


def test_embedded_default_says_so_first_and_reports_the_context_decision_without_errors():
    cp = check("--verbose")  # the full table: info rows (the context decision) and every hook's state
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


def test_sm100_resolution_catches_the_inherited_trtllm_mla_backend():
    # On SM100 SGLang resolves Kimi's attention to trtllm_mla; the MHA drafter would inherit it (SGLang #23490)
    cp = check("--for-gpu", "B200", "--json")
    assert cp.returncode == 1
    errs = [f for f in findings(cp) if f["severity"] == "error"]
    assert [f["check"] for f in errs] == ["attention_backend"] and "trtllm_mla" in errs[0]["found"]
    assert errs[0]["fix"] == "--speculative-draft-attention-backend flashinfer"


def test_eagle3_drafter_with_eagle_is_an_error_listed_with_everything_else():
    cp = check("--model-path", "kimi-k2.5", "--trust-remote-code", "--tp-size", "8", "--speculative-algorithm", "EAGLE",
               "--speculative-draft-model-path", "aq-medai/kimi-k2-eagle3", "--speculative-num-steps", "3",
               "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4", "--for-gpu", "sm90", "--json")
    assert cp.returncode == 1
    f = findings(cp)
    assert any(x["severity"] == "error" and x["check"] == "algorithm" and "#21272" in x["expected"] for x in f)
    assert any(x["check"] == "context" for x in f)  # the other checks still ran


def test_llama_pair_reports_its_2048_vs_131072_context():
    cp = check("--model-path", "llama-3.1-8b-instruct", "--speculative-algorithm", "EAGLE3",
               "--speculative-draft-model-path", "llama-3.1-8b-eagle3", "--for-gpu", "H200", "--json")
    assert cp.returncode == 0
    ctx = [x for x in findings(cp) if x["check"] == "context"]
    assert ctx and "2048" in ctx[0]["found"] and "131072" in ctx[0]["found"] and ctx[0]["severity"] == "warning"
    assert "NVIDIA_H200.draft_head.json (measured on NVIDIA H200" in json.loads(cp.stdout)["kernel_table"]


def test_unknown_flag_gets_sglangs_error_in_one_line():
    cp = check("--model-path", "kimi-k2.5", "--no-such-flag")
    assert cp.returncode == 2
    assert cp.stderr.strip().splitlines()[-1].startswith("sglang-kimi-eagle3: error:")
    assert "unrecognized arguments: --no-such-flag" in cp.stderr and "Traceback" not in cp.stderr
    assert len([ln for ln in cp.stderr.splitlines() if "error" in ln]) == 1


@pytest.mark.parametrize("case", ["malformed", "missing", "no_mpe", "bad_gpu", "bad_policy"])
def test_unusable_input_exits_2_with_one_line(tmp_path, case):
    draft = str(AQ_K2_DRAFT)
    extra = []
    if case == "malformed":
        (tmp_path / "config.json").write_text('{"architectures": ["LlamaForCausalLMEagle3"],')
        draft = str(tmp_path)
    elif case == "missing":
        draft = str(tmp_path / "no-such-drafter")
    elif case == "no_mpe":
        draft = str(edited_copy(AQ_K2_DRAFT, tmp_path / "d", max_position_embeddings=...))
    elif case == "bad_gpu":
        extra = ["--for-gpu", "voodoo-9000"]
    env = {"SGLANG_KIMI_EAGLE3_CONTEXT_POLICY": "stretch"} if case == "bad_policy" else {}
    cp = check("--model-path", "kimi-k2.5", "--trust-remote-code", "--speculative-algorithm", "EAGLE3",
               "--speculative-draft-model-path", draft, *extra, **env)
    lines = [ln for ln in cp.stderr.splitlines() if ln.strip()]
    assert cp.returncode == 2, cp.stdout[-2000:] + cp.stderr[-2000:]
    assert lines and lines[-1].startswith("sglang-kimi-eagle3: error:") and "Traceback" not in cp.stderr
    want = {"malformed": "malformed JSON", "missing": "not a folder", "no_mpe": "max_position_embeddings",
            "bad_gpu": "--for-gpu", "bad_policy": "SGLANG_KIMI_EAGLE3_CONTEXT_POLICY"}[case]
    assert want in lines[-1]


@pytest.mark.parametrize("args,want", [
    (["--for-gpu", ""], "--for-gpu is empty"), (["--for-gpu", "sm999"], "compute capability 999"),
    (["--json=yes"], "--json takes no value"), (["--tp-size", "0"], "--tp-size 0"),
    (["--context-length", "-5"], "--context-length -5"),
])
def test_nonsense_check_flags_exit_2_before_sglang_parses(args, want):
    cp = check("--model-path", "kimi-k2.5", "--trust-remote-code", *args)
    assert cp.returncode == 2, cp.stdout[-2000:] + cp.stderr[-2000:]
    last = cp.stderr.strip().splitlines()[-1]
    assert last.startswith("sglang-kimi-eagle3: error:") and want in last and "Traceback" not in cp.stderr


def test_broken_draft_config_is_exit_2_naming_file_and_field(tmp_path):
    """End to end through the CLI (the full table of broken fields runs in-process in test/reliability)."""
    for i, (edit, want) in enumerate([({"max_position_embeddings": 0}, "'max_position_embeddings' = 0"),
                                      ({"eagle_config": [2, 30, 58]}, "'eagle_config' = [2, 30, 58] (list)")]):
        data = json.loads((AQ_K2_DRAFT / "config.json").read_text())
        data.update(edit)
        folder = tmp_path / str(i)
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(data))
        cp = check("--model-path", "kimi-k2.5", "--trust-remote-code", "--speculative-algorithm", "EAGLE3",
                   "--speculative-draft-model-path", str(folder))
        assert cp.returncode == 2, cp.stdout[-2000:] + cp.stderr[-2000:]
        last = cp.stderr.strip().splitlines()[-1]
        assert last.startswith(f"sglang-kimi-eagle3: error: {folder / 'config.json'}: field") and want in last
        assert "Traceback" not in cp.stderr


def test_plugin_switched_off_check_shows_sglangs_own_refusal_and_says_the_plugin_is_off():
    # without the plugin, the 131072-position drafter beside the 262144 target is SGLang's context error
    cp = check(SGLANG_KIMI_EAGLE3="0")
    assert cp.returncode == 1, cp.stdout[-2000:] + cp.stderr[-2000:]
    assert "NoneType: None" not in cp.stdout
    assert "with this plugin switched off (SGLANG_KIMI_EAGLE3=0), launch_server would refuse to start" in cp.stdout
