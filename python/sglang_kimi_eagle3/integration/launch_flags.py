"""Reading launch_server flags the way `check` and `tune` both need them (one scanner, one SGLang parser).

- `flag_value(argv, *names)`: the value of the first `--name VALUE` / `--name=VALUE` (None when absent);
- `refuse_nonpositive(argv)`: GPU and token counts SGLang's parser accepts but a launch cannot use (0, -1), and
  memory fractions outside (0, 1] (nan, 2, -0.5);
- `merge_config_file(argv)`: `--config FILE` replaced by the file's options as SGLang merges them;
- `canonical_flags(argv)`: every flag spelled as a prefix SGLang's parser takes (`--model-p`) written out in full;
- `sglang_parser()`: launch_server's own argparse parser (with this plugin's flag), for the two above;
- `parse_with_sglang(argv)`: SGLang's own `prepare_server_args`, its refusal as one UserError line; the parsed
  values held to refuse_nonpositive's bounds (however the flag was spelled).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import stat

from ..errors import UserError

POSITIVE = {"--tp-size": "GPUs", "--tensor-parallel-size": "GPUs", "--context-length": "tokens",
            "--pp-size": "pipeline stages", "--pipeline-parallel-size": "pipeline stages", "--nnodes": "nodes",
            "--dp-size": "data-parallel replicas", "--data-parallel-size": "data-parallel replicas",
            "--cuda-graph-max-bs-decode": "the largest decode batch captured in a CUDA graph",
            "--ep-size": "expert-parallel GPUs", "--expert-parallel-size": "expert-parallel GPUs",
            "--ep": "expert-parallel GPUs", "--attn-cp-size": "attention context-parallel GPUs",
            "--attention-context-parallel-size": "attention context-parallel GPUs",
            "--max-total-tokens": "tokens in the KV pool"}
FRACTIONS = {"--mem-fraction-static": "the share of GPU memory for the weights and the KV pool, e.g. 0.85"}
PARSED = {"tp_size": "--tp-size", "context_length": "--context-length", "mem_fraction_static": "--mem-fraction-static",
          "pp_size": "--pp-size", "nnodes": "--nnodes", "dp_size": "--dp-size",
          "cuda_graph_max_bs_decode": "--cuda-graph-max-bs-decode", "ep_size": "--ep-size",
          "attn_cp_size": "--attn-cp-size", "max_total_tokens": "--max-total-tokens"}


def flag_values(argv: list[str], *names: str):
    """(name, value) of every `--name VALUE` / `--name=VALUE` among `names`, in order ('' when the value is missing)."""
    for i, a in enumerate(argv):
        flag, eq, val = a.partition("=")
        if flag in names:
            yield flag, (val if eq else (argv[i + 1] if i + 1 < len(argv) else ""))


def flag_value(argv: list[str], *names: str) -> str | None:
    """The value of the first of `names` given in `argv`, else None."""
    return next((v for _, v in flag_values(argv, *names) if v != ""), None)


def int_flag_value(argv: list[str], *names: str) -> int | None:
    v = flag_value(argv, *names)
    if v is None:
        return None
    try:
        return int(v)
    except ValueError:
        raise UserError(f"{names[0]} {v!r}: expected an integer") from None


def refuse_nonpositive(argv: list[str]) -> None:
    """SGLang's parser and resolution accept these and the launch fails later (or serves nothing): refuse now."""
    for flag, val in flag_values(argv, *POSITIVE):
        if re.fullmatch(r"\s*[-+]?\d+\s*", val) and int(val) < 1:
            raise UserError(f"{flag} {val.strip()}: expected a positive integer ({POSITIVE[flag]})")
    for flag, val in flag_values(argv, *FRACTIONS):
        try:
            v = float(val)
        except ValueError:
            continue  # not a number: SGLang's parser names it
        if not 0 < v <= 1:  # nan and inf fail this too
            raise UserError(f"{flag} {val.strip()}: expected a number in (0, 1] ({FRACTIONS[flag]})")


def sglang_parser():
    """launch_server's argparse parser as `prepare_server_args` builds it, with this plugin's flag (as the plugin adds
    it to SGLang's parser)."""
    import argparse

    from sglang.srt.server_args import ServerArgs

    from .hooks.context_policy import add_flag

    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    add_flag(parser)
    return parser


def merge_config_file(argv: list[str]) -> list[str]:
    """`argv` with `--config FILE` replaced by the YAML file's options, merged by SGLang's own ConfigArgumentMerger as
    prepare_server_args merges them (before the other flags, which win), so that whatever reads the flags (the
    embedded default, the model paths) sees the launch the file describes. A file SGLang refuses (not .yaml, missing,
    malformed, not a mapping) is one UserError naming --config; so is `--config=FILE`, which launch_server ignores."""
    for a in argv:
        if a.startswith("--config="):
            raise UserError(f"{a}: launch_server reads a config file only as --config FILE (given as --config=FILE it "
                            f"ignores the file); write --config {a.split('=', 1)[1]}")
    if "--config" not in argv:
        return argv

    import yaml
    from sglang.srt.utils.server_args_config_parser import ConfigArgumentMerger

    i = argv.index("--config")
    path = argv[i + 1] if i + 1 < len(argv) and argv.count("--config") == 1 else None
    where = f"--config {path}" if path is not None else "--config"
    fix = "give one YAML file of launch_server options (key: value per line)"
    if path is not None:
        try:
            mode = os.stat(path).st_mode
        except OSError:
            mode = None  # missing or unreadable: SGLang's merger names it
        if mode is not None and not stat.S_ISREG(mode):  # a folder fails to open, a FIFO would block
            kind = "a folder" if stat.S_ISDIR(mode) else "not a regular file"
            raise UserError(f"{where}: not a config file: it is {kind}; {fix}")
    parser = sglang_parser()
    log = logging.getLogger(ConfigArgumentMerger.__module__)  # it logs its refusal before raising it: said once, below
    was, log.disabled = log.disabled, True
    try:
        return ConfigArgumentMerger(parser).merge_config_with_args(list(argv))
    except (ValueError, OSError, yaml.YAMLError) as exc:
        raise UserError(f"{where}: {str(exc).rstrip('.!')}; {fix}") from None
    finally:
        log.disabled = was


def canonical_flags(argv: list[str]) -> list[str]:
    """`argv` with each `--prefix` / `--prefix=VALUE` that SGLang's launch_server parser resolves to exactly one
    option (argparse takes a unique prefix: `--model-p` for `--model-path`) spelled as that option, so that what reads
    the flags before SGLang's parser (the embedded default, the model paths, the bounds) sees what the launch sees.
    Exact names, ambiguous prefixes (SGLang's parser refuses those) and values are left as given; without SGLang's
    server stack nothing changes."""
    try:
        parser = sglang_parser()
    except Exception:  # noqa: BLE001 - tune reads the flags directly where SGLang's stack does not import
        return list(argv)
    known = parser._option_string_actions
    out, i = [], 0
    while i < len(argv):
        a = argv[i]
        flag, eq, val = a.partition("=")
        if a.startswith("--") and len(flag) > 2 and flag not in known:
            hits = [o for o in known if o.startswith(flag)]
            if len(hits) == 1:
                a = hits[0] + eq + val
        out.append(a)
        if flag in known or (a != argv[i]):  # a flag taking a value: its value is never read as a flag here
            action = known[a.partition("=")[0]]
            if not eq and action.nargs not in (0, "?", "*") and i + 1 < len(argv):
                out.append(argv[i + 1])
                i += 1
        i += 1
    return out


def parse_with_sglang(argv: list[str]):
    """SGLang's launch_server parser over `argv` (plugins loaded first, so our flag is known)."""
    from sglang.srt.server_args import prepare_server_args

    argv = merge_config_file(argv)  # a file SGLang's merger refuses: one line, not its ValueError
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            server_args = prepare_server_args(argv)
    except SystemExit:
        lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
        msg = next((ln for ln in reversed(lines) if "error:" in ln), lines[-1] if lines else "invalid arguments")
        raise UserError(f"launch_server flags rejected by SGLang's parser: {msg.split('error:', 1)[-1].strip()}") from None
    # the same bounds on the parsed values: a spelling argparse takes for the flag (a prefix: --mem-fraction, --tp) too
    refuse_nonpositive([x for dest, flag in PARSED.items() if getattr(server_args, dest, None) is not None
                        for x in (flag, str(getattr(server_args, dest)))])
    nnodes, rank = getattr(server_args, "nnodes", None), getattr(server_args, "node_rank", None)
    if isinstance(nnodes, int) and isinstance(rank, int) and not 0 <= rank < nnodes:
        # SGLang starts it: its ranks lie past the world (pipeline rank >= --pp-size, or another node's TP ranks)
        raise UserError(f"--node-rank {rank}: expected 0 to {nnodes - 1} (one rank per node of --nnodes {nnodes}); "
                        "give this node's rank")
    return server_args
