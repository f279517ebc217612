"""Preflight checks that depend on the GPU: the draft's attention backend, SM120 notes. Pure."""

from __future__ import annotations

from ..configs import MLA_DRAFT_ARCHS
from .model import Deployment, Finding

# Backends SGLang 0.5.23's DraftBackendFactory can build for a draft (speculative/draft_utils.py
# create_decode_backend / create_draft_extend_backend); any other name fails at start with
# "EAGLE is not supported in ... attention backend".
DRAFT_BACKENDS = {"flashinfer", "triton", "intel_amx", "intel_xpu", "aiter", "fa3", "hybrid_linear_attn", "flashmla",
                  "trtllm_mha", "trtllm_mla", "cutedsl_mla", "dsa", "nsa", "ascend", "fa4", "dsv4"}
# Backends that only implement MLA (latent KV): an MHA drafter (LlamaForCausalLMEagle3) on them crashes at
# start - SGLang #23490: Kimi-K2.6 + EAGLE-3 draft inherited the target's trtllm_mla.
MLA_ONLY = {"trtllm_mla", "flashmla", "cutedsl_mla", "dsa", "nsa", "dsv4"}
# Backends that only implement MHA: an MLA drafter (Eagle3DeepseekV2ForCausalLM) cannot use them.
MHA_ONLY = {"trtllm_mha"}
# Where each backend runs (compute capability majors): FA3 is Hopper-only; trtllm_mla and cutedsl_mla
# are SM100-only (model_overrides/deepseek_v2.py); FlashMLA covers SM90 and SM100.
BACKEND_ARCH = {"fa3": {9}, "trtllm_mla": {10}, "cutedsl_mla": {10}, "flashmla": {9, 10}}


def recommended_draft_backend(sm: int, mla_draft: bool) -> str:
    """A draft backend that works on this GPU for this drafter kind."""
    major = sm // 10
    if mla_draft:
        return {9: "fa3", 10: "flashinfer"}.get(major, "triton")
    return {9: "fa3", 10: "flashinfer"}.get(major, "triton")


def _draft_backends(d: Deployment) -> list[tuple[str, str]]:
    """(phase, backend) pairs the draft will run with, per SGLang's DraftBackendFactory."""
    if d.draft_backend_flag:
        return [("draft decode+extend", d.draft_backend_flag)]
    out = []
    if d.target_decode_backend:
        out.append(("draft decode (inherited from the target's decode backend)", d.target_decode_backend))
    if d.target_prefill_backend and d.target_prefill_backend != d.target_decode_backend:
        out.append(("draft extend (inherited from the target's prefill backend)", d.target_prefill_backend))
    return out


def check_attention_backend(d: Deployment) -> list[Finding]:
    dr = d.draft
    if dr is None or d.algorithm not in ("EAGLE", "EAGLE3"):
        return []
    pairs = _draft_backends(d)
    if not pairs:
        return [Finding("info", "attention_backend", "target backends not resolved: draft backend not checked")]
    mla = dr.arch in MLA_DRAFT_ARCHS or dr.is_mla
    sm = d.gpu.sm if d.gpu else 90
    fix = f"--speculative-draft-attention-backend {recommended_draft_backend(sm, mla)}"
    out = []
    for phase, be in pairs:
        kind = "MLA" if mla else "MHA"
        if be not in DRAFT_BACKENDS:
            out.append(Finding("error", "attention_backend", f"{phase}: {be}", "a backend SGLang can build for an EAGLE "
                               "draft", fix))
        elif not mla and be in MLA_ONLY:
            out.append(Finding("error", "attention_backend", f"{phase}: {be} (MLA-only) for the {kind} drafter {dr.arch}",
                               "an MHA-capable draft backend (SGLang #23490: crash at start)", fix))
        elif mla and be in MHA_ONLY:
            out.append(Finding("error", "attention_backend", f"{phase}: {be} (MHA-only) for the MLA drafter {dr.arch}",
                               "an MLA-capable draft backend", fix))
        elif be in BACKEND_ARCH and sm // 10 not in BACKEND_ARCH[be]:
            out.append(Finding("error", "attention_backend", f"{phase}: {be} on sm{sm}",
                               f"{be} runs on sm{'/sm'.join(str(m * 10) for m in sorted(BACKEND_ARCH[be]))} only", fix))
        else:
            out.append(Finding("info", "attention_backend", f"{phase}: {be} (supports the {kind} drafter on sm{sm})"))
    return out


def check_platform(d: Deployment) -> list[Finding]:
    """SM120 (RTX PRO 6000 Blackwell, RTX 5090) notes - only when the deployment targets SM120."""
    if d.gpu is None or not d.gpu.is_sm120:
        return []
    out = []
    backends = {b for _, b in _draft_backends(d)} | {d.target_decode_backend, d.target_prefill_backend}
    if "flashinfer" in backends and not d.cuda_graph_disabled:
        out.append(Finding("warning", "platform_sm120", "flashinfer attention with CUDA-graph replay on sm_120: SGLang "
                           "#24361 (illegal memory access in flashinfer prefill plan during speculative verify replay, "
                           "RTX PRO 6000)", "triton attention on SM120 (SGLang's MLA default there)",
                           "--attention-backend triton --speculative-draft-attention-backend triton"))
    if d.tp > 1 and not d.custom_all_reduce_disabled:
        out.append(Finding("warning", "platform_sm120", f"tp {d.tp} on sm_12x with SGLang's custom all-reduce allowed: "
                           "custom all-reduce has crashed during CUDA-graph capture on sm_12x PCIe boxes (vLLM #47751; "
                           "capture blockers vLLM #47266), and on PCIe without NVLink it gains little",
                           "NCCL all-reduce on PCIe-only SM120 boxes", "--disable-custom-all-reduce"))
    out.append(Finding("info", "platform_sm120", "SM120 kernels: <= 99 KB shared memory per block, no wgmma; this "
                       "plugin's Triton launch tables for sm120 are compile-verified, not measured (no Blackwell here)"))
    return out
