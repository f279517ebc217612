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
Nothing here raises: every failure is a RequestResult with `error` set.
"""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass

SPEC_KEYS = {"spec_accept_length": "accept_length", "spec_accept_rate": "accept_rate", "spec_verify_ct": "verify_ct",
             "spec_num_correct_drafts": "num_correct", "spec_num_proposed_drafts": "num_proposed",
             "spec_correct_drafts_histogram": "histogram"}


@dataclass(slots=True)
class RequestResult:
    prompt_id: str
    category: str
    ok: bool
    error: str | None = None  # http_<code> | timeout | connection | bad_response
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


def _post(url: str, body: dict, timeout: float) -> tuple[int, bytes]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:  # 4xx/5xx: keep the body for the message
        return exc.code, exc.read() or b""


def _error_message(raw: bytes) -> str:
    try:
        err = json.loads(raw).get("error")
        return str(err.get("message", err) if isinstance(err, dict) else err)[:300]
    except Exception:
        return raw[:300].decode(errors="replace")


def parse_spec(meta: dict) -> dict | None:
    """The spec fields of meta_info, renamed; None when speculation reported nothing."""
    if "spec_verify_ct" not in meta:
        return None
    spec = {short: meta.get(key) for key, short in SPEC_KEYS.items()}
    if not isinstance(spec["verify_ct"], int) or spec["verify_ct"] <= 0:
        return None
    return spec


def generate(base_url: str, prompt_id: str, category: str, text: str, sampling_params: dict, timeout: float,
             keep_output: bool = False) -> RequestResult:
    body = {"text": text, "sampling_params": sampling_params, "stream": False}
    r = RequestResult(prompt_id, category, ok=False)
    t0 = time.perf_counter()
    try:
        status, raw = _post(base_url.rstrip("/") + "/generate", body, timeout)
    except (TimeoutError, socket.timeout):
        r.error, r.detail = "timeout", f"no full response within {timeout:g} s"
    except urllib.error.URLError as exc:
        is_timeout = isinstance(exc.reason, (TimeoutError, socket.timeout))
        r.error, r.detail = ("timeout" if is_timeout else "connection"), str(exc.reason)[:300]
    except (ConnectionError, OSError) as exc:
        r.error, r.detail = "connection", f"{type(exc).__name__}: {exc}"[:300]
    else:
        r.latency_s = time.perf_counter() - t0
        if status != 200:
            r.error, r.detail = f"http_{status}", _error_message(raw)
            return r
        try:
            out = json.loads(raw)
            meta = out["meta_info"]
            r.completion_tokens = int(meta["completion_tokens"])
        except Exception as exc:
            r.error, r.detail = "bad_response", f"{type(exc).__name__}: {exc}; body starts {raw[:120]!r}"
            return r
        r.ok = True
        r.prompt_tokens = meta.get("prompt_tokens")
        r.server_latency_s = meta.get("e2e_latency")
        fr = meta.get("finish_reason")
        r.finish_reason = fr.get("type") if isinstance(fr, dict) else fr
        r.spec = parse_spec(meta)
        if keep_output:
            r.text, r.output_ids = out.get("text"), out.get("output_ids")
        return r
    r.latency_s = time.perf_counter() - t0
    return r


def server_info(base_url: str, timeout: float = 10.0) -> dict:
    """The speculative settings and model of a running server (GET /server_info); {'error': ...} if unreachable."""
    keep = ("model_path", "served_model_name", "tp_size", "speculative_algorithm", "speculative_draft_model_path",
            "speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens", "speculative_adaptive",
            "speculative_adaptive_config", "cuda_graph_max_bs", "version")
    try:
        with urllib.request.urlopen(base_url.rstrip("/") + "/server_info", timeout=timeout) as resp:
            doc = json.loads(resp.read())
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}
    return {k: doc.get(k) for k in keep if k in doc}
