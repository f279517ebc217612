"""Every tree-verification kernel, with every launch config of ops/configs/sm120.verify.json, compiles
for SM120 (RTX PRO 6000 Blackwell / RTX 5090) on the CPU: <= 99 KB shared memory per block and no
register spills (ptxas -v of the ptxas Triton ships for sm >= 100 on the generated PTX).

Constexprs come from the launchers' own planning functions (argmax_plan, walk_config,
sampling_plan) at Kimi shapes (vocab 163840; N 4, 16, 64; bs 1..256), so what compiles here is what
would launch there. Arguments get the 16-byte divisibility a real launch gets.
"""

import json
import sys
from pathlib import Path

import pytest

triton = pytest.importorskip("triton")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # test/ (also when run as a script)
from sm120_compile import assert_fits_sm120, compile_kernel, compiled_in_subprocess, ptxas_report  # noqa: E402

from sglang_kimi_eagle3.ops import argmax_verify as av  # noqa: E402
from sglang_kimi_eagle3.ops import tree_sampling as ts  # noqa: E402
from sglang_kimi_eagle3.ops import verify_greedy as vg  # noqa: E402
from sglang_kimi_eagle3.ops.arch import op_config  # noqa: E402
from sglang_kimi_eagle3.ops.tables import CONFIG_DIR  # noqa: E402

TABLE = json.loads((CONFIG_DIR / "sm120.verify.json").read_text())
VOCAB = 163840
SHAPES = [(bs, n) for bs in (1, 8, 64, 256) for n in (4, 16, 64)]

I32, I64, F32 = "*i32", "*i64", "*fp32"
TREE = {"cand_ptr": I64, "ridx_ptr": I64, "nxt_ptr": I64, "sib_ptr": I64}


def _greedy_cases():
    for bs, n in SHAPES:
        rows = bs * n
        cfg = op_config("argmax_verify", {"rows": rows, "vocab": VOCAB, "bs": bs, "n": n}, TABLE)
        br, block, _ch, splits, warps, even = av.argmax_plan(rows, VOCAB, cfg)
        pdl = bool(cfg.get("pdl", True))
        for dtype in ("fp32", "bf16"):
            yield (f"split_argmax-{dtype}-br{br}-b{block}-w{warps}-even{int(even)}-pdl{int(pdl)}", av._split_argmax_kernel,
                   {"part_key_ptr": I32, "part_idx_ptr": I32, "logits_ptr": "*" + dtype,
                    **{k: "i32" for k in ("stride_row", "R", "V", "CH", "SP")}},
                   {"BR": br, "BLOCK": block, "EVEN": even, "USE_PDL": pdl},
                   ["part_key_ptr", "part_idx_ptr", "logits_ptr", "stride_row", "V", "CH"], warps)
        np_, fblock, _fch, fsplits, fwarps, feven = av.fused_plan(bs, n, VOCAB, cfg)
        for dtype in ("fp32", "bf16") if av.fused_applies(cfg, n, bs) else ():
            yield (f"argmax_verify-{dtype}-np{np_}-b{fblock}-spp{vg.pow2(fsplits, 1)}-w{fwarps}-even{int(feven)}",
                   av._argmax_verify_kernel,
                   {"predicts_ptr": I32, "accept_index_ptr": I32, "accept_num_ptr": I32, "part_key_ptr": I32,
                    "part_idx_ptr": I32, "sem_ptr": I32, **TREE, "logits_ptr": "*" + dtype,
                    **{k: "i32" for k in ("stride_row", "bs", "S", "N", "V", "CH", "SP")}},
                   {"NP": np_, "BLOCK": fblock, "SPP": vg.pow2(fsplits, 1), "EVEN": feven, "INIT": True,
                    "ACC_ADD": 1},  # the hook's (HOOK_INIT, HOOK_LENS)
                   ["part_key_ptr", "part_idx_ptr", "logits_ptr", "stride_row", "V", "CH"], fwarps)
        vcfg = {"rows_per_program": cfg.get("verify_rows_per_program", 1)}
        if "verify_num_warps" in cfg:
            vcfg["num_warps"] = cfg["verify_num_warps"]
        plain = op_config("verify_greedy", {"bs": bs, "n": n}, TABLE)
        for fused, c in ((True, vcfg), (False, plain)):
            np_, bb, vwarps = vg.walk_config("verify_greedy", n, bs, c, None)
            spp = vg.pow2(splits, 1) if fused else 1
            yield (f"verify_greedy-{'fused' if fused else 'tp'}-np{np_}-bb{bb}-spp{spp}-w{vwarps}", vg.verify_greedy_kernel,
                   {"predicts_ptr": I32, "accept_index_ptr": I32, "accept_num_ptr": I32, **TREE, "target_ptr": I64,
                    "part_key_ptr": I32, "part_idx_ptr": I32, **{k: "i32" for k in ("bs", "S", "N", "R", "SP")}},
                   {"NP": np_, "BB": bb, "SPP": spp, "FROM_PARTIALS": fused, "USE_PDL": fused and pdl, "INIT": fused,
                    "ACC_ADD": int(fused)}, [],
                   vwarps)  # INIT, ACC_ADD: the greedy hook's two-launch path (argmax + verify); verify_tree_greedy's: none


def _sampling_cases():
    for bs, n in SHAPES:
        cfg = op_config("tree_sampling", {"bs": bs, "n": n, "vocab": VOCAB}, TABLE)
        pl, pdl = ts.sampling_plan(bs, n, VOCAB, cfg), bool(cfg.get("pdl", True))
        yield (f"walk-np{pl['np']}-bb{pl['walk_bb']}-w{pl['walk_warps']}", ts._walk_kernel,
               {"predicts_ptr": I32, "accept_index_ptr": I32, "accept_num_ptr": I32, "draft_probs_ptr": F32,
                "work_ptr": I64, **TREE, "coins_ptr": F32, "target_probs_ptr": F32, "threshold_single": "fp32",
                "threshold_acc": "fp32", **{k: "i32" for k in ("bs", "S", "N", "V")}},
               {"NP": pl["np"], "BB": pl["walk_bb"], "USE_PDL": pdl}, ["target_probs_ptr", "draft_probs_ptr", "V"],
               pl["walk_warps"])
        yield (f"tile_sums-bb{pl['sum_bb']}-g{pl['G']}-w{pl['sum_warps']}", ts._tile_sums_kernel,
               {"tile_sum_ptr": F32, "tile_last_ptr": I32, "target_probs_ptr": F32, "draft_probs_ptr": F32,
                "work_ptr": I64, **{k: "i32" for k in ("bs", "V", "T", "TPS")}},
               {"BB": pl["sum_bb"], "G": pl["G"], "USE_PDL": pdl}, ["target_probs_ptr", "draft_probs_ptr", "V"],
               pl["sum_warps"])
        yield (f"sample-bb{pl['sample_bb']}-tp{pl['TP']}-g{pl['G']}-w{pl['sample_warps']}", ts._sample_kernel,
               {"predicts_ptr": I32, "tile_sum_ptr": F32, "tile_last_ptr": I32, "target_probs_ptr": F32,
                "draft_probs_ptr": F32, "work_ptr": I64, "coin_ptr": F32, **{k: "i32" for k in ("bs", "V", "T")}},
               {"BB": pl["sample_bb"], "TP": pl["TP"], "G": pl["G"], "USE_PDL": pdl}, ["target_probs_ptr", "draft_probs_ptr", "V"],
               pl["sample_warps"])
        yield (f"tree_fused-np{pl['np']}-tp{pl['TP']}-g{pl['G']}-w{pl['sum_warps']}", ts._tree_sampling_kernel,
               {"predicts_ptr": I32, "accept_index_ptr": I32, "accept_num_ptr": I32, "draft_probs_ptr": F32,
                "tile_sum_ptr": F32, "tile_last_ptr": I32, "sem_ptr": I32, **TREE, "coins_ptr": F32,
                "target_probs_ptr": F32, "final_ptr": F32, "threshold_single": "fp32", "threshold_acc": "fp32",
                **{k: "i32" for k in ("bs", "S", "N", "V", "T", "TPS")}},
               {"NP": pl["np"], "TP": pl["TP"], "G": pl["G"]}, ["target_probs_ptr", "draft_probs_ptr", "V"],
               pl["sum_warps"])


def _cases():
    seen = {}
    for case in list(_greedy_cases()) + list(_sampling_cases()):
        seen.setdefault(case[0], case)
    return seen


CASES = _cases()


def test_every_table_rule_is_reached():
    """Each rule of the SM120 table applies to at least one of the compiled shapes."""
    for op, spec in TABLE["ops"].items():
        for cfg in [spec["default"]] + [r["config"] for r in spec.get("rules", [])]:
            hit = any(op_config(op, {"rows": bs * n, "vocab": VOCAB, "bs": bs, "n": n}, TABLE) == cfg for bs, n in SHAPES)
            assert hit, f"{op}: config {cfg} is never selected for the compiled shapes"


def compile_all(workdir: str) -> dict:
    """name -> ptxas report (sm120_compile.ptxas_report); run without TRITON_INTERPRET (see fixture)."""
    return {name: ptxas_report(compile_kernel(fn, types, ce, div, {"num_warps": warps}), name, workdir)
            for name, (_, fn, types, ce, div, warps) in CASES.items()}


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    return compiled_in_subprocess(__file__, tmp_path_factory.mktemp("sm120_verify"))


@pytest.mark.parametrize("name", list(CASES))
def test_compiles_for_sm120(name, compiled):
    assert_fits_sm120(name, compiled[name])


if __name__ == "__main__":
    print(json.dumps(compile_all(sys.argv[1])))
