"""The one status table of every hook this plugin touches, and per-process call counters (pure).

SGLang logs and swallows exceptions raised by plugins and by `HookRegistry.apply_hooks`, so a hook
that silently failed would otherwise look exactly like one that worked. Every hook therefore records
here what happened to it; `sglang-kimi-eagle3 status` prints the table, preflight reads it, tests
assert it.

Install states (what registration did):
  registered  queued (HookRegistry / resolution step), not yet confirmed in effect in this process
  applied     in effect: the upstream attribute now routes through our function
  skipped     deliberately not applied; `detail` says why (kill switch, upstream already has it, ...)
  failed      tried and did not take effect; `detail` carries the error

Counters (this process only): every kernel hook counts each call it sees, as `ours` (our kernel ran)
or `sglang` (handed to SGLang's function) with the reason, per shape bucket. Calls replayed from a
CUDA graph never reach Python: a captured batch size is counted once, at capture.

Status words (`status_word`, what an operator reads):
  active                                    bound at every call site, our kernel chosen for some shape here
  installed, SGLang kernel for this GPU/shapes   bound, but every call so far went to SGLang's function
  skipped (why)          failed (error)
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass

STATES = ("registered", "applied", "skipped", "failed")


@dataclass(slots=True)
class HookStatus:
    name: str  # short id, e.g. "context_policy"
    target: str  # upstream dotted path (or "-" when the hook has no single target)
    state: str
    detail: str = ""

    def __post_init__(self):
        if self.state not in STATES:
            raise ValueError(f"hook state {self.state!r} is not one of {STATES}")


_TABLE: dict[str, HookStatus] = {}
# (hook, "ours" | "sglang", shape bucket, reason) -> calls
_COUNTS: Counter = Counter()
_CALLS = [0]  # calls counted so far in this process (the status writer rewrites its file when it grows)
_LISTENERS: list = []  # fn(hook, who, bucket, reason) per counted call (integration/hooks/metrics.py)


def record(name: str, target: str, state: str, detail: str = "") -> HookStatus:
    """Set (or overwrite) the row of hook `name`; returns it."""
    row = HookStatus(name, target, state, detail)
    _TABLE[name] = row
    return row


def get(name: str) -> HookStatus | None:
    return _TABLE.get(name)


def rows() -> list[HookStatus]:
    return list(_TABLE.values())


def as_dicts() -> list[dict]:
    return [asdict(r) for r in _TABLE.values()]


def clear() -> None:
    """Forget every row and counter (tests, and re-registration after the kill switch changes)."""
    _TABLE.clear()
    _COUNTS.clear()


# ---- counters ------------------------------------------------------------------------------------


def count(hook: str, who: str, bucket: str, reason: str = "") -> None:
    """One call of `hook`: who ran it ("ours" | "sglang"), its shape bucket, why it went to SGLang."""
    _COUNTS[(hook, who, bucket, reason)] += 1
    _CALLS[0] += 1
    for fn in _LISTENERS:
        fn(hook, who, bucket, reason)


def count_items() -> list[tuple[tuple[str, str, str, str], int]]:
    """((hook, who, bucket, reason), calls) for every counter of this process."""
    return list(_COUNTS.items())


def add_listener(fn) -> None:
    """Call fn(hook, who, bucket, reason) on every counted call from now on (an exporter). Idempotent."""
    if fn not in _LISTENERS:
        _LISTENERS.append(fn)


def remove_listener(fn) -> None:
    if fn in _LISTENERS:
        _LISTENERS.remove(fn)


def calls() -> int:
    """How many calls were counted in this process so far (any hook), plus bump()s: the status writer rewrites
    its file when this grows."""
    return _CALLS[0]


def bump() -> None:
    """The table changed outside a counted call (a row's detail grew while serving): have it written again."""
    _CALLS[0] += 1


def counters(hook: str | None = None) -> dict:
    """{hook: {"ours": {bucket: n}, "sglang": {reason: {bucket: n}}}} for this process."""
    out: dict = {}
    for (h, who, bucket, reason), n in sorted(_COUNTS.items()):
        if hook is not None and h != hook:
            continue
        node = out.setdefault(h, {"ours": {}, "sglang": {}})
        if who == "ours":
            node["ours"][bucket] = node["ours"].get(bucket, 0) + n
        else:
            node["sglang"].setdefault(reason or "-", {})[bucket] = n
    return out


def totals(hook: str) -> tuple[int, int]:
    """(calls ours, calls SGLang's) of one hook in this process."""
    ours = sum(n for (h, who, _b, _r), n in _COUNTS.items() if h == hook and who == "ours")
    theirs = sum(n for (h, who, _b, _r), n in _COUNTS.items() if h == hook and who != "ours")
    return ours, theirs


# ---- what an operator reads ----------------------------------------------------------------------


def status_word(row: HookStatus, unbound: list[str] | None = None, kernel: bool = False,
                planned_wins: int = 0) -> str:
    """The status word of a hook: install state + call-site verification + (kernel hooks) counters.

    unbound: call sites that still hold SGLang's function (None: not verified, e.g. not imported yet).
    planned_wins: shapes the launch table in effect gives to our kernel (used before any call; -1: all).
    """
    if row.state == "failed":
        return f"failed ({row.detail})"
    if row.state == "skipped":
        return f"skipped ({row.detail})"
    if unbound:
        return f"failed (not bound at {', '.join(unbound)}: that caller still runs SGLang's function)"
    if row.state == "registered":
        return f"installed ({row.detail})" if not kernel else \
            "installed, not yet confirmed in this process; SGLang kernel so far"
    if not kernel:
        return "active"
    ours, theirs = totals(row.name)
    if ours:
        return "active"
    if not theirs and planned_wins < 0:
        return "installed, ours for every call in its fast path (SGLANG_KIMI_EAGLE3_KERNELS=ours); no calls yet here"
    if not theirs and planned_wins:
        return f"installed, ours where the launch table records a win ({planned_wins} shape(s)); no calls yet here"
    return "installed, SGLang kernel for this GPU/shapes"

