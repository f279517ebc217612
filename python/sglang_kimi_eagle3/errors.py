"""The one exception type for bad user input (pure).

A `UserError` message is a single line that names the file, field, flag or variable, what was found,
and the fix. The CLI prints it as `sglang-kimi-eagle3: error: <message>` and exits 2; inside a server
launch it is raised as-is, so SGLang's own log shows that line instead of a deep traceback.
"""


class UserError(ValueError):
    """Unusable input: unreadable file, malformed JSON, unknown flag or policy value."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))  # always one line
