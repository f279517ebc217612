"""One native `/generate` request (stream off) -> RequestResult. Standard library HTTP only.

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

Nothing here raises: every failure is a RequestResult with `error` set to one kind:
  timeout       no full response within the request's total deadline (a watchdog closes the socket,
                so a server that drips one byte a second cannot stretch it)
  connection    refused / reset / closed before a response
  interrupted   the run was stopped (Ctrl-C, SIGTERM): `abort_all()` closed the socket
  http_<code>   a 4xx/5xx answer (detail: the server's message)
  truncated     the body ended before its Content-Length (IncompleteRead)
  bad_http      not HTTP (BadStatusLine, header too long, ...)
  bad_json      a 200 whose body is not JSON
  bad_field     JSON of the wrong shape, or a value of the wrong type or out of range (negative tokens,
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
MAX_BODY = 64 << 20  # a /generate answer larger than this is not one


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
    text: str | None = None
    output_ids: list | None = None

    def as_dict(self) -> dict:
        return asdict(self)


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


def request(method: str, base_url: str, path: str, body: dict | None, timeout: float) -> tuple[int, bytes]:
    """(status, body) within `timeout` seconds in total; Failed(kind, detail) otherwise."""
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


def parse_generate(raw: bytes, r: RequestResult, keep_output: bool) -> None:
    """Fill `r` from a 200 body; Failed("bad_json" | "bad_field") when it is not SGLang's shape."""
    try:
        out = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise Failed("bad_json", f"{type(exc).__name__}: {exc}; body starts {raw[:80]!r}") from None
    if not isinstance(out, dict) or not isinstance(out.get("meta_info"), dict):
        raise Failed("bad_field", f"no meta_info object in the response; body starts {raw[:80]!r}")
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


def generate(base_url: str, prompt_id: str, category: str, text: str, sampling_params: dict, timeout: float,
             keep_output: bool = False) -> RequestResult:
    body = {"text": text, "sampling_params": sampling_params, "stream": False}
    r = RequestResult(prompt_id, category, ok=False)
    t0 = time.perf_counter()
    try:
        status, raw = request("POST", base_url, "/generate", body, timeout)
        r.latency_s = time.perf_counter() - t0
        if status != 200:
            r.error, r.detail = f"http_{status}", _error_message(raw)
            return r
        parse_generate(raw, r, keep_output)
        r.ok = True
    except Failed as exc:
        r.error, r.detail = exc.kind, str(exc)
    except Exception as exc:  # a bug of ours: still one counted result, never a crash of the sweep
        r.error, r.detail = "client_bug", f"{type(exc).__name__}: {exc}"[:300]
    if not r.ok:
        r.completion_tokens = r.prompt_tokens = r.spec = None
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
