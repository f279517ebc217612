"""Compile Triton kernels for SM120 on a machine without a GPU, and read ptxas's resource report.

Shared by test/ops/test_sm120_compile_*.py. Each test module lists its (name, kernel, arg types,
constexprs, 16-byte-divisible args, options) cases and runs `compile_cases` in a fresh interpreter
without TRITON_INTERPRET (the test session runs Triton in interpreter mode, where nothing compiles).
Limits checked (RTX PRO 6000 Blackwell / RTX 5090): <= 99 KB shared memory per block, no wgmma /
tcgen05 (SM120 has neither), ptxas succeeds with zero spill bytes.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

SMEM_LIMIT = 99 * 1024
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
    assert r["spills"] and not any(r["spills"]), f"{name}: register spills (or no ptxas -v report):\n{r['log']}"
