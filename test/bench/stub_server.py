"""The one stub server module of the bench tests (127.0.0.1 only). Not a model. Three servers:

ProtocolStub (with StubConfig): a protocol stub of SGLang's native HTTP API with SYNTHETIC acceptance and
timing, for the bench client, the e2e harness, the anatomy capture and the example run behind docs/img; it
runs as a command too (`python test/bench/stub_server.py --help`). `with ProtocolStub(cfg) as url:`; it
stops when the block ends.

FaultServer: a fault-injecting HTTP server on raw sockets.

Each request gets the behaviour `plan(n, path)` returns (n = 1-based request count over /generate):
well-formed SGLang answers, broken HTTP, broken JSON, wrong field types, values out of range, a
server that drips one byte at a time, one that never answers. Not a model: every answer is canned.
`with FaultServer(plan, lifetime=20) as url:`; after `lifetime` seconds it shuts down on its own.

StreamServer: a local HTTP server (stdlib http.server) that streams SGLang 0.5.23 /generate chunks with set
delays. Each request gets the steps `script(n, body)` returns (n = 1-based /generate count): a float
sleeps that many seconds, a dict is one `data: <json>` chunk, bytes go out as they are, "DONE" is
`data: [DONE]`, "HOLD" keeps the connection open without another byte until the server stops (a proxy
or server that does not close the stream after [DONE]). `sglang_chunks` builds SGLang's chunk sequence:
cumulative completion_tokens, text and output_ids in every chunk; finish_reason, e2e_latency and the spec fields in the last one only
(srt/managers/tokenizer_manager.py, non-incremental streaming; srt/entrypoints/http_server.py). Bodies
go out with chunked transfer encoding, as uvicorn sends a StreamingResponse.
`with StreamServer(script) as url:`; it stops by itself after `lifetime` seconds.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import random
import socket
import socketserver
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HIST = [1, 2, 3, 2]  # 8 verify passes: 0x1, 1x2, 2x3, 3x2 -> 14 correct drafts of 24 proposed


def meta(**over) -> dict:
    m = {"id": "f", "finish_reason": {"type": "length"}, "prompt_tokens": 5, "completion_tokens": 22,
         "cached_tokens": 0, "e2e_latency": 0.01, "spec_accept_length": 22 / 8, "spec_accept_rate": 14 / 24,
         "spec_verify_ct": 8, "spec_num_correct_drafts": 14, "spec_num_proposed_drafts": 24,
         "spec_correct_drafts_histogram": list(HIST)}
    m.update(over)
    return {k: v for k, v in m.items() if v is not ...}


def body_of(doc) -> bytes:
    return json.dumps(doc).encode()


def ok_body(**over) -> bytes:
    return body_of({"text": "x", "output_ids": list(range(22)), "meta_info": meta(**over)})


# behaviour name -> what the client must count it as
FAULTS = {
    "truncated": "truncated",  # Content-Length 2000, 50 bytes, close
    "bad_status": "bad_http",  # not an HTTP status line
    "close": "connection",  # closes without a byte
    "http_500": "http_500",
    "not_json": "bad_json",
    "no_meta": "bad_field",
    "list_body": "bad_field",
    "tokens_string": "bad_field",
    "tokens_negative": "bad_field",
    "tokens_float": "bad_field",
    "hist_string": "bad_field",
    "hist_negative": "bad_field",
    "hist_not_list": "bad_field",
    "proposed_string": "bad_field",
    "proposed_negative": "bad_field",
    "accept_rate_negative": "bad_field",
    "accept_length_nan": "bad_field",
    "verify_string": "bad_field",
    "latency_negative": "bad_field",
    "hist_more_than_verify": "bad_field",
    "zero_tokens_with_verifies": "bad_field",  # tau would read 0.00 beside a 58 % acceptance
    "drip_body": "timeout",  # one byte every 0.1 s: a per-read timeout would never fire
    "drip_headers": "timeout",
    "hang": "timeout",
}
BODIES = {
    "not_json": b"<html>502 Bad Gateway</html>", "no_meta": body_of({"text": "x"}), "list_body": b"[1, 2]",
    "tokens_string": ok_body(completion_tokens="22"), "tokens_negative": ok_body(completion_tokens=-5),
    "tokens_float": ok_body(completion_tokens=2.5), "hist_string": ok_body(spec_correct_drafts_histogram=["a", 1]),
    "hist_negative": ok_body(spec_correct_drafts_histogram=[-3, 1]), "hist_not_list": ok_body(spec_correct_drafts_histogram="1,2"),
    "proposed_string": ok_body(spec_num_proposed_drafts="24"), "proposed_negative": ok_body(spec_num_proposed_drafts=-24),
    "accept_rate_negative": ok_body(spec_accept_rate=-0.5),
    "adaptive_rate_above_1": ok_body(spec_num_correct_drafts=30, spec_accept_rate=30 / 24),  # legal: see client.py
    "accept_length_nan": ok_body(spec_accept_length=float("nan")), "verify_string": ok_body(spec_verify_ct="8"),
    "latency_negative": ok_body(e2e_latency=-1), "hist_more_than_verify": ok_body(spec_correct_drafts_histogram=[9, 9]),
    "zero_tokens_with_verifies": ok_body(completion_tokens=0),
    "hist_past_drafts": ok_body(spec_correct_drafts_histogram=[1, 2, 3, 1, 1]),  # 4 accepted of 3 drafted: impossible
    "ok": ok_body(), "nospec": body_of({"text": "x", "meta_info": meta(spec_verify_ct=..., spec_accept_length=...)}),
}
INFO = {"model_path": "fault-server", "speculative_algorithm": "EAGLE3", "speculative_num_steps": 3,
        "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4}


class ServedInThread:
    """Runs `self.server` (a socketserver) in a thread for a `with` block, stopping it after its lifetime timer
    (`self._timer`) at the latest; `self.url` and `self.stopping` are set by the subclass."""

    def stop(self) -> None:
        self.stopping.set()
        threading.Thread(target=self.server.shutdown, daemon=True).start()

    def __enter__(self) -> str:
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self._timer.start()
        return self.url

    def __exit__(self, *exc):
        self._timer.cancel()
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()


class FaultServer(ServedInThread):
    def __init__(self, plan, lifetime: float = 20.0, info: dict | None = None):
        self.plan, self.count, self.lock = plan, 0, threading.Lock()
        self.stopping = threading.Event()
        self.info = INFO if info is None else info
        srv = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                try:
                    srv._handle(self.request)
                except OSError:
                    pass

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True
            request_queue_size = 256

        self.server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._timer = threading.Timer(lifetime, self.stop)
        self._timer.daemon = True

    def _read_request(self, sock) -> tuple[str, str]:
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = sock.recv(65536)
            if not chunk:
                return "", ""
            buf += chunk
        head, rest = buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        length = next((int(ln.split(":", 1)[1]) for ln in lines if ln.lower().startswith("content-length:")), 0)
        while len(rest) < length:
            chunk = sock.recv(65536)
            if not chunk:
                break
            rest += chunk
        method, path = lines[0].split(" ")[:2]
        return method, path

    def _handle(self, sock: socket.socket) -> None:
        method, path = self._read_request(sock)
        if path == "/server_info":
            return self._send(sock, 200, body_of(self.info))
        with self.lock:
            self.count += 1
            n = self.count
        kind = self.plan(n, path)
        if kind in BODIES:
            return self._send(sock, 200, BODIES[kind])
        if kind == "http_500":
            return self._send(sock, 500, body_of({"error": {"message": "injected"}}))
        if kind == "truncated":
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2000\r\n\r\n" + ok_body()[:50])
            return
        if kind == "bad_status":
            sock.sendall(b"HELLO THERE\r\n\r\n")
            return
        if kind == "close":
            return
        if kind == "drip_body":
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
            while not self.stopping.wait(0.1):
                sock.sendall(b" ")
            return
        if kind == "drip_headers":
            for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 100000:
                if self.stopping.wait(0.1):
                    return
                sock.sendall(bytes([byte]))
            return
        if kind == "hang":
            self.stopping.wait()
            return
        raise AssertionError(f"unknown behaviour {kind!r}")

    def _send(self, sock, code: int, body: bytes) -> None:
        sock.sendall(f"HTTP/1.1 {code} X\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
                     f"Connection: close\r\n\r\n".encode() + body)



def cycle(*kinds):
    """A plan that answers request n with kinds[(n - 1) % len(kinds)]."""
    return lambda n, path: kinds[(n - 1) % len(kinds)]


def wait_for(pred, timeout: float = 10.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.02)
    return False


# ---- streaming ----------------------------------------------------------------------------------

SPEC_INFO = {"model_path": "stream-server", "speculative_algorithm": "EAGLE3", "speculative_num_steps": 3,
             "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4}
PLAIN_INFO = {"model_path": "stream-server"}


def sglang_chunks(ttft: float, steps: list[tuple[float, int]], spec: bool = True) -> list:
    """Sleep `ttft`, send a chunk with the first token, then per step (delay, tokens) sleep and send a chunk
    bringing that many tokens; the last chunk finishes; then [DONE]. Spec fields: one verify per chunk after
    the first, accepting tokens - 1 drafts."""
    out, n, ids, verifies, correct = [], 0, [], 0, 0
    plan = [(ttft, 1)] + list(steps)
    for i, (delay, k) in enumerate(plan):
        out.append(delay)
        n += k
        ids += list(range(100 + len(ids), 100 + len(ids) + k))
        if i:
            verifies, correct = verifies + 1, correct + k - 1
        meta = {"id": "s", "finish_reason": None, "prompt_tokens": 5, "completion_tokens": n, "cached_tokens": 0}
        if i == len(plan) - 1:
            meta.update(finish_reason={"type": "length", "length": n}, e2e_latency=0.5)
            if spec and verifies:
                hist = [0] * 4
                for _d, kk in steps:
                    hist[kk - 1] += 1
                meta.update(spec_verify_ct=verifies, spec_accept_length=n / verifies, spec_num_correct_drafts=correct,
                            spec_num_proposed_drafts=3 * verifies, spec_accept_rate=correct / (3 * verifies),
                            spec_correct_drafts_histogram=hist)
        out.append({"text": "t" * n, "output_ids": list(ids), "meta_info": meta})
    out.append("DONE")
    return out


class StreamServer(ServedInThread):
    def __init__(self, script, info: dict | None = None, lifetime: float = 60.0):
        self.script, self.info = script, SPEC_INFO if info is None else info
        self.count, self.bodies, self.lock = 0, [], threading.Lock()
        srv = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                body = json.dumps(srv.info).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with srv.lock:
                    srv.count += 1
                    n = srv.count
                    srv.bodies.append(body)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for step in srv.script(n, body):
                    if step == "HOLD":
                        srv.stopping.wait()
                        return
                    if isinstance(step, float | int):
                        if srv.stopping.wait(step):
                            return
                        continue
                    data = (b"data: [DONE]\n\n" if step == "DONE" else step if isinstance(step, bytes)
                            else b"data: " + json.dumps(step).encode() + b"\n\n")
                    self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

        self.stopping = threading.Event()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._timer = threading.Timer(lifetime, self.stop)
        self._timer.daemon = True


# ---- protocol stub (also a command: python test/bench/stub_server.py --help) ---------------------

@dataclass
class StubConfig:
    alphas: list[float] | None = field(default_factory=lambda: [0.8, 0.6, 0.45])  # None = speculation off
    pass_ms: float = 2.0
    draft_ms: float = 0.2
    knee_tokens: float = 64.0
    fail_every: int = 0
    hang_every: int = 0
    hang_s: float = 5.0
    nospec_every: int = 0
    garbage_every: int = 0
    model_path: str = "protocol-stub (synthetic)"
    salt: str = ""  # mixed into the per-prompt seed: a stub with another salt answers other ids (a wrong server)
    sglang_log: bool = False  # print SGLang 0.5.23's `Prefill batch` / `Decode batch` log lines (UTC) on stdout


def _log_line(kind: str, running: int, prompt_tokens: int = 0) -> None:
    """One SGLang-shaped scheduler log line, as round_logs.py and prefill_mix.py read a live server's log."""
    t = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
    if kind == "prefill":
        print(f"[{t}] Prefill batch, #new-seq: 1, #new-token: {prompt_tokens}, #cached-token: 0, token usage: 0.00, "
              f"#running-req: {running}, #queue-req: 0, ", flush=True)
    else:
        print(f"[{t}] Decode batch, #running-req: {running}, #token: 0, token usage: 0.00, gen throughput (token/s): "
              "0.00, #queue-req: 0, ", flush=True)


def _simulate(cfg: StubConfig, prompt: str, max_new: int, in_flight: int) -> tuple[dict, list[int], float]:
    """meta_info spec fields, output ids and seconds to sleep for one request."""
    rng = random.Random(hashlib.sha256((cfg.salt + prompt).encode()).digest())
    n_out = max(1, min(max_new, max_new - rng.randrange(0, max(1, max_new // 4))))  # some stop early
    ids = [rng.randrange(1000, 30000) for _ in range(n_out)]
    if cfg.alphas is None:
        per_pass = cfg.pass_ms * (1 + in_flight / cfg.knee_tokens) / 1e3
        return {}, ids, n_out * per_pass
    steps = len(cfg.alphas)
    produced, verify, correct, hist = 1, 0, 0, [0]  # token 1 comes from prefill, as in SGLang
    while produced < n_out:
        k = 0
        while k < steps and rng.random() < cfg.alphas[k]:  # chain: a rejection ends the round
            k += 1
        k = min(k, n_out - produced - 1)  # the last round is cut at max_new_tokens
        hist += [0] * (k + 1 - len(hist))
        hist[k] += 1
        verify, correct, produced = verify + 1, correct + k, produced + k + 1
    per_round = (cfg.pass_ms * (1 + in_flight * (steps + 1) / cfg.knee_tokens) + steps * cfg.draft_ms) / 1e3
    spec = {}
    if verify:
        spec = {"spec_accept_rate": correct / (verify * steps), "spec_accept_length": n_out / verify,
                "spec_num_correct_drafts": correct, "spec_num_proposed_drafts": verify * steps,
                "spec_verify_ct": verify, "spec_correct_drafts_histogram": hist}
    return spec, ids, verify * per_round


class ProtocolStub:
    """A protocol stub of SGLang's native HTTP API, for testing the bench client and for example runs.

    It is NOT a model and NOT a measurement. It answers POST /generate with the response shape of
    sglang 0.5.23 (tokenizer_manager.py: {"text", "output_ids", "meta_info"}; spec fields as computed by
    `_calculate_spec_decoding_metrics`) and GET /server_info with a few server-arg fields. Acceptance is
    SYNTHETIC: each verify pass accepts draft i with probability alpha_i given 1..i-1 accepted (seeded per
    prompt, so runs repeat). Time is SYNTHETIC too: it sleeps pass_ms * (1 + in_flight * tokens / knee)
    per target pass (+ draft_ms per draft step), a toy "batching gets dearer" curve.

        python test/bench/stub_server.py --port 30000 --alpha 0.8,0.6,0.45        # "speculative"
        python test/bench/stub_server.py --port 30001 --no-spec                     # "baseline"

    Fault injection (by request count, 1-based; StubConfig fields, from Python only): fail_every N (HTTP 500),
    hang_every N (sleeps hang_s, for client timeouts), nospec_every N (ok response without spec fields),
    garbage_every N (a 200 without meta_info).

    Threaded HTTP server on 127.0.0.1; `with ProtocolStub(cfg) as url:` gives its base URL.
    """

    def __init__(self, cfg: StubConfig | None = None, port: int = 0):
        self.cfg = cfg or StubConfig()
        self.count = 0
        self.in_flight = 0
        self.texts: list[str] = []  # every /generate body's text, in arrival order (what a client sent)
        self.lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def _send(self, code: int, doc: dict):
                body = json.dumps(doc).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout tests)
                    pass

            def do_GET(self):
                if self.path == "/server_info":
                    c = stub.cfg
                    self._send(200, {"model_path": c.model_path, "tp_size": 1, "version": "stub",
                                     "speculative_algorithm": "EAGLE3" if c.alphas else None,
                                     "speculative_num_steps": len(c.alphas) if c.alphas else None,
                                     "speculative_eagle_topk": 1 if c.alphas else None,
                                     "speculative_num_draft_tokens": len(c.alphas) + 1 if c.alphas else None})
                elif self.path == "/health":  # SGLang answers 200 once serving (the e2e harness waits for it)
                    self._send(200, {})
                else:
                    self._send(404, {"detail": "Not Found"})

            def do_POST(self):
                if self.path == "/start_profile":
                    return self._profile(json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}"))
                if self.path == "/freeze_gc":  # SGLang: its processes' garbage collectors freeze what they hold
                    return self._send(200, {})
                if self.path != "/generate":
                    return self._send(404, {"detail": "Not Found"})
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                with stub.lock:
                    stub.count += 1
                    n, stub.in_flight = stub.count, stub.in_flight + 1
                    stub.texts.append(body.get("text"))
                try:
                    self._answer(n, body)
                finally:
                    with stub.lock:
                        stub.in_flight -= 1

            def _profile(self, req: dict):
                """SGLang's /start_profile with num_steps: answers at once, writes the trace when the steps are done
                (here: a SYNTHETIC one-kernel-per-step chrome trace, gzipped, under SGLang's file name)."""
                import gzip
                import os

                def write():
                    time.sleep(0.2)
                    steps = int(req.get("num_steps") or 1)
                    ev = [{"ph": "X", "cat": "kernel", "name": "verify_greedy_kernel", "pid": 0, "tid": 7,
                           "ts": 1000.0 + 10 * i, "dur": 2.0, "args": {"stream": 7}} for i in range(steps)]
                    name = (req.get("profile_prefix") + "-" if req.get("profile_prefix") else "") + f"{time.time()}-TP-0.trace.json.gz"
                    path = os.path.join(req.get("output_dir") or "/tmp", name)
                    with open(path + ".part", "wb") as f:
                        f.write(gzip.compress(json.dumps({"traceEvents": ev}).encode()))
                    os.replace(path + ".part", path)

                threading.Thread(target=write, daemon=True).start()
                self._send(200, {"success": True, "message": "Succeeded"})

            def _answer(self, n: int, body: dict):
                c = stub.cfg
                if "text" not in body:  # SGLang's contract check answers 400 with a string error
                    return self._send(400, {"error": "Either text or input_ids should be provided."})
                if c.fail_every and n % c.fail_every == 0:
                    return self._send(500, {"error": {"message": f"stub: injected failure on request {n}"}})
                if c.garbage_every and n % c.garbage_every == 0:  # 200 with a body that is not SGLang's shape
                    return self._send(200, {"unexpected": True})
                if c.hang_every and n % c.hang_every == 0:
                    time.sleep(c.hang_s)
                sp = body.get("sampling_params", {})
                spec, ids, secs = _simulate(c, body["text"], int(sp.get("max_new_tokens", 128)), stub.in_flight)
                if c.nospec_every and n % c.nospec_every == 0:
                    spec = {}
                prompt_tokens = max(1, len(body["text"]) // 4)
                if c.sglang_log:
                    _log_line("prefill", stub.in_flight, prompt_tokens)
                time.sleep(secs)
                if c.sglang_log:
                    _log_line("decode", stub.in_flight)
                meta = {"id": f"stub-{n}", "finish_reason": {"type": "length", "length": len(ids)},
                        "prompt_tokens": prompt_tokens, "weight_version": "default",
                        "num_retractions": 0, "reasoning_tokens": 0, "completion_tokens": len(ids),
                        "cached_tokens": 0, "e2e_latency": secs, **spec}
                self._send(200, {"text": " ".join(f"w{i % 97}" for i in ids), "output_ids": ids, "meta_info": meta})

        class Server(ThreadingHTTPServer):
            request_queue_size = 1024  # the default backlog of 5 resets connections under a 128-request burst

        self.server = Server(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> str:
        self._thread.start()
        return self.url

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def main() -> None:
    p = argparse.ArgumentParser(description=inspect.cleandoc(ProtocolStub.__doc__), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--alpha", default="0.8,0.6,0.45", help="synthetic per-position acceptance (its length = steps)")
    p.add_argument("--no-spec", action="store_true", help="behave as a server without speculation")
    p.add_argument("--pass-ms", type=float, default=2.0)
    p.add_argument("--draft-ms", type=float, default=0.2)
    p.add_argument("--knee-tokens", type=float, default=64.0)
    p.add_argument("--sglang-log", action="store_true",
                   help="print a `Prefill batch` line per request and a `Decode batch` line when it ends, as SGLang logs")
    a = p.parse_args()
    cfg = StubConfig(None if a.no_spec else [float(x) for x in a.alpha.split(",")], a.pass_ms, a.draft_ms, a.knee_tokens,
                     sglang_log=a.sglang_log)
    stub = ProtocolStub(cfg, a.port)
    print(f"protocol stub (synthetic, not a model) on {stub.url}", flush=True)
    try:
        stub.server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
