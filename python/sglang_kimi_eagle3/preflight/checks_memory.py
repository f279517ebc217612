"""Preflight: do the weights fit per GPU, and how many KV tokens remain? Pure (see memory.py for the model)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..configs import ModelInfo, read_json
from .memory import (
    GIB,
    MIB,
    MM_RESERVATION_GIB,
    PRELOAD_OVERHEAD_GIB,
    SGLANG_ALLOWANCE_FLOOR_GIB,
    Weights,
    config_weights,
    draft_kv_bytes_per_token,
    gib,
    kv_dtype_bytes,
    target_kv_bytes_per_token,
    tensor_weights,
    with_index_total,
)
from .model import Deployment, Finding

TP_CHOICES = (1, 2, 4, 8, 16, 32)


@dataclass(slots=True)
class MemoryBudget:
    """One GPU of the deployment, in bytes (per TP rank)."""

    tp: int
    gpu_total: float
    fraction: float
    static: float  # fraction x (total - PRELOAD_OVERHEAD_GIB): weights + KV pool
    allowance: float  # the rest of the free memory: activations, CUDA graphs, communicator buffers
    target_weights: float
    draft_weights: float
    mm_reservation: float
    kv_cell: float  # bytes per token SGLang divides the KV budget by (target + draft at the target's size)
    draft_kv_real: float  # the draft's own KV bytes per token (0 without a draft)
    draft_kv_assumed: float  # what SGLang counts for the draft's layers
    target_source: str
    draft_source: str

    @property
    def weights(self) -> float:
        return self.target_weights + self.draft_weights

    @property
    def kv_budget(self) -> float:
        return self.static - self.weights - self.mm_reservation

    @property
    def kv_tokens(self) -> int:
        return max(0, int(self.kv_budget // self.kv_cell)) if self.kv_cell > 0 else 0


def vision_config_of(target: ModelInfo) -> dict | None:
    """The outer config's vision_config (a multimodal target's tower and SGLang's reservation), else None."""
    from pathlib import Path

    outer = read_json(Path(target.file))
    return outer.get("vision_config") if isinstance(outer.get("vision_config"), dict) else None


def memory_deployment(target: ModelInfo, draft: ModelInfo | None, *, gpu_memory_mib: float, gpu_memory_source: str,
                      tp: int, mem_fraction_static: float, kv_cache_dtype: str = "auto",
                      algorithm: str | None = "EAGLE3") -> Deployment:
    """A Deployment carrying only what `budget` reads (config-only checkpoints: no weights beside the configs),
    for callers that name a deployment without launching it (`plan`'s profiles)."""
    return Deployment(target=target, draft=draft, algorithm=algorithm if draft is not None else None, steps=None,
                      topk=None, draft_tokens=None, tp=tp, gpu_memory_mib=gpu_memory_mib,
                      gpu_memory_source=gpu_memory_source, mem_fraction_static=mem_fraction_static,
                      mem_fraction_given=True, kv_cache_dtype=kv_cache_dtype,
                      target_vision_config=vision_config_of(target))


def target_weights(d: Deployment) -> Weights:
    w = config_weights(d.target, vision_config=d.target_vision_config)
    return with_index_total(w, d.target_index_bytes) if d.target_index_bytes else w


def draft_weights(d: Deployment) -> Weights | None:
    if d.draft is None:
        return None
    eagle3 = d.draft.is_eagle3_draft
    if d.draft_tensor_shapes:
        return tensor_weights(d.draft_tensor_shapes, d.draft.torch_dtype, eagle3_draft=eagle3)
    return config_weights(d.draft, eagle3_draft=eagle3)


def budget(d: Deployment, tp: int | None = None, fraction: float | None = None) -> MemoryBudget | None:
    """The per-GPU budget of this deployment (at another TP size or fraction when given); None when the GPU's
    memory or the fraction is unknown."""
    if d.gpu_memory_mib is None or (fraction or d.mem_fraction_static) is None:
        return None
    tp = tp or d.tp
    frac = fraction or d.mem_fraction_static
    total = d.gpu_memory_mib * MIB
    pre = total - PRELOAD_OVERHEAD_GIB * GIB
    tw = target_weights(d)
    dw = draft_weights(d)
    elem = kv_dtype_bytes(d.kv_cache_dtype, d.target.torch_dtype)
    cell_t = target_kv_bytes_per_token(d.target, elem, tp)
    draft_layers = d.draft.num_hidden_layers if d.draft is not None and d.algorithm in ("EAGLE", "EAGLE3") else 0
    assumed = int(cell_t * draft_layers / d.target.num_hidden_layers) if draft_layers else 0
    real = draft_kv_bytes_per_token(d.draft, elem, tp) if draft_layers else 0
    return MemoryBudget(
        tp=tp, gpu_total=total, fraction=frac, static=pre * frac, allowance=pre * (1 - frac),
        target_weights=tw.per_gpu(tp), draft_weights=dw.per_gpu(tp) if dw else 0.0,
        mm_reservation=MM_RESERVATION_GIB * GIB if d.target_vision_config else 0.0,
        kv_cell=cell_t + assumed, draft_kv_real=real, draft_kv_assumed=assumed,
        target_source=tw.source, draft_source=dw.source if dw else "",
    )


def _tp_fix(d: Deployment, b: MemoryBudget, min_tokens: int = 4096) -> str:
    """The smallest larger --tp-size that divides the heads and leaves a KV pool of at least `min_tokens`,
    with its numbers."""
    for n in TP_CHOICES:
        if n <= b.tp or d.target.num_attention_heads % n:
            continue
        nb = budget(d, tp=n)
        if nb is not None and nb.kv_budget > 0 and nb.kv_tokens >= min_tokens:
            nodes = f" --nnodes {n // 8} (8 GPUs per node)" if n > 8 else ""
            return (f"--tp-size {n}{nodes} ({gib(nb.weights)} of weights per GPU, a KV pool of {nb.kv_tokens} tokens "
                    f"at {nb.fraction:.3f})")
    return "a GPU with more memory, or more GPUs"


def check_memory(d: Deployment) -> list[Finding]:
    if d.gpu_memory_mib is None:
        return [Finding("info", "memory", f"memory fit not checked: {d.gpu_memory_source or 'GPU memory unknown'}",
                        "", "--for-gpu H200 | B200 | H100 | 'RTX PRO 6000' (a GPU model, not only an architecture)")]
    b = budget(d)
    if b is None:
        return [Finding("info", "memory", "memory fit not checked: --mem-fraction-static was not resolved")]
    frac_src = "--mem-fraction-static" if d.mem_fraction_given else "SGLang's default for this GPU"
    gpu = f"{d.gpu_memory_source}: {gib(b.gpu_total)}"
    where = (f"static pool {b.fraction:.3f} ({frac_src}) x {gib(b.gpu_total - PRELOAD_OVERHEAD_GIB * GIB)} free "
             f"before load ({gpu}, less {PRELOAD_OVERHEAD_GIB:.0f} GiB CUDA context/NCCL) = {gib(b.static)} per GPU")
    need = (f"weights {gib(b.weights)} per GPU at --tp-size {b.tp} (target {gib(b.target_weights)} from "
            f"{b.target_source}" + (f"; draft {gib(b.draft_weights)} from {b.draft_source}" if b.draft_weights else "")
            + ")")
    out: list[Finding] = []
    if b.kv_budget <= 0:
        fix = _tp_fix(d, b)
        pre = b.gpu_total - PRELOAD_OVERHEAD_GIB * GIB
        f_need = (b.weights + b.mm_reservation) / pre
        alt = ""
        if f_need < 0.93:
            alt = f"; --mem-fraction-static {min(0.95, f_need + 0.03):.2f} would hold the weights only by shrinking " \
                  "the activation/CUDA-graph allowance"
        what = ("CUDA runs out of memory while the weights load" if b.weights > pre else
                "SGLang loads the weights, then stops ('Loaded weights leave no GPU memory for the KV cache')")
        return [Finding("error", "memory", f"{need} > {where}: {what}",
                        f"weights + KV cache within the static pool (needed {gib(b.weights + b.mm_reservation)} for "
                        f"weights alone, available {gib(b.static)})", fix + alt)]
    ctx = d.context_length or d.target.derived_context
    tokens = b.kv_tokens
    cell = f"{b.kv_cell:.0f} B/token: target {b.kv_cell - b.draft_kv_assumed:.0f}" + \
        (" (MLA latent, whole on every rank)" if d.target.is_mla else "") + \
        (f" + draft {b.draft_kv_assumed:.0f}" if b.draft_kv_assumed else "")
    bs = d.max_running_requests or d.cuda_graph_max_bs
    per_req = f"; at {bs} running requests ({'--max-running-requests' if d.max_running_requests else 'the decode CUDA-graph batch'}) " \
              f"{tokens // bs} tokens each" if bs else ""
    line = (f"{need}; {where}; KV pool {gib(b.kv_budget)} = {tokens} tokens ({cell}) = "
            f"{tokens / ctx:.2f} x the served context {ctx}{per_req}")
    if tokens < ctx:
        fix = f"--context-length {max(1024, tokens // 1024 * 1024)}"
        if d.kv_cache_dtype in ("auto", "bfloat16", "float16"):
            fp8 = budget(replace(d, kv_cache_dtype="fp8_e4m3"))
            fix += ", or --kv-cache-dtype fp8_e4m3" + (
                " (half the bytes per token)" if fp8.kv_tokens >= ctx else
                f" --context-length {max(1024, fp8.kv_tokens // 1024 * 1024)} (half the bytes per token: "
                f"{fp8.kv_tokens} tokens)")
        bigger = _tp_fix(d, b, min_tokens=ctx)
        if bigger.startswith("--tp-size"):
            fix += f", or {bigger}"
        out.append(Finding("warning", "memory", line, f"a KV pool of at least one full context ({ctx} tokens); a "
                           "request longer than the pool is refused or evicts every other request", fix))
    else:
        out.append(Finding("info", "memory", line))
    if b.draft_kv_real > b.draft_kv_assumed:
        extra = tokens * (b.draft_kv_real - b.draft_kv_assumed)
        sev = "warning" if extra > b.allowance / 2 else "info"
        out.append(Finding(sev, "memory", f"the draft's own KV is {b.draft_kv_real:.0f} B/token per GPU but SGLang sizes "
                           f"the pool counting {b.draft_kv_assumed:.0f} (the target's per-layer size): {gib(extra)} "
                           f"more than the static pool, taken from the {gib(b.allowance)} allowance",
                           "" if sev == "info" else "the draft's KV inside the allowance",
                           "" if sev == "info" else "--mem-fraction-static lower by "
                           f"{extra / (b.gpu_total - PRELOAD_OVERHEAD_GIB * GIB):.2f}"))
    out += adaptive_states(d)
    if d.mem_fraction_given and b.gpu_total > 60 * GIB and b.allowance < SGLANG_ALLOWANCE_FLOOR_GIB * GIB:
        out.append(Finding("warning", "memory", f"--mem-fraction-static {b.fraction} leaves {gib(b.allowance)} for "
                           f"activations, CUDA graphs and communicator buffers", f">= {SGLANG_ALLOWANCE_FLOOR_GIB:.0f} GiB "
                           "(SGLang's own floor on GPUs over 60 GB)",
                           f"--mem-fraction-static {1 - SGLANG_ALLOWANCE_FLOOR_GIB * GIB / (b.gpu_total - PRELOAD_OVERHEAD_GIB * GIB):.2f}"
                           " or leave it out (SGLang derives it)"))
    return out


def adaptive_states(d: Deployment) -> list[Finding]:
    """Adaptive speculation: one runtime state per candidate step (its own CUDA graphs and buffers), on top of the
    static pool; their memory is modelled (planner/adaptive_table.state_memory_gb), not measured here. Where this
    plugin's adaptive default was refused for that memory, the launch runs the fixed chain: a warning with the fix."""
    if d.adaptive_kept:
        return [Finding("warning", "adaptive", "adaptive steps, this plugin's default for chain launches (speculation "
                        "drops to SGLang's off-state where it does not pay), stay off: " + d.adaptive_kept["found"]
                        + "; the launch runs its fixed chain, slower than plain decoding where drafting does not pay",
                        "adaptive steps on, their extra runtime states within the budget", d.adaptive_kept["fix"])]
    capped = []
    if d.adaptive_capped:
        top = d.adaptive_capped["top"]
        capped = [Finding("warning", "adaptive", "adaptive steps, this plugin's default for chain launches (speculation "
                          "drops to SGLang's off-state where it does not pay), run " + d.adaptive_capped["found"]
                          + f"; above batch {top} the launch runs its fixed chain, slower than plain decoding where "
                          "drafting does not pay", "adaptive steps at every batch, their extra runtime states within the "
                          "budget", d.adaptive_capped["fix"])]
    if not d.adaptive or not d.adaptive_table:
        return capped
    from .memory import adaptive_memory_lines as memory_lines, adaptive_states as states, captured_graph_bs

    top = d.cuda_graph_max_bs or 128
    graph_bs = d.cuda_graph_bs or [b for b in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512) if b < top] + [top]
    graph_bs = captured_graph_bs(graph_bs, d.max_running_requests)
    lines = memory_lines(d.adaptive_table, d.target.vocab_size, graph_bs, d.steps)
    return capped + [Finding("info", "memory", f"adaptive speculation builds {len(states(d.adaptive_table))} runtime "
                             f"states (one per candidate step), modelled: " + "; ".join(lines))] + _over_budget(d, graph_bs)


def _over_budget(d: Deployment, graph_bs: list[int]) -> list[Finding]:
    """A table that is not this plugin's (SGLang's default under a bare --speculative-adaptive, or an operator's file)
    held to the budget this plugin's own table keeps: its states are built after every weight has loaded, and SGLang's
    default table at Kimi's vocabulary models at tens of GB. A warning: the operator's choice is served as asked."""
    from ..base import ENV_ADAPTIVE_MAX_GB, adaptive_max_gb
    from ..errors import UserError
    from .memory import adaptive_extra_gb, captured_graph_bs

    cfg, vocab = d.adaptive_table, d.target.vocab_size
    if d.adaptive_ours:
        return []  # the table the launch step wrote for this launch: within the budget, or capped (the warning above)
    try:
        budget = adaptive_max_gb()
    except UserError:
        return []  # the variable itself is refused before this runs
    extra = adaptive_extra_gb(cfg, vocab, graph_bs, d.steps)
    if extra <= budget:
        return []
    fit = ""
    for top in sorted((b for b in graph_bs if b < max(graph_bs)), reverse=True):
        smaller = captured_graph_bs([b for b in graph_bs if b <= top], d.max_running_requests)
        gb = adaptive_extra_gb(cfg, vocab, smaller, d.steps)
        if gb <= budget:
            fit = (f", or --cuda-graph-max-bs-decode {top} (these states then model at {gb:.1f} GB; batches above {top} "
                   "run without CUDA graphs)")
            break
    return [Finding("warning", "adaptive", f"this launch's adaptive table (not this plugin's: SGLang's default under "
                    f"--speculative-adaptive, or --speculative-adaptive-config) builds runtime states modelled at "
                    f"{extra:.1f} GB per GPU beside the launch's own, at vocab {vocab} and CUDA-graph batches up to "
                    f"{max(graph_bs)}: SGLang builds them after every weight has loaded, and a GPU beside a large "
                    "target's weights and KV pool has a few GB left there",
                    f"the extra runtime states within {ENV_ADAPTIVE_MAX_GB} ({budget:g} GB)",
                    ("" if d.adaptive_default_off else "leave out --speculative-adaptive and "
                     "--speculative-adaptive-config: this plugin then serves the chain launch with its own adaptive "
                     "table, within the budget, or ") + fit.removeprefix(", or ")
                    + (", or " if fit else "") + f"{ENV_ADAPTIVE_MAX_GB} set to the GB the GPU can spare")]
