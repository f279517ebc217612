"""One native `/generate` request -> RequestResult, streamed or not. Standard library HTTP only.

Response shape (sglang 0.5.23, srt/managers/tokenizer_manager.py): {"text", "output_ids", "meta_info"}
with meta_info {"id", "finish_reason": {"type": "length"|"stop", ...}, "prompt_tokens",
"completion_tokens", "cached_tokens", "e2e_latency", ...}. When speculation ran and at least one
verify happened (`_calculate_spec_decoding_metrics`), meta_info also has:
  spec_accept_length            completion_tokens / spec_verify_ct (bonus token included)
  spec_accept_rate              spec_num_correct_drafts / spec_num_proposed_drafts (no bonus)
  spec_verify_ct                target verify passes for this request
  spec_num_correct_drafts, spec_num_proposed_drafts (= verify_ct x (draft tokens - 1))
  spec_correct_drafts_histogram h[k] = verify passes that accepted exactly k drafts
Errors come back as HTTP 4xx/5xx with {"error": {"message": ...}} or {"error": "..."}.

Streaming ("stream": true; srt/entrypoints/http_server.py `stream_results`): a text/event-stream of
`data: <json>` lines, one per output the tokenizer manager hands over, then `data: [DONE]`. Each JSON has
the shape above; meta_info.completion_tokens is cumulative in every chunk (text and output_ids are the
whole output so far, or deltas with --incremental-streaming-output); e2e_latency, finish_reason and the
spec fields come with the last chunk only. An error after the 200 is a chunk {"error": {"message": ...}}.
The request ends at data: [DONE]: whatever the server then does with the connection (holds it open, sends
more) is not read.
Per request (as SGLang's own bench_serving measures /generate):
  ttft_s     send -> the first chunk that carries a token
  itl_s      one entry per token after the first: a chunk's gap since the previous token-carrying chunk,
             spread evenly over the tokens it brought (a verify pass that accepts k drafts sends k + 1
             tokens at once: k + 1 entries of gap / (k + 1))
  latency_s  send -> data: [DONE] (end to end)

Nothing here raises: every failure is a RequestResult with `error` set to one kind:
  timeout       no full response within the request's total deadline (a watchdog closes the socket,
                so a server that drips one byte a second cannot stretch it)
  connection    refused / reset / closed before a response
  interrupted   the run was stopped (Ctrl-C, SIGTERM): `abort_all()` closed the socket
  http_<code>   a 4xx/5xx answer (detail: the server's message)
  truncated     the body ended before its Content-Length (IncompleteRead); a stream without data: [DONE]
  stream_error  an {"error": ...} chunk inside a 200 stream (detail: the server's message)
  bad_http      not HTTP (BadStatusLine, header too long, ...)
  bad_json      a 200 whose body (or one of whose stream chunks) is not JSON
  bad_field     JSON of the wrong shape (in a stream: completion_tokens that go down), or a value of
                the wrong type or out of range (negative tokens,
                a histogram with negative counts or more passes than spec_verify_ct, 0 completion
                tokens beside verify passes; in the sweep also a histogram with counts past the server's
                draft count): counted, never averaged in
  client_bug    an exception in this module (a bug of ours, with its type)
"""

from __future__ import annotations

import http.client
import json
import math
import socket
import threading
import time
from dataclasses import asdict, dataclass
from urllib.parse import urlsplit

SPEC_KEYS = {"spec_accept_length": "accept_length", "spec_accept_rate": "accept_rate", "spec_verify_ct": "verify_ct",
             "spec_num_correct_drafts": "num_correct", "spec_num_proposed_drafts": "num_proposed",
             "spec_correct_drafts_histogram": "histogram"}
MAX_BODY = 64 << 20  # a /generate answer (or one stream chunk) larger than this is not one


@dataclass(slots=True)
class RequestResult:
    prompt_id: str
    category: str
    ok: bool
    error: str | None = None  # see the module docstring
    detail: str = ""
    latency_s: float = 0.0  # client wall time, send to full response
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    server_latency_s: float | None = None  # meta_info.e2e_latency
    finish_reason: str | None = None
    spec: dict | None = None  # SPEC_KEYS values; None when the server sent no spec fields
    ttft_s: float | None = None  # streaming only (see the module docstring)
    itl_s: list | None = None  # streaming only: one gap per token after the first (seconds)
    chunks: int | None = None  # streaming only: data chunks received
    text: str | None = None
    output_ids: list | None = None

    def as_dict(self, keep_itl: bool = False) -> dict:
        """The JSON form; a streamed request's per-token gaps are kept only with keep_itl (--save-outputs),
        and summarized (itl_mean_s, itl_max_s) otherwise."""
        d = asdict(self)
        if self.itl_s is not None and not keep_itl:
            d.pop("itl_s")
            d["itl_mean_s"] = sum(self.itl_s) / len(self.itl_s) if self.itl_s else None
            d["itl_max_s"] = max(self.itl_s) if self.itl_s else None
        return d


class Failed(Exception):
    """One failed request: `kind` is the error kind, str() the detail."""

    def __init__(self, kind: str, detail: str):
        super().__init__(detail[:300])
        self.kind = kind


# --- in-flight connections: a watchdog enforces total deadlines, abort_all() stops everything ---------
_LOCK = threading.Lock()
_LIVE: dict[int, list] = {}  # id -> [connection, deadline, why-closed or None]
_STOP = threading.Event()
_WATCHDOG: list[threading.Thread] = []


def _shut(entry: list, why: str) -> None:
    entry[2] = entry[2] or why
    sock = getattr(entry[0], "sock", None)
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)  # wakes a thread blocked in recv/send at once
        except OSError:
            pass


def _watch() -> None:
    while True:
        time.sleep(0.05)
        now = time.monotonic()
        with _LOCK:
            for entry in _LIVE.values():
                if entry[2] is None and now >= entry[1]:
                    _shut(entry, "deadline")


def abort_all() -> None:
    """Stop: no new request starts, every open request returns 'interrupted' within moments."""
    _STOP.set()
    with _LOCK:
        for entry in _LIVE.values():
            _shut(entry, "stop")


def stopped() -> bool:
    return _STOP.is_set()


def reset() -> None:
    """Allow requests again after abort_all() (a new run in the same process)."""
    _STOP.clear()


def request(method: str, base_url: str, path: str, body: dict | None, timeout: float,
            on_data=None) -> tuple[int, bytes]:
    """(status, body) within `timeout` seconds in total; Failed(kind, detail) otherwise.

    on_data(bytes, t): a 200 body is handed over as it arrives (t: time.perf_counter() at arrival) and
    not kept (the returned body is then b""); on_data may raise Failed to end the request, and returns True
    when the body is complete (a stream's `data: [DONE]`): the request ends there, whatever the server then
    does with the connection (holds it open, sends more)."""
    if _STOP.is_set():
        raise Failed("interrupted", "the run was stopped before this request")
    u = urlsplit(base_url)
    cls = http.client.HTTPSConnection if u.scheme == "https" else http.client.HTTPConnection
    conn = cls(u.hostname, u.port, timeout=timeout)
    entry = [conn, time.monotonic() + timeout, None]
    with _LOCK:
        _LIVE[id(entry)] = entry
        if not _WATCHDOG:
            _WATCHDOG.append(threading.Thread(target=_watch, name="bench-deadlines", daemon=True))
            _WATCHDOG[0].start()
    try:
        data = json.dumps(body).encode() if body is not None else None
        conn.request(method, u.path.rstrip("/") + path, body=data,
                     headers={"Content-Type": "application/json"} if data is not None else {})
        if entry[2]:
            raise ConnectionError("closed")
        resp = conn.getresponse()
        if on_data is not None and resp.status == 200:
            while True:
                data = resp.read1(1 << 16)  # what has arrived (chunked transfer decoded), without waiting for more
                if not data:
                    break
                if on_data(data, time.perf_counter()) or entry[2]:
                    break
            if entry[2]:
                raise ConnectionError("closed")
            return resp.status, b""
        chunks, size = [], 0
        while True:
            chunk = resp.read(1 << 16)
            if not chunk:
                break
            size += len(chunk)
            if size > MAX_BODY:
                raise Failed("bad_http", f"response body larger than {MAX_BODY} bytes")
            chunks.append(chunk)
            if time.monotonic() >= entry[1]:
                entry[2] = "deadline"
                break
        if entry[2]:
            raise ConnectionError("closed")
        if resp.length:  # read(amt) returns b"" at a early close instead of raising IncompleteRead
            raise http.client.IncompleteRead(b"".join(chunks), resp.length)
        return resp.status, b"".join(chunks)
    except Failed:
        raise
    except Exception as exc:
        why = entry[2]
        if why == "deadline" or isinstance(exc, (TimeoutError, socket.timeout)):
            raise Failed("timeout", f"no full response within {timeout:g} s") from None
        if why == "stop":
            raise Failed("interrupted", "the run was stopped (Ctrl-C / SIGTERM)") from None
        if isinstance(exc, http.client.IncompleteRead):
            raise Failed("truncated", f"body ended after {len(exc.partial)} bytes, "
                                      f"{exc.expected} more expected") from None
        if isinstance(exc, http.client.RemoteDisconnected):
            raise Failed("connection", "the server closed the connection without a response") from None
        if isinstance(exc, http.client.HTTPException):
            raise Failed("bad_http", f"{type(exc).__name__}: {exc}") from None
        if isinstance(exc, OSError):
            raise Failed("connection", f"{type(exc).__name__}: {exc}") from None
        raise
    finally:
        with _LOCK:
            _LIVE.pop(id(entry), None)
        conn.close()


def _error_message(raw: bytes) -> str:
    try:
        err = json.loads(raw).get("error")
        return str(err.get("message", err) if isinstance(err, dict) else err)[:300]
    except Exception:
        return raw[:300].decode(errors="replace")


# --- response fields: type and range, or Failed("bad_field") ------------------------------------------
def _int(meta: dict, key: str, required: bool = False) -> int | None:
    v = meta.get(key)
    if v is None and not required:
        return None
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise Failed("bad_field", f"meta_info.{key} = {v!r}: expected an integer >= 0")
    return v


def _num(meta: dict, key: str, hi: float | None = None) -> float | None:
    v = meta.get(key)
    if v is None:
        return None
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v < 0 or (hi is not None and v > hi):
        raise Failed("bad_field", f"meta_info.{key} = {v!r}: expected a finite number >= 0" + (f" and <= {hi}" if hi else ""))
    return float(v)


def parse_spec(meta: dict) -> dict | None:
    """The spec fields of meta_info, renamed and checked; None when speculation reported nothing."""
    if "spec_verify_ct" not in meta:
        return None
    verify = _int(meta, "spec_verify_ct")
    if not verify:
        return None
    hist = meta.get("spec_correct_drafts_histogram")
    if hist is not None and (not isinstance(hist, list) or
                             not all(isinstance(h, int) and not isinstance(h, bool) and h >= 0 for h in hist)):
        raise Failed("bad_field", f"meta_info.spec_correct_drafts_histogram = {str(hist)[:80]}: expected a list of "
                                  "counts >= 0")
    # No upper bound on accept_rate or num_correct vs num_proposed: SGLang 0.5.23 computes num_proposed from
    # the *current* draft-token count, so under --speculative-adaptive a request that ran longer drafts
    # earlier can legitimately report accept_rate > 1 (tokenizer_manager._calculate_spec_decoding_metrics).
    spec = {"accept_length": _num(meta, "spec_accept_length"), "accept_rate": _num(meta, "spec_accept_rate"),
            "verify_ct": verify, "num_correct": _int(meta, "spec_num_correct_drafts"),
            "num_proposed": _int(meta, "spec_num_proposed_drafts"), "histogram": hist}
    if hist is not None and sum(hist) > verify:
        raise Failed("bad_field", f"meta_info.spec_correct_drafts_histogram counts {sum(hist)} passes, more than "
                                  f"spec_verify_ct {verify}")
    return spec


def _fill(out, r: RequestResult, keep_output: bool, where: str = "") -> None:
    """Fill `r` from one SGLang output object (a non-streamed body, or a stream's last chunk)."""
    if not isinstance(out, dict) or not isinstance(out.get("meta_info"), dict):
        raise Failed("bad_field", f"no meta_info object in the {where or 'response'}; starts {str(out)[:80]!r}")
    meta = out["meta_info"]
    r.completion_tokens = _int(meta, "completion_tokens", required=True)
    r.prompt_tokens = _int(meta, "prompt_tokens")
    r.server_latency_s = _num(meta, "e2e_latency")
    fr = meta.get("finish_reason")
    fr = fr.get("type") if isinstance(fr, dict) else fr
    r.finish_reason = fr if isinstance(fr, str) or fr is None else str(fr)[:40]
    r.spec = parse_spec(meta)
    if r.spec is not None and r.completion_tokens == 0:  # every verify pass yields at least its bonus token
        raise Failed("bad_field", f"meta_info.completion_tokens = 0 with spec_verify_ct {r.spec['verify_ct']}: a "
                                  "verify pass always yields a token")
    if keep_output:
        ids = out.get("output_ids")
        if ids is not None and not isinstance(ids, list):
            raise Failed("bad_field", f"output_ids = {str(ids)[:60]}: expected a list")
        r.text, r.output_ids = out.get("text"), ids


def parse_generate(raw: bytes, r: RequestResult, keep_output: bool) -> None:
    """Fill `r` from a 200 body; Failed("bad_json" | "bad_field") when it is not SGLang's shape."""
    try:
        out = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise Failed("bad_json", f"{type(exc).__name__}: {exc}; body starts {raw[:80]!r}") from None
    if not isinstance(out, dict) or not isinstance(out.get("meta_info"), dict):
        raise Failed("bad_field", f"no meta_info object in the response; body starts {raw[:80]!r}")
    _fill(out, r, keep_output)


class StreamReader:
    """Parses SGLang's /generate event stream as it arrives (feed(bytes, t)) and times its tokens."""

    def __init__(self, t0: float, keep_output: bool):
        self.t0, self.keep_output = t0, keep_output
        self.buf = b""
        self.last: dict | None = None  # the last output object
        self.done = False  # data: [DONE] seen
        self.chunks = 0
        self.tokens = 0  # completion_tokens so far
        self.ttft: float | None = None
        self.t_last: float | None = None  # arrival of the last chunk that brought tokens
        self.itl: list[float] = []
        self.t_end: float | None = None
        self.texts: list = []
        self.ids: list = []

    def feed(self, data: bytes, t: float) -> bool:
        """Parse what arrived; True once `data: [DONE]` is in (the stream is complete: stop reading)."""
        self.buf += data
        while b"\n" in self.buf and not self.done:
            line, self.buf = self.buf.split(b"\n", 1)
            self._line(line.strip(), t)
        if not self.done and self.buf.strip() == b"data: [DONE]":  # the end, its line break not (yet) sent
            self.buf = b""
            self._line(b"data: [DONE]", t)
        if len(self.buf) > MAX_BODY:
            raise Failed("bad_http", f"a stream chunk larger than {MAX_BODY} bytes")
        return self.done

    def _line(self, line: bytes, t: float) -> None:
        if not line.startswith(b"data:"):
            return  # blank separators, SSE comments, event: lines
        payload = line[5:].strip()
        if payload == b"[DONE]":
            self.done, self.t_end = True, t
            return
        try:
            out = json.loads(payload)
        except (ValueError, RecursionError) as exc:
            raise Failed("bad_json", f"stream chunk {self.chunks + 1}: {type(exc).__name__}: {exc}; starts "
                                     f"{payload[:80]!r}") from None
        self.chunks += 1
        if isinstance(out, dict) and "error" in out:
            raise Failed("stream_error", _error_message(payload))
        if not isinstance(out, dict) or not isinstance(out.get("meta_info"), dict):
            raise Failed("bad_field", f"stream chunk {self.chunks}: no meta_info object; starts {payload[:80]!r}")
        n = _int(out["meta_info"], "completion_tokens", required=True)
        if n < self.tokens:
            raise Failed("bad_field", f"stream chunk {self.chunks}: meta_info.completion_tokens went down from "
                                      f"{self.tokens} to {n}")
        if n > self.tokens:
            if self.ttft is None:
                self.ttft = t - self.t0
            else:  # SGLang's bench_serving convention: the gap spread over the tokens it brought
                self.itl += [(t - self.t_last) / (n - self.tokens)] * (n - self.tokens)
            self.t_last, self.tokens = t, n
        if self.keep_output:
            self.texts.append(out.get("text") or "")
            ids = out.get("output_ids")
            self.ids += ids if isinstance(ids, list) else []
        self.last = out

    def finish(self, r: RequestResult) -> None:
        """Fill `r` from the finished stream (Failed when it did not finish)."""
        if self.buf.strip() and not self.done:  # a last line without its line break; nothing after [DONE] counts
            self._line(self.buf.strip(), time.perf_counter())
        if self.last is None:
            raise Failed("truncated", "the stream ended without a data chunk")
        if not self.done:
            raise Failed("truncated", f"the stream ended after {self.chunks} chunk(s) without data: [DONE]")
        _fill(self.last, r, self.keep_output, where=f"last stream chunk ({self.chunks})")
        r.ttft_s, r.itl_s, r.chunks = self.ttft, self.itl, self.chunks
        r.latency_s = self.t_end - self.t0
        if self.keep_output and r.output_ids is not None and len(r.output_ids) != r.completion_tokens:
            r.text, r.output_ids = "".join(t for t in self.texts if isinstance(t, str)), self.ids  # incremental deltas


def generate(base_url: str, prompt_id: str, category: str, text: str, sampling_params: dict, timeout: float,
             keep_output: bool = False, stream: bool = False) -> RequestResult:
    body = {"text": text, "sampling_params": sampling_params, "stream": stream}
    r = RequestResult(prompt_id, category, ok=False)
    t0 = time.perf_counter()
    reader = StreamReader(t0, keep_output) if stream else None
    try:
        status, raw = request("POST", base_url, "/generate", body, timeout, reader.feed if reader else None)
        r.latency_s = time.perf_counter() - t0
        if status != 200:
            r.error, r.detail = f"http_{status}", _error_message(raw)
            return r
        if reader is not None:
            reader.finish(r)
        else:
            parse_generate(raw, r, keep_output)
        r.ok = True
    except Failed as exc:
        r.error, r.detail = exc.kind, str(exc)
    except Exception as exc:  # a bug of ours: still one counted result, never a crash of the sweep
        r.error, r.detail = "client_bug", f"{type(exc).__name__}: {exc}"[:300]
    if not r.ok:
        r.completion_tokens = r.prompt_tokens = r.spec = r.ttft_s = r.itl_s = None
        r.latency_s = r.latency_s or time.perf_counter() - t0
    return r


INFO_KEYS = ("model_path", "served_model_name", "tp_size", "speculative_algorithm", "speculative_draft_model_path",
             "speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens", "speculative_adaptive",
             "speculative_adaptive_config", "cuda_graph_max_bs", "cuda_graph_max_bs_decode", "version")
_INFO_MAX = 1 << 20  # larger "steps" or "tp" is nonsense (and would size lists)
_INFO_INTS = ("tp_size", "speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens", "cuda_graph_max_bs",
               "cuda_graph_max_bs_decode")  # 0.5.23 names it cuda_graph_max_bs_decode


def server_info(base_url: str, timeout: float = 10.0) -> dict:
    """The speculative settings and model of a running server (GET /server_info); {'error': ...} if unreachable.

    Integer settings that are not positive integers are dropped (and named under 'ignored')."""
    try:
        status, raw = request("GET", base_url, "/server_info", None, timeout)
        if status != 200:
            return {"error": f"HTTP {status}: {_error_message(raw)}"}
        doc = json.loads(raw)
        if not isinstance(doc, dict):
            return {"error": f"not a JSON object: {raw[:80]!r}"}
    except Failed as exc:
        return {"error": f"{exc.kind}: {exc}"}
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}
    out = {k: doc.get(k) for k in INFO_KEYS if k in doc}
    bad = [k for k in _INFO_INTS if out.get(k) is not None
           and (not isinstance(out[k], int) or isinstance(out[k], bool) or not 1 <= out[k] <= _INFO_MAX)]
    for k in bad:
        out.pop(k)
    for k in ("model_path", "served_model_name", "speculative_algorithm"):
        if out.get(k) is not None and not isinstance(out[k], str):
            bad.append(k)
            out.pop(k)
    if bad:
        out["ignored"] = f"non-sensical values of {', '.join(bad)}"
    return out
