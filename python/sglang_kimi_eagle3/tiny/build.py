"""Write the tiny target + drafter folders (config.json, model.safetensors, tokenizer, tiny.json), seeded.

Pure: torch, safetensors and json (compressed-tensors for `int4`); no sglang import. Same seed, spec,
options and device kind -> identical files on any machine (the vocabulary maps always come from a CPU
generator; the weights from a generator on the device they are made on). Every file is written
atomically (temp file + os.replace); a folder whose tiny.json already records the same build is left
as it is.

  OUT/target     KimiK25ForConditionalGeneration (language model only; weights under `language_model.`),
                 or DeepseekV3ForCausalLM with `text_only`; routed experts INT4 with `int4`
  OUT/draft      the EAGLE-3 drafter (spec.draft_vocab_size rows)
  OUT/draft-<n>  one more drafter per spec.draft_variants entry (n rows)
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from ..atomic import write_atomic
from ..errors import UserError
from .spec import TinySpec, draft_config, target_config, wrapper_config
from .tokenizer import tokenizer_config, tokenizer_json
from .weights import draft_head, draft_proposals, draft_weights, embedding, target_weights, vocab_maps

FORMAT = 3  # bump when the files a seed produces change
KEEP_DTYPE = ("e_score_correction_bias",)  # fp32 bias as in real checkpoints; integer/bool tensors always kept
WRAPPER_PREFIX = "language_model."


@dataclass(slots=True)
class BuildOptions:
    text_only: bool = False  # DeepseekV3ForCausalLM instead of the Kimi-K2.5 wrapper
    int4: bool = False  # routed experts as compressed-tensors pack-quantized int4 (group 32)
    draft_agreement: float = 1.0  # fraction of tokens after which the drafter proposes the target's next token
    device: str = "cpu"  # torch device the tensors are made on ("meta": shapes only, nothing is written)

    def __post_init__(self):
        q = self.draft_agreement
        if not isinstance(q, (int, float)) or not 0.0 <= q <= 1.0:
            raise ValueError(f"draft_agreement {q!r}: expected a fraction in [0, 1]")
        self.draft_agreement = float(q)

    @property
    def device_kind(self) -> str:
        return torch.device(self.device).type


@dataclass(slots=True)
class Tensors:
    target: dict[str, torch.Tensor]  # checkpoint names as written
    drafts: dict[int, dict[str, torch.Tensor]]  # draft rows -> drafter tensors
    succ: torch.Tensor  # [V] the target's planted next token
    proposals: torch.Tensor  # [V] what every drafter proposes after each token


def make_tensors(spec: TinySpec, seed: int, opts: BuildOptions) -> Tensors:
    """Every tensor of the pair (fp32/bf16 on opts.device, INT4 experts packed), before writing."""
    if opts.int4:
        spec.check_int4()
    gm = torch.Generator().manual_seed(seed)
    vocabs, succ = vocab_maps(spec, gm)
    kind = opts.device_kind
    gw = gm if kind == "cpu" else None if kind == "meta" else torch.Generator(opts.device).manual_seed(seed)
    E = embedding(spec, gw, opts.device)
    tw = target_weights(spec, gw, E, succ)
    head = tw["lm_head.weight"].to(torch.bfloat16).float()  # the rows as the drafter will hold them
    prop = draft_proposals(succ, vocabs[spec.succ_vocab_size], opts.draft_agreement, seed)
    dhead = draft_head(gw, E, succ, prop, head)
    drafts = {rows: draft_weights(spec, gw, dhead, D) for rows, D in vocabs.items()}
    if opts.int4:
        from .quant import quantize_routed_experts

        tw = quantize_routed_experts(tw)
    if not opts.text_only:
        tw = {WRAPPER_PREFIX + k: v for k, v in tw.items()}
    return Tensors(tw, drafts, succ, prop)


def _write_json(path: Path, data) -> None:
    write_atomic(path, json.dumps(data, indent=2) + "\n", mkdir=True)


def _stored(name: str, v: torch.Tensor) -> torch.Tensor:
    keep = not v.is_floating_point() or any(s in name for s in KEEP_DTYPE)
    return (v if keep else v.to(torch.bfloat16)).to("cpu").contiguous()


def _write_weights(path: Path, tensors: dict[str, torch.Tensor]) -> None:
    from safetensors.torch import save

    out = {k: _stored(k, v) for k, v in tensors.items()}
    write_atomic(path, save(out, metadata={"format": "pt"}), mkdir=True)


def _stamp(seed: int, spec: TinySpec, opts: BuildOptions, role: str) -> dict:
    o = asdict(opts) | {"device": opts.device_kind}  # cuda:0 and cuda:1 draw the same numbers
    stamp = {"builder": "sglang_kimi_eagle3.tiny", "format": FORMAT, "seed": seed, "role": role,
             "spec": asdict(spec), "options": o}
    return json.loads(json.dumps(stamp))  # as read back from tiny.json (tuples -> lists)


def _up_to_date(folder: Path, stamp: dict) -> bool:
    try:
        return (json.loads((folder / "tiny.json").read_text()) == stamp
                and (folder / "model.safetensors").is_file() and (folder / "config.json").is_file())
    except (OSError, ValueError):
        return False


WRITTEN = ("config.json", "model.safetensors", "successor.json", "tokenizer.json", "tokenizer_config.json",
           "proposals.json")  # every file build() writes, besides tiny.json


def _refuse_foreign(folder: Path) -> None:
    """build() replaces files only in a folder it built (one holding tiny.json): never the user's own model."""
    if os.path.lexists(folder) and not folder.is_dir():
        raise UserError(f"{folder}: is a file, not a folder; choose another OUT, or move that file away")
    if (folder / "tiny.json").is_file():
        return
    theirs = [n for n in WRITTEN if os.path.lexists(folder / n)]
    if theirs:
        raise UserError(f"{folder}: holds {', '.join(theirs)} that the tiny builder did not write (no tiny.json); "
                        "choose another OUT, or move those files away")


def draft_dirs(out: str | os.PathLike, spec: TinySpec) -> dict[int, Path]:
    """draft rows -> folder: OUT/draft for the main drafter, OUT/draft-<rows> for each variant."""
    out = Path(out)
    return {spec.draft_vocab_size: out / "draft"} | {rows: out / f"draft-{rows}" for rows in spec.draft_variants}


def build(out: str | os.PathLike, seed: int = 0, spec: TinySpec | None = None, **options) -> tuple[Path, Path]:
    """Build (or reuse) `out`/target and `out`/draft (and `out`/draft-<rows> per variant); returns the
    target and main drafter paths. `options`: BuildOptions' fields (text_only, int4, draft_agreement, device)."""
    spec, opts = spec or TinySpec(), BuildOptions(**options)
    if opts.device_kind == "meta":
        raise ValueError("device 'meta' makes shapes only (make_tensors); build() writes real weights")
    target, drafts = Path(out) / "target", draft_dirs(out, spec)
    stamps = {target: _stamp(seed, spec, opts, "target")}
    stamps |= {d: _stamp(seed, spec, opts, "draft") | {"draft_vocab_size": rows} for rows, d in drafts.items()}
    main = drafts[spec.draft_vocab_size]
    if all(_up_to_date(f, s) for f, s in stamps.items()):
        return target, main
    for folder in stamps:
        _refuse_foreign(folder)
    t = make_tensors(spec, seed, opts)
    for folder in stamps:  # stale until rewritten last, yet still marking the folder as the builder's
        _write_json(folder / "tiny.json", {"builder": "sglang_kimi_eagle3.tiny", "state": "building"})
    config = target_config(spec, int4=opts.int4) if opts.text_only else wrapper_config(spec, int4=opts.int4)
    _write_json(target / "config.json", config)
    _write_weights(target / "model.safetensors", t.target)
    _write_json(target / "successor.json", t.succ.tolist())
    _write_json(target / "tokenizer.json", tokenizer_json(spec))
    _write_json(target / "tokenizer_config.json", tokenizer_config())
    for rows, folder in drafts.items():
        _write_json(folder / "config.json", draft_config(spec, rows))
        _write_weights(folder / "model.safetensors", t.drafts[rows])
        _write_json(folder / "proposals.json", t.proposals.tolist())
    for folder, stamp in stamps.items():
        _write_json(folder / "tiny.json", stamp)
    return target, main


def successor(target: str | os.PathLike) -> list[int]:
    """The planted next-token rule of a built target: succ[t] is its greedy choice after token t."""
    return json.loads((Path(target) / "successor.json").read_text())


def proposals(draft: str | os.PathLike) -> list[int]:
    """What a built drafter proposes after each token t (== successor() where it agrees with the target)."""
    return json.loads((Path(draft) / "proposals.json").read_text())
