"""Hooks: `--speculative-draft-context-policy` on SGLang's own server-args parser.

Upstream targets (sglang 0.5.23 srt/server_args.py):
  ServerArgs.add_cli_args (staticmethod, :351) - AFTER: add our flag to the parser every SGLang
    entrypoint builds (launch_server, `sglang serve`, --config YAML merging), so argparse accepts it,
    validates its choices and lists it in --help.
  ServerArgs.from_cli_args (classmethod, :446) - AROUND: the record only copies its declared fields,
    so we carry the parsed value as a bookkeeping attribute `_kimi_eagle3_context_policy` (underscore
    names are allowed on the record and survive pickling to scheduler processes via __reduce__).
Why: the context policy is a per-launch decision; an env var alone is easy to leave behind.
How: read back with `policy_of(server_args)`; the env var SGLANG_KIMI_EAGLE3_CONTEXT_POLICY is the
  fallback when the flag is absent (Engine API users).
Upstream issue: none (SGLang has no draft-scoped context flag). Remove when it does.
"""

from __future__ import annotations

from ..policy.context import FLAG, POLICIES
from . import registry

ATTR = "_kimi_eagle3_context_policy"
DEST = "speculative_draft_context_policy"


def install() -> None:
    registry.register("cli_flag", "sglang.srt.server_args.ServerArgs.add_cli_args", _add_cli_args, "after")
    registry.register("cli_flag_value", "sglang.srt.server_args.ServerArgs.from_cli_args", _from_cli_args, "around")


def add_flag(parser) -> None:
    """Add the flag to an argparse parser (also used by our own `check` command)."""
    if any(FLAG in a.option_strings for a in parser._actions):
        return
    parser.add_argument(
        FLAG, dest=DEST, choices=POLICIES, default=None,
        help="[sglang-kimi-eagle3] how a draft with fewer positions than the served context is reconciled: "
             "auto (default: extend), strict (refuse), extend (lift only the draft's limit), yarn (YaRN-scale a "
             "plain-RoPE draft), cap (serve the draft's length). Env: SGLANG_KIMI_EAGLE3_CONTEXT_POLICY.")


def _add_cli_args(result, parser, *args, **kwargs):
    add_flag(parser)
    return result


def _from_cli_args(original, cls, args, *rest, **kwargs):
    server_args = original(cls, args, *rest, **kwargs)
    value = getattr(args, DEST, None)
    if value is not None:
        setattr(server_args, ATTR, value)
    return server_args


def policy_of(server_args) -> str | None:
    """The flag's value carried on a ServerArgs record, or None."""
    return getattr(server_args, ATTR, None) if server_args is not None else None
