"""A protocol stub of SGLang's native HTTP API, for testing the bench client and for example runs.

It is NOT a model and NOT a measurement. It answers POST /generate with the response shape of
sglang 0.5.23 (tokenizer_manager.py: {"text", "output_ids", "meta_info"}; spec fields as computed by
`_calculate_spec_decoding_metrics`) and GET /server_info with a few server-arg fields. Acceptance is
SYNTHETIC: each verify pass accepts draft i with probability alpha_i given 1..i-1 accepted (seeded per
prompt, so runs repeat). Time is SYNTHETIC too: it sleeps pass_ms * (1 + in_flight * tokens / knee)
per target pass (+ draft_ms per draft step), a toy "batching gets dearer" curve.

    python benchmark/serving/protocol_stub.py --port 30000 --alpha 0.8,0.6,0.45        # "speculative"
    python benchmark/serving/protocol_stub.py --port 30001 --no-spec                     # "baseline"

Fault injection (by request count, 1-based): --fail-every N (HTTP 500), --hang-every N (sleeps
--hang-s, for client timeouts), --nospec-every N (ok response without spec fields); garbage_every
(a 200 without meta_info) from Python only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


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


def _simulate(cfg: StubConfig, prompt: str, max_new: int, in_flight: int) -> tuple[dict, list[int], float]:
    """meta_info spec fields, output ids and seconds to sleep for one request."""
    rng = random.Random(hashlib.sha256(prompt.encode()).digest())
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
    """Threaded HTTP server on 127.0.0.1; `with ProtocolStub(cfg) as url:` gives its base URL."""

    def __init__(self, cfg: StubConfig | None = None, port: int = 0):
        self.cfg = cfg or StubConfig()
        self.count = 0
        self.in_flight = 0
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
                if self.path != "/generate":
                    return self._send(404, {"detail": "Not Found"})
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                with stub.lock:
                    stub.count += 1
                    n, stub.in_flight = stub.count, stub.in_flight + 1
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
                time.sleep(secs)
                meta = {"id": f"stub-{n}", "finish_reason": {"type": "length", "length": len(ids)},
                        "prompt_tokens": max(1, len(body["text"]) // 4), "weight_version": "default",
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
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--alpha", default="0.8,0.6,0.45", help="synthetic per-position acceptance (its length = steps)")
    p.add_argument("--no-spec", action="store_true", help="behave as a server without speculation")
    p.add_argument("--pass-ms", type=float, default=2.0)
    p.add_argument("--draft-ms", type=float, default=0.2)
    p.add_argument("--knee-tokens", type=float, default=64.0)
    a = p.parse_args()
    cfg = StubConfig(None if a.no_spec else [float(x) for x in a.alpha.split(",")], a.pass_ms, a.draft_ms, a.knee_tokens)
    stub = ProtocolStub(cfg, a.port)
    print(f"protocol stub (synthetic, not a model) on {stub.url}", flush=True)
    try:
        stub.server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
