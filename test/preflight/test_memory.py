"""Memory-fit preflight (pure): weight bytes per GPU, KV tokens, and every suggested fix re-checked."""

import dataclasses
import json
import re

from helpers import AQ_K2_DRAFT, KIMI_K25, LLAMA_8B, LLAMA_8B_DRAFT
from sglang_kimi_eagle3.configs import read_config
from sglang_kimi_eagle3.preflight import Deployment, GpuTarget, has_errors, run_checks
from sglang_kimi_eagle3.preflight.checks_memory import budget, check_memory
from sglang_kimi_eagle3.preflight.memory import GIB, config_weights, known_gpu_memory_mib, tensor_weights

RTX = GpuTarget("RTX PRO 6000", 120, "test")
VISION = json.loads((KIMI_K25 / "config.json").read_text())["vision_config"]


def kimi(**kw) -> Deployment:
    """The embedded default (TP 8, fraction 0.85) on 8x RTX PRO 6000 (97887 MiB each)."""
    base = dict(target=read_config(KIMI_K25), draft=read_config(AQ_K2_DRAFT), algorithm="EAGLE3", steps=3, topk=1,
                draft_tokens=4, tp=8, gpu=RTX, gpu_memory_mib=97887, gpu_memory_source="RTX PRO 6000 Blackwell (96 GB)",
                mem_fraction_static=0.85, mem_fraction_given=True, target_vision_config=VISION, cuda_graph_max_bs=512)
    base.update(kw)
    return Deployment(**base)


def apply_fix(d: Deployment, fix: str) -> Deployment:
    """The first flag of a finding's fix, applied to the deployment."""
    m = re.match(r"--(tp-size|context-length|mem-fraction-static) ([\d.]+)", fix)
    assert m, fix
    field, val = {"tp-size": ("tp", int), "context-length": ("context_length", int),
                  "mem-fraction-static": ("mem_fraction_static", float)}[m.group(1)]
    return dataclasses.replace(d, **{field: val(m.group(2))})


def mem(findings, severity=None):
    return [f for f in findings if f.check == "memory" and (severity is None or f.severity == severity)]


def test_kimi_k25_int4_totals_about_595_gb_with_the_routed_experts_packed():
    w = config_weights(read_config(KIMI_K25), vision_config=VISION)
    assert 550e9 < w.total < 600e9, w.total  # the published checkpoint: ~595 GB
    int4 = sum(p.nbytes for p in w.parts if p.note == "int4 packed")
    # 60 MoE layers x 384 experts x 3 x 7168 x 2048 weights at 4 bits + a bf16 scale per 32
    assert int4 == 60 * 384 * 3 * 7168 * 2048 * (0.5 + 2 / 32)
    bf16 = {p.name for p in w.parts if p.note != "int4 packed"}
    assert {"lm_head.weight", "model.layers.0.mlp.gate_proj.weight", "model.layers.5.self_attn.kv_b_proj.weight",
            "model.layers.5.mlp.shared_experts.up_proj.weight"} <= bf16  # the config's ignore list stays bf16
    assert 70 * GIB < w.per_gpu(8) < 75 * GIB and 139 * GIB < w.per_gpu(4) < 143 * GIB


def test_tp4_on_96gb_cards_is_an_error_with_numbers_and_its_fix_passes():
    f = check_memory(kimi(tp=4))
    err = mem(f, "error")
    assert len(err) == 1, [x.one_line() for x in f]
    assert re.search(r"weights 14\d\.\d GiB per GPU at --tp-size 4", err[0].found)
    assert "needed 14" in err[0].expected and "available 80.4 GiB" in err[0].expected
    assert err[0].fix.startswith("--tp-size 8 ")
    fixed = check_memory(apply_fix(kimi(tp=4), err[0].fix))
    assert not mem(fixed, "error"), [x.one_line() for x in fixed]


def test_tp8_fits_and_warns_that_the_kv_pool_is_below_the_context_with_a_fix_that_clears_it():
    d = kimi()
    b = budget(d)
    assert b.kv_cell == (512 + 64) * 2 * 61 + (512 + 64) * 2  # MLA latent x 61 layers + the draft's layer
    assert 100_000 < b.kv_tokens < 150_000
    f = check_memory(d)
    assert not has_errors(f)
    warn = mem(f, "warning")
    assert len(warn) == 1 and f"{b.kv_tokens} tokens" in warn[0].found and "262144" in warn[0].found
    fixed = check_memory(apply_fix(d, warn[0].fix))
    assert not mem(fixed, "warning") and mem(fixed, "info"), [x.one_line() for x in fixed]


def test_the_embedded_default_has_no_memory_error_in_the_full_check():
    assert not has_errors(mem(run_checks(kimi())))


def test_a_high_fraction_warns_about_the_activation_allowance_and_the_fix_clears_it():
    f = check_memory(kimi(mem_fraction_static=0.95))
    warn = [x for x in mem(f, "warning") if "activations, CUDA graphs" in x.found]
    assert len(warn) == 1 and "4.7 GiB" in warn[0].found
    assert not [x for x in check_memory(apply_fix(kimi(mem_fraction_static=0.95), warn[0].fix))
                if "activations, CUDA graphs" in x.found]
    # SGLang's own default (not given) is never second-guessed
    assert not [x for x in check_memory(kimi(mem_fraction_static=0.95, mem_fraction_given=False))
                if "activations, CUDA graphs" in x.found]


def test_the_index_total_size_replaces_the_config_derived_total():
    small = kimi(tp=4, target_index_bytes=250 * GIB)  # a checkpoint that is smaller than the config says
    assert not mem(check_memory(small), "error")
    assert "safetensors index total_size (250.0 GiB)" in mem(check_memory(small))[0].found


def test_unknown_gpu_memory_is_said_not_guessed():
    f = check_memory(kimi(gpu_memory_mib=None, gpu_memory_source="'sm120' names an architecture"))
    assert [x.severity for x in f] == ["info"] and "not checked" in f[0].found and "--for-gpu H200" in f[0].fix


def test_known_gpus_and_draft_weights_from_safetensors_shapes():
    assert known_gpu_memory_mib("RTX PRO 6000")[0] == 97887 and known_gpu_memory_mib("NVIDIA H200")[0] == 143771
    assert known_gpu_memory_mib("H100")[0] == 81559 and known_gpu_memory_mib("b200")[0] == 183359
    assert known_gpu_memory_mib("sm90") is None
    shapes = {"embed_tokens.weight": [163840, 7168], "fc.weight": [7168, 21504], "lm_head.weight": [32000, 7168]}
    w = tensor_weights(shapes, "bfloat16", eagle3_draft=True)  # the embedding is the target's
    assert w.total == 2 * (7168 * 21504 + 32000 * 7168) and w.per_gpu(8) == 2 * (7168 * 21504 + 32000 * 7168 / 8)


def test_an_mha_target_splits_its_kv_heads_over_tp():
    d = kimi(target=read_config(LLAMA_8B), draft=read_config(LLAMA_8B_DRAFT), tp=1, target_vision_config=None,
             gpu_memory_mib=81559, mem_fraction_static=0.8)
    b = budget(d)
    assert b.kv_cell == 2 * 8 * 128 * 2 * 32 + 2 * 8 * 128 * 2 * 32 // 32  # K+V x 8 KV heads x 128 x bf16 x 32 layers
    assert 14e9 < b.target_weights < 17e9 and not has_errors(check_memory(d))


def test_an_adaptive_launch_states_the_modelled_memory_of_every_runtime_state():
    table = {"1": {"candidate_steps": [0, 1, 3]}, "64": {"candidate_steps": [0, 1]}}
    f = check_memory(kimi(adaptive=True, adaptive_table=table, cuda_graph_max_bs=128,
                          cuda_graph_bs=[1, 2, 4, 8, 16, 32, 64, 128]))
    line = [x.found for x in mem(f, "info") if "runtime states" in x.found]
    assert len(line) == 1 and "builds 3 runtime states" in line[0] and "modelled" in line[0], line
    # steps 3 is listed only by the slot of bs 1-63: its graphs stop at bs 32; steps 0 and 1 reach bs 128
    assert "steps 0: ~4.2 GB" in line[0] and "steps 1: ~8.3 GB" in line[0], line[0]
    assert "steps 3 (the launch's own, built without adaptive steps too): ~4.2 GB" in line[0], line[0]
    assert not [x for x in check_memory(kimi()) if "runtime states" in x.found]  # a fixed chain: none


def test_the_adaptive_states_reach_no_graph_above_the_request_pool():
    """SGLang 0.5.23 captures no decode graph above --max-running-requests (get_batch_sizes_to_capture: that size
    instead), so an adaptive state's modelled memory stops there too; a pool above the largest graph changes nothing."""
    table = {"1": {"candidate_steps": [0, 3]}, "64": {"candidate_steps": [0, 3]}}
    graphs = dict(adaptive=True, adaptive_table=table, cuda_graph_max_bs=512,
                  cuda_graph_bs=[1, 2, 4, 8, 16, 32, 64, 128, 256, 512])

    def line(**kw):
        return [x.found for x in mem(check_memory(kimi(**graphs, **kw)), "info") if "runtime states" in x.found][0]

    assert "taken to vocab 163840 and bs 512" in line()
    assert "taken to vocab 163840 and bs 100" in line(max_running_requests=100) and "bs 512" not in line(
        max_running_requests=100)
    assert line(max_running_requests=1000) == line()
