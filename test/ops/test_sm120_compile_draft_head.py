"""Every draft-head kernel, with every launch config of ops/configs/sm120.draft_head.json, compiles for
SM120 (RTX PRO 6000 Blackwell / RTX 5090) on the CPU: <= 99 KB shared memory per block, no register
spills (ptxas -v of the ptxas Triton ships for sm >= 100), and mma.sync instead of wgmma (SM120 has none).

Arguments get the 16-byte divisibility a real launch gets (aligned tensors, strides of 7168 / 4000),
otherwise Triton would neither vectorise nor pipeline the loads and the shared-memory figure would
be meaningless.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

triton = pytest.importorskip("triton")
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from sglang_kimi_eagle3.ops import draft_topk as dt  # noqa: E402
from sglang_kimi_eagle3.ops import lm_head_gemv as gemv  # noqa: E402
from sglang_kimi_eagle3.ops import lm_head_topk as lt  # noqa: E402
from sglang_kimi_eagle3.ops.arch import CONFIG_DIR  # noqa: E402

SMEM_LIMIT = 99 * 1024
TARGET = GPUTarget("cuda", 120, 32)
PTXAS = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas-blackwell"  # what Triton uses for sm >= 100
TABLE = json.loads((CONFIG_DIR / "sm120.draft_head.json").read_text())


SHAPES = [(bs, rows) for bs in (1, 16, 32, 64, 128) for rows in (4000, 32000)]


def _configs(op, launch_config, *extra):
    """The distinct launch configs the table gives for Kimi shapes; every rule must be reached."""
    seen = {}
    for bs, rows in SHAPES:
        cfg = launch_config(bs, rows, *extra, table=TABLE)
        # the fused and row kernels specialise on the row count too (candidate merge width)
        seen.setdefault(json.dumps(cfg, sort_keys=True) + ("" if op == "lm_head_gemv" else str(rows)), (cfg, rows))
    spec = TABLE["ops"][op]
    for cfg in [spec["default"]] + [r["config"] for r in spec.get("rules", [])]:
        assert any(all(c.get(k) == v for k, v in cfg.items()) for c, _ in seen.values()), f"{op}: rule {cfg} unreached"
    return list(seen.values())


def _compile(fn, types, constexprs, divisible, num_warps, num_stages=3, maxnreg=None):
    names = fn.arg_names
    sig = {n: types.get(n, "constexpr") for n in names}
    assert all(sig[n] != "constexpr" or n in constexprs for n in names), f"missing arg types for {fn.__name__}"
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in divisible}
    return triton.compile(ASTSource(fn, sig, constexprs, attrs), target=TARGET,
                          options={"num_warps": num_warps, "num_stages": num_stages, **({"maxnreg": maxnreg} if maxnreg else {})})


def _gemv_cases():
    for cfg, _rows in _configs("lm_head_gemv", gemv.launch_config, 7168):
        for rnd in (0, 1):
            types = {"out_ptr": "*fp32" if rnd else "*bf16", "part_ptr": "*fp32", "sem_ptr": "*i32", "h_ptr": "*bf16",
                     "w_ptr": "*bf16", **{n: "i32" for n in ("stride_ob", "stride_hb", "stride_wr", "bs", "R", "H",
                                                              "n_k", "n_rb", "MAXC")}}
            ce = {"BLOCK_R": cfg["BLOCK_R"], "BLOCK_B": cfg["BLOCK_B"], "BLOCK_K": cfg["BLOCK_K"],
                  "EVEN_K": True, "ROUND": rnd, "UPCAST": False}
            div = ["out_ptr", "part_ptr", "sem_ptr", "h_ptr", "w_ptr", "stride_ob", "stride_hb", "stride_wr", "H"]
            yield f"gemv-{cfg['BLOCK_R']}x{cfg['BLOCK_B']}x{cfg['BLOCK_K']}-{'fp32' if rnd else 'bf16'}", \
                gemv._lm_head_gemv_kernel, types, ce, div, cfg


def _topk_fused_cases():
    for k, p_mode, d2t in ((1, lt.P_ONE, True), (4, lt.P_SOFTMAX, False), (8, lt.P_NONE, False)):
        for cfg, rows in _configs("lm_head_topk", lt.launch_config, 7168, k):
            n_rb = triton.cdiv(rows, cfg["BLOCK_R"])
            nrb_p2, k_p2 = triton.next_power_of_2(n_rb), triton.next_power_of_2(k)
            merge, chunk = lt.merge_plan(cfg["BLOCK_B"], nrb_p2, k_p2)
            types = {"p_ptr": "*fp32", "logit_ptr": "*fp32", "id_ptr": "*i64", "stat_ptr": "*fp32", "pos_ptr": "*i64",
                     "part_ptr": "*fp32", "cand_ptr": "*i64", "cstat_ptr": "*fp32", "sem_ptr": "*i32", "h_ptr": "*bf16",
                     "w_ptr": "*bf16", "d2t_ptr": "*i64", **{n: "i32" for n in ("stride_hb", "stride_wr", "bs", "R", "H",
                                                                                "n_k", "n_rb", "MAXC", "id_offset")}}
            ce = {"BLOCK_R": cfg["BLOCK_R"], "BLOCK_B": cfg["BLOCK_B"], "BLOCK_K": cfg["BLOCK_K"],
                  "EVEN_K": True, "UPCAST": False, "ROUND": 1, "K": k, "K_P2": k_p2, "NRB_P2": nrb_p2,
                  "MERGE_ROWS": merge, "CHUNK": chunk, "P_MODE": p_mode, "HAS_D2T": d2t, "HAS_POS": k == 1}
            div = ["p_ptr", "logit_ptr", "id_ptr", "stat_ptr", "part_ptr", "cand_ptr", "cstat_ptr", "sem_ptr", "h_ptr",
                   "w_ptr", "stride_hb", "stride_wr", "H"]
            yield f"fused-{cfg['BLOCK_R']}x{cfg['BLOCK_B']}x{cfg['BLOCK_K']}-k{k}-R{rows}", lt._lm_head_topk_kernel, \
                types, ce, div, cfg


def _row_topk_cases():
    for mode, k in ((0, 1), (1, 4), (2, 8)):
      for cfg, rows in _configs("draft_topk", dt.launch_config, k):
            types = {"val_ptr": "*fp32", "idx_ptr": "*i64", "pos_ptr": "*i64", "tok_ptr": "*i64", "part_key_ptr": "*i64",
                     "part_stat_ptr": "*fp32", "sem_ptr": "*i32", "x_ptr": "*fp32", "d2t_ptr": "*i64",
                     **{n: "i32" for n in ("stride_x", "stride_tok", "tok_col", "V", "n_splits")}}
            ce = {"K": k, "K_P2": triton.next_power_of_2(k), "BLOCK": cfg["BLOCK"], "NS_P2": triton.next_power_of_2(triton.cdiv(rows, cfg["BLOCK"])), "MODE": mode,
                  "HAS_D2T": mode == 0, "WRITE_TOK": mode == 0, "SPLIT": True}
            div = ["val_ptr", "idx_ptr", "part_key_ptr", "part_stat_ptr", "sem_ptr", "x_ptr", "stride_x"]
            yield f"row_topk-{cfg['BLOCK']}-mode{mode}-k{k}-V{rows}", dt._row_topk_kernel, types, ce, div, cfg


CASES = list(_gemv_cases()) + list(_topk_fused_cases()) + list(_row_topk_cases())


def compile_all(workdir: str) -> dict:
    """name -> {shared, wgmma, ptxas_rc, spills, log}; run without TRITON_INTERPRET (see test)."""
    out = {}
    for name, fn, types, ce, div, cfg in CASES:
        kernel = _compile(fn, types, ce, div, cfg["num_warps"], cfg.get("num_stages", 3), cfg.get("maxnreg"))
        ptx = kernel.asm["ptx"]
        target = re.search(r"^\.target\s+(\S+)", ptx, re.M).group(1)
        src = Path(workdir) / f"{name}.ptx"
        src.write_text(ptx)
        res = subprocess.run([str(PTXAS), "-v", f"--gpu-name={target}", str(src), "-o", str(src.with_suffix(".cubin"))],
                             capture_output=True, text=True, timeout=120)
        out[name] = {"shared": kernel.metadata.shared, "mma": sorted(set(re.findall(r"\b(wgmma|tcgen05|mma\.sync)", ptx))),
                     "target": target, "ptxas_rc": res.returncode,
                     "spills": [int(n) for n in re.findall(r"(\d+) bytes spill (?:stores|loads)", res.stderr)],
                     "log": res.stderr[-1500:]}
    return out


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    # The test session runs Triton in interpreter mode (conftest), where kernels cannot be compiled:
    # compile in a fresh interpreter without TRITON_INTERPRET.
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    work = tmp_path_factory.mktemp("sm120")
    res = subprocess.run([sys.executable, __file__, str(work)], capture_output=True, text=True, env=env, timeout=900)
    assert res.returncode == 0, f"compile run failed:\n{res.stdout[-2000:]}\n{res.stderr[-4000:]}"
    return json.loads(res.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_compiles_for_sm120(name, compiled):
    r = compiled[name]
    assert r["target"].startswith("sm_120"), r["target"]
    assert r["shared"] <= SMEM_LIMIT, f"{name}: {r['shared']} B shared > {SMEM_LIMIT}"
    assert "wgmma" not in r["mma"] and "tcgen05" not in r["mma"], f"{name}: {r['mma']} in SM120 PTX"
    assert r["ptxas_rc"] == 0, f"{name}: ptxas failed:\n{r['log']}"
    assert r["spills"] and not any(r["spills"]), f"{name}: register spills (or no ptxas -v report):\n{r['log']}"


if __name__ == "__main__":
    print(json.dumps(compile_all(sys.argv[1])))
