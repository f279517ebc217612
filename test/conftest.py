"""Test-wide setup.

The kernel tests pick their device once (test/kernel_device.py): a CUDA GPU when torch sees one, where
the Triton kernels run compiled, else the CPU with Triton's interpreter (TRITON_INTERPRET=1, set here
before anything imports triton). The same files run in both modes; nothing is skipped for being on a
GPU. `device` is the fixture form. No sglang import here: collection must work where SGLang's serving
stack cannot be imported (the lent H200 runs test/ops with SGLang's kernel wheel only).
"""

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REFERENCE_CONFIGS = ROOT / "python" / "sglang_kimi_eagle3" / "profiles"
sys.path.insert(0, str(ROOT / "test"))  # shared test helpers (test/helpers.py, test/kernel_device.py)

import kernel_device  # noqa: E402  (sets TRITON_INTERPRET on a CPU-only machine)


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def pytest_sessionstart(session):
    """One line where the suite's processes would compile SGLang's imports from source (test/bytecode_note.py),
    written in the controller (not each xdist worker) and under -q too."""
    import bytecode_note

    line = None if hasattr(session.config, "workerinput") else bytecode_note.note()
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if line and reporter is not None:
        reporter.write_line(line, yellow=True)


@pytest.hookimpl(optionalhook=True)  # an xdist hook: without pytest-xdist installed pytest must not reject it
def pytest_xdist_auto_num_workers(config):
    """`-n auto`: one worker per core, at most 8 where a GPU is visible (a kernel test can hold tens of GiB of
    GPU memory in its worker), none on a single core."""
    n = _cores()
    if n < 2:
        return 0
    return min(n, 8) if kernel_device.ON_GPU else n


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own pytest_cmdline_main turns -n into workers
def pytest_cmdline_main(config):
    """A plain `pytest` on a machine without a GPU runs on pytest-xdist workers (a [test] dependency): one per
    core, at most 4 (each holds its warm SGLang interpreters, about 3 GB), whole files per worker
    (`--dist loadfile`: a module's fixtures and state stay in one process), handed out longest first
    (test/durations.py). The suite is mostly single-threaded Python in subprocesses, so on the
    2-core CI box one process leaves a core idle. An explicit `-n N` wins (the GPU suite passes its own);
    `-n 0` or `-p no:xdist` runs one process, as do --pdb, --collect-only and a single core. On a GPU box the
    default stays one process."""
    opt = config.option
    if (hasattr(config, "workerinput") or not config.pluginmanager.hasplugin("xdist") or kernel_device.ON_GPU
            or opt.numprocesses is not None or opt.usepdb or opt.collectonly):
        return None
    n = min(_cores(), 4)
    if n < 2:
        return None
    opt.numprocesses = n
    if opt.dist == "no":
        opt.dist = "loadfile"
        opt.loadscopereorder = False  # pytest-xdist >= 3.7: hand files out in the order below, not by their number of tests
    return None


def pytest_collection_modifyitems(config, items):
    """In an xdist worker: the longest files first by the measured table (test/durations.py; an unknown file marked
    `slow`, it spawns SGLang processes, counts as a long one), so the last files handed out are short ones; the
    order within a file is kept."""
    if not hasattr(config, "workerinput"):
        return
    import durations

    table = durations.load()
    slow = {item.path for item in items if item.get_closest_marker("slow") is not None}
    keys = {path: durations.order_key(path.relative_to(ROOT).as_posix(), path in slow, table)
            for path in {item.path for item in items}}
    items.sort(key=lambda item: keys[item.path])  # stable: each file's tests stay together and in order


@pytest.fixture(scope="session", autouse=True)
def _wide_columns():
    """Program output wraps to COLUMNS (python/sglang_kimi_eagle3/terminal.py): tests that read what a command
    prints see one width, wide enough not to wrap, whatever terminal runs pytest (pytest's own report keeps
    the real one). The width tests set their own."""
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "1000"
    yield
    if old is None:
        os.environ.pop("COLUMNS", None)
    else:
        os.environ["COLUMNS"] = old


@pytest.fixture(scope="session")
def device():
    """The torch.device every kernel-test tensor is built on."""
    return kernel_device.device()
