"""benchmark/serving/step_ratio.py: the two servers read side by side in alternating order, and the document's
arithmetic (medians of the listed readings), against protocol stubs (synthetic timing, not a model). No timing is
asserted."""

import json
import statistics

import step_ratio
from stub_server import ProtocolStub, StubConfig


def test_readings_alternate_which_server_goes_first_every_round():
    calls = []
    plain, off = step_ratio.paired(lambda u: calls.append(u) or len(calls), ("P", "O"), 3)
    assert calls == ["P", "O", "O", "P", "P", "O"]
    assert plain == [1, 4, 5] and off == [2, 3, 6]  # each server's own readings, in its own order


def test_the_document_lists_every_reading_and_its_medians(tmp_path):
    out = tmp_path / "ratio.json"
    with ProtocolStub(StubConfig(alphas=None, pass_ms=0.1)) as p, ProtocolStub(StubConfig(alphas=None, pass_ms=0.1)) as o:
        assert step_ratio.main(["--plain", p, "--off", o, "--json", str(out), "--concurrency", "1,2", "--repeats", "3",
                                "--new-tokens", "4", "--prompt-tokens", "32", "--timeout", "20"]) == 0
    doc = json.loads(out.read_text())
    pre = doc["prefill"]
    assert len(pre["target_s_all"]) == len(pre["off_s_all"]) == 3
    assert pre["target_s"] == statistics.median(pre["target_s_all"]) and pre["off_s"] == statistics.median(pre["off_s_all"])
    assert [r["concurrency"] for r in doc["decode"]] == [1, 2]
    for r in doc["decode"]:
        assert len(r["target_step_s_all"]) == len(r["off_step_s_all"]) == 3
        t, o = statistics.median(r["target_step_s_all"]), statistics.median(r["off_step_s_all"])
        assert (r["target_step_s"], r["off_step_s"]) == (t, o)
        assert r["ratio"] == (o - t) / t and r["off_vs_plain"] == o / t


def test_three_servers_rotate_so_each_goes_first_once_in_three_rounds():
    calls = []
    p, o, x = step_ratio.paired(lambda u: calls.append(u) or len(calls), ("P", "O", "X"), 3)
    assert calls == ["P", "O", "X", "O", "X", "P", "X", "P", "O"]
    assert p == [1, 6, 8] and o == [2, 4, 9] and x == [3, 5, 7]  # reading i of each server is from round i


def test_also_servers_are_read_in_the_same_rounds_and_compared_round_by_round(tmp_path):
    out = tmp_path / "ratio.json"
    with (ProtocolStub(StubConfig(alphas=None, pass_ms=0.1)) as p, ProtocolStub(StubConfig(alphas=None, pass_ms=0.1)) as o,
          ProtocolStub(StubConfig(alphas=None, pass_ms=0.1)) as x):
        assert step_ratio.main(["--plain", p, "--off", o, "--also", f"offext={x}", "--json", str(out), "--concurrency", "2",
                                "--repeats", "3", "--new-tokens", "4", "--prompt-tokens", "32", "--timeout", "20"]) == 0
    doc = json.loads(out.read_text())
    assert doc["also"] == {"offext": x} and len(doc["prefill"]["also"]["offext"]["s_all"]) == 3
    (r,) = doc["decode"]
    ts, xs, os_ = r["target_step_s_all"], r["also"]["offext"]["step_s_all"], r["off_step_s_all"]
    assert r["also"]["offext"]["vs_plain_rounds"] == [a / b for a, b in zip(xs, ts)]
    assert r["also"]["offext"]["vs_plain_rounds_median"] == statistics.median(a / b for a, b in zip(xs, ts))
    assert r["off_vs_plain_rounds"] == [a / b for a, b in zip(os_, ts)]


def test_a_malformed_also_is_refused_naming_the_flag(capsys):
    import pytest

    with pytest.raises(SystemExit) as e:
        step_ratio.main(["--plain", "http://a", "--off", "http://b", "--json", "x", "--also", "offext"])
    assert e.value.code == 2 and "--also 'offext': expected NAME=http://HOST:PORT" in capsys.readouterr().err


def test_each_level_starts_with_one_uncounted_pass_per_server(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(step_ratio, "batch_latency", lambda u, c, p, n, to: 0.1)
    monkeypatch.setattr(step_ratio, "decode_step",
                        lambda u, c, n, to, ctx: calls.append((u, c, n)) or ctx == 64 and 0.01 * len(calls))
    out = tmp_path / "ratio.json"
    assert step_ratio.main(["--plain", "http://p", "--off", "http://o", "--json", str(out), "--concurrency", "1,4",
                            "--repeats", "2", "--new-tokens", "16"]) == 0
    # per level: the warm pass of each server (8 new tokens), then the rotated rounds (16)
    assert calls == [("http://p", 1, 8), ("http://o", 1, 8), ("http://p", 1, 16), ("http://o", 1, 16),
                     ("http://o", 1, 16), ("http://p", 1, 16),
                     ("http://p", 4, 8), ("http://o", 4, 8), ("http://p", 4, 16), ("http://o", 4, 16),
                     ("http://o", 4, 16), ("http://p", 4, 16)]
    doc = json.loads(out.read_text())
    assert doc["decode"][0]["warm_step_s"] == {"plain": 0.01, "off": 0.02}
    assert doc["decode"][0]["target_step_s_all"] == [0.03, 0.06]  # the counted readings leave the warm ones out


def test_the_decode_step_reads_at_the_context_asked(tmp_path, monkeypatch):
    """--decode-context: the prompt tokens of every decode-step request (the off-state's verify attention grows with
    the context; 64 by default, as in the runs of 2026-12-03/04), recorded in each row."""
    seen = []
    monkeypatch.setattr(step_ratio, "batch_latency", lambda u, c, p, n, to: seen.append((p, n)) or 0.1 + 0.001 * n)
    out = tmp_path / "ratio.json"
    assert step_ratio.main(["--plain", "http://p", "--off", "http://o", "--json", str(out), "--concurrency", "2",
                            "--repeats", "1", "--new-tokens", "16", "--prompt-tokens", "512", "--decode-context", "1500"]) == 0
    assert {p for p, n in seen if n == 1} == {512, 1500} and {p for p, n in seen if n > 8} == {1500}  # n 8: the prefill's warm pass
    assert json.loads(out.read_text())["decode"][0]["decode_context"] == 1500
