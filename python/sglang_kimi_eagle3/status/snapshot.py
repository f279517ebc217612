"""The runtime status file a serving scheduler writes (port<PORT>.json), as `status --running` reads it back.
Pure: every field the reader uses is checked before anything is printed, so a foreign or damaged file is
one exit-2 line ("not a status file: ...") and never a traceback after the header.

Format (written by integration/hooks/runtime_status.snapshot):
  {"plugin": str, "pid": int, "time": str, "table_in_effect": str,
   "launch_path": {"fast_path": str, "direct_launch": str, "int_pointers": bool, "fallbacks": {kernel: str}} | null?,
   "hooks": [{"name": str, "status": str, "state": str?, "target": str?, "detail": str?,
              "sites": {"bound": [str], "unbound": [str], ...} | {},
              "call_sites": [str]? (every call site the hook registered in the serving process),
              "table_wins": [...]?,
              "counters": {"ours": {bucket: int}, "sglang": {reason: {bucket: int}}}}]}
"""

from __future__ import annotations

from ..documents import read_document, require_object
from ..errors import UserError
from ..validate import bool_field, check_int, check_str, dict_field, list_field, show, str_field

KIND = "status"


def _counts(node, where: str, key: str) -> None:
    if not isinstance(node, dict):
        raise UserError(f"{where}: field {key!r} = {show(node)}; expected an object of call counts")
    for bucket, n in node.items():
        check_int(n, where, f"{key}.{bucket}", lo=0)


def check_snapshot(doc, where: str) -> dict:
    require_object(doc, where, ("pid", "time", "table_in_effect", "hooks"))
    check_int(doc["pid"], where, "pid", lo=0)
    str_field(doc, "time", where, nonempty=False)
    str_field(doc, "table_in_effect", where, nonempty=False)
    for key in ("plugin", "sglang", "tested_sglang"):  # optional (older files), printed when present
        str_field(doc, key, where, required=False, nonempty=False)
    lp = dict_field(doc, "launch_path", where, required=False)  # absent or null: no launch plan yet (or an older file)
    if lp is not None:
        for key in ("fast_path", "direct_launch"):
            str_field(lp, f"launch_path.{key}", where)
        bool_field(lp, "launch_path.int_pointers", where)
        lp["fallbacks"] = dict_field(lp, "launch_path.fallbacks", where, default={})  # absent or null: none
        for kernel, why in lp["fallbacks"].items():
            check_str(why, where, f"launch_path.fallbacks.{kernel}", True, None)
    hooks = list_field(doc, "hooks", where, what="a list of hook rows")
    for i, h in enumerate(hooks):
        key = f"hooks[{i}]"
        if not isinstance(h, dict):
            raise UserError(f"{where}: field {key!r} = {show(h)}; expected an object")
        str_field(h, f"{key}.name", where)
        str_field(h, f"{key}.status", where)
        for opt in ("state", "target", "detail"):
            str_field(h, f"{key}.{opt}", where, required=False, nonempty=False)
        sites = dict_field(h, f"{key}.sites", where, default={})
        for name in sites:
            list_field(sites, f"{key}.sites.{name}", where, what="a list of call sites")
        list_field(h, f"{key}.call_sites", where, default=[], what="a list of call sites")
        c = dict_field(h, f"{key}.counters", where, default={"ours": {}, "sglang": {}})
        _counts(c.get("ours", {}), where, f"{key}.counters.ours")
        theirs = c.get("sglang", {})
        if not isinstance(theirs, dict):
            raise UserError(f"{where}: field '{key}.counters.sglang' = {show(theirs)}; expected an object")
        for reason, node in theirs.items():
            _counts(node, where, f"{key}.counters.sglang.{reason}")
        h["sites"], h["counters"] = sites, c  # null reads as absent (dict_field), so the printer sees the defaults
        c.setdefault("ours", {})
        c.setdefault("sglang", {})
    return doc


def load(path, hint: str) -> dict:
    """A status file, checked (documents.read_document: FIFOs, devices and huge files refused unread)."""
    return read_document(path, KIND, check_snapshot, hint=hint, max_bytes=16 << 20)
