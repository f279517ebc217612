"""The /generate client against a protocol stub on 127.0.0.1 (SGLang 0.5.23's response shape)."""

import socket

from stub_server import ProtocolStub, StubConfig
from sglang_kimi_eagle3.bench.client import generate, parse_spec, server_info

SP = {"max_new_tokens": 24, "temperature": 0.0}


def test_protocol_stub_ok_response_with_spec_fields():
    with ProtocolStub(StubConfig(alphas=[0.9, 0.7, 0.5], pass_ms=0.1)) as url:
        r = generate(url, "p1", "chat", "hello there", SP, timeout=10, keep_output=True)
    assert r.ok and r.error is None
    assert r.completion_tokens == len(r.output_ids) and r.finish_reason == "length"
    s = r.spec
    assert s["verify_ct"] >= 1 and sum(s["histogram"]) == s["verify_ct"]
    assert s["accept_length"] == r.completion_tokens / s["verify_ct"]
    assert s["num_proposed"] == 3 * s["verify_ct"] and s["accept_rate"] == s["num_correct"] / s["num_proposed"]
    assert s["num_correct"] == sum(k * v for k, v in enumerate(s["histogram"]))


def test_protocol_stub_without_speculation_gives_no_spec():
    with ProtocolStub(StubConfig(alphas=None, pass_ms=0.1)) as url:
        r = generate(url, "p1", "chat", "hello", SP, timeout=10)
        info = server_info(url)
    assert r.ok and r.spec is None and r.completion_tokens > 0
    assert info["speculative_algorithm"] is None and info["model_path"].startswith("protocol-stub")


def test_protocol_stub_http_500_and_400_are_errors_with_message():
    with ProtocolStub(StubConfig(fail_every=1, pass_ms=0.1)) as url:
        r = generate(url, "p1", "code", "x", SP, timeout=10)
    assert not r.ok and r.error == "http_500" and "injected failure" in r.detail
    with ProtocolStub(StubConfig(pass_ms=0.1)) as url:
        from sglang_kimi_eagle3.bench import client

        status, raw = client.request("POST", url, "/generate", {"input_ids_missing": True}, 10)
    assert status == 400 and client._error_message(raw).startswith("Either text")


def test_protocol_stub_timeout_is_counted_not_raised():
    with ProtocolStub(StubConfig(hang_every=1, hang_s=3.0, pass_ms=0.1)) as url:
        r = generate(url, "p1", "math", "x", SP, timeout=0.3)
    assert not r.ok and r.error == "timeout" and r.latency_s < 2.0


def test_protocol_stub_unexpected_body_is_bad_response():
    with ProtocolStub(StubConfig(garbage_every=1)) as url:
        r = generate(url, "p1", "math", "x", SP, timeout=10)
    assert not r.ok and r.error == "bad_field" and "meta_info" in r.detail


def test_connection_refused_is_counted_not_raised():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    r = generate(f"http://127.0.0.1:{port}", "p1", "chat", "x", SP, timeout=5)
    assert not r.ok and r.error == "connection"
    assert "error" in server_info(f"http://127.0.0.1:{port}", timeout=2)


def test_parse_spec_ignores_zero_verify_and_absent_fields():
    assert parse_spec({"completion_tokens": 1}) is None
    assert parse_spec({"spec_verify_ct": 0, "spec_accept_length": 0}) is None
    got = parse_spec({"spec_verify_ct": 2, "spec_accept_length": 2.5, "spec_accept_rate": 0.5,
                      "spec_num_correct_drafts": 3, "spec_num_proposed_drafts": 6, "spec_correct_drafts_histogram": [0, 1, 1]})
    assert got == {"accept_length": 2.5, "accept_rate": 0.5, "verify_ct": 2, "num_correct": 3, "num_proposed": 6,
                   "histogram": [0, 1, 1]}
