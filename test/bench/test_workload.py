"""`--workload chat`: the bundled request-length file is what its seeded generator writes, and e2e.py / bench
send each request with its own length (prompt characters and max_new_tokens) against a protocol stub."""

import json
import statistics

import e2e
import make_workload
from stub_server import ProtocolStub, StubConfig
from sglang_kimi_eagle3.bench import workload
from sglang_kimi_eagle3.commands.bench import main as bench_main
from sglang_kimi_eagle3.errors import UserError


def test_the_bundled_chat_file_is_the_seeded_generators_output():
    doc = json.loads((workload.DIR / "chat.json").read_text())
    assert doc["requests"] == make_workload.chat()["requests"]  # regenerate: same seed, same file
    d = doc["distribution"]
    ins, outs = [r[0] for r in doc["requests"]], [r[1] for r in doc["requests"]]
    assert d["prompt"]["min"] <= min(ins) and max(ins) <= d["prompt"]["max"]
    assert d["output"]["min"] <= min(outs) and max(outs) <= d["output"]["max"]
    assert 0.8 < statistics.median(ins) / d["prompt"]["median"] < 1.25
    assert 0.8 < statistics.median(outs) / d["output"]["median"] < 1.25
    assert statistics.mean(ins) > statistics.median(ins)  # right-skewed


def test_prompts_carry_exact_lengths_and_their_own_output_length():
    prompts, meta = workload.load("chat")
    doc = json.loads((workload.DIR / "chat.json").read_text())
    assert meta["name"] == "chat" and len(prompts) == len(doc["requests"])
    for p, (pin, pout) in zip(prompts, doc["requests"]):
        assert len(p.text) == pin and p.text.isascii() and p.max_new_tokens == pout
    capped, _ = workload.load("chat", cap=100)
    assert [p.max_new_tokens for p in capped] == [min(o, 100) for _, o in doc["requests"]]
    try:
        workload.load("nope")
    except UserError as exc:
        assert "--workload 'nope'" in str(exc) and "chat" in str(exc)
    else:
        raise AssertionError("an unknown workload must be refused")


def test_e2e_sends_each_request_with_the_workloads_lengths(tmp_path):
    out = tmp_path / "e2e.json"
    n = 5
    with ProtocolStub(StubConfig(alphas=None, pass_ms=0.05)) as url, ProtocolStub(StubConfig(pass_ms=0.05)) as u2:
        rc = e2e.main(["--server", f"plain={url}", "--server", f"spec={u2}", "--json", str(out), "--workload", "chat", "--concurrency", "1",
                       "--temperatures", "0", "--rounds", "1", "--round-s", "0.3", "--min-requests", str(n),
                       "--cold-requests", "1", "--max-new-tokens", "8"])
    assert rc == 0
    doc = json.loads(out.read_text())
    want = json.loads((workload.DIR / "chat.json").read_text())["requests"][:n]
    cold = [r for r in doc["rows"] if r["phase"] == "cold" and r["index"] == 1 and r["server"] == "plain"][0]
    # the stub ends a request up to a quarter early (some stop early): each got its own length, not --max-new-tokens 8
    assert sum(o - o // 4 for _, o in want) <= cold["summary"]["tokens"] <= sum(o for _, o in want)
    steady = [r for r in doc["rows"] if r["phase"] == "steady" and r["server"] == "plain"][0]["summary"]
    assert steady["tokens"] > 8 * steady["requests"]  # rounds too (e2e.timed_level): each request's own length
    sent = sorted((t["prompt"], t["prompt_tokens"]) for t in cold["requests"])
    assert sent == sorted((f"chat-{i:04d}", max(1, pin // 4)) for i, (pin, _) in enumerate(want))  # stub: chars / 4


def test_bench_takes_a_workload_and_refuses_it_with_prompts(tmp_path, capsys):
    with ProtocolStub(StubConfig(alphas=None, pass_ms=0.05)) as url:
        rc = bench_main(["--url", url, "--workload", "chat", "--concurrency", "1", "--max-new-tokens", "8",
                         "--json", str(tmp_path / "b.json"), "--temperature", "0"])
    assert rc == 0
    doc = json.loads((tmp_path / "b.json").read_text())
    assert "chat" in json.dumps(doc["config"])
    try:
        bench_main(["--url", "http://127.0.0.1:9", "--workload", "chat", "--categories", "chat"])
    except UserError as exc:
        assert "--workload" in str(exc)
    else:
        raise AssertionError("--workload with --categories must be refused")


def _shared_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def _e2e_sends(tmp_path, *extra) -> list[str]:
    plain, spec = ProtocolStub(StubConfig(alphas=None, pass_ms=0.05)), ProtocolStub(StubConfig(pass_ms=0.05))
    with plain as url, spec as u2:
        rc = e2e.main(["--server", f"plain={url}", "--server", f"spec={u2}", "--json", str(tmp_path / "e2e.json"),
                       "--workload", "chat", "--concurrency", "2", "--temperatures", "0", "--rounds", "2",
                       "--round-s", "0.3", "--min-requests", "4", "--cold-requests", "1", "--max-new-tokens", "4",
                       "--greedy-check", "0", *extra])
    assert rc == 0
    return plain.texts + spec.texts


def test_no_two_sends_share_more_than_a_few_prompt_characters(tmp_path):
    """Replayed as written, every chat prompt is a prefix of the same filler text: after its first send each one was
    a radix-cache hit that prefilled 1-2 tokens, so no run measured a prefill. Each send now has a head of its own;
    the workload's lengths stay exact. `--fresh-prompts false` replays them as written (decode alone)."""
    texts = _e2e_sends(tmp_path)
    lengths = {len(p.text) for p in workload.load("chat")[0]}
    assert len(texts) > 8 and all(len(t) in lengths for t in texts)
    ordered = sorted(texts)
    assert max(_shared_prefix(a, b) for a, b in zip(ordered, ordered[1:])) <= 4  # the counter's low digits, no more
    replayed = _e2e_sends(tmp_path, "--fresh-prompts", "false")
    assert len(set(replayed)) < len(replayed)  # the same prompts again (the cold pass and both rounds)
    ordered = sorted(replayed)
    assert max(_shared_prefix(a, b) for a, b in zip(ordered, ordered[1:])) >= 16  # one filler text: prefixes of each other
