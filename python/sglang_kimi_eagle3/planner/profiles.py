"""Bundled hardware profiles (data in planner/profiles/*.json) and their loader (pure).

Every number in a profile is `{"value": ..., "source": "..."}` or `{"value": ..., "assumption": "..."}`;
the loader refuses a number without one, so a profile always says where each figure came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..documents import read_document, refuse_unknown_keys, require_object
from ..errors import UserError
from ..validate import check_float, check_int, show

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
    deployment: dict | None = None  # the launch the numbers describe (capacity.check_deployment): its KV pool

    def assumptions(self) -> list[str]:
        return [k for k, v in self.provenance.items() if v.startswith("ASSUMPTION")]


def names() -> list[str]:
    return sorted(p.stem for p in DIR.glob("*.json"))


# key -> (lowest allowed, open at the bottom?, highest allowed): a profile number outside is unusable input
_RANGES = {"mem_GBps": (0, True, None), "mem_efficiency": (0, True, 1), "bf16_tflops": (0, True, None),
           "compute_efficiency": (0, True, 1), "allreduce_GBps": (0, True, None)}


def _number(doc, key: str, where: str, prov: dict, path: str):
    if not isinstance(doc, dict):
        raise UserError(f"{path}: section {where!r} = {show(doc)}; expected an object")
    node = doc.get(key)
    if not isinstance(node, dict) or "value" not in node:
        raise UserError(f"{path}: {where}.{key} is missing or not {{'value': ..., 'source'|'assumption': ...}}")
    src, ass = node.get("source"), node.get("assumption")
    if bool(src) == bool(ass) or not isinstance(src or ass, str):
        raise UserError(f"{path}: {where}.{key} must carry exactly one non-empty 'source' or 'assumption' string")
    prov[f"{where}.{key}"] = f"source: {src}" if src else f"ASSUMPTION: {ass}"
    return node["value"]


def _float(doc, key: str, where: str, prov: dict, path: str) -> float:
    lo, lo_open, hi = _RANGES.get(key, (0, False, None))  # default: a finite number >= 0
    return check_float(_number(doc, key, where, prov, path), path, f"{where}.{key}.value", lo=lo, hi=hi,
                       lo_open=lo_open, fix="fix the profile")


def _verify_table(value, path: str) -> dict[int, float]:
    where = "verify_us.value"
    if not isinstance(value, dict) or not value:
        raise UserError(f"{path}: field {where!r} = {show(value)}; expected a non-empty object {{verified tokens: us}}")
    out = {}
    for k, v in value.items():
        if not str(k).isdigit() or int(k) < 1:
            raise UserError(f"{path}: field {where!r} has key {k!r}; expected positive token counts such as \"32\"")
        out[int(k)] = check_float(v, path, f"{where}.{k}", lo=0)
    return out


def load(name_or_path: str, where: str | None = None) -> Profile:
    """A bundled profile by name (see `names()`) or a profile JSON file by path; every number checked. `where`: the flag
    or variable that named it, for every refusal line."""
    p = DIR / f"{name_or_path}.json"  # a bundled name first (names contain dots: "kimi-k2.5_...")
    if not p.is_file():
        p = Path(name_or_path)
    if not p.exists() and not p.is_symlink():
        raise UserError(f"{where + ': ' if where else ''}hardware profile {name_or_path!r} not found; bundled: "
                        f"{', '.join(names())} (or pass a JSON path)")
    return read_document(p, "hardware profile", _parse, hint=f"bundled: {', '.join(names())} (or pass a JSON path)",
                         flag=where)


_TOP_KEYS = ("name", "title", "model_note", "acceptance_preset", "context_tokens", "hardware", "target", "draft",
             "verify_us", "anchors", "deployment")
_NODE_KEYS = ("value", "source", "assumption")


def _parse(doc, path: str) -> Profile:
    p = Path(path)
    require_object(doc, path)
    refuse_unknown_keys(doc, _TOP_KEYS, path, "the profile")
    for sec, keys in (("hardware", _HW_KEYS), ("target", _PASS_KEYS), ("draft", _PASS_KEYS)):
        node = doc.get(sec)
        if isinstance(node, dict):
            refuse_unknown_keys(node, keys, path, f"section {sec!r}")
            for k, v in node.items():
                if isinstance(v, dict):
                    refuse_unknown_keys(v, _NODE_KEYS, path, f"{sec}.{k}")
    for k in ("context_tokens", "verify_us", "deployment"):
        if isinstance(doc.get(k), dict):
            refuse_unknown_keys(doc[k], _NODE_KEYS, path, k)
    prov: dict[str, str] = {}
    for sec in ("hardware", "target", "draft"):
        if sec not in doc:
            raise UserError(f"{path}: section '{sec}' is missing (needs hardware, target, draft)")
    hw = Hardware(**{k: _float(doc["hardware"], k, "hardware", prov, path) for k in _HW_KEYS})
    target = PassModel(**{k: _float(doc["target"], k, "target", prov, path) for k in _PASS_KEYS})
    draft = PassModel(**{k: _float(doc["draft"], k, "draft", prov, path) for k in _PASS_KEYS})
    for role, m in (("target", target), ("draft", draft)):
        if m.experts and m.experts_per_token > m.experts:
            raise UserError(f"{path}: {role}.experts_per_token {m.experts_per_token:g} > {role}.experts {m.experts:g}")
        if m.experts_per_token and not m.experts:
            raise UserError(f"{path}: {role}.experts_per_token {m.experts_per_token:g} with {role}.experts 0")
    verify = _verify_table(_number(doc, "verify_us", "profile", prov, path), path)
    ctx = check_int(_number(doc, "context_tokens", "profile", prov, path), path, "context_tokens.value", lo=0)
    name = doc.get("name", p.stem)
    title = doc.get("title", "")
    preset = doc.get("acceptance_preset")
    for k, v in (("name", name), ("title", title)):
        if not isinstance(v, str):
            raise UserError(f"{path}: field {k!r} = {show(v)}; expected a string")
    if preset is not None and not isinstance(preset, str):
        raise UserError(f"{path}: field 'acceptance_preset' = {show(preset)}; expected a preset name or null")
    deployment = None
    if "deployment" in doc:
        from .capacity import check_deployment

        deployment = check_deployment(_number(doc, "deployment", "profile", prov, path), path)
    return Profile(name, title, hw, target, draft, verify, ctx, preset, prov, path, deployment)
