"""Every draft-head kernel, with every launch config of ops/configs/sm120.draft_head.json, compiles for
SM120 (RTX PRO 6000 Blackwell / RTX 5090) on the CPU: <= 99 KB shared memory per block, no register
spills (ptxas -v of the ptxas Triton ships for sm >= 100), and mma.sync instead of wgmma (SM120 has none).

Arguments get the 16-byte divisibility a real launch gets (aligned tensors, strides of 7168 / 4000),
otherwise Triton would neither vectorise nor pipeline the loads and the shared-memory figure would
be meaningless.
"""

import json
import sys
from pathlib import Path

import pytest

triton = pytest.importorskip("triton")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # test/ (also when run as a script)
from sm120_compile import assert_fits_sm120, compile_kernel, compiled_in_subprocess, ptxas_report  # noqa: E402

from sglang_kimi_eagle3.ops import draft_topk as dt  # noqa: E402
from sglang_kimi_eagle3.ops import lm_head_gemv as gemv  # noqa: E402
from sglang_kimi_eagle3.ops import lm_head_topk as lt  # noqa: E402
from sglang_kimi_eagle3.ops.tables import CONFIG_DIR  # noqa: E402

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
    return compile_kernel(fn, types, constexprs, divisible, {"num_warps": num_warps, "num_stages": num_stages,
                                                             **({"maxnreg": maxnreg} if maxnreg else {})})


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
    """name -> ptxas report (sm120_compile.ptxas_report); run without TRITON_INTERPRET (see fixture)."""
    return {name: ptxas_report(_compile(fn, types, ce, div, cfg["num_warps"], cfg.get("num_stages", 3), cfg.get("maxnreg")),
                               name, workdir)
            for name, fn, types, ce, div, cfg in CASES}


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    return compiled_in_subprocess(__file__, tmp_path_factory.mktemp("sm120"))


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_compiles_for_sm120(name, compiled):
    assert_fits_sm120(name, compiled[name])


if __name__ == "__main__":
    print(json.dumps(compile_all(sys.argv[1])))
