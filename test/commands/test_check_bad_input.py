"""`sglang-kimi-eagle3 check` on unusable input: one line naming the file, field or flag, exit 2."""

import json

import pytest
from helpers import AQ_K2_DRAFT, edited_copy, run_check

pytestmark = pytest.mark.slow


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
    cp = run_check("--model-path", "kimi-k2.5", "--trust-remote-code", "--speculative-algorithm", "EAGLE3",
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
    cp = run_check("--model-path", "kimi-k2.5", "--trust-remote-code", *args)
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
        cp = run_check("--model-path", "kimi-k2.5", "--trust-remote-code", "--speculative-algorithm", "EAGLE3",
                   "--speculative-draft-model-path", str(folder))
        assert cp.returncode == 2, cp.stdout[-2000:] + cp.stderr[-2000:]
        last = cp.stderr.strip().splitlines()[-1]
        assert last.startswith(f"sglang-kimi-eagle3: error: {folder / 'config.json'}: field") and want in last
        assert "Traceback" not in cp.stderr
