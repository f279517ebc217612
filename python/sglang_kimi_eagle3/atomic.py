"""The one writer of every file this package writes (pure: stdlib only).

`write_atomic(path, data)`: a temp file in the same folder, flushed and fsynced, given the mode a plain
`open(path, "w")` would give (0666 minus the umask, not the 0600 of a temp file), then `os.replace`d
over `path`: a reader sees the old file or the new one, never half of one, and a failure leaves the old
file intact (the temp file is removed). Raises OSError; callers turn it into their own message.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path


def umask() -> int:
    """This process's umask, read without changing it where /proc tells (threads may be writing)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def write_atomic(path, data: str | bytes, *, mkdir: bool = False, check=None) -> Path:
    """Replace `path` with `data` (str: UTF-8) atomically. mkdir: create missing parent folders.
    check(tmp_path): run on the complete temp file before it replaces `path` (it may raise)."""
    p = Path(path)
    if mkdir:
        p.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
            fh.flush()
            os.fchmod(fh.fileno(), 0o666 & ~umask())
            os.fsync(fh.fileno())
        if check is not None:
            check(tmp)
        os.replace(tmp, p)
        tmp = None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
    return p


def write_json_atomic(path, doc, *, mkdir: bool = False) -> Path:
    """`doc` as indented JSON plus a newline (write_atomic)."""
    return write_atomic(path, json.dumps(doc, indent=1) + "\n", mkdir=mkdir)
