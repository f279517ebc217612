"""What a draft checkpoint folder really holds: safetensors headers, their data against the file sizes, the
index's shards, and the values of `d2t` (pure: stdlib only; no tensor data is read except d2t's).

SGLang 0.5.23 loads a draft this way (what each field below lets preflight check):
  - model_loader/weight_utils.py filter_duplicate_safetensors_files: a shard named in
    model.safetensors.index.json but absent raises "references N shard file(s) missing" -> `missing_shards`;
  - safetensors' reader refuses a file shorter than its header's data offsets (a truncated download)
    -> `truncated`;
  - models/llama_eagle3.py load_weights: `hot_token_id = d2t + arange(d2t.shape[0])`, then the worker
    indexes with it (`topk_index = hot_token_id[topk_index]`, eagle_worker_v2.py): d2t must be a 1-D
    integer tensor of draft_vocab_size entries whose hot ids lie in [0, target vocab) -> `tensors["d2t"]`,
    `hot_id_range`;
  - the draft lm_head is a ParallelLMHead of draft_vocab_size rows; its weight loader asserts the
    checkpoint's row count -> `tensors["lm_head.weight"]`.
A header that cannot be parsed at all is a one-line UserError (unusable input); everything else is data
for the checks (preflight/checks_draft.py), so every problem is listed at once.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from array import array
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UserError
from ..validate import check_int, list_field, show

INDEX = "model.safetensors.index.json"
MAX_HEADER = 100_000_000  # safetensors' own limit
MAX_D2T_READ = 1 << 24  # entries of d2t whose values are read (a real d2t: 32k-160k)
INT_DTYPES = {"I8": ("b", 1), "U8": ("B", 1), "I16": ("h", 2), "U16": ("H", 2), "I32": ("i", 4), "U32": ("I", 4),
              "I64": ("q", 8), "U64": ("Q", 8)}


@dataclass(slots=True)
class TensorInfo:
    dtype: str  # safetensors dtype name: I64, BF16, F32 ...
    shape: list[int]
    file: str
    begin: int = 0  # data offsets inside the file's data section
    end: int = 0


@dataclass(slots=True)
class DraftWeights:
    folder: str
    tensors: dict[str, TensorInfo] = field(default_factory=dict)
    index_map: dict[str, str] = field(default_factory=dict)  # tensor -> shard file, from the index (if any)
    missing_shards: list[str] = field(default_factory=list)  # named in the index, not in the folder
    truncated: list[str] = field(default_factory=list)  # "<file>: header needs N bytes, file has M"
    hot_id_range: tuple[int, int] | None = None  # (min, max) of d2t[i] + i, when d2t could be read

    @property
    def shapes(self) -> dict[str, list[int]]:
        return {k: v.shape for k, v in self.tensors.items()}

    def find(self, suffix: str) -> tuple[str, TensorInfo] | None:
        """The tensor named `suffix` or ending in '.<suffix>' (d2t, model.d2t, lm_head.weight, ...)."""
        for name, t in self.tensors.items():
            if name == suffix or name.endswith("." + suffix):
                return name, t
        return None

    def missing_shard_of(self, suffix: str) -> str | None:
        """The missing shard the index says holds `suffix`, if any."""
        for name, shard in self.index_map.items():
            if (name == suffix or name.endswith("." + suffix)) and shard in self.missing_shards:
                return shard
        return None


def _header(f: Path) -> tuple[dict, int, int]:
    """(header, header length, file size) of one safetensors file; UserError when it is not one."""
    try:
        st = os.stat(f)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError("not a regular file")
        with open(f, "rb") as fh:
            n = int.from_bytes(fh.read(8), "little")
            if not 0 < n < MAX_HEADER:
                raise ValueError(f"header length {n}")
            header = json.loads(fh.read(n).decode("utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise UserError(f"{f}: not a readable safetensors file ({type(exc).__name__}: {exc}); re-download the "
                        "drafter") from None
    if not isinstance(header, dict):
        raise UserError(f"{f}: safetensors header is {show(header)}, not an object of tensors; re-download the drafter")
    return header, n, st.st_size


def _tensor(name: str, meta, where: str, file: str) -> TensorInfo:
    shape = list_field(meta, f"{name}.shape", where, what="a list of dimensions",
                       item=lambda v, w, k: check_int(v, w, k, lo=0))
    dtype = meta.get("dtype") if isinstance(meta, dict) else None
    if not isinstance(dtype, str):
        raise UserError(f"{where}: field '{name}.dtype' = {show(dtype)}; expected a dtype name such as \"I64\"")
    offs = meta.get("data_offsets", [0, 0])
    if not (isinstance(offs, list) and len(offs) == 2):
        raise UserError(f"{where}: field '{name}.data_offsets' = {show(offs)}; expected [begin, end]")
    begin, end = (check_int(v, where, f"{name}.data_offsets[{i}]", lo=0) for i, v in enumerate(offs))
    return TensorInfo(dtype, shape, file, begin, end)


def _read_index(folder: Path) -> dict[str, str]:
    p = folder / INDEX
    if not p.exists():
        return {}
    from ..validate import read_json_object

    doc = read_json_object(p, "re-download the drafter", "safetensors index")
    wm = doc.get("weight_map")
    if not isinstance(wm, dict) or not all(isinstance(v, str) for v in wm.values()):
        raise UserError(f"{p}: field 'weight_map' = {show(wm)}; expected an object of tensor name -> shard file; "
                        "re-download the drafter")
    return dict(wm)


def _hot_range(f: Path, header_len: int, t: TensorInfo) -> tuple[int, int] | None:
    """(min, max) of d2t[i] + i, reading only d2t's bytes; None when it is not a readable 1-D integer tensor."""
    if t.dtype not in INT_DTYPES or len(t.shape) != 1 or not 0 < t.shape[0] <= MAX_D2T_READ:
        return None
    code, size = INT_DTYPES[t.dtype]
    if t.end - t.begin != t.shape[0] * size:
        return None
    try:
        with open(f, "rb") as fh:
            fh.seek(8 + header_len + t.begin)
            raw = fh.read(t.end - t.begin)
    except OSError:
        return None
    if len(raw) != t.end - t.begin:
        return None
    vals = array(code)
    vals.frombytes(raw)
    if sys.byteorder != "little" and size > 1:
        vals.byteswap()
    hot = [v + i for i, v in enumerate(vals)]
    return min(hot), max(hot)


def read_draft_weights(folder: str | Path) -> DraftWeights | None:
    """Every safetensors file (and the index) in `folder`; None when it holds no weights (a config-only folder)."""
    folder = Path(folder)
    try:
        files = sorted(folder.glob("*.safetensors"))
        has_index = (folder / INDEX).exists()
    except OSError as exc:
        raise UserError(f"{folder}: folder exists but is unreadable ({exc.strerror or exc})") from None
    if not files and not has_index:
        return None
    w = DraftWeights(str(folder), index_map=_read_index(folder))
    present = {f.name for f in files}
    w.missing_shards = sorted({s for s in w.index_map.values() if s not in present})
    for f in files:
        if w.index_map and f.name not in set(w.index_map.values()):
            continue  # SGLang loads only the shards the index names
        header, n, size = _header(f)
        where = f"{f} (safetensors header)"
        data_end = 0
        infos = {}
        for name, meta in header.items():
            if name == "__metadata__":
                continue
            t = _tensor(name, meta, where, str(f))
            infos[name] = t
            data_end = max(data_end, t.end)
        if 8 + n + data_end > size:
            w.truncated.append(f"{f.name}: its header places {8 + n + data_end} bytes of data, the file has {size}")
        w.tensors.update(infos)
        d2t = next(((k, t) for k, t in infos.items() if k == "d2t" or k.endswith(".d2t")), None)
        if d2t is not None and f.name not in {x.split(":", 1)[0] for x in w.truncated}:
            w.hot_id_range = _hot_range(f, n, d2t[1])
    return w
