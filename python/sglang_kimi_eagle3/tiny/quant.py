"""INT4 routed experts as Kimi-K2.5's checkpoint stores them, written with the compressed-tensors library.

Kimi-K2.5 (and Kimi-K2-Thinking) keep attention, the shared experts, the dense MLPs and lm_head in bf16
and store each routed expert's gate/up/down projection as compressed-tensors `pack-quantized` int 4-bit,
symmetric, group 32 (`spec.quantization_config()`): `weight_packed` int32 [out, in / 8] (eight 4-bit
values per word, offset by 8), `weight_scale` bf16 [out, in / 32], `weight_shape` int32 [2] (the
checkpoint's tensor types are F32 / I32 / BF16). The scale is the library's min-max one
(`calculate_qparams`: max |w| of the group / 7.5) of the bf16 weight; the packing is the library's own
`PackedQuantizationCompressor`, the format SGLang's CompressedTensorsWNA16MoE loads and repacks for its
Marlin MoE kernel. compressed-tensors is an SGLang dependency; it is imported only when quantizing.
"""

from __future__ import annotations

import re

import torch

from .spec import quantization_config

ROUTED = re.compile(r"(.*\.mlp\.experts\.\d+\.(?:gate|up|down)_proj)\.weight$")


def _scheme():
    from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme

    group = quantization_config()["config_groups"]["group_0"]
    return QuantizationScheme(targets=group["targets"], weights=QuantizationArgs.model_validate(group["weights"]))


def quantize_routed_experts(w: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """`w` with every routed expert projection's `weight` replaced by weight_packed / weight_scale / weight_shape."""
    from compressed_tensors.compressors import PackedQuantizationCompressor
    from compressed_tensors.quantization.utils import calculate_qparams

    scheme = _scheme()
    args = scheme.weights
    out: dict[str, torch.Tensor] = {}
    for name, tensor in w.items():
        m = ROUTED.match(name)
        if not m:
            out[name] = tensor
            continue
        weight = tensor.to(torch.bfloat16)  # what a bf16 checkpoint would have held
        rows, cols = weight.shape
        groups = weight.float().reshape(rows, cols // args.group_size, args.group_size)
        if weight.device.type == "meta":  # shapes only (the library's compress has a meta branch of its own)
            scale, zero = groups[..., 0], None
        else:
            scale, zero = calculate_qparams(groups.amin(-1), groups.amax(-1), args)
        packed = PackedQuantizationCompressor.compress(
            {"weight": weight, "weight_scale": scale.to(torch.bfloat16), "weight_zero_point": zero}, scheme)
        out[f"{m[1]}.weight_packed"] = packed["weight_packed"]
        out[f"{m[1]}.weight_scale"] = packed["weight_scale"]
        out[f"{m[1]}.weight_shape"] = packed["weight_shape"].to(torch.int32)
    return out


def dequantize(w: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The inverse view (compressed-tensors' own decompress): each packed expert projection as a bf16 `weight`."""
    from compressed_tensors.compressors import PackedQuantizationCompressor

    scheme = _scheme()
    out = {k: v for k, v in w.items() if not re.search(r"\.weight_(packed|scale|shape)$", k)}
    for name in w:
        if name.endswith(".weight_packed"):
            base = name[: -len("_packed")]
            parts = {"weight_packed": w[name], "weight_scale": w[base + "_scale"], "weight_shape": w[base + "_shape"]}
            out[base] = PackedQuantizationCompressor.decompress(parts, scheme)["weight"]
    return out
