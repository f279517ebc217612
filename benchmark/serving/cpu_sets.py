"""Disjoint CPU sets of whole cores, and a command run on one (device_adaptive.sh, DA_PIN=1: the co-resident servers
on one set, the load client on another).

Why: co-resident servers (plain / ours / ours_q2 on one GPU) and the load client share the host's CPUs, and a
host-bound prefill runs as fast as the CPU its scheduler thread lands on: a busy client on the same CPU slows it, and
on an H100 lease (2026-12-07, benchmark/host/cpu_neighbours.py) the CPUs themselves launched at two speeds, some at
one speed for minutes. Pinned, the servers' processes (the HTTP server, its scheduler, its detokenizer: children
inherit the mask) keep to CPUs of their own, away from the client's.

    python3 benchmark/serving/cpu_sets.py N                  # N sets, one per line ("0-3"), the topology on stderr
    python3 benchmark/serving/cpu_sets.py --run 0-3 -- CMD   # run CMD with its CPU mask set to 0-3 (exec)
    python3 benchmark/serving/cpu_sets.py --pin-tree PID 0 1-11
        # PID and every process below it, each of its threads: a process titled `sglang::scheduler...` (SGLang's
        # scheduler) on the first list, the others on the second

Sets are whole physical cores (a core's SMT siblings stay together: /sys/devices/system/cpu/cpuN/topology), split into
N runs of consecutive cores as evenly as the cores allow (the first sets take the extra core); with fewer cores than
sets, CPUs are split instead; with fewer CPUs than sets, sets share CPUs (set i takes CPU i mod n). Only CPUs this
process may run on are used (os.sched_getaffinity). Linux only; nothing here imports sglang.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def parse_list(text: str) -> list[int]:
    """A kernel CPU list ("0-3,8,10-11") as CPU numbers; ValueError where it is not one."""
    out: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        a, b = int(lo), int(hi) if sep else int(lo)
        if b < a:
            raise ValueError(f"{part}: a range runs low to high")
        out.extend(range(a, b + 1))
    if not out:
        raise ValueError("no CPU in the list")
    return out


def format_list(cpus) -> str:
    """CPU numbers as a kernel CPU list: runs as ranges ("0-3,8")."""
    cpus = sorted(set(cpus))
    runs: list[list[int]] = []
    for c in cpus:
        if runs and c == runs[-1][1] + 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return ",".join(f"{a}-{b}" if b > a else f"{a}" for a, b in runs)


def cores(cpus, sysfs: str = "/sys/devices/system/cpu") -> list[list[int]]:
    """`cpus` grouped by physical core (SMT siblings together, from sysfs; a CPU sysfs does not describe is a core
    of its own), in order of each core's first CPU."""
    allowed = set(cpus)
    seen: set[int] = set()
    groups: list[list[int]] = []
    for c in sorted(allowed):
        if c in seen:
            continue
        sib = [c]
        for name in ("core_cpus_list", "thread_siblings_list"):
            f = Path(sysfs) / f"cpu{c}" / "topology" / name
            try:
                sib = [s for s in parse_list(f.read_text()) if s in allowed] or [c]
                break
            except (OSError, ValueError):
                continue
        sib = sorted(set(sib) | {c})
        seen.update(sib)
        groups.append(sib)
    return groups


def _split(items: list, n: int) -> list[list]:
    """`items` in n consecutive runs, as even as they go (the first runs one longer)."""
    q, r = divmod(len(items), n)
    out, i = [], 0
    for k in range(n):
        step = q + (1 if k < r else 0)
        out.append(items[i:i + step])
        i += step
    return out


def plan(n: int, cpus=None, sysfs: str = "/sys/devices/system/cpu") -> list[list[int]]:
    """n CPU sets: whole cores where there are at least n, else single CPUs, else shared CPUs (see the module doc)."""
    if n < 1:
        raise ValueError("at least one set")
    cpus = sorted(cpus if cpus is not None else os.sched_getaffinity(0))
    groups = cores(cpus, sysfs)
    if len(groups) >= n:
        return [sorted(c for core in run for c in core) for run in _split(groups, n)]
    if len(cpus) >= n:
        return _split(cpus, n)
    return [[cpus[i % len(cpus)]] for i in range(n)]


SCHEDULER_TITLE = "sglang::scheduler"  # SGLang 0.5.23 titles its scheduler processes so (setproctitle: the cmdline)


def descendants(root: int, proc: str = "/proc") -> list[int]:
    """root and every process below it (by each process's parent in /proc/PID/stat), root first."""
    parent: dict[int, int] = {}
    for d in os.listdir(proc):
        if d.isdigit():
            try:
                stat = Path(proc, d, "stat").read_text()
                parent[int(d)] = int(stat[stat.rindex(")") + 2:].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    out, todo = [], [root]
    while todo:
        p = todo.pop(0)
        out.append(p)
        todo.extend(sorted(c for c, pp in parent.items() if pp == p))
    return out


def pin_tree(root: int, sched: set[int], rest: set[int]) -> list[tuple[int, str, str]]:
    """Every thread of root and of each process below it on `sched` (a scheduler: titled SCHEDULER_TITLE) or on
    `rest`; (pid, its command line's first 60 characters, "sched" / "rest") for each process pinned. A process or a
    thread gone meanwhile is skipped."""
    done = []
    for pid in descendants(root):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
        except OSError:
            continue
        which = "sched" if cmd.startswith(SCHEDULER_TITLE) else "rest"
        for tid in tids:
            try:
                os.sched_setaffinity(tid, sched if which == "sched" else rest)
            except OSError:
                pass
        done.append((pid, cmd[:60], which))
    return done


def main(argv: list[str]) -> int:
    if argv[:1] == ["--pin-tree"]:
        try:
            root, sched, rest = int(argv[1]), set(parse_list(argv[2])), set(parse_list(argv[3]))
        except (IndexError, ValueError) as exc:
            print(f"cpu_sets.py --pin-tree PID SCHED_LIST REST_LIST: {exc}", file=sys.stderr)
            return 2
        if not Path(f"/proc/{root}").is_dir():
            print(f"cpu_sets.py --pin-tree: no process {root}", file=sys.stderr)
            return 2
        done = pin_tree(root, sched, rest)
        n = sum(1 for d in done if d[2] == "sched")
        print(f"{len(done)} process{'es' if len(done) != 1 else ''} pinned, {n} scheduler{'s' if n != 1 else ''} on "
              f"{format_list(sched)}, the rest on "
              f"{format_list(rest)}" + ("" if n else " (no process named a scheduler)"))
        return 0
    if argv[:1] == ["--run"]:
        if len(argv) < 4 or argv[2] != "--":
            print("cpu_sets.py --run LIST -- CMD ...: give a CPU list and the command after --", file=sys.stderr)
            return 2
        try:
            mask = set(parse_list(argv[1]))
        except ValueError as exc:
            print(f"cpu_sets.py --run: '{argv[1]}' is not a CPU list ({exc}); e.g. 0-3,8", file=sys.stderr)
            return 2
        os.sched_setaffinity(0, mask)
        os.execvp(argv[3], argv[3:])
    if len(argv) != 1 or not argv[0].isdigit() or int(argv[0]) < 1:
        print("cpu_sets.py N: give the number of sets, 1 or more (or --run LIST -- CMD)", file=sys.stderr)
        return 2
    cpus = sorted(os.sched_getaffinity(0))
    groups = cores(cpus)
    print(f"{len(cpus)} CPUs, {len(groups)} cores (up to {max(len(g) for g in groups)} threads a core)", file=sys.stderr)
    for s in plan(int(argv[0]), cpus):
        print(format_list(s))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
