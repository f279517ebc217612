"""`sglang-kimi-eagle3 tune [launch_server flags]`: measure our kernels against SGLang's on this GPU
and write the launch table `auto` then uses here (tuning/cache.py: the user cache).

For the shapes the deployment runs (tuning/shapes.py; flags as for `check`, none = the embedded
default), per op and shape: our launch parameters searched within the architecture's limits
(tuning/search.py), our best checked against SGLang's own kernel on the same inputs (ids and accept
paths bit for bit; GEMV values as accurate as SGLang's matmul), both timed side by side (CUDA-graph
replays, inputs rotated past the L2, fixed counts: tuning/timing.replay_time_us). A win, as in the
bundled tables: exact and ours < 0.97 x SGLang's time. The table is written atomically after every
op, so Ctrl-C keeps what finished. Imports SGLang's kernels through upstream_kernels (works on a
machine without SGLang's server stack).
"""

from __future__ import annotations

import json
import logging
import tempfile
import warnings
from pathlib import Path

from ..errors import UserError
from ..integration.launch_flags import canonical_flags, flag_value, int_flag_value, parse_with_sglang, refuse_nonpositive
from ..ops import tables
from ..terminal import echo
from ..tuning import run as tune_run
from ..tuning.shapes import ALL_OPS, OPS, TuneShapes, from_configs, measurements
from ..validate import expand_path
from . import quiet_sglang_arch_warning

HELP = """usage: sglang-kimi-eagle3 tune [--dry-run] [--quick] [--cache-dir DIR] [--ignore-bundled] [--ops OP,...] \
[launch_server flags ...]

Measures this plugin's kernels against SGLang's own on the local GPU for the shapes the deployment runs (TP \
shard rows, draft vocab, hidden, N / topk, batch sizes), searches our launch parameters, and writes a per-GPU \
table that `SGLANG_KIMI_EAGLE3_KERNELS=auto` (the default) uses on this GPU before the bundled one. No \
launch_server flags = the embedded default (as `check`).

  --dry-run         print the shapes and ops it would measure, and where the table would go (no GPU)
  --quick           batch sizes 1, 32, 128 (those the batch cap reaches) and a smaller search grid
  --cache-dir DIR   where to write (default: $SGLANG_KIMI_EAGLE3_TUNE_DIR, else \
$XDG_CACHE_HOME/sglang-kimi-eagle3/tuned); serving reads $SGLANG_KIMI_EAGLE3_TUNE_DIR or the default
  --ignore-bundled  measure as if no bundled table existed (search seeds and report ignore it)
  --ops OP,...      only these ops (default: """ + ", ".join(OPS) + """; also lm_head_topk, which no hook runs)
Exit: 0 done, 2 unusable input or no GPU, 130 interrupted (finished ops are kept)."""


# ------------------------------------------------------------------------------------ arguments


def _split(argv: list[str]) -> tuple[dict, list[str]]:
    ours = {"dry_run": False, "quick": False, "cache_dir": None, "ignore_bundled": False, "ops": list(OPS)}
    rest, i = [], 0
    while i < len(argv):
        a = argv[i]
        name, val = (a.split("=", 1) + [None])[:2] if a.startswith("--") and "=" in a else (a, None)
        if name in ("--dry-run", "--quick", "--ignore-bundled"):
            if val is not None:  # --quick=no is not --quick
                raise UserError(f"{a}: {name} takes no value; write {name} alone or leave it out")
            ours[name[2:].replace("-", "_")] = True
        elif name in ("--cache-dir", "--ops"):
            if val is None:
                if i + 1 >= len(argv):
                    raise UserError(f"{name} needs a value")
                val = argv[i + 1]
                i += 1
            if name == "--ops":
                ops = [o.strip() for o in val.split(",") if o.strip()]
                bad = [o for o in ops if o not in ALL_OPS]
                if bad or not ops:
                    raise UserError(f"--ops {val}: unknown op(s) {', '.join(bad) or '(none)'}; choose from {','.join(ALL_OPS)}")
                ours["ops"] = ops
            else:
                ours["cache_dir"] = _cache_dir(val)
        else:
            rest.append(a)
        i += 1
    refuse_nonpositive(rest)  # as `check` does: --tp-size 0 is not TP 1
    return ours, rest


def _cache_dir(val: str, flag: str = "--cache-dir") -> str:
    """--cache-dir: a folder, or a path whose existing part is one (the folder is created when writing)."""
    p = expand_path(val, flag)
    blocker = next((q for q in (p, *p.parents) if q.exists() and not q.is_dir()), None)
    if blocker is not None:
        what = "is a file" if blocker == p else f"lies under {blocker}, which is a file"
        raise UserError(f"{flag} {val}: {what}, not a folder; give a folder (created if missing)")
    here = next(q for q in (p, *p.parents) if q.exists())
    try:  # the table is written there later, after measuring: a probe folder, removed at once
        Path(tempfile.mkdtemp(prefix=".tune-probe-", dir=here)).rmdir()
    except OSError as exc:
        raise UserError(f"{flag} {val}: cannot create files in {here} ({exc.strerror or exc}); give a folder this "
                        "user can write in") from None
    return val


def _default_cache_dir() -> None:
    """No --cache-dir: the folder serving reads ($SGLANG_KIMI_EAGLE3_TUNE_DIR, else the user cache) checked as
    --cache-dir is, before any measuring (a file there failed the first write, after the first op)."""
    import os

    env = os.environ.get(tables.ENV_DIR, "").strip()
    _cache_dir(str(tables.cache_dir()), f"${tables.ENV_DIR}" if env else "the tuned-table folder ($XDG_CACHE_HOME)")


def _parsed_by_sglang(argv: list[str]) -> dict | None:
    """SGLang's own parser over the flags (as `check`): its error for a bad flag; None where SGLang's
    server stack does not import (a bare GPU box with only its kernels): the flags are read directly."""
    try:
        from sglang.srt.plugins import load_plugins
        from sglang.srt.server_args import prepare_server_args  # noqa: F401
    except Exception:
        return None
    load_plugins()
    sa = parse_with_sglang(argv)
    return {k: getattr(sa, k, None) for k in ("model_path", "speculative_draft_model_path", "tp_size",
                                               "speculative_eagle_topk", "speculative_num_steps",
                                               "speculative_num_draft_tokens", "cuda_graph_max_bs_decode",
                                               "max_running_requests", "json_model_override_args")}


def _overrides(raw) -> dict | None:
    """--json-model-override-args as SGLang reads it (ModelConfig.from_server_args: json.loads, applied to the target's
    and the draft's config alike); anything but a JSON object is refused here, before a GPU is touched."""
    if raw is None or raw == {}:
        return None
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError as exc:
        raise UserError(f"tune: --json-model-override-args: not valid JSON ({exc}); give a JSON object, e.g. "
                        "'{\"max_position_embeddings\": 262144}'") from None
    if value is None:  # JSON null: SGLang's get_config applies no overrides (`if model_override_args:`)
        return None
    if not isinstance(value, dict):
        raise UserError(f"tune: --json-model-override-args: expected a JSON object, got {type(value).__name__}; give "
                        "an object, e.g. '{\"max_position_embeddings\": 262144}'")
    return value or None


def _merged(rest: list[str]) -> list[str]:
    """`rest` with --config FILE merged by SGLang's own merger (integration/launch_flags.merge_config_file); where
    SGLang's server stack does not import (a bare GPU box), a --config is refused rather than ignored."""
    if "--config" not in rest and not any(a.startswith("--config=") for a in rest):
        return rest
    from ..integration.launch_flags import merge_config_file

    try:
        return merge_config_file(rest)
    except ImportError as exc:
        raise UserError(f"tune: --config needs SGLang's server stack to read the file ({exc}); give the launch's "
                        "flags on the command line instead") from None


def deployment_shapes(rest: list[str], quick: bool) -> tuple[TuneShapes, str, str]:
    """(shapes, title, how the flags were read) for launch_server flags (none: the embedded default)."""
    from ..configs import read_config
    from ..profiles import DEFAULT_DEPLOYMENT_NAME
    from .check import overlay_default, resolve_model_paths

    rest = _merged(rest)  # --config FILE: its options, as launch_server reads them (as `check`)
    rest = canonical_flags(rest)  # a prefix SGLang's parser takes (--model-p): read as the flag it is (as `check`)
    # no model path: the embedded default, with any flags given replacing its own (as `check --tp-size 4`)
    embedded = not any(a in ("--model-path", "--model") or a.startswith(("--model-path=", "--model=")) for a in rest)
    title = f"the embedded default: {DEFAULT_DEPLOYMENT_NAME}" if embedded else "launch_server " + " ".join(rest)
    if embedded and rest:
        title += " - with " + " ".join(rest)
    argv, _labels = resolve_model_paths(overlay_default(list(rest)) if embedded else list(rest))
    parsed = _parsed_by_sglang(argv)
    how = "flags parsed by SGLang's launch_server parser"
    if parsed is None:
        how = "flags read directly (SGLang's server stack does not import here)"
        parsed = {"model_path": flag_value(argv, "--model-path", "--model"),
                  "speculative_draft_model_path": flag_value(argv, "--speculative-draft-model-path", "--speculative-draft-model"),
                  "tp_size": int_flag_value(argv, "--tp-size", "--tp"),
                  "speculative_eagle_topk": int_flag_value(argv, "--speculative-eagle-topk"),
                  "speculative_num_steps": int_flag_value(argv, "--speculative-num-steps"),
                  "speculative_num_draft_tokens": int_flag_value(argv, "--speculative-num-draft-tokens"),
                  "cuda_graph_max_bs_decode": int_flag_value(argv, "--cuda-graph-max-bs-decode", "--cuda-graph-max-bs"),
                  "max_running_requests": int_flag_value(argv, "--max-running-requests"),
                  "json_model_override_args": flag_value(argv, "--json-model-override-args")}
    if not parsed["model_path"]:
        raise UserError("tune: --model-path is not set; give the target model (or no flags for the embedded default)")
    overrides = _overrides(parsed["json_model_override_args"])  # SGLang applies them to the target and the draft
    target = read_config(parsed["model_path"], overrides=overrides)
    dpath = parsed["speculative_draft_model_path"]
    draft = read_config(dpath, overrides=overrides) if dpath else None
    tp = int(parsed["tp_size"] or 1)
    for role, m in (("target", target), ("draft", draft)):
        if m is not None and m.num_attention_heads % tp:  # as `check` refuses it: SGLang cannot shard these heads
            raise UserError(f"tune: --tp-size {tp}: the {role} {m.path} has {m.num_attention_heads} attention heads, which "
                            f"{tp} does not divide; give the --tp-size you launch with (one dividing {m.num_attention_heads})")
    shapes = from_configs(target, draft, tp=tp, topk=parsed["speculative_eagle_topk"],
                          steps=parsed["speculative_num_steps"], draft_tokens=parsed["speculative_num_draft_tokens"],
                          max_bs=parsed["cuda_graph_max_bs_decode"] or parsed["max_running_requests"], quick=quick)
    return shapes, title, how


# ------------------------------------------------------------------------------------ main


def main(argv: list[str]) -> int:
    if any(a in ("-h", "--help") for a in argv):
        echo(HELP)
        return 0
    ours, rest = _split(argv)
    if ours["cache_dir"] is None:
        _default_cache_dir()
    warnings.filterwarnings("ignore")
    logging.getLogger("sglang_kimi_eagle3").setLevel(logging.WARNING)
    quiet_sglang_arch_warning()
    shapes, title, how = deployment_shapes(rest, ours["quick"])  # the flags first: a typo is named, not the GPU
    if not ours["dry_run"]:
        _require_gpu()
    todo = [m for m in measurements(shapes) if m["op"] in ours["ops"]]
    echo(f"Tuning for {title}")
    echo(f"Shapes ({how}): {shapes.describe()}")
    if ours["dry_run"]:
        echo(f"Would measure {len(todo)} (op, shape) points, ours vs SGLang's kernel:")
        for m in todo:
            echo(f"  {m['op']:14s} {tune_run.shape_text(m['shape']):32s} key {m['key']}")
        echo(f"Table would be written to {tables.cache_dir(ours['cache_dir'])}/<GPU name>.json")
        return 0
    from ..integration.upstream_kernels import spec_ops

    return tune_run.run(shapes, todo, title, ours, " ".join(["sglang-kimi-eagle3", "tune"] + argv), spec_ops())


def _require_gpu() -> None:
    try:
        import torch

        ok = torch.cuda.is_available()
    except Exception:
        ok = False
    if not ok:
        raise UserError("tune: no CUDA GPU visible here (torch.cuda.is_available() is False); run it on the machine "
                        "that will serve, or add --dry-run to list the shapes and ops it would measure")
