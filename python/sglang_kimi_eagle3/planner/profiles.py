"""Bundled hardware profiles (data in planner/profiles/*.json) and their loader (pure).

Every number in a profile is `{"value": ..., "source": "..."}` or `{"value": ..., "assumption": "..."}`;
the loader refuses a number without one, so a profile always says where each figure came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..configs import read_json
from ..errors import UserError

DIR = Path(__file__).parent / "profiles"
DEFAULT_PROFILE = "kimi-k2.5_8xrtxpro6000_tp8"  # the embedded default deployment (profiles/__init__.py)

_HW_KEYS = ("mem_GBps", "mem_efficiency", "bf16_tflops", "compute_efficiency", "allreduce_latency_us",
            "allreduce_GBps", "layer_overhead_us")
_PASS_KEYS = ("layers", "pass_overhead_us", "static_bytes_per_gpu", "moe_layers", "experts", "experts_per_token",
              "expert_bytes_per_gpu", "kv_bytes_per_ctx_token", "gemm_flops_per_token", "attn_flops_per_ctx_token",
              "allreduces", "allreduce_bytes_per_token", "tail_us")


@dataclass(slots=True)
class Hardware:
    mem_GBps: float
    mem_efficiency: float
    bf16_tflops: float
    compute_efficiency: float
    allreduce_latency_us: float
    allreduce_GBps: float
    layer_overhead_us: float


@dataclass(slots=True)
class PassModel:
    """Per-GPU cost figures of one model's forward pass (target or draft) under TP."""
    layers: float
    pass_overhead_us: float
    static_bytes_per_gpu: float
    moe_layers: float
    experts: float
    experts_per_token: float
    expert_bytes_per_gpu: float
    kv_bytes_per_ctx_token: float
    gemm_flops_per_token: float
    attn_flops_per_ctx_token: float
    allreduces: float
    allreduce_bytes_per_token: float
    tail_us: float


@dataclass(slots=True)
class Profile:
    name: str
    title: str
    hardware: Hardware
    target: PassModel
    draft: PassModel
    verify_us: dict[int, float]  # verified tokens (bs x tokens per request) -> us
    context_tokens: int
    acceptance_preset: str | None
    provenance: dict[str, str] = field(default_factory=dict)  # "hardware.mem_GBps" -> "source: ..." / "ASSUMPTION: ..."
    path: str = ""

    def assumptions(self) -> list[str]:
        return [k for k, v in self.provenance.items() if v.startswith("ASSUMPTION")]


def names() -> list[str]:
    return sorted(p.stem for p in DIR.glob("*.json"))


def _number(doc: dict, key: str, where: str, prov: dict, path: str):
    node = doc.get(key)
    if not isinstance(node, dict) or "value" not in node:
        raise UserError(f"{path}: {where}.{key} is missing or not {{'value': ..., 'source'|'assumption': ...}}")
    src, ass = node.get("source"), node.get("assumption")
    if bool(src) == bool(ass):
        raise UserError(f"{path}: {where}.{key} must carry exactly one non-empty 'source' or 'assumption'")
    prov[f"{where}.{key}"] = f"source: {src}" if src else f"ASSUMPTION: {ass}"
    return node["value"]


def load(name_or_path: str) -> Profile:
    """A bundled profile by name (see `names()`) or a profile JSON file by path."""
    p = DIR / f"{name_or_path}.json"  # a bundled name first (names contain dots: "kimi-k2.5_...")
    if not p.is_file():
        p = Path(name_or_path)
    if not p.is_file():
        raise UserError(f"hardware profile {name_or_path!r} not found; bundled: {', '.join(names())} (or pass a JSON path)")
    doc = read_json(p)
    prov: dict[str, str] = {}
    path = str(p)
    try:
        hw = Hardware(**{k: float(_number(doc["hardware"], k, "hardware", prov, path)) for k in _HW_KEYS})
        target = PassModel(**{k: float(_number(doc["target"], k, "target", prov, path)) for k in _PASS_KEYS})
        draft = PassModel(**{k: float(_number(doc["draft"], k, "draft", prov, path)) for k in _PASS_KEYS})
    except KeyError as exc:
        raise UserError(f"{path}: section {exc} is missing (needs hardware, target, draft)") from None
    verify = {int(k): float(v) for k, v in _number(doc, "verify_us", "profile", prov, path).items()}
    ctx = int(_number(doc, "context_tokens", "profile", prov, path))
    return Profile(doc.get("name", p.stem), doc.get("title", ""), hw, target, draft, verify, ctx,
                   doc.get("acceptance_preset"), prov, path)
