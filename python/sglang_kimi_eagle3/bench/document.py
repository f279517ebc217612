"""The bench JSON on disk: atomic writes, and a checked read for `--baseline-json` and `plan --bench` (pure).

A document read back is checked field by field (validate.py) before any number in it is used, so a
hand-edited or foreign file is one exit-2 line naming the file and field, not a ZeroDivisionError later.
"""

from __future__ import annotations

import json

from ..documents import read_document, require_object
from ..errors import UserError
from ..validate import (
    atomic_write_text,
    check_float,
    check_int,
    dict_field,
    float_field,
    int_field,
    list_field,
    str_field,
)

SCHEMA = "sglang-kimi-eagle3-bench/1"  # bench/runner.py writes it
MAX_CONCURRENCY = 4096  # the most `bench --concurrency` runs a level at (commands/bench.py MAX_LEVEL)


def write(doc: dict, path: str, flag: str = "--json") -> str:
    """Temp file + fsync + rename: a crash, a full disk or `ulimit -f` never leaves a partial JSON."""
    return atomic_write_text(path, json.dumps(doc, indent=1, allow_nan=False) + "\n", flag)


def _summary(s, where: str, key: str) -> None:
    if s is None:
        return
    if not isinstance(s, dict):
        raise UserError(f"{where}: field {key!r} = {str(s)[:60]}; expected an object or null")
    for k in ("agg_tok_s", "tok_s_per_req_mean", "tau"):
        float_field(s, f"{key}.{k}", where, required=False, lo=0, lo_open=True)
    for k in ("requests", "ok", "no_spec"):
        int_field(s, f"{key}.{k}", where, required=False, lo=0)
    list_field(s, f"{key}.histogram", where, required=False, what="a list of counts",
               item=lambda v, w, k: check_int(v, w, k, lo=0))
    list_field(s, f"{key}.alpha", where, required=False, what="a list of acceptance values",
               item=lambda v, w, k: None if v is None else check_float(v, w, k, lo=0, hi=1))
    int_field(s, f"{key}.drafts_per_verify", where, required=False, lo=0, hi=1024)
    errors = dict_field(s, f"{key}.errors", where, required=False) or {}
    for kind, n in errors.items():
        check_int(n, where, f"{key}.errors.{kind}", lo=0)
    str_field(s, f"{key}.first_error", where, required=False, nonempty=False)
    _streaming(s, where, key)


def check(doc: dict, path: str) -> dict:
    """`doc` if it is a bench document whose numbers can be used; UserError naming the field otherwise."""
    where = str(path)
    levels = list_field(doc, "levels", where, nonempty=True, what="a list of concurrency levels")
    seen = set()
    for i, lv in enumerate(levels):
        key = f"levels[{i}]"
        if not isinstance(lv, dict):
            raise UserError(f"{where}: field {key!r} = {str(lv)[:60]}; expected an object")
        c = int_field(lv, f"{key}.concurrency", where, lo=1, hi=MAX_CONCURRENCY,
                      fix=f"bench runs no level above concurrency {MAX_CONCURRENCY}")
        if c in seen:
            raise UserError(f"{where}: concurrency {c} appears twice in 'levels'")
        seen.add(c)
        for role in ("spec", "baseline"):
            _summary(lv.get(role), where, f"{key}.{role}")
    _summary(doc.get("overall"), where, "overall")
    servers = dict_field(doc, "servers", where, required=False) or {}
    info = dict_field(servers, "servers.spec", where, required=False) or {}
    for k in ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens"):
        int_field(info, f"servers.spec.{k}", where, required=False, lo=1, hi=1024)
    setting = dict_field(doc, "setting", where, required=False) or {}  # bench/setting.py: what `plan --bench` trusts
    for k in ("steps", "topk", "draft_tokens"):
        int_field(setting, f"setting.{k}", where, required=False, lo=1, hi=1024)
    return doc


def _check_file(doc, where: str) -> dict:
    require_object(doc, where, ("levels",))
    if doc.get("schema") not in (None, SCHEMA):
        raise UserError(f"{where}: schema {doc.get('schema')!r}, this plugin writes {SCHEMA!r}")
    return check(doc, where)


def load(path: str, flag: str) -> dict:
    """Read and check a bench JSON given with `flag` (--baseline-json, --bench): documents.read_document."""
    return read_document(path, "bench", _check_file, flag=flag,
                         hint="give a file written by `sglang-kimi-eagle3 bench --json`")


def _streaming(s: dict, where: str, key: str) -> None:
    """The --stream latency block of a summary (bench/stats.py `streaming`), when there is one."""
    float_field(s, f"{key}.latency_p99_s", where, required=False, lo=0)
    st = dict_field(s, f"{key}.streaming", where, required=False)
    if not st:
        return
    for k in ("ttft_s", "itl_s", "e2e_s"):
        block = dict_field(st, f"{key}.streaming.{k}", where)
        for q in ("p50", "p90", "p99", "mean"):
            float_field(block, f"{key}.streaming.{k}.{q}", where, required=False, lo=0)
