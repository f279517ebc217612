"""Preflight: (target, draft, flags) -> every finding at once. Pure: no sglang import.

integration/preflight/inputs.py turns a launch (SGLang's own parsed and resolved server args) into a
`Deployment`; `run_checks` runs every check on it and returns all findings, errors first.
"""

from __future__ import annotations

from .checks_draft import check_aux_agreement, check_draft_class, check_draft_weights, check_same_model
from .checks_launch import check_aux_layers, check_context, check_launch_flags, check_sglang_error, check_spec_params, check_tensor_parallel
from .checks_memory import check_memory
from .checks_model import check_algorithm, check_capture_support, check_dtype_quant, check_hidden, check_trust_remote_code, check_vocab
from .checks_platform import check_attention_backend, check_platform
from .model import Deployment, Finding, GpuTarget, SglangFacts

CHECKS = (
    check_sglang_error,
    check_same_model,
    check_draft_class,
    check_algorithm,
    check_capture_support,
    check_hidden,
    check_vocab,
    check_aux_layers,
    check_aux_agreement,
    check_draft_weights,
    check_context,
    check_spec_params,
    check_launch_flags,
    check_tensor_parallel,
    check_attention_backend,
    check_dtype_quant,
    check_trust_remote_code,
    check_platform,
    check_memory,
)
_ORDER = {"error": 0, "warning": 1, "info": 2}


def run_checks(d: Deployment) -> list[Finding]:
    """Every finding of every check, errors first (stable within a severity)."""
    findings: list[Finding] = []
    for check in CHECKS:
        findings.extend(check(d))
    return sorted(findings, key=lambda f: _ORDER[f.severity])


def has_errors(findings: list[Finding]) -> bool:
    return any(f.severity == "error" for f in findings)


def summary(findings: list[Finding]) -> str:
    n = {s: sum(f.severity == s for f in findings) for s in _ORDER}
    return f"{n['error']} error(s), {n['warning']} warning(s), {n['info']} info"


__all__ = ["Deployment", "Finding", "GpuTarget", "SglangFacts", "run_checks", "has_errors", "summary", "CHECKS"]
