"""The whole `bench` command against protocol stubs (synthetic acceptance, injected faults), then
`plan --bench` on its JSON: the run never crashes, every failure is counted, nothing leaks into averages."""

import json
import sys

import pytest

from stub_server import ProtocolStub, StubConfig
from sglang_kimi_eagle3.bench.plots import plot_bench
from sglang_kimi_eagle3.cli import main as cli_main

FAST = ["--concurrency", "1,4", "--max-new-tokens", "16", "--min-requests", "10", "--rounds", "1", "--warmup", "0",
        "--categories", "chat,math", "--no-progress"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "run.json"
    spec = StubConfig(alphas=[0.85, 0.6, 0.4], pass_ms=0.2, fail_every=5, nospec_every=7)
    base = StubConfig(alphas=None, pass_ms=0.2)
    with ProtocolStub(spec) as spec_url, ProtocolStub(base) as base_url:
        rc = cli_main(["bench", "--url", spec_url, "--baseline-url", base_url, "--json", str(out)] + FAST)
    return rc, json.loads(out.read_text()), out


def test_protocol_stub_sweep_counts_every_failure(run):
    rc, doc, _ = run
    assert rc == 0
    assert [lv["concurrency"] for lv in doc["levels"]] == [1, 4]
    reqs = doc["requests"]["spec"]
    total = sum(len(v) for v in reqs.values())
    assert total == 20
    failed = sum(1 for v in reqs.values() for r in v if not r["ok"])
    assert failed == 4  # requests 5, 10, 15, 20 of the stub's counter
    assert sum(sum(lv["spec"]["errors"].values()) for lv in doc["levels"]) == 4
    assert sum(lv["spec"]["errors"].get("http_500", 0) for lv in doc["levels"]) == 4
    no_spec = sum(lv["spec"]["no_spec"] for lv in doc["levels"])
    assert no_spec == sum(1 for v in reqs.values() for r in v if r["ok"] and r["spec"] is None) >= 1


def test_protocol_stub_sweep_tau_excludes_spec_less_answers(run):
    _, doc, _ = run
    for lv in doc["levels"]:
        rs = [r for r in doc["requests"]["spec"][str(lv["concurrency"])] if r["ok"] and r["spec"]]
        tau = sum(r["completion_tokens"] for r in rs) / sum(r["spec"]["verify_ct"] for r in rs)
        assert lv["spec"]["tau"] == pytest.approx(tau)
        assert len(lv["spec"]["alpha"]) == 3  # depth from the stub's /server_info: 3 steps
        assert lv["baseline"]["no_spec"] == lv["baseline"]["ok"] and lv["baseline"]["tau"] is None
        assert lv["speedup"]["aggregate"] == pytest.approx(lv["spec"]["agg_tok_s"] / lv["baseline"]["agg_tok_s"])
    assert doc["servers"]["spec"]["speculative_num_steps"] == 3
    assert doc["config"]["templates"] == {"spec": "raw", "baseline": "raw"}


def test_plan_reads_the_bench_json(run, tmp_path, capsys):
    _, _, path = run
    cfg = tmp_path / "adaptive.json"
    assert cli_main(["plan", "--bench", str(path), "-o", str(cfg), "--batch-sizes", "1,4"]) == 0
    out = capsys.readouterr().out
    assert "measured in" in out and "measured step times in" in out
    asp = pytest.importorskip("sglang.srt.speculative.adaptive_spec_params")
    _, slots = asp._load_adaptive_config(str(cfg))
    assert sorted(slots) == [1, 4]


def test_unreachable_server_is_a_counted_failure_not_a_crash(tmp_path, capsys):
    out = tmp_path / "dead.json"
    rc = cli_main(["bench", "--url", "http://127.0.0.1:9", "--json", str(out), "--timeout", "2"] + FAST)
    assert rc == 1  # nothing was measured: the run failed (it used to exit 0 with status "complete")
    doc = json.loads(out.read_text())
    assert doc["status"] == "failed" and "no request succeeded" in doc["interrupted"]["error"]
    assert all(lv["spec"]["ok"] == 0 and lv["spec"]["errors"] == {"connection": lv["spec"]["requests"]}
               for lv in doc["levels"])
    cap = capsys.readouterr()
    assert "failed" in cap.out and "no request to http://127.0.0.1:9 succeeded" in cap.err


def test_bench_bad_input_is_one_line_exit_2(capsys):
    assert cli_main(["bench", "--url", "http://x", "--concurrency", "0,2"]) == 2
    assert cli_main(["bench", "--url", "http://x", "--categories", "poetry"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("sglang-kimi-eagle3: error:") for line in err)


def test_plots_written_or_clearly_skipped(run, tmp_path, monkeypatch):
    _, doc, _ = run
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if the 'plot' extra were absent
    msg = plot_bench(doc, str(tmp_path / "none"))
    assert len(msg) == 1 and msg[0].startswith("skipped the plots: matplotlib is not installed")
    monkeypatch.undo()
    pytest.importorskip("matplotlib")
    paths = plot_bench(doc, str(tmp_path / "png"), "protocol stub, synthetic")
    assert [p.rsplit("/", 1)[1] for p in paths] == ["tau_speedup.png", "acceptance.png"]
    for p in paths:
        with open(p, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_plots_never_replace_a_png_bench_did_not_write(run, tmp_path, capsys):
    """--plots DIR holding the user's own acceptance.png: exit 2 naming it, before any request, the file kept; the
    plots bench wrote itself are replaced by a rerun."""
    pytest.importorskip("matplotlib")
    _, doc, path = run
    plots = tmp_path / "png"
    plots.mkdir()
    (plots / "acceptance.png").write_bytes(b"\x89PNG\r\n\x1a\nmine")
    argv = ["bench", "--url", "http://127.0.0.1:9", "--json", str(tmp_path / "r.json"), "--plots", str(plots)] + FAST
    assert cli_main(argv) == 2
    err = capsys.readouterr().err
    assert str(plots / "acceptance.png") in err and "move it away" in err and len(err.strip().splitlines()) == 1
    assert (plots / "acceptance.png").read_bytes().endswith(b"mine") and not (tmp_path / "r.json").exists()
    (plots / "acceptance.png").unlink()
    plot_bench(doc, str(plots))  # bench's own plots
    from sglang_kimi_eagle3.bench import outputs

    outputs.check_plots(str(plots))  # a rerun may replace them
