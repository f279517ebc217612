"""benchmark/serving/prefill_mix.py: the prefill batches of each server's rounds, from SGLang 0.5.23's `Prefill batch`
log lines (written here in that format, with the other lines a server log holds between them)."""

import gzip
import json

import prefill_mix


def _line(t: str, seqs: int, new: int, cached: int = 0, running: int = 0) -> str:
    return (f"[2026-12-07 {t}] Prefill batch, #new-seq: {seqs}, #new-token: {new}, #cached-token: {cached}, token "
            f"usage: 0.01, #running-req: {running}, #queue-req: 0, #pending-token: 0, cuda graph: False, input "
            f"throughput (token/s): 1234.5\n")


LOG = ([_line("09:00:00", 1, 30)]  # a lone warm-up probe: its own burst, under --min-batches
       + [f"[2026-12-07 09:00:0{i}] Decode batch, #running-req: 7, #token: 900, gen throughput (token/s): 400.0\n"
          for i in range(3)]
       + [_line(f"09:00:{10 + i:02d}", 1 + i % 2, 600 + 100 * i, cached=i, running=6) for i in range(6)]  # round 1
       + [_line(f"09:00:{30 + i:02d}", 2, 1000, running=30) for i in range(5)])  # round 2: a pause of 14 s before it


def test_rounds_split_at_pauses_and_summarise_their_batches():
    rs = prefill_mix.rounds(prefill_mix.batches(LOG), gap_s=6, min_batches=5)
    assert [r["start"] for r in rs] == ["09:00:10", "09:00:30"]  # the lone probe left out, the pause split the rest
    one, two = rs
    assert (one["batches"], one["requests"], one["span_s"]) == (6, 9, 5)
    assert one["requests_per_batch"] == 1.5
    assert one["new_tokens_per_batch"] == 850.0  # (600 + 700 + ... + 1100) / 6
    assert one["cached_tokens_per_batch"] == 2.5 and one["running_mean"] == 6.0
    assert (two["batches"], two["requests"], two["new_tokens_per_batch"], two["running_mean"]) == (5, 10, 1000.0, 30.0)
    # a wider gap joins the rounds; a lower floor keeps the probe
    assert len(prefill_mix.rounds(prefill_mix.batches(LOG), gap_s=30, min_batches=5)) == 1
    assert len(prefill_mix.rounds(prefill_mix.batches(LOG), gap_s=6, min_batches=1)) == 3


def test_main_reads_gzip_logs_by_name_and_writes_the_rounds(tmp_path, capsys):
    for name in ("plain", "ours"):
        with gzip.open(tmp_path / f"{name}.log.gz", "wt") as f:
            f.writelines(LOG)
    out = tmp_path / "mix.json"
    assert prefill_mix.main([f"plain={tmp_path / 'plain.log.gz'}", f"ours={tmp_path / 'ours.log.gz'}",
                             "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert list(doc["servers"]) == ["plain", "ours"]
    assert [r["batches"] for r in doc["servers"]["ours"]] == [6, 5]
    text = capsys.readouterr().out
    assert "== plain: 2 rounds" in text and "== ours: 2 rounds" in text


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    assert prefill_mix.main([str(tmp_path / "plain.log")]) == 2  # no NAME=
    assert "give each log as NAME=PATH" in capsys.readouterr().err
    assert prefill_mix.main([f"plain={tmp_path / 'missing.log'}"]) == 2
    assert "plain: cannot read" in capsys.readouterr().err
    (tmp_path / "other.log").write_text("no prefill here\n")
    assert prefill_mix.main([f"plain={tmp_path / 'other.log'}"]) == 2
    err = capsys.readouterr().err
    assert "no SGLang 'Prefill batch' line" in err and err.count("\n") == 1
