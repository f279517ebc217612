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


@pytest.hookimpl(optionalhook=True)  # an xdist hook: without pytest-xdist installed pytest must not reject it
def pytest_xdist_auto_num_workers(config):
    """`-n auto` where pytest-xdist is installed (not by default: on the 2-core CI box `-n 2` saved 1.5 of 19.5
    minutes, the SGLang-subprocess tests already use both cores): one worker per core, at most 8 where a GPU is
    visible (a kernel test can hold tens of GiB of GPU memory in its worker), none on a single core."""
    n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if n < 2:
        return 0
    return min(n, 8) if kernel_device.ON_GPU else n


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
