"""`bench` against a fault-injecting server (test/bench/stub_server.py, 127.0.0.1 only, stops by itself):
every malformed answer is one counted error of its kind, a deadline is total time, bad input exits 2
before the first request, every finished level survives Ctrl-C / SIGTERM / a crash, writes are atomic."""

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from stub_server import FAULTS, HIST, FaultServer, cycle, wait_for
from sglang_kimi_eagle3.bench import client
from sglang_kimi_eagle3.bench.client import generate
from sglang_kimi_eagle3.cli import main as cli_main
from helpers import ROOT, clean_env

SP = {"max_new_tokens": 8}
FAST = ["--max-new-tokens", "8", "--min-requests", "4", "--rounds", "1", "--warmup", "0", "--categories", "chat",
        "--no-progress"]


@pytest.fixture(autouse=True)
def _fresh_client():
    client.reset()
    yield
    client.reset()


@pytest.mark.parametrize("kind,want", sorted(FAULTS.items()))
def test_each_fault_is_one_error_of_its_kind(kind, want):
    with FaultServer(cycle(kind), lifetime=10) as url:
        t0 = time.monotonic()
        r = generate(url, "p", "chat", "x", SP, timeout=0.4)
        took = time.monotonic() - t0
    assert not r.ok and r.error == want, (r.error, r.detail)
    assert r.completion_tokens is None and r.spec is None  # nothing of it can reach an average
    assert took < 1.5  # a total deadline: drip and hang end at 0.4 s (+ the watchdog's 50 ms tick)


def test_good_answer_still_parses():
    with FaultServer(cycle("ok", "adaptive_rate_above_1"), lifetime=10) as url:
        r = generate(url, "p", "chat", "x", SP, timeout=5, keep_output=True)
        r2 = generate(url, "p", "chat", "x", SP, timeout=5)
    assert r.ok and r.completion_tokens == 22 and r.spec["histogram"] == HIST and len(r.output_ids) == 22
    # under --speculative-adaptive SGLang divides by the current draft count: a rate above 1 is real data
    assert r2.ok and r2.spec["accept_rate"] == 30 / 24


def test_sweep_counts_each_kind_and_averages_only_good_answers(tmp_path):
    kinds = ("ok", "truncated", "bad_status", "hist_string", "tokens_negative", "hist_negative", "proposed_string",
             "not_json", "ok", "nospec")
    out = tmp_path / "run.json"
    with FaultServer(cycle(*kinds), lifetime=20) as url:
        rc = cli_main(["bench", "--url", url, "--json", str(out), "--concurrency", "1,2", "--min-requests", "10",
                       "--max-new-tokens", "8", "--rounds", "1", "--warmup", "0", "--categories", "chat,math",
                       "--no-progress", "--timeout", "5"])
    assert rc == 0
    doc = json.loads(out.read_text())
    assert doc["status"] == "complete" and doc["interrupted"] is None
    errors: dict = {}
    for lv in doc["levels"]:
        for k, v in lv["spec"]["errors"].items():
            errors[k] = errors.get(k, 0) + v
    # per 10 requests: truncated, bad_http, 4 x bad_field, bad_json -> x2 levels
    assert errors == {"truncated": 2, "bad_http": 2, "bad_field": 8, "bad_json": 2}
    o = doc["overall"]
    assert (o["ok"], o["no_spec"]) == (6, 2)
    assert o["tau"] == pytest.approx(22 / 8) and o["histogram"] == [2 * 2 * h for h in HIST]
    assert o["alpha"] == pytest.approx([7 / 8, 5 / 7, 2 / 5])  # from HIST: tails 8, 7, 5, 2


@pytest.mark.parametrize("args,want", [
    (["--url", "127.0.0.1:30000"], "needs an http:// or https:// scheme"),
    (["--url", "http://[::1"], "not a valid URL"),
    (["--url", "http://[::1]:99999"], "not a valid URL"),
    (["--url", "http://"], "has no host"),
    (["--url", "ftp://h:1"], "scheme"),
    (["--baseline-url", "localhost"], "--baseline-url"),
    (["--timeout", "nan"], "--timeout 'nan': expected a finite number > 0"),
    (["--timeout", "inf"], "--timeout 'inf'"), (["--timeout", "0"], "--timeout '0'"), (["--timeout", "-1"], "--timeout"),
    (["--timeout", "abc"], "--timeout 'abc'"),
    (["--temperature", "nan"], "--temperature"), (["--temperature", "-1"], "--temperature"),
    (["--concurrency", "0"], "--concurrency"), (["--concurrency", "a,b"], "--concurrency"),
    (["--concurrency", "1-100000"], "--concurrency"), (["--concurrency", ""], "--concurrency"),
    (["--max-new-tokens", "0"], "--max-new-tokens 0"), (["--max-new-tokens", "x"], "--max-new-tokens"),
    (["--rounds", "-1"], "--rounds"), (["--warmup", "-1"], "--warmup"),
    (["--json", "{tmp}/no/such/folder/x.json"], "does not exist"), (["--json", "{tmp}"], "is a folder"),
    (["--json", "{tmp}/file/x.json"], "a parent of it is a file"), (["--json", "/proc/bench.json"], "cannot create"),
    (["--json", "/dev/null"], "is a device"),
    (["--plots", "{tmp}/file"], "not a folder"), (["--plots", "{tmp}/no/such/plots"], "does not exist"),
    (["--baseline-json", "{tmp}/missing.json"], "no such bench file"), (["--baseline-json", "{tmp}/file"], "malformed JSON"),
    (["--baseline-json", "{tmp}/b_levels_str.json"], "'levels'"),
    (["--baseline-json", "{tmp}/b_c0.json"], "'levels[0].concurrency' = 0"),
    (["--baseline-json", "{tmp}/b_tau_str.json"], "'levels[0].spec.tau'"),
    (["--baseline-json", "{tmp}/b_nolevels.json"], "not a bench file: no 'levels'"),
    (["--baseline-json", "{tmp}/b_tok0.json"], "'levels[0].spec.agg_tok_s'"),
    (["--baseline-json", "{tmp}", "--baseline-url", "http://h:1"], "not both"),
    # counts are bounded before anything is allocated (--min-requests 10000000000 was a MemoryError after 29 s)
    (["--min-requests", "10000000000"], "--min-requests 10000000000: expected an integer in [1, 100000]"),
    (["--min-requests", "1e10"], "--min-requests 1e10"), (["--max-new-tokens", "9999999999"], "--max-new-tokens"),
    (["--warmup", "100000"], "--warmup"), (["--rounds", "100000", "--concurrency", "64"], "requests in one level"),
    (["--timeout", "1e9"], "--timeout"), (["--temperature", "1e9"], "--temperature"),
    # output paths checked distinct up front
    (["--json", "{tmp}/same.json", "--baseline-json", "{tmp}/same.json"], "would overwrite the baseline"),
    (["--json", "{tmp}/q", "--plots", "{tmp}/q"], "--plots {tmp}/q is the --json file"),
    (["--json", "{tmp}/p/tau_speedup.png", "--plots", "{tmp}/p"], "is the plot --plots"),
    # baseline sanity
    (["--baseline-url", "{url}"], "is the --url server"),
    (["--baseline-url", "{url_localhost}"], "is the --url server"),
    (["--baseline-json", "{tmp}/b_spec.json"], "a run against a speculating server"),
    (["--baseline-json", "{tmp}/b_spec_info.json"], "speculative_algorithm EAGLE3"),
    (["--baseline-json", "{tmp}/b_c3.json"], "no level to compare"),
    (["--template", "chatml"], "unknown --template"), (["--categories", "poetry"], "unknown prompt categories"),
    (["--no-such-flag"], "unrecognized arguments"),
])
def test_bad_input_exits_2_before_the_first_request(tmp_path, capsys, args, want):
    (tmp_path / "file").write_text("{not json")
    for name, doc in {"b_levels_str": {"levels": "1,2"}, "b_c0": {"levels": [{"concurrency": 0}]},
                      "b_tau_str": {"levels": [{"concurrency": 1, "spec": {"tau": "2.5"}}]}, "b_nolevels": {"x": 1},
                      "b_tok0": {"levels": [{"concurrency": 1, "spec": {"agg_tok_s": 0}}]},
                      "b_spec": {"levels": [{"concurrency": 1, "spec": {"tau": 2.5, "histogram": [1, 2]}}]},
                      "b_spec_info": {"levels": [{"concurrency": 1}], "servers": {"spec": {"speculative_algorithm": "EAGLE3"}}},
                      "b_c3": {"levels": [{"concurrency": 3}]},
                      "same": {"levels": [{"concurrency": 1}]}}.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(doc))
    (tmp_path / "p").mkdir()
    srv = FaultServer(cycle("ok"), lifetime=10)
    args = [a.replace("{tmp}", str(tmp_path)).replace("{url}", srv.url)
            .replace("{url_localhost}", srv.url.replace("127.0.0.1", "localhost") + "/") for a in args]
    want = want.replace("{tmp}", str(tmp_path))
    with srv as url:
        base = [] if "--url" in args else ["--url", url]
        out = [] if "--json" in args else ["--json", str(tmp_path / "out.json")]
        rc = cli_main(["bench", *base, *out, *FAST, *args])
    err = capsys.readouterr().err
    assert rc == 2, err
    line = err.strip().splitlines()[-1]
    assert line.startswith("sglang-kimi-eagle3: error:") and want in line, line
    assert not (tmp_path / "out.json").exists() and srv.count == 0


def _interrupt_after_first_level(tmp_path, sig):
    """Level c=1 answers at once, c=2 hangs (default 600 s timeout); `sig` arrives once level 1 is on disk."""
    out = tmp_path / "run.json"
    plan = lambda n, path: "ok" if n <= 4 else "hang"  # noqa: E731
    sent = {}

    def fire():
        if wait_for(lambda: out.exists() and len(json.loads(out.read_text() or "{}").get("levels", [])) == 1):
            time.sleep(0.3)  # the c=2 requests are open now
            sent["t"] = time.monotonic()
            os.kill(os.getpid(), sig)

    with FaultServer(plan, lifetime=30) as url:
        threading.Thread(target=fire, daemon=True).start()
        rc = cli_main(["bench", "--url", url, "--json", str(out), "--concurrency", "1,2", *FAST])
        took = time.monotonic() - sent["t"]
    return rc, json.loads(out.read_text()), took


@pytest.mark.parametrize("sig,rc_want", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_keeps_finished_levels_and_stops_at_once(tmp_path, sig, rc_want):
    # Ctrl-C as in a terminal: a pytest-xdist worker starts with SIGINT ignored, so Python installed no
    # KeyboardInterrupt handler there (a process started in the background by a shell is the same)
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        rc, doc, took = _interrupt_after_first_level(tmp_path, sig)
    finally:
        signal.signal(signal.SIGINT, old)
    assert rc == rc_want
    assert took < 3.0  # not the 600 s request timeout: open requests are aborted
    assert doc["status"] == "interrupted" and doc["interrupted"]["signal"] == sig.name
    assert doc["interrupted"]["during"] == "spec c=2" and doc["interrupted"]["finished_levels"] == 1
    assert [lv["concurrency"] for lv in doc["levels"]] == [1] and doc["levels"][0]["spec"]["ok"] == 4
    assert signal.getsignal(signal.SIGTERM) is not None and signal.getsignal(signal.SIGTERM) != signal.SIG_IGN


def test_crash_mid_sweep_keeps_finished_levels(tmp_path, monkeypatch, capsys):
    from sglang_kimi_eagle3.bench import runner

    real, calls = runner.summarize, []

    def boom(*a, **k):
        calls.append(1)
        if len(calls) == 3:  # level 1 spec, overall, then level 2 spec
            raise RuntimeError("injected bug")
        return real(*a, **k)

    monkeypatch.setattr(runner, "summarize", boom)
    out = tmp_path / "run.json"
    with FaultServer(cycle("ok"), lifetime=10) as url:
        rc = cli_main(["bench", "--url", url, "--json", str(out), "--concurrency", "1,2", *FAST])
    assert rc == 3 and "injected bug" in capsys.readouterr().err
    doc = json.loads(out.read_text())
    assert doc["status"] == "failed" and [lv["concurrency"] for lv in doc["levels"]] == [1]


def test_file_size_limit_leaves_no_partial_json(tmp_path):
    """`ulimit -f 1`: the first write fails; exit 2 with one line, and no invalid JSON is left behind."""
    out = tmp_path / "run.json"
    with FaultServer(cycle("ok"), lifetime=15) as url:
        cmd = (f"ulimit -f 1; exec {sys.executable} -m sglang_kimi_eagle3.cli bench --url {url} --json {out} "
               f"--concurrency 1 --save-outputs {' '.join(FAST)}")
        cp = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=60, env=clean_env(),
                            cwd=str(ROOT))
    assert cp.returncode == 2, cp.stderr
    assert "could not be written" in cp.stderr.strip().splitlines()[-1] and "Traceback" not in cp.stderr
    assert not out.exists() or json.loads(out.read_text())
    assert [p.name for p in tmp_path.iterdir() if p.name != "run.json"] == []  # no temp file left


def test_server_info_garbage_is_ignored_not_trusted():
    with FaultServer(cycle("ok"), lifetime=10, info={"speculative_num_steps": "abc", "tp_size": -1,
                                                     "model_path": 5}) as url:
        info = client.server_info(url)
    assert "speculative_num_steps" not in info and "tp_size" not in info and "model_path" not in info
    assert "speculative_num_steps" in info["ignored"]


def test_server_info_keeps_sglang_0523s_cuda_graph_bound():
    """SGLang 0.5.23's /server_info names the decode graph bound cuda_graph_max_bs_decode."""
    with FaultServer(cycle("ok"), lifetime=10, info={"cuda_graph_max_bs_decode": 8}) as url:
        assert client.server_info(url)["cuda_graph_max_bs_decode"] == 8


def test_absurd_but_well_typed_numbers_cannot_blow_up_the_summary():
    from sglang_kimi_eagle3.bench.client import RequestResult
    from sglang_kimi_eagle3.bench.stats import MAX_DEPTH, summarize

    spec = {"accept_length": 2.0, "accept_rate": 0.5, "verify_ct": 1, "num_correct": 1, "num_proposed": 10**12,
            "histogram": [0, 1]}
    s = summarize([RequestResult("p", "chat", True, latency_s=1.0, completion_tokens=2, spec=spec)], 1.0)
    assert len(s["alpha"]) == MAX_DEPTH and s["alpha"][0] == 1.0
    with FaultServer(cycle("ok"), lifetime=10, info={"speculative_num_steps": 10**9}) as url:
        assert "speculative_num_steps" not in client.server_info(url)
