"""The one reader of external files: JSON this plugin did not write itself (pure: stdlib only).

validate.py checks the values (fields, flags); it reads files only through here (validate.read_json_file).

`status --running FILE`, `plan --bench/--profile/--costs`, `bench --baseline-json` all read through
`read_document(path, kind, check)`, and so do model configs and launch tables (validate.read_json_file).
Whatever the file is, the answer is the checked document or one UserError line, raised before the command
prints anything:
  - not there:                          "<path>: no such <kind> file; <hint>"
  - a folder, FIFO, socket or device:   refused from its stat, never opened (a FIFO would block, /dev/zero
                                        would never end)
  - larger than `max_bytes`:            refused from its stat, and never more than max_bytes + 1 read
  - empty, UTF-16/32 or with a byte-order mark, not UTF-8, malformed JSON, too deep, the wrong shape or a
    field of the wrong type (a list, a bench file given as a status file, a counter that is a string):
                                        "<path>: not a <kind> file: <why>"
`check(doc, where)` validates the parsed JSON (validate.py's readers, or any code raising UserError);
its message loses its "<where>: " prefix and becomes the <why>.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from .errors import MAX_JSON_BYTES, UserError, show

T = TypeVar("T")
MAX_BYTES = MAX_JSON_BYTES


class NotThatKind(UserError):
    """A file that exists and is readable, but is not a <kind> file."""


def _kind_of(mode: int) -> str:
    return ("a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file")


def _sniff(head: bytes, bad) -> None:
    """The start of a file: UTF-16/32 (a byte-order mark, or NULs in every other byte) and binary data refused."""
    if head[:2] in (b"\xff\xfe", b"\xfe\xff") or (len(head) > 1 and (head[0] == 0) != (head[1] == 0)):
        raise bad("encoded as UTF-16/32, not UTF-8 (SGLang and transformers read UTF-8); re-save it as UTF-8")
    if b"\x00" in head:
        raise bad(f"binary data (a NUL byte at offset {head.index(0)}), not UTF-8 text")


def read_text(path, kind: str, *, hint: str = "check the path", flag: str | None = None,
              max_bytes: int = MAX_BYTES) -> str:
    """The UTF-8 text of a regular file of at most max_bytes (FIFOs, devices, folders, UTF-16, a byte-order mark and
    empty files refused unread, each one line naming the file): what every reader of a foreign file starts with.
    Its first 64 KiB are checked before the rest is read: binary data (a NUL byte, which UTF-8 text never holds)
    is refused there, not after reading a gigabyte of it."""
    p = Path(path)
    where = f"{flag} {p}" if flag else str(p)

    def bad(why: str) -> NotThatKind:
        return NotThatKind(f"{where}: not a {kind} file: {why}")

    try:
        st = os.stat(p)
    except FileNotFoundError:
        if os.path.islink(p):
            raise UserError(f"{where}: a symbolic link to {os.readlink(p)!r}, which does not exist; {hint}") from None
        raise UserError(f"{where}: no such {kind} file; {hint}") from None
    except NotADirectoryError:
        raise UserError(f"{where}: no such {kind} file (a parent of it is a file, not a folder); {hint}") from None
    except OSError as exc:
        raise UserError(f"{where}: cannot be read ({exc.strerror or exc}); check the path and its folders' "
                        "permissions") from None
    if not stat.S_ISREG(st.st_mode):
        raise bad(f"it is {_kind_of(st.st_mode)}, not a regular file")
    if st.st_size > max_bytes:
        raise bad(f"{st.st_size} bytes, more than a {kind} file holds (at most {max_bytes})")
    try:
        with open(p, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):  # replaced between stat and open
                raise bad("it is not a regular file")
            raw = fh.read(min(max_bytes + 1, 1 << 16))
            _sniff(raw, bad)
            if len(raw) <= max_bytes:
                raw += fh.read(max_bytes + 1 - len(raw))
    except OSError as exc:
        raise UserError(f"{where}: exists but cannot be read ({exc.strerror or exc}); check its permissions") from None
    if len(raw) > max_bytes:
        raise bad(f"more than {max_bytes} bytes")
    if not raw.strip():
        raise bad("it is empty")
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff") or (len(raw) > 1 and (raw[0] == 0) != (raw[1] == 0)):
        raise bad("encoded as UTF-16/32, not UTF-8 (SGLang and transformers read UTF-8); re-save it as UTF-8")
    if raw.startswith(b"\xef\xbb\xbf"):
        raise bad("it starts with a UTF-8 byte-order mark, which JSON readers reject; re-save it without one")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise bad(f"not UTF-8 text (byte {raw[exc.start]:#04x} at offset {exc.start})") from None


def read_document(path, kind: str, check: Callable[[object, str], T] | None = None, *, hint: str = "check the path",
                  flag: str | None = None, max_bytes: int = MAX_BYTES) -> T:
    """The JSON in `path` (read_text), checked by `check(doc, str(path))` (default: any JSON object)."""
    p = Path(path)
    where = f"{flag} {p}" if flag else str(p)

    def bad(why: str) -> NotThatKind:
        return NotThatKind(f"{where}: not a {kind} file: {why}")

    text = read_text(path, kind, hint=hint, flag=flag, max_bytes=max_bytes)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise bad(f"malformed JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    except RecursionError:
        raise bad("JSON nested too deeply") from None
    if check is None:
        if not isinstance(doc, dict):
            raise bad(f"the top level is {show(doc)}, not an object")
        return doc
    try:
        return check(doc, str(p))
    except NotThatKind:
        raise
    except UserError as exc:
        msg = str(exc)
        for prefix in (f"{p}: ", f"{flag} {p}: " if flag else None):
            if prefix and msg.startswith(prefix):
                msg = msg[len(prefix):]
        raise bad(msg) from None
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, RecursionError) as exc:
        raise bad(f"{type(exc).__name__}: {exc}") from None


def require_object(doc, where: str, needs: tuple[str, ...] = ()) -> dict:
    """`doc` as a JSON object holding every key of `needs`."""
    if not isinstance(doc, dict):
        raise UserError(f"{where}: the top level is {show(doc)}, not an object")
    missing = [k for k in needs if k not in doc]
    if missing:
        raise UserError(f"{where}: no {', '.join(repr(k) for k in missing)}")
    return doc


def refuse_unknown_keys(node: dict, known, where: str, section: str) -> None:
    """A key this file format does not have is a typo or a foreign file: name it and the nearest known key."""
    import difflib

    for k in node:
        if k not in known:
            near = difflib.get_close_matches(str(k), list(known), n=1)
            raise UserError(f"{where}: unknown key {k!r} in {section}" + (f" (did you mean {near[0]!r}?)" if near else "")
                            + f"; known: {', '.join(sorted(known))}")
