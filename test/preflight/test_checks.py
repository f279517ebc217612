"""Each preflight check: a passing and a failing case built from the real bundled configs (pure)."""

import dataclasses
import json

import pytest
from helpers import AQ_K2_DRAFT, AQ_K25_DRAFT, KIMI_K2, KIMI_K25, LLAMA_8B, LLAMA_8B_DRAFT, edited_copy

from sglang_kimi_eagle3.configs import read_config, safetensors_shapes
from sglang_kimi_eagle3.errors import UserError
from sglang_kimi_eagle3.preflight import Deployment, GpuTarget, SglangFacts, has_errors, run_checks
from sglang_kimi_eagle3.preflight.checks_draft import check_draft_weights
from sglang_kimi_eagle3.preflight.checks_launch import (
    captured_layers,
    check_aux_layers,
    check_context,
    check_spec_params,
    check_tensor_parallel,
)
from sglang_kimi_eagle3.preflight.checks_model import (
    check_algorithm,
    check_capture_support,
    check_dtype_quant,
    check_hidden,
    check_trust_remote_code,
    check_vocab,
)
from sglang_kimi_eagle3.preflight.checks_platform import check_attention_backend, check_platform

SM90, SM100, SM120 = GpuTarget("H200", 90, "test"), GpuTarget("B200", 100, "test"), GpuTarget("RTX PRO 6000", 120, "test")
METHODS_OK = {"set_eagle3_layers_to_capture": True, "get_embed_and_head": True, "set_embed_and_head": True}


def kimi(**kw) -> Deployment:
    """The embedded default launch (TP 8, 3/1/4) on SM90 with fa3, as SGLang resolves it."""
    base = dict(target=read_config(KIMI_K25), draft=read_config(AQ_K2_DRAFT), algorithm="EAGLE3", steps=3, topk=1,
                draft_tokens=4, tp=8, gpu=SM90, target_decode_backend="fa3", target_prefill_backend="fa3",
                trust_remote_code=True, target_class_methods=dict(METHODS_OK), rope_margin=280,
                hook_states={"context_policy": ("applied", "")})
    base.update(kw)
    return Deployment(**base)


def sev(findings, check):
    return {f.severity for f in findings if f.check == check}


def test_embedded_default_has_no_errors_and_reports_the_context_decision():
    f = run_checks(kimi())
    assert not has_errors(f), [x.one_line() for x in f if x.severity == "error"]
    ctx = [x for x in f if x.check == "context"]
    assert ctx and "auto -> extend" in ctx[0].found and "131072" in ctx[0].found


# --- algorithm ---
def test_eagle3_drafter_with_eagle_is_an_error():
    f = check_algorithm(kimi(algorithm="EAGLE"))
    assert sev(f, "algorithm") == {"error"} and "#21272" in f[0].expected and f[0].fix == "--speculative-algorithm EAGLE3"
    assert sev(check_algorithm(kimi()), "algorithm") == {"info"}


def test_eagle1_drafter_with_eagle3_is_an_error_and_mla_drafter_is_recognised(tmp_path):
    eagle1 = read_config(edited_copy(AQ_K2_DRAFT, tmp_path / "e1", architectures=["LlamaForCausalLMEagle"]))
    assert sev(check_algorithm(kimi(draft=eagle1)), "algorithm") == {"error"}
    mla = read_config(edited_copy(AQ_K2_DRAFT, tmp_path / "mla", architectures=["Eagle3DeepseekV2ForCausalLM"]))
    f = check_algorithm(kimi(draft=mla))
    assert sev(f, "algorithm") == {"info"} and "MLA drafter" in f[0].found


# --- capture support ---
def test_capture_support_needs_the_delegation_methods_and_applied_hooks():
    assert sev(check_capture_support(kimi()), "capture_support") == {"info"}
    missing = dict(METHODS_OK, get_embed_and_head=False)
    f = check_capture_support(kimi(target_class_methods=missing))
    assert sev(f, "capture_support") == {"error"} and "get_embed_and_head" in f[0].found
    f = check_capture_support(kimi(hook_states={"context_policy": ("failed", "boom")}))
    assert sev(f, "plugin_hooks") == {"warning"}


# --- hidden sizes ---
def test_fc_width_follows_sglang_and_mismatches_are_errors(tmp_path):
    assert "error" not in sev(check_hidden(kimi()), "hidden_size")
    narrow = read_config(edited_copy(AQ_K2_DRAFT, tmp_path / "n", hidden_size=4096))
    f = check_hidden(kimi(draft=narrow))
    # SGLang builds fc from the draft's own hidden size when target_hidden_size is absent: 3*4096 != 3*7168
    assert "error" in sev(f, "hidden_size") and "target_hidden_size" in " ".join(x.fix for x in f)
    declared = read_config(edited_copy(AQ_K2_DRAFT, tmp_path / "d", hidden_size=4096, target_hidden_size=7168))
    f = check_hidden(kimi(draft=declared))
    assert "error" not in sev(f, "hidden_size") and "warning" in sev(f, "hidden_size")  # no embedding sharing
    f = check_hidden(kimi(draft_tensor_shapes={"fc.weight": [7168, 3 * 4096], "d2t": [32000]}))
    assert "error" in sev(f, "hidden_size")


# --- vocabulary ---
def _write_safetensors(folder, tensors: dict):
    header = json.dumps({k: {"dtype": "I64", "shape": v, "data_offsets": [0, 0]} for k, v in tensors.items()}).encode()
    (folder / "model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header)


def test_vocab_and_d2t(tmp_path):
    assert "error" not in sev(check_vocab(kimi()), "vocab")
    assert any("not checked" in x.found for x in check_draft_weights(kimi()))
    wrong = read_config(edited_copy(AQ_K2_DRAFT, tmp_path / "v", vocab_size=128256))
    assert "error" in sev(check_vocab(kimi(draft=wrong)), "vocab")
    big = read_config(edited_copy(AQ_K2_DRAFT, tmp_path / "b", draft_vocab_size=200000))
    assert "error" in sev(check_vocab(kimi(draft=big)), "vocab")
    folder = edited_copy(AQ_K2_DRAFT, tmp_path / "w")
    _write_safetensors(folder, {"fc.weight": [7168, 21504]})
    f = check_draft_weights(kimi(draft_tensor_shapes=safetensors_shapes(folder)))
    assert "error" in sev(f, "vocab") and "d2t" in f[0].found
    _write_safetensors(folder, {"fc.weight": [7168, 21504], "d2t": [32000]})
    assert "error" not in sev(check_draft_weights(kimi(draft_tensor_shapes=safetensors_shapes(folder))), "vocab")
    other = read_config(edited_copy(AQ_K2_DRAFT, tmp_path / "t", bos_token_id=1, eos_token_id=2))
    assert sev(check_vocab(kimi(draft=other)), "vocab") == {"warning"}


def test_corrupt_safetensors_is_a_one_line_error(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"\xff" * 16)
    with pytest.raises(UserError) as e:
        safetensors_shapes(tmp_path)
    assert "model.safetensors" in str(e.value)


# --- aux layers ---
def test_capture_rules_differ_by_target_family():
    assert captured_layers("KimiK25ForConditionalGeneration", None, 61) == [2, 30, 58]
    assert captured_layers("DeepseekV3ForCausalLM", [1, 29, 57], 61) == [2, 30, 58]  # TorchSpec-style ids
    assert captured_layers("DeepseekV3ForCausalLM", [2, 30, 58], 61) == [2, 30, 58]
    assert captured_layers("LlamaForCausalLM", [2, 16, 29], 32) == [3, 17, 30]  # Llama always adds 1
    assert captured_layers("LlamaForCausalLM", [1, 15, 28], 32) == [2, 16, 29]


def test_aux_layers_in_range_and_one_layer_shift(tmp_path):
    assert sev(check_aux_layers(kimi()), "aux_layers") == {"info"}
    shifted = read_config(edited_copy(AQ_K2_DRAFT, tmp_path / "s", eagle_config__eagle_aux_hidden_state_layer_ids=[3, 31, 59]))
    f = check_aux_layers(kimi(draft=shifted))
    assert sev(f, "aux_layers") == {"warning"} and "[2, 30, 58]" in f[0].fix
    oob = read_config(edited_copy(AQ_K2_DRAFT, tmp_path / "o", eagle_config__eagle_aux_hidden_state_layer_ids=[2, 30, 61]))
    assert sev(check_aux_layers(kimi(draft=oob)), "aux_layers") == {"error"}
    # Llama target, drafter declaring the input-convention default: SGLang's +1 shifts it by one layer
    llama_ids = read_config(edited_copy(LLAMA_8B_DRAFT, tmp_path / "l", eagle_config={"eagle_aux_hidden_state_layer_ids": [2, 16, 29]}))
    f = check_aux_layers(kimi(target=read_config(LLAMA_8B), draft=llama_ids, tp=1))
    assert sev(f, "aux_layers") == {"warning"} and "[1, 15, 28]" in f[0].fix


# --- context ---
def test_context_findings(tmp_path):
    f = check_context(kimi())
    assert sev(f, "context") == {"info"}
    assert sev(check_context(kimi(draft=read_config(AQ_K25_DRAFT))), "context") == {"info"}  # 262144 covers it
    f = check_context(kimi(context_policy="strict"))
    assert sev(f, "context") == {"error"} and "--speculative-draft-context-policy" in f[0].fix
    f = check_context(kimi(context_length=300000))
    assert sev(f, "context") == {"error"} and "--context-length 262144" in f[0].fix
    llama = kimi(target=read_config(LLAMA_8B), draft=read_config(LLAMA_8B_DRAFT), tp=1)
    f = check_context(llama)
    assert sev(f, "context") == {"warning"} and "2048" in f[0].found and "131072" in f[0].found
    assert sev(check_context(kimi(context_hook_active=False)), "context") == {"error"}
    assert sev(check_context(kimi(global_override_set=True)), "context") == {"warning"}
    scaled = read_config(edited_copy(AQ_K2_DRAFT, tmp_path / "y", rope_scaling={"rope_type": "yarn", "factor": 2.0,
                                                                               "original_max_position_embeddings": 65536}))
    assert sev(check_context(kimi(draft=scaled, context_policy="yarn")), "context") == {"error"}
    weird = read_config(edited_copy(AQ_K2_DRAFT, tmp_path / "w", rope_scaling={"rope_type": "wobbly"}))
    assert sev(check_context(kimi(draft=weird)), "context") == {"error"}


# --- speculative params ---
@pytest.mark.parametrize("steps,topk,tokens,want", [
    (3, 1, 4, {"info"}), (3, 1, 6, {"warning"}), (3, 4, 14, {"info"}), (3, 4, 37, {"info"}), (3, 4, 38, {"error"}),
    (3, 4, 8, {"info"}), (0, 1, 4, {"error"}), (3, None, None, {"error"}), (None, None, None, {"info"}),
])
def test_spec_params(steps, topk, tokens, want):
    # the tree bound is SGLang's, handed over as a fact (integration/preflight/sglang_facts.tree_capacity: 4 + 2*16 + 1)
    facts = SglangFacts(tree_capacity=37 if (steps, topk) == (3, 4) else None)
    assert sev(check_spec_params(kimi(steps=steps, topk=topk, draft_tokens=tokens, sglang=facts)), "spec_params") == want


def test_spec_params_rejections_sglang_would_make():
    assert "error" in sev(check_spec_params(kimi(topk=4, draft_tokens=8, use_rejection_sampling=True)), "spec_params")
    assert "error" in sev(check_spec_params(kimi(topk=4, draft_tokens=8, target_decode_backend="trtllm_mha")), "spec_params")
    assert "error" in sev(check_spec_params(kimi(topk=4, draft_tokens=8, page_size=64, target_decode_backend="flashmla")), "spec_params")


# --- tensor parallel ---
def test_tensor_parallel(tmp_path):
    assert "error" not in sev(check_tensor_parallel(kimi()), "tensor_parallel")
    odd = read_config(edited_copy(AQ_K2_DRAFT, tmp_path / "h", num_attention_heads=60, num_key_value_heads=60))
    assert "error" in sev(check_tensor_parallel(kimi(draft=odd)), "tensor_parallel")
    llama = kimi(target=read_config(LLAMA_8B), draft=read_config(LLAMA_8B_DRAFT), tp=16)
    assert "error" not in sev(check_tensor_parallel(llama), "tensor_parallel")  # 8 KV heads replicated over 16
    llama = kimi(target=read_config(LLAMA_8B), draft=read_config(LLAMA_8B_DRAFT), tp=3)
    assert "error" in sev(check_tensor_parallel(llama), "tensor_parallel")
    for kw in (dict(ep_size=8), dict(ep_size=4), dict(dcp_size=2), dict(ep_size=1, dcp_size=8)):
        assert "error" not in sev(check_tensor_parallel(kimi(**kw)), "tensor_parallel"), kw
    for kw in (dict(ep_size=3), dict(ep_size=16), dict(dcp_size=3)):  # ranks outside every group; SGLang's RuntimeError
        assert "error" in sev(check_tensor_parallel(kimi(**kw)), "tensor_parallel"), kw


# --- attention backends ---
def test_draft_backend_inherits_mla_only_backend_is_an_error():
    # SGLang #23490: on SM100 DeepSeek/Kimi targets get trtllm_mla; the MHA drafter inherits it
    f = check_attention_backend(kimi(gpu=SM100, target_decode_backend="trtllm_mla", target_prefill_backend="trtllm_mla"))
    assert sev(f, "attention_backend") == {"error"} and f[0].fix == "--speculative-draft-attention-backend flashinfer"
    ok = check_attention_backend(kimi(gpu=SM100, target_decode_backend="trtllm_mla", draft_backend_flag="flashinfer"))
    assert sev(ok, "attention_backend") == {"info"}
    sm120 = kimi(gpu=SM120, target_decode_backend="triton", target_prefill_backend="triton")
    assert sev(check_attention_backend(sm120), "attention_backend") == {"info"}
    f = check_attention_backend(kimi(gpu=SM120, target_decode_backend="triton"))  # prefill still fa3: Hopper-only
    assert sev(f, "attention_backend") == {"info", "error"}
    f = check_attention_backend(kimi(gpu=SM120, draft_backend_flag="fa3"))
    assert sev(f, "attention_backend") == {"error"} and "triton" in f[0].fix


# --- dtype, quantization, trust_remote_code ---
def test_dtype_quant_and_trust_remote_code():
    llama = kimi(target=read_config(LLAMA_8B), draft=read_config(LLAMA_8B_DRAFT), tp=1)
    assert sev(check_dtype_quant(llama), "dtype") == {"warning"}  # fp16 drafter, bf16 target
    assert not sev(check_dtype_quant(dataclasses.replace(llama, dtype="bfloat16")), "dtype")
    assert sev(check_dtype_quant(kimi(draft_quantization="fp8")), "quantization") >= {"warning"}
    assert sev(check_trust_remote_code(kimi(trust_remote_code=False)), "trust_remote_code") == {"error"}
    assert not check_trust_remote_code(kimi())
    assert sev(check_trust_remote_code(kimi(target=read_config(KIMI_K2))), "trust_remote_code") == set()


# --- platform ---
def test_sm120_notes_only_on_sm120():
    assert check_platform(kimi()) == []
    f = check_platform(kimi(gpu=SM120, target_decode_backend="triton", target_prefill_backend="triton"))
    assert sev(f, "platform_sm120") == {"warning", "info"} and "--disable-custom-all-reduce" in f[0].fix
    f = check_platform(kimi(gpu=SM120, target_decode_backend="flashinfer", custom_all_reduce_disabled=True))
    assert any("#24361" in x.found for x in f)


# --- bad input ---
def test_bad_config_files_are_one_line_errors(tmp_path):
    with pytest.raises(UserError) as e:
        read_config(tmp_path / "nope")
    assert "config.json: no such JSON file" in str(e.value)
    (tmp_path / "config.json").write_text("{ not json")
    with pytest.raises(UserError) as e:
        read_config(tmp_path)
    assert "malformed JSON" in str(e.value) and "line 1" in str(e.value) and "\n" not in str(e.value)
    from sglang_kimi_eagle3.configs import require_draft_context

    bare = read_config(edited_copy(AQ_K2_DRAFT, tmp_path / "m", max_position_embeddings=...))
    with pytest.raises(UserError) as e:
        require_draft_context(bare)
    assert "max_position_embeddings" in str(e.value)
