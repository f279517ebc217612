"""benchmark/serving/cpu_sets.py: disjoint CPU sets of whole cores for co-resident servers (DA_PIN=1), from a sysfs
topology written here (16 CPUs as 8 cores of two SMT siblings, numbered as Linux numbers them: N and N + 8), and
`--run` setting the mask of the command it runs."""

import os
import subprocess
import sys

import cpu_sets
import pytest
from helpers import ROOT


def _sysfs(tmp_path, siblings: dict[int, str], name: str = "core_cpus_list"):
    for cpu, text in siblings.items():
        d = tmp_path / f"cpu{cpu}" / "topology"
        d.mkdir(parents=True)
        (d / name).write_text(text + "\n")
    return str(tmp_path)


def test_sets_are_whole_cores_split_evenly(tmp_path):
    sysfs = _sysfs(tmp_path, {c: f"{c % 8},{c % 8 + 8}" for c in range(16)})
    sets = cpu_sets.plan(4, range(16), sysfs)
    assert sets == [[0, 1, 8, 9], [2, 3, 10, 11], [4, 5, 12, 13], [6, 7, 14, 15]]  # siblings never split
    assert [cpu_sets.format_list(s) for s in sets] == ["0-1,8-9", "2-3,10-11", "4-5,12-13", "6-7,14-15"]
    three = cpu_sets.plan(3, range(16), sysfs)  # 8 cores over 3 sets: 3, 3, 2
    assert [len(s) for s in three] == [6, 6, 4] and sorted(c for s in three for c in s) == list(range(16))


def test_fewer_cores_than_sets_splits_cpus_then_shares_them(tmp_path):
    sysfs = _sysfs(tmp_path, {c: f"{c % 2},{c % 2 + 2}" for c in range(4)}, name="thread_siblings_list")  # 2 cores
    assert cpu_sets.plan(2, range(4), sysfs) == [[0, 2], [1, 3]]
    assert cpu_sets.plan(3, range(4), sysfs) == [[0, 1], [2], [3]]  # 2 cores < 3 sets: CPUs split
    assert cpu_sets.plan(5, [0, 1], str(tmp_path / "none")) == [[0], [1], [0], [1], [0]]  # 2 CPUs < 5 sets: shared
    assert cpu_sets.cores([0, 1, 5], str(tmp_path / "none")) == [[0], [1], [5]]  # no topology: a CPU is a core


def test_only_allowed_cpus_are_used(tmp_path):
    sysfs = _sysfs(tmp_path, {c: f"{c % 8},{c % 8 + 8}" for c in range(16)})
    sets = cpu_sets.plan(2, [0, 1, 2, 3, 8, 9], sysfs)  # CPU 10 and 11 (siblings of 2, 3) not ours
    assert sets == [[0, 1, 8, 9], [2, 3]]


def test_lists_parse_and_format():
    assert cpu_sets.parse_list("0-3,8,10-11") == [0, 1, 2, 3, 8, 10, 11]
    assert cpu_sets.format_list([11, 0, 1, 2, 10, 8]) == "0-2,8,10-11"
    for bad in ("", "3-1", "a"):
        with pytest.raises(ValueError):
            cpu_sets.parse_list(bad)


def _run(*args):
    return subprocess.run([sys.executable, "benchmark/serving/cpu_sets.py", *args], capture_output=True, text=True,
                          timeout=60, cwd=str(ROOT))


def test_run_sets_the_commands_mask_and_bad_input_exits_2():
    cpu = min(os.sched_getaffinity(0))
    cp = _run("--run", str(cpu), "--", sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))")
    assert cp.returncode == 0 and cp.stdout.strip() == f"[{cpu}]", cp.stderr
    cp = _run("2")
    assert cp.returncode == 0 and len(cp.stdout.split()) == 2 and "cores" in cp.stderr
    for args, says in ((["--run", "x", "--", "true"], "is not a CPU list"), (["--run", "0", "true"], "after --"),
                       (["0"], "number of sets")):
        cp = _run(*args)
        assert cp.returncode == 2 and says in cp.stderr and cp.stderr.count("\n") == 1, (args, cp.stderr)


def _allowed(pid: int) -> str:
    return [ln for ln in open(f"/proc/{pid}/status").read().splitlines() if ln.startswith("Cpus_allowed_list:")][0].split()[1]


def test_pin_tree_puts_a_scheduler_on_its_own_cpu_and_the_rest_elsewhere(tmp_path):
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two CPUs")
    # a server's shape: a main process, a child titled as SGLang titles its scheduler, another child (a detokenizer)
    tree = ("import subprocess, sys, time\n"
            "kids = [subprocess.Popen([sys.executable, '-c', 'import setproctitle, sys, time; "
            "setproctitle.setproctitle(sys.argv[1]); print(1, flush=True); time.sleep(60)', t], stdout=subprocess.PIPE)"
            " for t in ('sglang::scheduler_TP0', 'sglang::detokenizer')]\n"
            "[k.stdout.readline() for k in kids]\n"  # each titled
            "print(' '.join(str(k.pid) for k in kids), flush=True)\n"
            "time.sleep(60)\n")
    main = subprocess.Popen([sys.executable, "-c", tree], stdout=subprocess.PIPE, text=True)
    try:
        sched_pid, detok_pid = (int(p) for p in main.stdout.readline().split())
        cp = _run("--pin-tree", str(main.pid), str(cpus[0]), str(cpus[-1]))
        assert cp.returncode == 0, cp.stderr
        assert f"3 processes pinned, 1 scheduler on {cpus[0]}, the rest on {cpus[-1]}" in cp.stdout, cp.stdout
        assert _allowed(sched_pid) == str(cpus[0])
        assert _allowed(detok_pid) == str(cpus[-1]) and _allowed(main.pid) == str(cpus[-1])
    finally:
        for p in cpu_sets.descendants(main.pid)[::-1]:
            try:
                os.kill(p, 9)
            except OSError:
                pass
        main.wait(10)
    cp = _run("--pin-tree", "999999999", "0", "0")
    assert cp.returncode == 2 and "no process 999999999" in cp.stderr
