"""A local HTTP server (stdlib http.server) that streams SGLang 0.5.23 /generate chunks with set delays.

Not a model: each request gets the steps `script(n, body)` returns (n = 1-based /generate count): a float
sleeps that many seconds, a dict is one `data: <json>` chunk, bytes go out as they are, "DONE" is
`data: [DONE]`, "HOLD" keeps the connection open without another byte until the server stops (a proxy
or server that does not close the stream after [DONE]). `sglang_chunks` builds SGLang's chunk sequence: cumulative completion_tokens, text and
output_ids in every chunk; finish_reason, e2e_latency and the spec fields in the last one only
(srt/managers/tokenizer_manager.py, non-incremental streaming; srt/entrypoints/http_server.py). Bodies
go out with chunked transfer encoding, as uvicorn sends a StreamingResponse.
`with StreamServer(script) as url:`; it stops by itself after `lifetime` seconds.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from fault_server import ServedInThread

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

