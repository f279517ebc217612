"""The one exception type for bad user input (pure).

A `UserError` message is a single line that names the file, field, flag or variable, what was found,
and the fix. The CLI prints it as `sglang-kimi-eagle3: error: <message>` and exits 2; inside a server
launch it is raised as-is, so SGLang's own log shows that line instead of a deep traceback.
"""


class UserError(ValueError):
    """Unusable input: unreadable file, malformed JSON, unknown flag or policy value."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))  # always one line


def run_script(run, argv, name: str) -> int:
    """A script's main: `run(argv)` (sys.argv[1:] when argv is None); a UserError is its one line on stderr
    as `<name>: error: <message>`, exit status 2."""
    import sys

    try:
        return run(sys.argv[1:] if argv is None else argv)
    except UserError as exc:
        print(f"{name}: error: {exc}", file=sys.stderr)
        return 2


MAX_JSON_BYTES = 64 << 20  # a config/profile/bench file larger than this is not one (a device, a dump)


def show(value, limit: int = 60) -> str:
    """A short, one-line description of a found value: repr plus its JSON type."""
    text = repr(value)
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    kind = {bool: "boolean", int: "integer", float: "number", str: "string", list: "list", dict: "object",
            type(None): "null"}.get(type(value), type(value).__name__)
    return f"{text} ({kind})"
