"""`plan --bench` from measured step times: bench documents built by the real summarizers from request rows of
known latency (fixture JSON), and a real `bench` run against two protocol stubs (a plain and a speculative
HTTP server) through `plan --bench` to an adaptive file SGLang's own loader reads."""

import json
import sys
from pathlib import Path

import pytest

from sglang_kimi_eagle3.bench import document
from sglang_kimi_eagle3.bench.client import RequestResult
from sglang_kimi_eagle3.bench.stats import speedup, summarize
from sglang_kimi_eagle3.bench.step_costs import level_costs
from sglang_kimi_eagle3.cli import main as cli_main

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))  # stub_server.py: the protocol stub
INFO = {"model_path": "fixture", "speculative_algorithm": "EAGLE3", "speculative_num_steps": 3,
        "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4}


def _spec_row(i, hist, round_us):
    verify = sum(hist)
    tokens = sum((k + 1) * n for k, n in enumerate(hist))
    correct = sum(k * n for k, n in enumerate(hist))
    spec = {"accept_length": tokens / verify, "accept_rate": correct / (3 * verify), "verify_ct": verify,
            "num_correct": correct, "num_proposed": 3 * verify, "histogram": list(hist)}
    return RequestResult(f"p{i}", "chat", True, latency_s=verify * round_us * 1e-6, prompt_tokens=10,
                         completion_tokens=tokens, spec=spec)


def _plain_row(i, step_us, tokens=100):
    return RequestResult(f"p{i}", "chat", True, latency_s=tokens * step_us * 1e-6, prompt_tokens=10,
                         completion_tokens=tokens)


def bench_doc(t1, rnd, hist, levels=(1, 4, 16, 64), n=4):
    """A bench document: per level n spec answers (each `hist`, rounds of rnd(c) us) and n plain answers
    (steps of t1(c) us), summarized by bench's own functions."""
    doc = {"schema": document.SCHEMA, "status": "complete", "levels": [], "servers": {"spec": dict(INFO), "baseline": {}},
           "requests": {"spec": {}, "baseline": {}}}
    every = []
    for c in levels:
        spec = [_spec_row(i, hist, rnd(c)) for i in range(n)]
        plain = [_plain_row(i, t1(c)) for i in range(n)]
        lv = {"concurrency": c, "requests": n, "spec": summarize(spec, sum(r.latency_s for r in spec) / c, 3),
              "baseline": summarize(plain, sum(r.latency_s for r in plain) / c)}
        lv["speedup"] = speedup(lv["spec"], lv["baseline"])
        doc["requests"]["spec"][str(c)] = [r.as_dict() for r in spec]
        doc["requests"]["baseline"][str(c)] = [r.as_dict() for r in plain]
        lv["step_costs"] = level_costs(spec, plain, 3, 4)
        doc["levels"].append(lv)
        every += spec
    doc["overall"] = summarize(every, 1.0, 3)
    return doc


def _write(doc, tmp_path, name="run.json"):
    p = tmp_path / name
    document.write(doc, str(p))
    return p


def _plan(tmp_path, bench, *extra):
    out, js = tmp_path / "adaptive.json", tmp_path / "plan.json"
    rc = cli_main(["plan", "--bench", str(bench), "-o", str(out), "--json", str(js), "--no-sglang-check", *extra])
    return rc, out, js


def _pred(js, bs, steps):
    doc = json.loads(js.read_text())
    return next(p for p in doc["batch_sizes"][str(bs)]["all"] if p["steps"] == steps)


# plain step 1000 + 10 c us; a round at 3 drafts = verify of c x 4 tokens (= plain step at 4c) + 3 x 300 us
T1 = lambda c: 1000.0 + 10 * c  # noqa: E731
ROUND = lambda c: T1(4 * c) + 3 * 300.0  # noqa: E731
HIST = [2, 3, 4, 6]  # 15 passes; alpha 13/15, 10/13, 6/10


def test_level_costs_pool_latency_over_tokens_and_verify_passes():
    spec = [_spec_row(0, [1, 1], 2000.0), _spec_row(1, [0, 0, 2], 3000.0)]
    plain = [_plain_row(0, 1000.0, 10), _plain_row(1, 2000.0, 30)]
    plain.append(RequestResult("bad", "chat", False, error="timeout", latency_s=9.0))  # failed: not pooled
    sc = level_costs(spec, plain, 3, 4)
    assert sc["plain_step_us"] == pytest.approx(1e6 * (0.01 + 0.06) / 40)  # 1750: pooled, not a mean of rates
    assert sc["spec_round_us"] == pytest.approx(1e6 * (2 * 2000e-6 + 2 * 3000e-6) / 4)
    assert sc["tau"] == pytest.approx((1 + 2 + 3 + 3) / 4)
    assert (sc["steps"], sc["verify_tokens"], sc["plain_requests"], sc["spec_requests"]) == (3, 4, 2, 2)
    adaptive = level_costs(spec, plain, 3, 4, adaptive=True)
    assert adaptive["steps"] is None and adaptive["verify_tokens"] is None  # steps vary: no setting to calibrate


def test_plan_splits_the_measured_round_into_verify_and_draft_steps(tmp_path, capsys):
    bench = _write(bench_doc(T1, ROUND, HIST), tmp_path)
    rc, out, js = _plan(tmp_path, bench, "--batch-sizes", "1,4,16,64")
    assert rc == 0
    text = " ".join(capsys.readouterr().out.split())  # the table's lines wrap anywhere
    assert "measured step times in" in text and "lumped overhead" not in text
    assert "NOT MEASURABLE from outside" in text and "ESTIMATED" in text
    assert "{1: 300, 4: 300, 16: 300, 64: 300}" in text.replace("{ ", "{").replace(", ", ", ")  # the draft step recovered at every level
    for bs in (1, 4, 16, 64):
        s3 = _pred(js, bs, 3)
        assert s3["base_us"] == pytest.approx(T1(bs)) and s3["round_us"] == pytest.approx(ROUND(bs))  # as measured
        s1 = _pred(js, bs, 1)
        assert s1["round_us"] == pytest.approx(T1(2 * bs) + 300.0)  # verify of 2 tokens + one draft step
        a1 = 13 / 15
        assert s1["speedup"] == pytest.approx((1 + a1) * T1(bs) / (T1(2 * bs) + 300.0))


def test_low_acceptance_plans_no_drafting_where_it_loses(tmp_path, capsys):
    hist = [14, 5, 1, 0]  # alpha_1 0.30
    bench = _write(bench_doc(T1, lambda c: T1(4 * c) + 3 * 100.0, hist), tmp_path)
    rc, out, js = _plan(tmp_path, bench, "--batch-sizes", "1,64")
    assert rc == 0
    cfg = json.loads(out.read_text())
    assert cfg["64"]["candidate_steps"] == [0]  # 1.3 x 1640 / (2280 + 100) = 0.90: no drafting
    assert 0 not in cfg["1"]["candidate_steps"]  # 1.3 x 1010 / (1020 + 100) = 1.17 at one step
    assert _pred(js, 64, 1)["speedup"] == pytest.approx(1.3 * 1640 / 2380)


def test_a_bench_file_without_step_costs_keeps_the_lumped_model(tmp_path, capsys):
    doc = bench_doc(T1, ROUND, HIST)
    for lv in doc["levels"]:
        del lv["step_costs"]
    rc, _, _ = _plan(tmp_path, _write(doc, tmp_path))
    assert rc == 0 and "lumped overhead" in capsys.readouterr().out


def test_bad_step_costs_are_one_line_exit_2(tmp_path, capsys):
    doc = bench_doc(T1, ROUND, HIST)
    doc["levels"][1]["step_costs"]["spec_round_us"] = "fast"
    rc, out, _ = _plan(tmp_path, _write(doc, tmp_path))
    err = capsys.readouterr().err
    assert rc == 2 and "levels[1].step_costs.spec_round_us" in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_a_concurrency_past_what_bench_runs_is_one_line_exit_2(tmp_path, capsys):
    """A hand-edited level at concurrency 1e308 (an integral float, so it passed as an integer) reached the cost
    model and died there as an internal ZeroDivisionError (exit 3)."""
    doc = bench_doc(T1, ROUND, HIST)
    doc["levels"][0]["concurrency"] = 1e308
    rc, out, _ = _plan(tmp_path, _write(doc, tmp_path))
    err = capsys.readouterr().err
    assert rc == 2 and "levels[0].concurrency" in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()


def test_bench_then_plan_then_sglangs_loader_reads_the_file(tmp_path, capsys):
    """The live loop's data path on CPU: bench a plain and a speculative HTTP server, plan, adaptive file."""
    from stub_server import ProtocolStub, StubConfig

    asp = pytest.importorskip("sglang.srt.speculative.adaptive_spec_params")
    run = tmp_path / "run.json"
    fast = ["--concurrency", "1,4", "--max-new-tokens", "12", "--ignore-eos", "--min-requests", "6", "--rounds", "1",
            "--warmup", "0", "--categories", "chat", "--no-progress"]
    with ProtocolStub(StubConfig(alphas=[0.8, 0.6, 0.4], pass_ms=0.2)) as spec, \
            ProtocolStub(StubConfig(alphas=None, pass_ms=0.2)) as plain:
        assert cli_main(["bench", "--url", spec, "--baseline-url", plain, "--json", str(run)] + fast) == 0
        plain_only = tmp_path / "plain.json"
        assert cli_main(["bench", "--url", plain, "--json", str(plain_only)] + fast) == 0
        again = tmp_path / "again.json"
        assert cli_main(["bench", "--url", spec, "--baseline-json", str(plain_only), "--json", str(again)] + fast) == 0
    doc = json.loads(run.read_text())
    for lv in doc["levels"]:
        sc = lv["step_costs"]
        assert (sc["steps"], sc["verify_tokens"], sc["plain_requests"], sc["spec_requests"]) == (3, 4, 6, 6)
        assert sc["plain_step_us"] > 0 and sc["spec_round_us"] > 0
    merged = json.loads(again.read_text())  # the plain time comes from the earlier file's request rows
    base_rows = json.loads(plain_only.read_text())["requests"]["spec"]
    for lv in merged["levels"]:
        rows = base_rows[str(lv["concurrency"])]
        want = 1e6 * sum(r["latency_s"] for r in rows) / sum(r["completion_tokens"] for r in rows)
        assert lv["step_costs"]["plain_step_us"] == pytest.approx(want)
    capsys.readouterr()
    out = tmp_path / "adaptive.json"
    assert cli_main(["plan", "--bench", str(run), "-o", str(out), "--batch-sizes", "1,2,4"]) == 0
    text = capsys.readouterr().out
    assert "measured step times in" in text and "NOT MEASURABLE" in text
    _, slots = asp._load_adaptive_config(str(out))
    assert sorted(slots) == [1, 2, 4]


def _tree_doc(t1, rnd, hist, levels):
    """bench_doc for a tree server (steps 3 / topk 4 / 8 draft tokens: 7 drafts a verify)."""
    doc = bench_doc(t1, rnd, hist, levels)
    tree = {**INFO, "speculative_eagle_topk": 4, "speculative_num_draft_tokens": 8}
    doc["servers"]["spec"] = tree
    for c in levels:
        spec = [_spec_row(i, hist, rnd(c)) for i in range(4)]
        for r in spec:
            r.spec["num_proposed"] = 7 * r.spec["verify_ct"]
            r.spec["accept_rate"] = r.spec["num_correct"] / r.spec["num_proposed"]
        lv = next(lv for lv in doc["levels"] if lv["concurrency"] == c)
        lv["spec"] = summarize(spec, sum(r.latency_s for r in spec) / c, 3)
        lv["speedup"] = speedup(lv["spec"], lv["baseline"])
        lv["step_costs"] = level_costs(spec, [_plain_row(i, t1(c)) for i in range(4)], 3, 8)
        doc["requests"]["spec"][str(c)] = [r.as_dict() for r in spec]
    doc["overall"] = summarize([RequestResult(**{**r, "spec": r["spec"]}) for c in levels
                                for r in doc["requests"]["spec"][str(c)]], 1.0, 3)
    return doc


def test_a_tree_bench_plans_its_measured_setting_as_measured(tmp_path, capsys):
    """A tree round (8 tokens a request) is cheaper than a plain step of 8x the requests: the plan at the measured
    setting and concurrencies gives the measured round and the measured speedup, so following its own hint
    (--steps 3 --topk 4 --draft-tokens 8) it speculates where the bench measured a gain."""
    t1 = lambda c: 100.0 + 10 * c  # noqa: E731  plain step 110 us at c 1; a plain step of 8 requests: 180 us
    rnd = lambda c: 0.8 * t1(8 * c)  # noqa: E731  the measured tree round: 144 us at c 1
    bench = _write(_tree_doc(t1, rnd, HIST, (1, 2, 4)), tmp_path)
    rc, out, js = _plan(tmp_path, bench, "--batch-sizes", "1,2,4", "--steps", "3", "--topk", "4", "--draft-tokens", "8")
    text = " ".join(capsys.readouterr().out.split())
    assert rc == 0
    doc = json.loads(bench.read_text())
    for lv in doc["levels"]:
        c = lv["concurrency"]
        p = _pred(js, c, 3)
        assert (p["topk"], p["draft_tokens"]) == (4, 8)
        assert p["round_us"] == pytest.approx(rnd(c)) and p["base_us"] == pytest.approx(t1(c))
        assert p["speedup"] == pytest.approx(lv["speedup"]["per_request"], rel=0.02)  # plan = measurement
    best = json.loads(js.read_text())["batch_sizes"]["1"]["best"]
    assert best["steps"] == 3 and best["speedup"] > 1  # 2.8 x 110 / 144: speculation on
    assert "scaled down to the measured round" in text
    # no chain is searched here, and the tree gains at every batch size: it is the recommendation (it was "launch
    # without --speculative-algorithm", the all-off adaptive file's line)
    rec = json.loads(js.read_text())["recommendation"]
    flags = "--speculative-algorithm EAGLE3 --speculative-num-steps 3 --speculative-eagle-topk 4 --speculative-num-draft-tokens 8"
    assert (rec["kind"], rec["launch_flags"]) == ("tree", flags), rec
    assert "recommended: the tree steps 3 / topk 4 / 8 draft tokens" in text and "launch without" not in text


def test_past_the_measured_concurrency_every_cost_is_held(tmp_path, capsys):
    """Measured at c 1, 2, 4: at bs 8..64 the plain step, the verify pass and the draft step are all those of c 4,
    so the predicted round (and the speedup) is held too, not the verify extrapolated while the plain step is held."""
    bench = _write(bench_doc(T1, ROUND, HIST, levels=(1, 2, 4)), tmp_path)
    rc, out, js = _plan(tmp_path, bench, "--batch-sizes", "4,8,16,32,64")
    assert rc == 0
    assert "held at the nearest measured batch size" in " ".join(capsys.readouterr().out.split())
    at4 = {s: _pred(js, 4, s) for s in (1, 2, 3)}
    for bs in (8, 16, 32, 64):
        for s in (1, 2, 3):
            p = _pred(js, bs, s)
            assert p["base_us"] == pytest.approx(at4[s]["base_us"]) and p["round_us"] == pytest.approx(at4[s]["round_us"])
            assert p["speedup"] == pytest.approx(at4[s]["speedup"])
    assert at4[3]["round_us"] == pytest.approx(ROUND(4))
