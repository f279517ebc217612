"""Reading launch_server flags the way `check` and `tune` both need them (one scanner, one SGLang parser).

- `flag_value(argv, *names)`: the value of the first `--name VALUE` / `--name=VALUE` (None when absent);
- `refuse_nonpositive(argv)`: GPU and token counts SGLang's parser accepts but a launch cannot use (0, -1), and
  memory fractions outside (0, 1] (nan, 2, -0.5);
- `parse_with_sglang(argv)`: SGLang's own `prepare_server_args`, its refusal as one UserError line.
"""

from __future__ import annotations

import contextlib
import io
import re

from ..errors import UserError

POSITIVE = {"--tp-size": "GPUs", "--tensor-parallel-size": "GPUs", "--context-length": "tokens"}
FRACTIONS = {"--mem-fraction-static": "the share of GPU memory for the weights and the KV pool, e.g. 0.85"}


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


def parse_with_sglang(argv: list[str]):
    """SGLang's launch_server parser over `argv` (plugins loaded first, so our flag is known)."""
    from sglang.srt.server_args import prepare_server_args

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            return prepare_server_args(argv)
    except SystemExit:
        lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
        msg = next((ln for ln in reversed(lines) if "error:" in ln), lines[-1] if lines else "invalid arguments")
        raise UserError(f"launch_server flags rejected by SGLang's parser: {msg.split('error:', 1)[-1].strip()}") from None
