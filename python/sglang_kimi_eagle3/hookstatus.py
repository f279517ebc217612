"""The one status table of every hook this plugin touches (pure: no sglang import).

SGLang logs and swallows exceptions raised by plugins and by `HookRegistry.apply_hooks`, so a hook
that silently failed would otherwise look exactly like one that worked. Every hook therefore records
here what happened to it; `sglang-kimi-eagle3 status` prints the table, preflight reads it, tests
assert it.

States:
  registered  handed to SGLang's HookRegistry, not yet confirmed patched (apply_hooks runs later)
  applied     in effect: the upstream attribute now routes through our function
  skipped     deliberately not applied; `detail` says why (kill switch, upstream already has it, ...)
  failed      tried and did not take effect; `detail` carries the error
"""

from __future__ import annotations

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
    """Forget every row (tests, and re-registration after the kill switch changes)."""
    _TABLE.clear()


def format_table(table: list[HookStatus] | None = None) -> str:
    """Plain-text table, one hook a line, for logs."""
    table = rows() if table is None else table
    if not table:
        return "(no hooks recorded: the plugin's register() has not run in this process)"
    w_name = max(len(r.name) for r in table)
    w_state = max(len(r.state) for r in table)
    lines = []
    for r in table:
        lines.append(f"{r.name:<{w_name}}  {r.state:<{w_state}}  {r.target}" + (f"  ({r.detail})" if r.detail else ""))
    return "\n".join(lines)
