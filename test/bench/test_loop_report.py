"""benchmark/serving/loop_report.py on the H200 loop run of 2026-12-01 (raw rounds in benchmark/results/): the bench
documents it derives from alternating rounds plan like a bench run, and its table puts the planner's numbers
next to the measured ones, with the never-slower floor."""

import json
from pathlib import Path

import loop_report

from sglang_kimi_eagle3.cli import main as cli_main

RESULTS = Path(__file__).resolve().parents[2] / "benchmark" / "results"
E2E = json.loads((RESULTS / "loop-fixed-vs-plain-h200-2026-12-01.json").read_text())


def test_bench_documents_from_rounds_carry_the_median_round_and_plan(tmp_path, capsys):
    docs = loop_report.bench_docs(E2E)
    assert sorted(docs) == ["0.3", "0.6", "0.9"]
    lv = {x["concurrency"]: x for x in docs["0.6"]["levels"]}
    assert sorted(lv) == [1, 4, 16, 64]
    rounds = sorted(r["summary"]["agg_tok_s"] for r in E2E["rows"]
                    if r["phase"] == "steady" and r["server"] == "fixed-q0.6" and r["concurrency"] == 16)
    assert lv[16]["spec"]["agg_tok_s"] == rounds[1]  # the median of the three rounds, not their mean
    sc = lv[16]["step_costs"]
    assert sc["steps"] == 3 and sc["verify_tokens"] == 4
    assert abs(sc["spec_round_us"] * lv[16]["spec"]["tok_s_per_req_median"] / 1e6 - lv[16]["spec"]["tau"]) < 1e-9
    path = tmp_path / "b.json"
    path.write_text(json.dumps(docs["0.6"]))
    out = tmp_path / "a.json"
    assert cli_main(["plan", "--bench", str(path), "--batch-sizes", "1,4,16,64", "-o", str(out), "--no-sglang-check",
                     "--json", str(tmp_path / "p.json")]) == 0
    assert all(v["candidate_steps"] == [0] for k, v in json.loads(out.read_text()).items() if k.isdigit())


def test_the_table_names_the_planners_error_and_the_floor():
    rows = loop_report.rows(RESULTS / "loop-h200-2026-12-01-derived", E2E)
    by = {(r["q"], r["c"]): r for r in rows}
    assert len(rows) == 12
    r = by[(0.6, 16)]
    assert r["candidates"] == [0] and r["adaptive"]["median"] == 1.0  # planned plain: served plain
    assert r["floor_ok"] is True and r["adaptive_vs_best_fixed"] == 1.0
    assert abs(r["fixed"]["median"] - 0.606) < 0.01  # the measured fixed/plain ratio of that level
    assert abs(r["err_fixed_pct"] - 100 * (r["pred_fixed"] - r["fixed"]["median"]) / r["fixed"]["median"]) < 1e-9
    q9 = by[(0.9, 64)]
    assert q9["adaptive"] is None and q9["floor_ok"] is None  # its adaptive server was not measured: no verdict
    md = loop_report.markdown(rows)
    assert md.count("\n") == 14 and "| 0.6 | 16 |" in md
