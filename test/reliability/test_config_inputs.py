"""Every bad config value is one UserError line naming the file and field (exit 2), never a traceback.

One table of broken draft/target configs built from the real bundled ones; pure, no SGLang import.
"""

import json
import os
import sys

import pytest
from helpers import AQ_K2_DRAFT, KIMI_K25, edited_copy

from sglang_kimi_eagle3.cli import main as cli_main
from sglang_kimi_eagle3.configs import read_config, safetensors_shapes
from sglang_kimi_eagle3.errors import UserError
from sglang_kimi_eagle3.policy.context import decide
from sglang_kimi_eagle3.preflight import Deployment, GpuTarget, has_errors, run_checks
from sglang_kimi_eagle3.validate import check_output_file, read_json_file

NAN, INF = float("nan"), float("inf")


def kimi_deployment(**kw) -> Deployment:
    """The embedded default launch (TP 8, steps 3 / topk 1 / 4 tokens) on SM90 with fa3."""
    base = dict(target=read_config(KIMI_K25), draft=read_config(AQ_K2_DRAFT), algorithm="EAGLE3", steps=3, topk=1,
                draft_tokens=4, tp=8, gpu=GpuTarget("H200", 90, "test"), target_decode_backend="fa3",
                target_prefill_backend="fa3", trust_remote_code=True, rope_margin=280,
                hook_states={"context_policy": ("applied", "")})
    base.update(kw)
    return Deployment(**base)

# (case id, field edits on the AQ-MedAI drafter's config, words the one-line message must hold)
DRAFT_EDITS = [
    ("hidden_nan", dict(hidden_size=NAN), ["'hidden_size'", "nan", "an integer in [1, "]),
    ("hidden_inf", dict(hidden_size=INF), ["'hidden_size'", "inf"]),
    ("hidden_neg_inf", dict(hidden_size=-INF), ["'hidden_size'"]),
    ("hidden_string", dict(hidden_size="7168"), ["'hidden_size'", "'7168' (string)"]),
    ("hidden_float", dict(hidden_size=7168.5), ["'hidden_size'", "7168.5"]),
    ("hidden_bool", dict(hidden_size=True), ["'hidden_size'", "boolean"]),
    ("hidden_zero", dict(hidden_size=0), ["'hidden_size'", "in [1, "]),
    ("hidden_list", dict(hidden_size=[7168]), ["'hidden_size'", "(list)"]),
    ("layers_zero", dict(num_hidden_layers=0), ["'num_hidden_layers'"]),
    # past any model: `check` looped over 1e33 layers until memory ran out, or overflowed floats (exit 3)
    ("layers_huge", dict(num_hidden_layers=10**33), ["'num_hidden_layers'", "in [1, 16384]"]),
    ("hidden_1e300", dict(hidden_size=1e300), ["'hidden_size'", "in [1, 16777216]"]),
    ("vocab_huge", dict(vocab_size=2**40), ["'vocab_size'", "in [1, 16777216]"]),
    ("vocab_negative", dict(vocab_size=-1), ["'vocab_size'"]),
    ("heads_zero", dict(num_attention_heads=0), ["'num_attention_heads'", "in [1, "]),
    ("kv_heads_zero", dict(num_key_value_heads=0), ["'num_key_value_heads'"]),
    ("mpe_zero", dict(max_position_embeddings=0), ["'max_position_embeddings'", ">= 1"]),
    ("mpe_negative", dict(max_position_embeddings=-1), ["'max_position_embeddings'", "-1"]),
    ("mpe_string", dict(max_position_embeddings="131072"), ["'max_position_embeddings'", "string"]),
    ("mpe_nan", dict(max_position_embeddings=NAN), ["'max_position_embeddings'"]),
    ("seq_length_zero", dict(seq_length=0), ["'seq_length'"]),
    ("rope_theta_string", dict(rope_theta="1e6"), ["'rope_theta'", "'1e6' (string)", "finite number > 0"]),
    ("rope_theta_nan", dict(rope_theta=NAN), ["'rope_theta'"]),
    ("rope_theta_zero", dict(rope_theta=0), ["'rope_theta'"]),
    ("rope_scaling_list", dict(rope_scaling=[1, 2]), ["'rope_scaling'", "(list)"]),
    ("rope_factor_string", dict(rope_scaling={"rope_type": "linear", "factor": "2"}), ["'rope_scaling.factor'", "string"]),
    ("rope_factor_zero", dict(rope_scaling={"rope_type": "linear", "factor": 0}), ["'rope_scaling.factor'"]),
    ("rope_factor_inf", dict(rope_scaling={"rope_type": "linear", "factor": INF}), ["'rope_scaling.factor'"]),
    ("rope_type_number", dict(rope_scaling={"rope_type": 3}), ["'rope_scaling.rope_type'"]),
    ("rope_orig_mpe_zero", dict(rope_scaling={"rope_type": "yarn", "factor": 2, "original_max_position_embeddings": 0}),
     ["'rope_scaling.original_max_position_embeddings'"]),
    ("eos_dict", dict(eos_token_id={"id": 2}), ["'eos_token_id'", "(object)"]),
    ("eos_list_of_strings", dict(eos_token_id=["</s>"]), ["'eos_token_id[0]'"]),
    ("bos_negative", dict(bos_token_id=-3), ["'bos_token_id'"]),
    ("quant_groups_list", dict(quantization_config={"quant_method": "compressed-tensors", "config_groups": [{"weights": {}}]}),
     ["'quantization_config.config_groups'", "(list)"]),
    ("quant_config_string", dict(quantization_config="int4"), ["'quantization_config'", "string"]),
    ("quant_group_string", dict(quantization_config={"config_groups": {"g": "int4"}}), ["config_groups.g"]),
    ("quant_ignore_string", dict(quantization_config={"quant_method": "x", "ignore": "lm_head"}), ["'quantization_config.ignore'"]),
    ("eagle_config_list", dict(eagle_config=[2, 30, 58]), ["'eagle_config'", "(list)", "an object"]),
    ("aux_ids_strings", dict(eagle_config={"eagle_aux_hidden_state_layer_ids": ["2"]}),
     ["'eagle_config.eagle_aux_hidden_state_layer_ids[0]'"]),
    ("aux_ids_negative", dict(eagle_config={"eagle_aux_hidden_state_layer_ids": [-1, 30, 58]}), ["[0]'", ">= 0"]),
    ("architectures_empty", dict(architectures=[]), ["'architectures'", "non-empty"]),
    ("architectures_string", dict(architectures="LlamaForCausalLMEagle3"), ["'architectures'", "(string)"]),
    ("architectures_numbers", dict(architectures=[1]), ["'architectures[0]'"]),
    ("draft_vocab_zero", dict(draft_vocab_size=0), ["'draft_vocab_size'"]),
    ("target_hidden_string", dict(target_hidden_size="7168"), ["'target_hidden_size'"]),
    ("dtype_number", dict(torch_dtype=16), ["'torch_dtype'"]),
    ("tie_string", dict(tie_word_embeddings="yes"), ["'tie_word_embeddings'"]),
    ("model_type_list", dict(model_type=["llama"]), ["'model_type'"]),
    ("text_config_list", dict(text_config=[1]), ["'text_config'", "(list)"]),
]


@pytest.mark.parametrize("case,edits,words", DRAFT_EDITS, ids=[c[0] for c in DRAFT_EDITS])
def test_bad_draft_field_is_one_line_naming_file_and_field(tmp_path, case, edits, words):
    folder = edited_copy(AQ_K2_DRAFT, tmp_path / case, **edits)
    with pytest.raises(UserError) as e:
        read_config(folder)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(str(folder / "config.json")), msg
    for w in words:
        assert w in msg, (w, msg)


# Fields only the memory estimate reads (preflight/memory.py): a string, null or list there was an internal
# TypeError (exit 3) from `check`, a negative size a silent negative weight count.
@pytest.mark.parametrize("edits,field", [
    (dict(intermediate_size="x"), "'intermediate_size' = 'x' (string)"), (dict(intermediate_size=None), "'intermediate_size' is missing"),
    (dict(intermediate_size=[1]), "'intermediate_size' = [1] (list)"), (dict(intermediate_size=-5), "'intermediate_size' = -5"),
    (dict(head_dim="x"), "'head_dim' = 'x'"), (dict(head_dim=[1]), "'head_dim' = [1]"),
])
def test_bad_size_the_memory_estimate_reads_is_one_line_naming_file_and_field(tmp_path, edits, field):
    folder = edited_copy(AQ_K2_DRAFT, tmp_path / "d", **edits)
    from sglang_kimi_eagle3.preflight.memory import config_weights

    with pytest.raises(UserError) as e:  # what `check`'s memory fit reads for a drafter without weights
        config_weights(read_config(folder), eagle3_draft=True).per_gpu(8)
    msg = str(e.value)
    assert msg.startswith(f"{folder / 'config.json'}: field ") and field in msg, msg


# Nested (Kimi-K2.5) layout: the field is named with its text_config. prefix.
@pytest.mark.parametrize("edits,field", [
    (dict(text_config__hidden_size=NAN), "'text_config.hidden_size'"),
    (dict(text_config__max_position_embeddings=0), "'text_config.max_position_embeddings'"),
    (dict(text_config__rope_scaling__factor="64"), "'text_config.rope_scaling.factor'"),
    (dict(text_config__quantization_config__config_groups=[1]), "'text_config.quantization_config.config_groups'"),
])
def test_bad_nested_target_field_names_the_text_config_path(tmp_path, edits, field):
    with pytest.raises(UserError, match=field.replace(".", r"\.")):
        read_config(edited_copy(KIMI_K25, tmp_path / "t", **edits))


@pytest.mark.parametrize("edits,field", [
    (dict(text_config__moe_intermediate_size="x"), "'text_config.moe_intermediate_size' = 'x'"),
    (dict(text_config__kv_lora_rank=-1), "'text_config.kv_lora_rank' = -1"),
])
def test_bad_nested_size_the_memory_estimate_reads_names_the_text_config_path(tmp_path, edits, field):
    from sglang_kimi_eagle3.preflight.memory import config_weights

    with pytest.raises(UserError) as e:
        config_weights(read_config(edited_copy(KIMI_K25, tmp_path / "t", **edits))).per_gpu(8)
    assert field in str(e.value), str(e.value)


def _write(folder, data: bytes):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_bytes(data)
    return folder


GOOD = (AQ_K2_DRAFT / "config.json").read_text()
FILES = [
    ("non_utf8", lambda d: _write(d, b'{"architectures": ["L\xe9"]}'), "not UTF-8 text (byte 0xe9 at offset 21)"),
    ("utf16_bom", lambda d: _write(d, GOOD.encode("utf-16")), "UTF-16"),
    ("utf16_no_bom", lambda d: _write(d, GOOD.encode("utf-16-le")), "UTF-16"),
    ("utf8_bom", lambda d: _write(d, b"\xef\xbb\xbf" + GOOD.encode()), "byte-order mark"),
    ("deeply_nested", lambda d: _write(d, b"[" * 100000 + b"]" * 100000), "nested too deeply"),
    ("deeply_nested_object", lambda d: _write(d, b'{"a":' * 50000 + b"1" + b"}" * 50000), "nested too deeply"),
    ("top_level_list", lambda d: _write(d, b"[1, 2]"), "expected a JSON object at the top level"),
    ("empty_file", lambda d: _write(d, b""), "not a JSON file: it is empty"),
    ("config_is_a_folder", lambda d: (d / "config.json").mkdir(parents=True) or d, "not a JSON file: it is a folder"),
    ("config_is_a_fifo", lambda d: d.mkdir() or os.mkfifo(d / "config.json") or d, "not a JSON file: it is a FIFO"),
    ("symlink_loop", lambda d: d.mkdir() or os.symlink(d / "config.json", d / "config.json") or d, "cannot be read"),
    ("name_too_long", lambda d: (d.mkdir(), d / ("x" * 300))[1], "cannot be read (File name too long)"),  # an OSError even for root
    ("missing", lambda d: d.mkdir() or d, "no such JSON file"),
    ("parent_is_a_file", lambda d: (d.write_text("x"), d)[1], "a parent of it is a file"),
]


@pytest.mark.parametrize("case,make,want", FILES, ids=[c[0] for c in FILES])
def test_unreadable_config_file_is_told_apart_from_missing(tmp_path, case, make, want):
    folder = make(tmp_path / "m")
    with pytest.raises(UserError) as e:
        read_config(folder)
    assert want in str(e.value) and "\n" not in str(e.value), str(e.value)
    if case not in ("missing", "parent_is_a_file"):
        assert "no such" not in str(e.value)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file: permissions cannot fail here")
def test_unreadable_folder_says_unreadable(tmp_path):
    folder = _write(tmp_path / "d", GOOD.encode())
    folder.chmod(0)
    try:
        with pytest.raises(UserError, match="cannot be read"):
            read_config(folder)
    finally:
        folder.chmod(0o755)


@pytest.mark.parametrize("header,want", [
    ([1, 2], "safetensors header is [1, 2] (list)"),
    ({"d2t": {"dtype": "I64", "shape": "32000"}}, "'d2t.shape'"),
    ({"d2t": {"dtype": "I64", "shape": ["a"]}}, "'d2t.shape[0]'"),
    ({"d2t": [1]}, "d2t.shape"),
    ("x", "(string)"),
])
def test_bad_safetensors_header_is_one_line(tmp_path, header, want):
    raw = json.dumps(header).encode()
    (tmp_path / "model.safetensors").write_bytes(len(raw).to_bytes(8, "little") + raw)
    with pytest.raises(UserError) as e:
        safetensors_shapes(tmp_path)
    assert want in str(e.value), str(e.value)


def test_safetensors_fifo_is_refused_not_read(tmp_path):
    os.mkfifo(tmp_path / "model.safetensors")  # opening it would block forever
    with pytest.raises(UserError, match="not a regular file"):
        safetensors_shapes(tmp_path)


def test_d2t_message_grammar(tmp_path):
    for n, want in ((1, "the d2t tensor has 1 entry"), (7, "the d2t tensor has 7 entries")):
        f = [x for x in run_checks(kimi_deployment(draft_tensor_shapes={"d2t": [n], "fc.weight": [7168, 21504]}))
             if x.check == "vocab" and x.severity == "error"]
        assert f and f[0].found == want


# --- policy: no ZeroDivisionError, a UserError naming what is wrong ---------------------------------
@pytest.mark.parametrize("target_len,draft_len,margin,want", [
    (131072, 0, 0, "context length"), (131072, -1, 0, "-1"), (0, 2048, 0, "served context length"),
    (-5, 2048, 0, "-5"), (131072, 2048.0, 0, "2048.0"), (131072, 2048, -3, "rope margin"),
])
def test_decide_refuses_nonsense_lengths(target_len, draft_len, margin, want):
    for policy in ("auto", "strict", "yarn", "cap", "extend"):
        with pytest.raises(UserError, match=want):
            decide(target_len=target_len, draft_len=draft_len, policy=policy, rope_margin=margin)


# --- preflight: nonsense launch values are error findings --------------------------------------------
@pytest.mark.parametrize("kw,check,word", [
    (dict(tp=0), "tensor_parallel", "--tp-size 0"), (dict(tp=-1), "tensor_parallel", "--tp-size -1"),
    (dict(context_length=-5), "context", "--context-length -5"), (dict(context_length=0), "context", "--context-length 0"),
])
def test_nonsense_launch_values_are_errors(kw, check, word):
    f = run_checks(kimi_deployment(**kw))
    assert has_errors(f)
    assert any(x.severity == "error" and x.check == check and word in x.found for x in f), [x.one_line() for x in f]
    assert not any("-5 served" in x.found for x in f)


# --- check's own flags (no SGLang import: refused before it) ---------------------------------------
@pytest.mark.parametrize("argv,want", [
    (["--for-gpu", ""], "--for-gpu is empty"), (["--for-gpu="], "--for-gpu is empty"),
    (["--for-gpu", "sm999"], "no GPU has compute capability 999"), (["--for-gpu", "sm_12"], "compute capability 12"),
    (["--for-gpu"], "needs a value"), (["--for-gpu", "--json"], "needs a value"),
    (["--json=yes"], "--json takes no value"), (["--verbose=1"], "--verbose takes no value"),
    (["--tp-size", "0"], "--tp-size 0: expected a positive integer"), (["--tp-size=-1"], "--tp-size -1"),
    (["--tensor-parallel-size", "0"], "--tensor-parallel-size 0"),
    (["--context-length", "-5"], "--context-length -5: expected a positive integer"),
])
def test_check_flags_refused_before_sglang(argv, want):
    from sglang_kimi_eagle3.commands.check import _split

    with pytest.raises(UserError, match=want):
        _split(argv)


def test_check_flags_still_accepts_good_values():
    from sglang_kimi_eagle3.commands.check import _split, parse_gpu

    assert _split(["--for-gpu", "sm120", "--json", "--tp-size", "8"]) == (
        {"json": True, "verbose": False, "for_gpu": "sm120"}, ["--tp-size", "8"])
    assert parse_gpu("H200", "x").sm == 90 and parse_gpu("sm100a", "x").sm == 100


# --- small commands ------------------------------------------------------------------------------------
def test_profiles_help_and_unknown_argument(capsys):
    assert cli_main(["profiles", "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: sglang-kimi-eagle3 profiles") and "aq-medai/kimi-k2-eagle3" not in out
    assert cli_main(["profiles", "--bogus"]) == 2
    assert "unknown argument '--bogus'" in capsys.readouterr().err


def test_status_unknown_argument_is_refused(capsys):
    before = set(sys.modules)
    assert cli_main(["status", "--bogus"]) == 2
    assert "status: unknown argument '--bogus'" in capsys.readouterr().err
    assert not any(m.split(".")[0] == "sglang" for m in set(sys.modules) - before)  # refused before loading SGLang


# --- output paths ------------------------------------------------------------------------------------
@pytest.mark.parametrize("case,want", [
    ("missing_folder", "does not exist"), ("a_folder", "is a folder"), ("file_as_parent", "a parent of it is a file"),
    ("proc", "cannot create files"), ("fifo", "is a FIFO"), ("device", "is a device"), ("empty", "is empty"),
])
def test_unwritable_output_paths(tmp_path, case, want):
    (tmp_path / "f").write_text("x")
    os.mkfifo(tmp_path / "pipe")
    path = {"missing_folder": tmp_path / "no" / "x.json", "a_folder": tmp_path, "file_as_parent": tmp_path / "f" / "x.json",
            "proc": "/proc/x.json", "fifo": tmp_path / "pipe", "device": "/dev/null", "empty": ""}[case]
    with pytest.raises(UserError, match=want):
        check_output_file(path, "--json")
    assert check_output_file(tmp_path / "ok.json", "--json") == tmp_path / "ok.json"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f", "pipe"]  # the probe left nothing behind


def test_read_json_file_accepts_nan_literals_that_field_readers_then_refuse(tmp_path):
    (tmp_path / "a.json").write_text('{"x": NaN}')
    assert read_json_file(tmp_path / "a.json")["x"] != read_json_file(tmp_path / "a.json")["x"]


@pytest.mark.parametrize("var", ["SGLANG_KIMI_EAGLE3_KERNELS", "SGLANG_KIMI_EAGLE3_PREFLIGHT",
                                 "SGLANG_KIMI_EAGLE3_CONTEXT_POLICY"])
def test_status_with_a_garbage_variable_is_one_line_exit_2(capsys, monkeypatch, var):
    monkeypatch.setenv(var, "bogus")
    assert cli_main(["status"]) == 2
    err = capsys.readouterr().err
    assert f"{var}='bogus'" in err or (var in err and "bogus" in err), err
