"""Preflight data: what a check receives (Deployment) and what it returns (Finding). Pure."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..configs import ModelInfo

SEVERITIES = ("error", "warning", "info")


@dataclass(slots=True)
class Finding:
    severity: str  # error | warning | info
    check: str  # short id: "algorithm", "vocab", ...
    found: str  # what was found
    expected: str = ""  # what was expected
    fix: str = ""  # the exact flag / env / policy that fixes it ("" for info)

    def __post_init__(self):
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity {self.severity!r} not in {SEVERITIES}")

    def one_line(self) -> str:
        parts = [f"[{self.severity}] {self.check}: {self.found}"]
        if self.expected:
            parts.append(f"expected: {self.expected}")
        if self.fix:
            parts.append(f"fix: {self.fix}")
        return " | ".join(parts)

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(slots=True)
class GpuTarget:
    """The GPU the deployment will run on (not necessarily this machine's)."""

    name: str  # "NVIDIA RTX PRO 6000 Blackwell", "sm90 (assumed)", ...
    sm: int  # 90, 100, 120 ...
    how: str  # "local GPU", "--for-gpu sm120", "assumed: no local GPU", "embedded default"

    @property
    def is_sm120(self) -> bool:
        return self.sm // 10 == 12


@dataclass(slots=True)
class Deployment:
    """Everything preflight looks at, already resolved into plain values by integration/."""

    target: ModelInfo
    draft: ModelInfo | None
    algorithm: str | None  # as the operator wrote it (--speculative-algorithm), upper-cased
    steps: int | None  # as written (None: SGLang auto-chooses)
    topk: int | None
    draft_tokens: int | None
    tp: int = 1
    context_length: int | None = None  # --context-length
    context_policy: str = "auto"
    gpu: GpuTarget | None = None
    # Attention backends after SGLang's own resolution for `gpu` (None where not resolved)
    target_decode_backend: str | None = None
    target_prefill_backend: str | None = None
    draft_backend_flag: str | None = None  # --speculative-draft-attention-backend
    page_size: int | None = None
    dtype: str = "auto"
    quantization: str | None = None  # --quantization
    draft_quantization: str | None = None  # --speculative-draft-model-quantization
    trust_remote_code: bool = False
    use_rejection_sampling: bool = False
    cuda_graph_disabled: bool = False
    custom_all_reduce_disabled: bool = False
    # Installed SGLang facts
    target_class_methods: dict[str, bool] | None = None  # method -> present on the class SGLang builds
    hook_states: dict[str, tuple[str, str]] = field(default_factory=dict)  # hook -> (state, detail)
    # Draft weights (None: no weights next to the config)
    draft_tensor_shapes: dict[str, list[int]] | None = None
    sglang_error: str | None = None  # SGLang's own resolution refused the launch with this message
    rope_margin: int = 0
    context_hook_active: bool = True  # this plugin's context_policy hook will run in the scheduler
    global_override_set: bool = False  # SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN is set
    # Memory fit (checks_memory.py); None where unknown
    gpu_memory_mib: float | None = None  # the target GPU's total memory (nvidia-smi memory.total)
    gpu_memory_source: str = ""  # "this machine's GPU", "RTX PRO 6000 Blackwell (96 GB)", or why unknown
    mem_fraction_static: float | None = None  # after SGLang's resolution (its default when not given)
    mem_fraction_given: bool = False  # the operator wrote --mem-fraction-static
    kv_cache_dtype: str = "auto"
    target_vision_config: dict | None = None  # the outer config's vision_config (multimodal targets)
    target_index_bytes: int | None = None  # model.safetensors.index.json metadata.total_size, weights present
    cuda_graph_max_bs: int | None = None  # SGLang's decode CUDA-graph batch limit for this GPU
    max_running_requests: int | None = None  # --max-running-requests as written
