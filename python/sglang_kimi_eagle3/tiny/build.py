"""Write the tiny target + drafter folders (config.json, model.safetensors, tokenizer, tiny.json), seeded.

Pure: torch, safetensors and json; no sglang import. Same seed and spec -> identical files on any
machine (CPU generator). Every file is written atomically (temp file + os.replace); a folder whose
tiny.json already records the same seed and spec is left as it is.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict
from pathlib import Path

import torch

from .spec import TinySpec, draft_config, target_config
from .tokenizer import tokenizer_config, tokenizer_json
from .weights import draft_weights, successor_map, target_weights

FORMAT = 2  # bump when the weights a seed produces change
KEEP_DTYPE = ("e_score_correction_bias", "d2t", "t2d")  # fp32 bias, int64 / bool maps as real checkpoints


def _atomic_write(path: Path, write) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _write_json(path: Path, data) -> None:
    _atomic_write(path, lambda tmp: Path(tmp).write_text(json.dumps(data, indent=2) + "\n"))


def _write_weights(path: Path, tensors: dict[str, torch.Tensor]) -> None:
    from safetensors.torch import save_file

    out = {k: (v if any(s in k for s in KEEP_DTYPE) else v.to(torch.bfloat16)).contiguous() for k, v in tensors.items()}
    _atomic_write(path, lambda tmp: save_file(out, tmp, metadata={"format": "pt"}))


def _stamp(seed: int, spec: TinySpec, role: str) -> dict:
    stamp = {"builder": "sglang_kimi_eagle3.tiny", "format": FORMAT, "seed": seed, "role": role, "spec": asdict(spec)}
    return json.loads(json.dumps(stamp))  # as read back from tiny.json (tuples -> lists)


def _up_to_date(folder: Path, stamp: dict) -> bool:
    try:
        return (json.loads((folder / "tiny.json").read_text()) == stamp
                and (folder / "model.safetensors").is_file() and (folder / "config.json").is_file())
    except (OSError, ValueError):
        return False


def build(out: str | os.PathLike, seed: int = 0, spec: TinySpec | None = None) -> tuple[Path, Path]:
    """Build (or reuse) `out`/target and `out`/draft; returns their paths."""
    spec = spec or TinySpec()
    out = Path(out)
    target, draft = out / "target", out / "draft"
    st, sd = _stamp(seed, spec, "target"), _stamp(seed, spec, "draft")
    if _up_to_date(target, st) and _up_to_date(draft, sd):
        return target, draft
    g = torch.Generator().manual_seed(seed)
    D, succ = successor_map(spec, g)
    E = torch.randn(spec.vocab_size, spec.hidden_size, generator=g)
    tw = target_weights(spec, g, E, succ)
    dw = draft_weights(spec, g, tw["lm_head.weight"].to(torch.bfloat16).float(), D)
    for folder in (target, draft):
        (folder / "tiny.json").unlink(missing_ok=True)  # stale until rewritten last
    _write_json(target / "config.json", target_config(spec))
    _write_weights(target / "model.safetensors", tw)
    _write_json(target / "successor.json", succ.tolist())
    _write_json(target / "tokenizer.json", tokenizer_json(spec))
    _write_json(target / "tokenizer_config.json", tokenizer_config())
    _write_json(draft / "config.json", draft_config(spec))
    _write_weights(draft / "model.safetensors", dw)
    _write_json(target / "tiny.json", st)
    _write_json(draft / "tiny.json", sd)
    return target, draft


def successor(target: str | os.PathLike) -> list[int]:
    """The planted next-token rule of a built target: succ[t] is its greedy choice after token t."""
    return json.loads((Path(target) / "successor.json").read_text())
