"""Compile Triton kernels for SM120 on a machine without a GPU, and read ptxas's resource report.

Shared by test/ops/test_sm120_compile_*.py. Each test module lists its (name, kernel, arg types,
constexprs, 16-byte-divisible args, options) cases and runs `compile_cases` in a fresh interpreter
without TRITON_INTERPRET (the test session runs Triton in interpreter mode, where nothing compiles).
Limits checked (RTX PRO 6000 Blackwell / RTX 5090): <= 99 KB shared memory per block, no wgmma /
tcgen05 (SM120 has neither), ptxas succeeds, and spill bytes within SPILL_BUDGET for the installed
Triton version.

Spills depend on the Triton version (its register allocation hints and PTX differ), not only on our
code: with triton 3.8 (what sglang 0.5.23 pins) every kernel assembles with zero spill bytes; with
triton 3.6 (the lent H200's image) ptxas reported 8-byte spills for two kernels. SPILL_BUDGET records
what was measured per version; a version not listed gets the strict budget (zero) and the failure
message names the version, so a new Triton shows up as a decision to make, not as noise.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import fnmatch

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

SMEM_LIMIT = 99 * 1024
TRITON_VERSION = ".".join(triton.__version__.split(".")[:2])
# triton major.minor -> {kernel-case name pattern: allowed spill bytes (stores or loads)}; others: 0.
SPILL_BUDGET = {
    "3.8": {},  # sglang 0.5.23's pin: no spills anywhere (2026-11-30, CPU)
    "3.6": {"row_topk-*-mode2-k8-*": 8, "fused-*": 8},  # lent H200 image, 2026-11-30: 8 B in two kernels
}
TARGET = GPUTarget("cuda", 120, 32)
PTXAS = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas-blackwell"  # Triton's ptxas for sm >= 100


def compile_kernel(fn, types: dict, constexprs: dict, divisible=(), options: dict | None = None):
    """triton.compile for cuda:120; args in `divisible` get the 16-byte alignment a real launch has."""
    names = fn.arg_names
    sig = {n: types.get(n, "constexpr") for n in names}
    assert all(sig[n] != "constexpr" or n in constexprs for n in names), f"missing arg types for {fn.__name__}"
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in divisible}
    return triton.compile(ASTSource(fn, sig, constexprs, attrs), target=TARGET, options=options or {})


def ptxas_report(kernel, name: str, workdir: str) -> dict:
    """Assemble the kernel's PTX with `ptxas -v`: shared memory, matrix instructions, spills."""
    ptx = kernel.asm["ptx"]
    target = re.search(r"^\.target\s+(\S+)", ptx, re.M).group(1)
    src = Path(workdir) / f"{name}.ptx"
    src.write_text(ptx)
    res = subprocess.run([str(PTXAS), "-v", f"--gpu-name={target}", str(src), "-o", str(src.with_suffix(".cubin"))],
                         capture_output=True, text=True, timeout=120)
    return {"shared": kernel.metadata.shared, "target": target, "ptxas_rc": res.returncode,
            "mma": sorted(set(re.findall(r"\b(wgmma|tcgen05|mma\.sync)", ptx))),
            "spills": [int(n) for n in re.findall(r"(\d+) bytes spill (?:stores|loads)", res.stderr)],
            "log": res.stderr[-1500:]}


def compiled_in_subprocess(test_file: str, workdir) -> dict:
    """Run `python <test_file> <workdir>` without TRITON_INTERPRET; its __main__ prints the reports."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    res = subprocess.run([sys.executable, test_file, str(workdir)], capture_output=True, text=True, env=env, timeout=900)
    assert res.returncode == 0, f"compile run failed:\n{res.stdout[-2000:]}\n{res.stderr[-4000:]}"
    return json.loads(res.stdout.strip().splitlines()[-1])


def assert_fits_sm120(name: str, r: dict) -> None:
    assert r["target"].startswith("sm_120"), r["target"]
    assert r["shared"] <= SMEM_LIMIT, f"{name}: {r['shared']} B shared > {SMEM_LIMIT}"
    assert "wgmma" not in r["mma"] and "tcgen05" not in r["mma"], f"{name}: {r['mma']} in SM120 PTX"
    assert r["ptxas_rc"] == 0, f"{name}: ptxas failed:\n{r['log']}"
    assert r["spills"], f"{name}: no ptxas -v spill report:\n{r['log']}"
    assert max(r["spills"]) <= spill_budget(name), (
        f"{name}: {max(r['spills'])} spill bytes > {spill_budget(name)} allowed for triton {TRITON_VERSION} "
        f"(SPILL_BUDGET in test/sm120_compile.py):\n{r['log']}")


def spill_budget(name: str, version: str = TRITON_VERSION) -> int:
    """Spill bytes allowed for kernel case `name` under triton `version` (0 unless measured and listed)."""
    return max([b for pat, b in SPILL_BUDGET.get(version, {}).items() if fnmatch.fnmatch(name, pat)], default=0)
