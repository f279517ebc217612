"""`bench --prompts FILE`: JSONL and ShareGPT-style JSON read in file order; the prompts are what the server
receives; a bad file is one line naming the file, the line or entry and the field, exit 2, before any request."""

import json

import pytest

from sglang_kimi_eagle3.bench import client
from sglang_kimi_eagle3.bench.prompt_file import load_file
from sglang_kimi_eagle3.cli import main as cli_main
from stub_server import StreamServer, sglang_chunks


@pytest.fixture(autouse=True)
def _fresh_client():
    client.reset()
    yield
    client.reset()


def test_jsonl_with_prompt_or_text_category_and_id(tmp_path):
    f = tmp_path / "p.jsonl"
    f.write_text('{"prompt": "first one"}\n\n{"text": "second", "category": "code", "id": "x7"}\n')
    prompts, skipped = load_file(str(f))
    assert [(p.id, p.category, p.text, p.words) for p in prompts] == [
        ("p.jsonl:1", "custom", "first one", 2), ("x7", "code", "second", 1)]
    assert skipped == 0


def test_sharegpt_takes_the_first_human_turn_and_skips_entries_without_one(tmp_path):
    f = tmp_path / "sg.json"
    f.write_text(json.dumps([
        {"id": "a", "conversations": [{"from": "system", "value": "s"}, {"from": "human", "value": "Q1"},
                                      {"from": "gpt", "value": "A1"}, {"from": "human", "value": "Q2"}]},
        {"id": "b", "conversations": []},
        {"conversations": [{"from": "gpt", "value": "only an answer"}]},
        {"conversations": [{"from": "user", "value": "Q3"}]},
    ]))
    prompts, skipped = load_file(str(f))
    assert [(p.id, p.category, p.text) for p in prompts] == [("a", "sharegpt", "Q1"), ("sg.json:3", "sharegpt", "Q3")]
    assert skipped == 2


def test_the_server_receives_the_file_prompts(tmp_path, capsys):
    f = tmp_path / "sg.json"
    f.write_text(json.dumps([{"conversations": [{"from": "human", "value": "alpha"}]}, {"conversations": []},
                             {"conversations": [{"from": "human", "value": "beta"}]}]))
    srv = StreamServer(lambda n, body: sglang_chunks(0.0, [(0.0, 1)]))
    with srv as url:
        assert cli_main(["bench", "--url", url, "--prompts", str(f), "--template", "raw", "--stream", "--json", str(tmp_path / "r.json"),
                         "--concurrency", "1", "--min-requests", "4", "--rounds", "1", "--warmup", "0",
                         "--no-progress"]) == 0
    assert [b["text"] for b in srv.bodies] == ["alpha", "beta", "alpha", "beta"]
    cfg = json.loads((tmp_path / "r.json").read_text())["config"]
    assert cfg["prompts_file"] == str(f) and cfg["prompts"] == 2 and cfg["prompts_skipped"] == 1
    assert cfg["categories"] == ["sharegpt"]
    assert "1 entries without a human turn skipped" in capsys.readouterr().err


BAD = [
    ("bad.jsonl", '{"prompt": "ok"}\n{"prompt": "fine"}\n{"prompt": oops}\n', "line 3: not JSON"),
    ("field.jsonl", '{"prompt": "ok"}\n{"question": "where?"}\n', "line 2: no field 'prompt' or 'text' (keys: question)"),
    ("type.jsonl", '{"prompt": 5}\n', "line 1: field 'prompt' = 5; expected a non-empty string"),
    ("empty_prompt.jsonl", '{"text": "  "}\n', "line 1: field 'text'"),
    ("list_line.jsonl", '{"prompt": "a"}\n["a"]\n', "line 2: [\"a\"] is not an object"),
    ("list_entry.json", '["a"]', "entry [0]: \"a\" is not an object"),
    ("value.json", json.dumps([{"conversations": [{"from": "human", "value": "q"}]},
                               {"conversations": [{"from": "human", "value": ["q"]}]}]),
     "entry [1].conversations[0]: field 'value' = [\"q\"]; expected a string"),
    ("conv.json", json.dumps([{"conversations": "hello"}]), "entry [0]: field 'conversations' = \"hello\""),
    ("turn.json", json.dumps([{"conversations": ["hello"]}]), "entry [0].conversations[0]: \"hello\" is not an object"),
    ("broken.json", '[{"conversations": [}', "malformed JSON"),
    ("none.json", json.dumps([{"conversations": []}]), "no prompt in the file (1 entries without a human turn)"),
    ("blank.jsonl", "\n\n", "it is empty"),
    ("latin1.jsonl", b'{"prompt": "caf\xe9"}\n', "not UTF-8 text"),
]


@pytest.mark.parametrize("name,content,want", BAD, ids=[b[0] for b in BAD])
def test_a_bad_prompt_file_is_one_line_naming_file_line_and_field_exit_2(tmp_path, capsys, name, content, want):
    f = tmp_path / name
    f.write_bytes(content if isinstance(content, bytes) else content.encode())
    rc = cli_main(["bench", "--url", "http://127.0.0.1:1", "--prompts", str(f), "--json", str(tmp_path / "r.json"),
                   "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1, err
    assert err[0].startswith(f"sglang-kimi-eagle3: error: --prompts {f}: ") and want in err[0], err[0]
    assert not (tmp_path / "r.json").exists()  # refused before the run started


def test_prompts_and_categories_together_and_a_missing_file_are_refused(tmp_path, capsys):
    assert cli_main(["bench", "--url", "http://127.0.0.1:1", "--prompts", str(tmp_path / "p.jsonl"), "--categories", "chat",
                     "--json", str(tmp_path / "r.json")]) == 2
    assert cli_main(["bench", "--url", "http://127.0.0.1:1", "--prompts", str(tmp_path / "missing.jsonl"),
                     "--json", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "give --prompts or --categories, not both" in err[0]
    assert err[1].startswith(f"sglang-kimi-eagle3: error: --prompts {tmp_path / 'missing.jsonl'}: no such prompt file")


def test_a_gigabyte_of_nuls_is_refused_from_its_first_bytes(tmp_path, capsys):
    """A 1 GiB file of NULs (sparse: no disk used) is within the size limit, but is refused as binary from its
    first bytes: one exit-2 line, and the file is never read in full (peak memory stays far below its size)."""
    import tracemalloc

    from sglang_kimi_eagle3.errors import UserError

    f = tmp_path / "zeros.jsonl"
    with open(f, "wb") as fh:
        fh.truncate(1 << 30)
    tracemalloc.start()
    try:
        with pytest.raises(UserError, match="binary data"):
            load_file(str(f))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, peak
    assert cli_main(["bench", "--url", "http://127.0.0.1:1", "--prompts", str(f), "--json", str(tmp_path / "r.json"),
                     "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a prompt file: binary data (a NUL byte at offset 0)" in err[0], err


def test_jsonl_lines_are_split_at_newlines_only(tmp_path):
    """json.dumps(ensure_ascii=False) writes U+2028, U+2029 and NEL raw inside a string (web text has them); the
    reader split lines at them too (str.splitlines) and refused a valid file as 'not JSON (Unterminated string)'."""
    f = tmp_path / "web.jsonl"
    texts = ["one\u2028two", "para\u2029graph", "caf\x85 menu"]
    f.write_text("".join(json.dumps({"prompt": t}, ensure_ascii=False) + "\n" for t in texts) + '{"text": "crlf"}\r\n')
    prompts, _ = load_file(str(f))
    assert [p.text for p in prompts] == [*texts, "crlf"]
    assert [p.id for p in prompts] == ["web.jsonl:1", "web.jsonl:2", "web.jsonl:3", "web.jsonl:4"]
