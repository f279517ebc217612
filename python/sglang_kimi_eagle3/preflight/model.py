"""Preflight data: what a check receives (Deployment) and what it returns (Finding). Pure."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..configs import ModelInfo
from .checkpoint import DraftWeights

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
class SglangFacts:
    """What the installed SGLang itself says about this launch, as plain data: gathered by
    integration/preflight/sglang_facts.py from SGLang's own classes and functions (None: could not be derived)."""

    draft_class: str | None = None  # the class SGLang's get_model_architecture picks for the draft
    draft_class_error: str | None = None  # why it picks none (the architecture is not registered)
    tree_capacity: int | None = None  # most --speculative-num-draft-tokens organize_draft_results takes (topk > 1)
    context_override: bool = False  # SGLang reads SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN as set (or runs in CI)
    use_aux: bool | None = None  # eagle_config.use_aux_hidden_state as SGLang reads it (default true)
    capture_ids: list | None = None  # the eagle_config ids SGLang hands the target (None: the target's default)
    captured_layers: list[int] | None = None  # what the target class's set_eagle3_layers_to_capture makes of them
    top_level_ids: list | None = None  # a top-level eagle_aux_hidden_state_layer_ids (the target ignores it)
    draft_input_width: int | None = None  # get_draft_input_from_target_hidden_dim: the aux buffer width
    fc_in_features: int | None = None  # the in-width of the fc SGLang builds for this draft class
    notes: list[str] = field(default_factory=list)  # facts that could not be derived, and why


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
    ep_size: int = 1  # --ep-size after SGLang's resolution
    dcp_size: int = 1  # --dcp-size
    context_length: int | None = None  # --context-length
    context_policy: str = "auto"
    gpu: GpuTarget | None = None
    # Attention backends after SGLang's own resolution for `gpu` (None where not resolved)
    target_decode_backend: str | None = None
    target_prefill_backend: str | None = None
    draft_backend_flag: str | None = None  # --speculative-draft-attention-backend
    page_size: int | None = None
    device: str | None = None  # --device as written (None: SGLang detects the platform)
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
    sglang: SglangFacts | None = None  # SGLang's own verdicts (None: pure callers, or SGLang refused first)
    draft_weights: DraftWeights | None = None  # the draft folder's weights (None: no weights beside the config)
    draft_tokens_typed: int | None = None  # --speculative-num-draft-tokens as typed (draft_tokens: as resolved)
    adaptive: bool = False  # --speculative-adaptive in effect after SGLang's resolution
    adaptive_table: dict | None = None  # the adaptive config SGLang will load (its default table when no file)
    adaptive_kept: dict | None = None  # our adaptive default refused for memory: {"found", "fix"} (integration/adaptive_default.py)
    adaptive_capped: dict | None = None  # our adaptive default only up to a batch, for memory: {"found", "fix", "top"}
    adaptive_ours: bool = False  # the adaptive table in effect is the one this plugin's launch step wrote for this launch
    adaptive_default_off: str | None = None  # why this plugin's adaptive default would not serve this launch even
    #   without the operator's adaptive flags (None: it would; adaptive_default.decide less those flags)
    cuda_graph_bs: list[int] | None = None  # the decode CUDA-graph batch sizes, where resolved
    same_model_folder: bool = False  # the draft path names the target's own folder
