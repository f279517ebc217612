"""Typed checks of every external value (pure: stdlib only); files themselves are read by documents.py.

Fields of config files, profiles and bench/cost JSON, command-line flags and output paths all go through
these checks. Each raises `UserError` with one line naming the file (or flag), the field, what was found
and what was expected, so a bad value is an exit-2 message and never a traceback deep inside the
code that uses it (ZeroDivisionError, TypeError, ...).

  read_json_file(path, ...)          JSON from a regular file, through documents.read_document (one reader,
                                     one wording): missing / unreadable / not UTF-8 / malformed / too deep
  int_field, float_field, str_field, list_field, dict_field, bool_field
                                     typed reads of `d[key]` with range checks ("where" = the file; a
                                     dotted key 'a.b' names the field and reads d['b'])
  int_flag, float_flag, int_list_flag, float_list_flag, url_flag
                                     the same for command-line values ("where" = the flag)
  refuse_empty(args, attr=flag)      a flag given '' is refused, never read as absent
  expand_path(path, flag)            the one `~` expansion: `~user` unknown, no home, empty, a parent that
                                     cannot be searched -> UserError naming the flag (never RuntimeError)
  check_output_file(path, flag)      an output file can be written (before any long work starts)
  atomic_write_text(path, text)      atomic.write_atomic (temp file + fsync + os.replace, umask mode) as UserError
"""

from __future__ import annotations

import argparse
import math
import os
import stat
import tempfile
from pathlib import Path

from .atomic import write_atomic
from .documents import read_document
from .errors import MAX_JSON_BYTES, UserError, show  # noqa: F401  (re-exported: many modules take them from here)

MISSING = object()


def _fail(where: str, key: str, value, expected: str, fix: str = "") -> UserError:
    msg = f"{where}: field {key!r} = {show(value)}; expected {expected}"
    return UserError(msg + (f"; {fix}" if fix else ""))


def _get(d, key: str, where: str, default, required: bool):
    """d[key]; `key` may be a dotted display name ('text_config.hidden_size'): its last part is looked up."""
    if not isinstance(d, dict):
        raise UserError(f"{where}: expected an object holding {key!r}, found {show(d)}")
    k = key.rsplit(".", 1)[-1]
    if k in d and d[k] is not None:
        return d[k]
    if default is not MISSING:
        return default
    if required:
        raise UserError(f"{where}: field {key!r} is missing")
    return None


def is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _range(lo, hi) -> str:
    if lo is not None and hi is not None:
        return f"in [{lo}, {hi}]"
    if lo is not None:
        return f">= {lo}"
    return f"<= {hi}" if hi is not None else ""


def check_int(v, where: str, key: str, lo=None, hi=None, fix: str = "") -> int:
    """An integer (an integral float such as 4096.0 counts, as Python's json gives it) in [lo, hi]."""
    if isinstance(v, float) and math.isfinite(v) and v == int(v):
        v = int(v)
    if not is_int(v) or (lo is not None and v < lo) or (hi is not None and v > hi):
        raise _fail(where, key, v, " ".join(x for x in ("an integer", _range(lo, hi)) if x), fix)
    return v


def check_float(v, where: str, key: str, lo=None, hi=None, lo_open: bool = False, fix: str = "") -> float:
    """A finite number in [lo, hi] (or (lo, hi] with lo_open)."""
    bad = not is_number(v) or (lo is not None and (v <= lo if lo_open else v < lo)) or (hi is not None and v > hi)
    if bad:
        rng = (f"> {lo}" + (f" and <= {hi}" if hi is not None else "")) if lo_open else _range(lo, hi)
        raise _fail(where, key, v, " ".join(x for x in ("a finite number", rng) if x), fix)
    return float(v)


def check_str(v, where: str, key: str, nonempty: bool = True, choices=None) -> str:
    if not isinstance(v, str) or (nonempty and not v.strip()):
        raise _fail(where, key, v, "a non-empty string" if nonempty else "a string")
    if choices is not None and v not in choices:
        raise _fail(where, key, v, f"one of {', '.join(map(str, choices))}")
    return v


def int_field(d: dict, key: str, where: str, *, lo=None, hi=None, default=MISSING, required: bool = True,
              fix: str = "") -> int | None:
    v = _get(d, key, where, default, required)
    return None if v is None else check_int(v, where, key, lo, hi, fix)


def float_field(d: dict, key: str, where: str, *, lo=None, hi=None, lo_open: bool = False, default=MISSING,
                required: bool = True, fix: str = "") -> float | None:
    v = _get(d, key, where, default, required)
    return None if v is None else check_float(v, where, key, lo, hi, lo_open, fix)


def str_field(d: dict, key: str, where: str, *, default=MISSING, required: bool = True, nonempty: bool = True,
              choices=None) -> str | None:
    v = _get(d, key, where, default, required)
    return None if v is None else check_str(v, where, key, nonempty, choices)


def bool_field(d: dict, key: str, where: str, *, default=MISSING, required: bool = True) -> bool | None:
    v = _get(d, key, where, default, required)
    if v is None:
        return None
    if not isinstance(v, bool):
        raise _fail(where, key, v, "true or false")
    return v


def list_field(d: dict, key: str, where: str, *, default=MISSING, required: bool = True, nonempty: bool = False,
               item=None, what: str = "a list") -> list | None:
    """A list; `item(value, where, "key[i]")` checks (and may convert) each element."""
    v = _get(d, key, where, default, required)
    if v is None:
        return None
    if not isinstance(v, list) or (nonempty and not v):
        raise _fail(where, key, v, ("a non-empty " + what.removeprefix("a ")) if nonempty else what)
    return [item(x, where, f"{key}[{i}]") for i, x in enumerate(v)] if item else list(v)


def dict_field(d: dict, key: str, where: str, *, default=MISSING, required: bool = True) -> dict | None:
    v = _get(d, key, where, default, required)
    if v is None:
        return None
    if not isinstance(v, dict):
        raise _fail(where, key, v, "an object")
    return v


# --- files -----------------------------------------------------------------------------------------
def _kind(mode: int) -> str:
    return ("a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else
            "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file")


def read_json_file(path, missing_hint: str = "check the path", what: str = "JSON"):
    """Parsed JSON from a regular file (any top-level type): documents.read_document with `what` as the kind,
    so every file this plugin reads is refused in the same words ("<path>: no such <what> file; <hint>",
    "<path>: not a <what> file: <why>")."""

    return read_document(path, what, lambda doc, where: doc, hint=missing_hint, max_bytes=MAX_JSON_BYTES)


def read_json_object(path, missing_hint: str = "check the path", what: str = "JSON") -> dict:
    data = read_json_file(path, missing_hint, what)
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a JSON object at the top level, found {show(data)}")
    return data


def expand_path(path, flag: str) -> Path:
    """`path` with a leading `~` / `~user` expanded (Path.expanduser raises RuntimeError on an unknown user or a
    missing home): an empty path, an unknown user, no home folder, or a parent folder this process may not
    search -> one UserError line naming `flag`. Every path a user hands to a command goes through here."""
    text = os.fspath(path) if isinstance(path, os.PathLike) else path
    if not isinstance(text, str) or not text.strip():
        raise UserError(f"{flag} is empty; give a path")
    if "\x00" in text:
        raise UserError(f"{flag} {text!r}: a path cannot hold a NUL character")
    p = Path(text)
    if text.startswith("~"):
        user = text[1:].split("/", 1)[0]
        try:
            p = p.expanduser()
        except RuntimeError:
            p = None
        if p is None or str(p).startswith("~"):
            who = f"there is no user {user!r} on this machine" if user else "this process has no home folder ($HOME unset)"
            raise UserError(f"{flag} {text}: cannot expand '~' ({who}); write the full path")
    try:
        os.stat(p)
    except PermissionError as exc:
        raise UserError(f"{flag} {text}: a folder on the way to it may not be read or searched "
                        f"({exc.strerror or exc}); give a path this user can reach") from None
    except (OSError, ValueError):
        pass  # missing, a file as a parent, ...: the caller's own check names it
    return p


def check_output_file(path, flag: str) -> Path:
    """Refuse, before any long work, an output path that cannot be written (or must not be replaced).

    Missing folder, a parent that is a file, a path that is a folder / FIFO / device, a folder we cannot
    create files in (read-only, /proc) -> UserError naming the flag.
    """
    if not str(path).strip():
        raise UserError(f"{flag} is empty; give a file path")
    p = expand_path(path, flag)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        st = None
    except NotADirectoryError:
        raise UserError(f"{flag} {path}: a parent of it is a file, not a folder") from None
    except OSError as exc:
        raise UserError(f"{flag} {path}: cannot be used ({exc.strerror or exc})") from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise UserError(f"{flag} {path}: is a folder; give a file path inside it")
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise UserError(f"{flag} {path}: is {_kind(st.st_mode)}; give a regular file path")
    parent = p.parent
    if not parent.is_dir():
        hint = "is a file, not a folder" if parent.exists() else "does not exist; create it first"
        raise UserError(f"{flag} {path}: the folder {parent} {hint}")
    try:
        fd, probe = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".probe", dir=parent)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise UserError(f"{flag} {path}: cannot create files in {parent} ({exc.strerror or exc})") from None
    return p


def check_output_dir(path, flag: str) -> Path:
    """An output folder that exists and is writable, or whose parent is (it is created later)."""
    p = expand_path(path, flag)
    if p.exists() and not p.is_dir():
        raise UserError(f"{flag} {path}: exists and is not a folder")
    probe_in = p if p.is_dir() else p.parent
    if not probe_in.is_dir():
        raise UserError(f"{flag} {path}: the folder {probe_in} does not exist; create it first")
    try:
        fd, probe = tempfile.mkstemp(prefix=".probe.", dir=probe_in)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise UserError(f"{flag} {path}: cannot create files in {probe_in} ({exc.strerror or exc})") from None
    return p


def atomic_write_bytes(path, data: bytes, flag: str = "output") -> str:
    """atomic.write_atomic, its failure as one UserError line naming `flag`; the old file stays intact."""
    try:
        write_atomic(path, data)
    except OSError as exc:
        raise UserError(f"{flag} {path}: could not be written ({exc.strerror or exc}); nothing was replaced") from None
    return str(Path(path))


def atomic_write_text(path, text: str, flag: str = "output") -> str:
    return atomic_write_bytes(path, text.encode("utf-8"), flag)


# --- command-line values -----------------------------------------------------------------------------
def _flag_fail(flag: str, text, expected: str) -> UserError:
    return UserError(f"{flag} {text!r}: expected {expected}")


def int_flag(text, flag: str, lo=None, hi=None) -> int:
    try:
        v = int(str(text).strip())
    except ValueError:
        raise _flag_fail(flag, text, " ".join(x for x in ("an integer", _range(lo, hi)) if x)) from None
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise _flag_fail(flag, text, f"an integer {_range(lo, hi)}")
    return v


def float_flag(text, flag: str, lo=None, hi=None, lo_open: bool = False) -> float:
    try:
        v = float(str(text).strip())
    except ValueError:
        v = None
    rng = (f"> {lo}" + (f" and <= {hi}" if hi is not None else "")) if lo_open else _range(lo, hi)
    if v is None or not math.isfinite(v) or (lo is not None and (v <= lo if lo_open else v < lo)) or \
            (hi is not None and v > hi):
        raise _flag_fail(flag, text, " ".join(x for x in ("a finite number", rng) if x))
    return v


def int_list_flag(text, flag: str, lo: int = 1, hi: int | None = None, max_items: int = 4096) -> list[int]:
    """'1,2,4' or '1-7' or a mix -> sorted distinct ints in [lo, hi]; at most `max_items` values."""
    want = f"comma-separated integers{' ' + _range(lo, hi) if _range(lo, hi) else ''} or ranges like 1-7"
    parts = [x.strip() for x in str(text).split(",")]
    if not all(parts):  # also '1,,2' and '1,': a missing value is a typo, as for the float lists
        raise _flag_fail(flag, text, want)
    out: set[int] = set()
    for part in parts:
        lo_s, sep, hi_s = part.partition("-") if not part.startswith("-") else (part, "", "")
        try:
            a = int(lo_s)
            b = int(hi_s) if sep else a
        except ValueError:
            raise _flag_fail(flag, text, want) from None
        if a > b or a < lo or (hi is not None and b > hi):
            raise _flag_fail(flag, text, want)
        if b - a + 1 + len(out) > max_items:
            raise UserError(f"{flag} {text!r}: {b - a + 1 + len(out)} values is more than this command searches "
                            f"(at most {max_items}); give a smaller range")
        out.update(range(a, b + 1))
    return sorted(out)


def float_list_flag(text, flag: str, lo=None, hi=None) -> list[float]:
    parts = [x.strip() for x in str(text).split(",")]
    want = f"comma-separated finite numbers {_range(lo, hi)}, e.g. 0.8,0.6,0.4".strip()
    if not str(text).strip() or any(not x for x in parts):
        raise _flag_fail(flag, text, want)
    try:
        return [float_flag(x, flag, lo, hi) for x in parts]
    except UserError:
        raise _flag_fail(flag, text, want) from None


def refuse_empty(args, **flags: str) -> None:
    """attribute=flag: a flag given an empty value (`--json ''`, a shell variable that expanded to nothing) is one
    UserError naming it, never read as the flag left out."""
    for attr, flag in flags.items():
        value = getattr(args, attr)
        if value is not None and not str(value).strip(" ,"):
            raise UserError(f"{flag} {value!r} is empty; give a value or leave {flag} out")


def url_flag(text, flag: str) -> str:
    """An http(s) base URL with a host (and a valid port): 'host:30000' or '[::1' are refused."""
    from urllib.parse import urlsplit

    raw = str(text).strip()
    if any(c.isspace() or not c.isprintable() for c in raw):  # urlsplit drops tab/CR/LF silently: another URL
        raise UserError(f"{flag} {text!r}: holds a space or control character; type the URL on one line without "
                        f"spaces, e.g. http://127.0.0.1:30000")
    try:
        u = urlsplit(raw)
        port = u.port  # ValueError for a non-numeric or out-of-range port
    except ValueError as exc:
        raise UserError(f"{flag} {text!r}: not a valid URL ({exc}); use e.g. http://127.0.0.1:30000") from None
    if u.scheme not in ("http", "https"):
        rest = raw.split("://", 1)[-1].lstrip("/") or "127.0.0.1:30000"  # ftp://h -> http://h, not http://ftp://h
        raise UserError(f"{flag} {text!r}: needs an http:// or https:// scheme; use e.g. http://{rest}")
    if not u.hostname:
        raise UserError(f"{flag} {text!r}: has no host; use e.g. http://127.0.0.1:30000")
    if u.query or u.fragment:
        raise UserError(f"{flag} {text!r}: a base URL takes no ?query or #fragment")
    del port
    return raw.rstrip("/")


class ArgParser(argparse.ArgumentParser):
    """argparse, but a bad flag is one UserError line (exit 2 through cli.py), never usage + SystemExit."""

    def error(self, message: str):
        raise UserError(f"{self.prog}: {message} (see --help)")
