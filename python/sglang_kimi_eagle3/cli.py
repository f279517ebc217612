"""The `sglang-kimi-eagle3` command: a thin dispatcher over one module per subcommand.

Exit codes: 0 ok (warnings allowed), 1 the check found errors, 2 unusable input (one line on
stderr, never a traceback). SGLANG_KIMI_EAGLE3_DEBUG=1 shows tracebacks of unexpected failures.
"""

from __future__ import annotations

import importlib
import os
import sys

from .errors import UserError

# name -> (module, function, one-line help): one module per subcommand in commands/ (check, status and
# tune call into integration/, the only package with SGLang's hooks); `upstream` is upstream_export.py.
COMMANDS = {
    "check": ("sglang_kimi_eagle3.commands.check", "main",
              "find every problem of a draft/target deployment at once (takes launch_server flags; none = the embedded default)"),
    "status": ("sglang_kimi_eagle3.commands.status", "main",
               "load SGLang's plugins the way launch_server does and print this plugin's hook status table"),
    "plan": ("sglang_kimi_eagle3.commands.plan", "main",
             "predict the speedup per batch size and write SGLang's --speculative-adaptive-config"),
    "bench": ("sglang_kimi_eagle3.commands.bench", "main",
              "benchmark running SGLang servers: acceptance per position, speedup per concurrency"),
    "tune": ("sglang_kimi_eagle3.commands.tune", "main",
             "measure our kernels against SGLang's on this GPU and write the table `auto` uses here"),
    "upstream": ("sglang_kimi_eagle3.upstream_export", "main",
                 "export the upstream SGLang patch series (upstream/) applied to the installed SGLang: tree, patches"),
    "profiles": ("sglang_kimi_eagle3.cli", "_profiles", "list the bundled model configs usable as --model-path names"),
}


def _usage() -> str:
    from . import __version__

    lines = [f"sglang-kimi-eagle3 {__version__}: EAGLE-3 speculative decoding for Kimi-K2.5 on SGLang", "",
             "usage: sglang-kimi-eagle3 <command> [args]", ""]
    w = max(map(len, COMMANDS))
    lines += [f"  {n:<{w}}  {h}" for n, (_, _, h) in COMMANDS.items()]
    lines += ["", "`sglang-kimi-eagle3 <command> --help` for a command's options."]
    from .terminal import fill

    return fill("\n".join(lines))


def _profiles(argv: list[str]) -> int:
    from .profiles import PROFILES, profile_path
    from .terminal import echo

    if any(a in ("-h", "--help") for a in argv):
        echo("usage: sglang-kimi-eagle3 profiles\n\nLists the bundled model configs (config.json only, no weights) "
             "usable wherever a model path is:\n  sglang-kimi-eagle3 check --model-path kimi-k2.5 ...")
        return 0
    if argv:
        raise UserError(f"profiles: unknown argument {argv[0]!r}; profiles takes no arguments (see --help)")
    for name, (_folder, ckpt, source) in PROFILES.items():
        echo(f"{name}\n    {ckpt}\n    source: {source}\n    folder: {profile_path(name)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0 if argv else 2
    if argv[0] in ("-V", "--version"):
        from . import __version__

        print(__version__)
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"sglang-kimi-eagle3: error: unknown command {name!r}; commands: {', '.join(COMMANDS)}", file=sys.stderr)
        return 2
    module, func, _ = COMMANDS[name]
    try:
        return int(getattr(importlib.import_module(module), func)(rest) or 0)
    except UserError as exc:
        print(f"sglang-kimi-eagle3: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("sglang-kimi-eagle3: interrupted", file=sys.stderr)
        return 130
    except SystemExit:
        raise
    except Exception as exc:  # never a traceback for users; one line with the way to get one
        if os.environ.get("SGLANG_KIMI_EAGLE3_DEBUG"):
            raise
        msg = " ".join(f"{type(exc).__name__}: {exc}".split())
        print(f"sglang-kimi-eagle3: internal error in '{name}': {msg[:400]} "
              "(rerun with SGLANG_KIMI_EAGLE3_DEBUG=1 for the traceback)", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
