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
    (["--for-gpu", "H200 sm120"], "names more than one GPU (h200, sm120)"),  # was read as the H200
    (["--json=yes"], "--json takes no value"), (["--tp-size", "0"], "--tp-size 0"),
    (["--context-length", "-5"], "--context-length -5"),
    (["--nnodes", "0"], "--nnodes 0: expected a positive integer"),  # SGLang: ZeroDivisionError launching schedulers
    (["--pp-size", "0"], "--pp-size 0: expected a positive integer"),
    (["--nnodes", "2", "--node-rank", "5"], "--node-rank 5: expected 0 to 1"),  # SGLang: ranks past the world
    (["--dp-size", "0"], "--dp-size 0: expected a positive integer"),  # SGLang: a data-parallel launch of no replica
    (["--cuda-graph-max-bs-decode", "-5"], "--cuda-graph-max-bs-decode -5: expected a positive integer"),  # captures bs -5
    # SGLang resolves both, then divides by them deriving the MoE / attention widths: ZeroDivisionError at spawn
    (["--ep-size", "0"], "--ep-size 0: expected a positive integer"),
    (["--ep", "0"], "--ep 0: expected a positive integer"),  # SGLang's alias
    (["--attn-cp-size", "0"], "--attn-cp-size 0: expected a positive integer"),
    # SGLang caps the profiled KV pool at it: a pool of 0 tokens, 'Not enough memory' after the weights load
    (["--max-total-tokens", "0"], "--max-total-tokens 0: expected a positive integer"),
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


@pytest.mark.parametrize("name,content,extra,want", [
    ("launch.json", "tp-size: 4\n", [], "--config {f}: Config file must be YAML format, got: .json"),
    ("missing.yaml", None, [], "--config {f}: Config file not found"),
    ("folder.yaml", "dir", [], "--config {f}: not a config file: it is a folder"),
    ("list.yaml", "- 1\n- 2\n", [], "--config {f}: Config file must contain a dictionary"),
    ("bad.yaml", "a: [1\n", [], "--config {f}: "),
    ("latin.yaml", b"tp-size: \xe9\n", [], "--config {f}: "),
    ("ok.yaml", "tp-size: 4\n", ["--config", "{f}"], "--config: Multiple config files"),
    ("ok.yaml", "tp-size: 4\n", ["--config"], "--config: "),
    ("ok.yaml", "tp-size: 4\n", ["={f}"], "--config={f}: launch_server reads a config file only as --config FILE"),
])
def test_a_bad_config_file_is_one_line_naming_it(tmp_path, capsys, name, content, extra, want):
    """SGLang's config merger raised ValueError (exit 3, 'internal error') for a config file it refuses."""
    from sglang_kimi_eagle3.cli import main as cli_main

    f = tmp_path / name
    if content == "dir":
        f.mkdir()
    elif content is not None:
        f.write_bytes(content if isinstance(content, bytes) else content.encode())
    first = ["--config" + extra[0].replace("{f}", str(f))] if extra[:1] == ["={f}"] else ["--config", str(f)]
    rest = [a.replace("{f}", str(f)) for a in extra if a != "={f}"]
    assert cli_main(["check", *first, *rest]) == 2
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip() and "CUDA architecture" not in ln]
    assert len(lines) == 1 and lines[0].startswith("sglang-kimi-eagle3: error: "), lines
    assert want.replace("{f}", str(f)) in lines[0], lines


@pytest.mark.parametrize("args,want", [(["--mem-fraction", "nan"], "--mem-fraction-static nan: expected a number in (0, 1]"),
                                       (["--tp", "0"], "--tp-size 0: expected a positive integer")])
def test_a_flag_spelled_as_an_abbreviation_sglang_takes_is_held_to_the_same_bounds(args, want):
    """SGLang's parser takes a unique prefix (--mem-fraction for --mem-fraction-static): nan was exit 3 (the memory
    check), --tp 0 a memory error at 'tp 1' instead of the refusal the full spelling gets."""
    cp = run_check("--model-path", "kimi-k2.5", "--trust-remote-code", *args)
    assert cp.returncode == 2, cp.stdout[-2000:] + cp.stderr[-2000:]
    last = cp.stderr.strip().splitlines()[-1]
    assert last.startswith("sglang-kimi-eagle3: error:") and want in last and "Traceback" not in cp.stderr, last


def test_a_refused_config_file_is_said_once_not_logged_first(tmp_path, caplog):
    """`tune --config bad.yaml` (logging set up by then) printed SGLang's merger's multi-line log before the one line."""
    from sglang_kimi_eagle3.errors import UserError
    from sglang_kimi_eagle3.integration.launch_flags import merge_config_file

    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1\n")
    with pytest.raises(UserError, match=r"^--config .*bad\.yaml: while parsing"):
        merge_config_file(["--config", str(bad)])
    assert not caplog.records, [r.getMessage() for r in caplog.records]


def test_canonical_flags_spells_out_only_what_sglangs_parser_resolves():
    """A unique prefix becomes its flag (with `=VALUE` too); exact names, ambiguous prefixes (SGLang's parser refuses
    them) and values are left as given."""
    from sglang_kimi_eagle3.integration.launch_flags import canonical_flags

    got = canonical_flags(["--model-p", "m", "--tp-size=2", "--speculative-draft-model-p=d", "--mem-fraction", "0.5",
                           "--json-model-override-args", "--not-a-flag", "--speculative", "x"])
    assert got == ["--model-path", "m", "--tp-size=2", "--speculative-draft-model-path=d", "--mem-fraction-static", "0.5",
                   "--json-model-override-args", "--not-a-flag", "--speculative", "x"], got
