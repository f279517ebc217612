"""benchmark/host/cpu_neighbours.py on the CPU (its fallback without a GPU): each CPU timed alone in rotated rounds, and
one CPU beside a busy process on each CPU in turn, written as JSON; a CPU not its own exits 2. No timing is asserted."""

import json
import os
import subprocess
import sys

from helpers import ROOT


def _run(*args):
    return subprocess.run([sys.executable, "-m", "benchmark.host.cpu_neighbours", *args], capture_output=True, text=True,
                          timeout=300, cwd=str(ROOT))


def test_alone_and_beside_write_a_reading_per_cpu(tmp_path):
    cpus = sorted(os.sched_getaffinity(0))
    cp = _run("--alone", "--rounds", "2", "--launches", "200", "--json", str(tmp_path / "alone.json"))
    assert cp.returncode == 0, cp.stderr[-2000:]
    alone = json.loads((tmp_path / "alone.json").read_text())["alone_us"]
    assert sorted(int(c) for c in alone) == cpus and all(len(v) == 2 for v in alone.values())
    cp = _run("--cpu", str(cpus[0]), "--launches", "200", "--repeats", "1", "--json", str(tmp_path / "beside.json"))
    assert cp.returncode == 0, cp.stderr[-2000:]
    doc = json.loads((tmp_path / "beside.json").read_text())
    assert sorted(int(c) for c in doc["beside_us"]) == cpus and doc["alone_us"] > 0


def test_a_cpu_not_its_own_exits_2():
    cp = _run("--cpu", "100000")
    assert cp.returncode == 2 and "is not one of this process's CPUs" in cp.stderr
