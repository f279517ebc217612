"""benchmark/host/event_cost.py: the step clock's GPU timing cost on the host. On a CPU box it says in one line that it
needs a GPU (exit 2); on a GPU it drives the real hook with and without the timing and writes its JSON."""

import json
import subprocess
import sys

import pytest
import torch
from helpers import ROOT

SCRIPT = str(ROOT / "benchmark" / "host" / "event_cost.py")


@pytest.mark.skipif(torch.cuda.is_available(), reason="the no-GPU answer")
def test_without_a_gpu_it_says_so_in_one_line():
    r = subprocess.run([sys.executable, SCRIPT, "--steps", "16"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip() == "event_cost: no CUDA GPU here; run it on the GPU machine"


def test_bad_arguments_name_the_flag():
    r = subprocess.run([sys.executable, SCRIPT, "--steps", "3"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "--steps takes an integer >= 16" in r.stderr


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA timing events need a GPU")
def test_on_a_gpu_the_hook_is_timed_with_and_without_events(tmp_path):
    out = tmp_path / "event-cost.json"
    r = subprocess.run([sys.executable, SCRIPT, "--steps", "64", "--rounds", "2", "--json", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert doc["gpu_every"] >= 1 and len(doc["step_us"]["timed"]) == 2
    assert all(v > 0 for v in doc["primitives_us"].values())
