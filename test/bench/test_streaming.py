"""`bench --stream` against a local server that streams SGLang's /generate chunks with set delays: TTFT, ITL
(a chunk's gap spread over the tokens it brought) and end-to-end percentiles per level, in the JSON and the
table; broken streams are counted errors; the spec-off baseline workflow on one server address.

The delays are the server's sleeps, so TTFT and end-to-end times are at least their designed values; a gap between
two chunks can also come out shorter, by as much as the gap before it overran (the H200 suite, 2026-12-03: 78.95 ms
for an 80 ms gap beside 11 busy workers), so gaps get the slack on both sides. The upper bounds leave room for a
loaded machine and still tell a wrong measurement (a gap not spread over its tokens, a doubled time). Only the
measurement is asserted, never the speed of anything."""

import json

import pytest

from sglang_kimi_eagle3.bench import client
from sglang_kimi_eagle3.cli import main as cli_main
from stub_server import PLAIN_INFO, StreamServer, sglang_chunks

FAST = ["--max-new-tokens", "16", "--rounds", "1", "--warmup", "0", "--categories", "chat", "--no-progress",
        "--timeout", "20"]
SLACK = 0.03  # seconds a gap may come out shorter (the one before it overran)
LOAD = 0.1  # seconds a sleep may overrun on a loaded 2-core box (0.069 s seen on a fresh-clone CI run, 2026-12-03)


@pytest.fixture(autouse=True)
def _fresh_client():
    client.reset()
    yield
    client.reset()


def _designed(n):
    """Request n: TTFT 0.03 n s; then 6 chunks of 1 token, 0.02 s apart; then one chunk of 3 tokens after
    0.24 s (a verify that accepted 2 drafts): ITLs 6 x 0.02 and 3 x 0.08 per request."""
    return sglang_chunks(0.03 * n, [(0.02, 1)] * 6 + [(0.24, 3)])


def test_ttft_itl_and_e2e_percentiles_per_level(tmp_path, capsys):
    out = tmp_path / "run.json"
    with StreamServer(lambda n, body: _designed(n)) as url:
        rc = cli_main(["bench", "--url", url, "--stream", "--json", str(out), "--concurrency", "1",
                       "--min-requests", "10", *FAST])
    assert rc == 0
    doc = json.loads(out.read_text())
    s = doc["levels"][0]["spec"]
    assert s["ok"] == 10 and s["errors"] == {} and doc["config"]["stream"] is True
    st = s["streaming"]
    assert st["requests"] == 10
    # TTFT: 0.03 .. 0.30 s; nearest rank over 10: p50 -> 5th (0.15), p90 -> 9th (0.27), p99 -> 10th (0.30)
    for q, want in (("p50", 0.15), ("p90", 0.27), ("p99", 0.30)):
        assert want - 1e-3 <= st["ttft_s"][q] <= want + LOAD, (q, st["ttft_s"])
    # ITL: 90 token gaps, 60 of 0.02 s and 30 of 0.24 / 3 = 0.08 s: p50 0.02, p90 and p99 0.08
    assert st["itl_s"]["n"] == 90
    assert 0.02 - SLACK / 3 <= st["itl_s"]["p50"] <= 0.02 + LOAD / 2, st["itl_s"]  # below the 0.08 gaps
    for q in ("p90", "p99"):
        assert 0.08 - SLACK <= st["itl_s"][q] <= 0.08 + LOAD, (q, st["itl_s"])  # spread: below the chunk's 0.24
    # end to end: 0.03 n + 0.12 + 0.24
    for q, want in (("p50", 0.51), ("p90", 0.63), ("p99", 0.66)):
        assert want - 1e-3 <= st["e2e_s"][q] <= want + 2 * LOAD, (q, st["e2e_s"])
    assert s["latency_p99_s"] == st["e2e_s"]["p99"]
    # the spec fields of the last chunk still give tau: 10 tokens over 7 verifies per request
    assert s["tau"] == pytest.approx(10 / 7)
    req = doc["requests"]["spec"]["1"][0]
    assert req["chunks"] == 8 and req["ttft_s"] > 0 and "itl_s" not in req and req["itl_max_s"] >= 0.08 - SLACK
    printed = capsys.readouterr().out
    assert "streamed latency" in printed and "TTFT p50" in printed


def test_the_request_asks_for_a_stream_and_a_non_streamed_run_has_no_latency_block(tmp_path):
    from stub_server import FaultServer, cycle

    out = tmp_path / "run.json"
    srv = StreamServer(lambda n, body: sglang_chunks(0.0, [(0.0, 2)]))
    with srv as url:
        assert cli_main(["bench", "--url", url, "--stream", "--json", str(out), "--concurrency", "1",
                         "--min-requests", "2", *FAST]) == 0
    assert len(srv.bodies) == 2 and all(b["stream"] is True and b["sampling_params"]["max_new_tokens"] == 16
                                        for b in srv.bodies)
    with FaultServer(cycle("ok"), lifetime=15) as url:
        assert cli_main(["bench", "--url", url, "--json", str(tmp_path / "plain.json"), "--concurrency", "1",
                         "--min-requests", "2", *FAST]) == 0
    s = json.loads((tmp_path / "plain.json").read_text())["levels"][0]["spec"]
    assert s["streaming"] is None and s["latency_p99_s"] is not None


BROKEN = {
    "error_chunk": ([0.0, {"error": {"message": "injected overload"}}, "DONE"], "stream_error", "injected overload"),
    "no_done": (sglang_chunks(0.0, [(0.0, 1)])[:-1], "truncated", "without data: [DONE]"),
    "no_chunk": (["DONE"], "truncated", "without a data chunk"),
    "not_json": ([b"data: {nope\n\n", "DONE"], "bad_json", "stream chunk 1"),
    "tokens_down": ([{"meta_info": {"completion_tokens": 3}}, {"meta_info": {"completion_tokens": 2}}, "DONE"],
                    "bad_field", "went down from 3 to 2"),
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_a_broken_stream_is_one_counted_error_of_its_kind(name):
    steps, kind, detail = BROKEN[name]
    with StreamServer(lambda n, body: steps) as url:
        r = client.generate(url, "p", "chat", "hi", {"max_new_tokens": 4}, 5.0, stream=True)
    assert not r.ok and r.error == kind and detail in r.detail, (r.error, r.detail)
    assert r.ttft_s is None and r.itl_s is None and r.completion_tokens is None


@pytest.mark.parametrize("after", [["HOLD"], [{"meta_info": {"completion_tokens": 1}}, "HOLD"], [b"data: [DO"]])
def test_a_stream_ends_at_done_whatever_the_server_does_after(after, tmp_path):
    """[DONE] then the connection held open (or more bytes, then held): the request is complete at [DONE], its
    latency ends there, and a level of such streams is all ok answers (no timeout at all)."""
    steps = sglang_chunks(0.0, [(0.0, 3)]) + after
    with StreamServer(lambda n, body: steps, lifetime=30) as url:
        r = client.generate(url, "p", "chat", "hi", {"max_new_tokens": 4}, 4.0, stream=True)
        assert r.ok and r.error is None and r.completion_tokens == 4, (r.error, r.detail)
        out = tmp_path / "held.json"
        assert cli_main(["bench", "--url", url, "--json", str(out), "--concurrency", "2", "--min-requests", "2",
                         "--stream", *FAST[:-1], "4"]) == 0
    s = json.loads(out.read_text())["levels"][0]["spec"]
    assert s["ok"] == 2 and s["errors"] == {} and s["streaming"]["requests"] == 2


def test_a_done_line_split_over_two_reads_still_ends_the_stream():
    steps = sglang_chunks(0.0, [(0.0, 1)])[:-1] + [b"data: [DO", 0.05, b"NE]", "HOLD"]
    with StreamServer(lambda n, body: steps, lifetime=30) as url:
        r = client.generate(url, "p", "chat", "hi", {"max_new_tokens": 4}, 4.0, stream=True)
    assert r.ok and r.completion_tokens == 2, (r.error, r.detail)


def test_incremental_chunks_keep_the_whole_output_with_save_outputs():
    # --incremental-streaming-output: text and output_ids are deltas, completion_tokens stays cumulative
    steps = [{"text": "ab", "output_ids": [1], "meta_info": {"completion_tokens": 1}}, 0.0,
             {"text": "cd", "output_ids": [2, 3], "meta_info": {"completion_tokens": 3, "finish_reason": {"type": "length"}}},
             "DONE"]
    with StreamServer(lambda n, body: steps) as url:
        r = client.generate(url, "p", "chat", "hi", {"max_new_tokens": 4}, 5.0, keep_output=True, stream=True)
    assert r.ok and r.completion_tokens == 3 and r.text == "abcd" and r.output_ids == [1, 2, 3]
    assert len(r.itl_s) == 2 and r.chunks == 2


def test_spec_off_baseline_then_the_speculative_run_on_one_address(tmp_path, capsys):
    plain, spec = tmp_path / "plain.json", tmp_path / "spec.json"
    quick = lambda n, body: sglang_chunks(0.01, [(0.01, 1)] * 3, spec=False)  # noqa: E731
    args = ["--concurrency", "1,2", "--min-requests", "4", "--stream", *FAST]
    # step 1: the server without speculation, measured as the baseline
    with StreamServer(quick, info=PLAIN_INFO) as url:
        assert cli_main(["bench", "--url", url, "--spec-off-baseline", "--tag", "plain", "--json", str(plain), *args]) == 0
    base = json.loads(plain.read_text())
    assert base["config"]["spec_off_baseline"] is True and base["config"]["tag"] == "plain"
    # step 2: the same address, restarted with speculation, compared against step 1's JSON
    with StreamServer(lambda n, body: sglang_chunks(0.01, [(0.01, 3)])) as url:
        assert cli_main(["bench", "--url", url, "--baseline-json", str(plain), "--tag", "eagle3", "--json", str(spec),
                         *args]) == 0
    doc = json.loads(spec.read_text())
    for lv in doc["levels"]:
        assert lv["baseline"]["streaming"] is not None and lv["speedup"]["aggregate"] > 0
        r = lv["latency_ratio"]
        assert r["e2e_s"]["p50"] == pytest.approx(lv["spec"]["streaming"]["e2e_s"]["p50"] /
                                                  lv["baseline"]["streaming"]["e2e_s"]["p50"])
    assert "ratio" in capsys.readouterr().out


def test_spec_off_baseline_refuses_a_speculating_server_and_modes_must_match(tmp_path, capsys):
    with StreamServer(lambda n, body: sglang_chunks(0.0, [])) as url:  # reports speculative_algorithm EAGLE3
        assert cli_main(["bench", "--url", url, "--spec-off-baseline", "--json", str(tmp_path / "p.json"),
                         "--concurrency", "1", "--min-requests", "1", *FAST]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("sglang-kimi-eagle3: error: --spec-off-baseline --url ") and \
        "speculative_algorithm EAGLE3" in err[-1] and "without --speculative-* flags" in err[-1]
    base = tmp_path / "plain.json"
    base.write_text(json.dumps({"schema": "sglang-kimi-eagle3-bench/1", "config": {"stream": True},
                                "levels": [{"concurrency": 1, "spec": {"agg_tok_s": 10.0}}]}))
    assert cli_main(["bench", "--url", "http://127.0.0.1:1", "--baseline-json", str(base), "--json",
                     str(tmp_path / "s.json"), "--concurrency", "1"]) == 2
    assert "measured with --stream, this run without" in capsys.readouterr().err


def test_a_baseline_json_with_a_bad_latency_block_is_refused_and_other_requests_are_warned(tmp_path, capsys):
    from sglang_kimi_eagle3.bench import outputs

    base = tmp_path / "plain.json"
    lv = {"concurrency": 1, "spec": {"agg_tok_s": 10.0, "streaming": {"ttft_s": {"p50": "fast"}, "itl_s": {}, "e2e_s": {}}}}
    base.write_text(json.dumps({"config": {"stream": True}, "levels": [lv]}))
    assert cli_main(["bench", "--url", "http://127.0.0.1:1", "--baseline-json", str(base), "--stream", "--json",
                     str(tmp_path / "s.json"), "--concurrency", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a bench file: field 'levels[0].spec.streaming.ttft_s.p50' = 'fast' (string)" in err[0], err
    doc = {"config": {"sampling_params": {"max_new_tokens": 64}, "prompts_file": None, "categories": ["chat"]}}
    notes = outputs.baseline_config_notes(doc, {"sampling_params": {"max_new_tokens": 256}, "prompts_file": None,
                                                "categories": ["chat"]}, "plain.json")
    assert len(notes) == 1 and "sampling_params {'max_new_tokens': 64}" in notes[0] and "different requests" in notes[0]
