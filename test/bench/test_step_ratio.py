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
