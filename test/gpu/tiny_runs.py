"""The servers test_live_tiny.py compares, each started once per session on demand (so `-k` runs only
what it needs): the tiny pair built by sglang_kimi_eagle3.tiny, served by `python -m
sglang.launch_server` with this plugin (SGLang loads it through its entry point).

  roles:  plain     the target alone
          chain     EAGLE3 steps 3 / topk 1 / 4 tokens (the seed's shape)
          tree      EAGLE3 steps 3 / topk 4 / 8 tokens
          upstream  chain with SGLANG_KIMI_EAGLE3_KERNELS=upstream (SGLang's own kernels)
          refused   chain with SGLANG_KIMI_EAGLE3=0: must fail to start

Variables: GPU_CI_TINY_DIR (where the models go; default a temporary folder), GPU_CI_LOG_DIR (server
logs, status files, bench JSON), GPU_CI_PORT (first port, default 30200), GPU_CI_STARTUP_TIMEOUT
(seconds per server, default 600), GPU_CI_TP (default: 2 when two GPUs are visible, else 1),
GPU_CI_EXTRA_ARGS (more launch_server flags for every server), GPU_CI_REUSE_RUNS=1 (take a role's result from
GPU_CI_LOG_DIR when an earlier session recorded one: lets the lent device split five server starts over
several 10-minute calls; the assertions still run on that result and its server log).
"""

from __future__ import annotations

import json
import os
import random
import shlex
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from gpu_env import gpu_count
from server import Server

N_PROMPTS, MAX_NEW_TOKENS, SEED = 24, 48, 1234
ROLES = {"plain": (None, {}), "chain": ("chain", {}), "tree": ("tree", {}),
         "upstream": ("chain", {"SGLANG_KIMI_EAGLE3_KERNELS": "upstream"}),
         "refused": ("chain", {"SGLANG_KIMI_EAGLE3": "0"})}
_STRIP = ("SGLANG_KIMI_EAGLE3", "SGLANG_KIMI_EAGLE3_KERNELS", "SGLANG_KIMI_EAGLE3_CONTEXT_POLICY",
          "SGLANG_KIMI_EAGLE3_PREFLIGHT", "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", "SGLANG_PLUGINS",
          "SGLANG_IS_IN_CI", "SGLANG_SIMULATE_ACC_LEN")
_CACHE: dict = {}


def log_dir() -> Path:
    if "log_dir" not in _CACHE:
        d = os.environ.get("GPU_CI_LOG_DIR")
        _CACHE["log_dir"] = Path(d) if d else Path(tempfile.mkdtemp(prefix="gpu-ci-tiny-"))
        _CACHE["log_dir"].mkdir(parents=True, exist_ok=True)
    return _CACHE["log_dir"]


def models() -> tuple[Path, Path]:
    if "models" not in _CACHE:
        from sglang_kimi_eagle3.tiny import build

        _CACHE["models"] = build(os.environ.get("GPU_CI_TINY_DIR") or log_dir() / "models", seed=0)
    return _CACHE["models"]


def tp() -> int:
    return int(os.environ.get("GPU_CI_TP") or (2 if gpu_count() >= 2 else 1))


def prompts() -> list[list[int]]:
    """Seeded token-id prompts of 4 to 300 tokens over the whole vocabulary (ids 3.. are ordinary)."""
    from sglang_kimi_eagle3.tiny import TinySpec

    rng, v = random.Random(SEED), TinySpec().vocab_size
    return [[rng.randrange(3, v) for _ in range(rng.choice((4, 17, 64, 129, 300)))] for _ in range(N_PROMPTS)]


def generate(url: str, batch: list[list[int]], max_new_tokens: int = MAX_NEW_TOKENS) -> list[dict]:
    body = {"input_ids": batch, "sampling_params": {"temperature": 0.0, "max_new_tokens": max_new_tokens,
                                                    "ignore_eos": True}}
    req = urllib.request.Request(url + "/generate", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        out = json.loads(r.read())
    return out if isinstance(out, list) else [out]


def child_env(extra: dict, status_dir: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in _STRIP}
    env.update(extra)
    env["SGLANG_KIMI_EAGLE3_STATUS_DIR"] = str(status_dir)
    return env


def argv_of(role: str) -> list[str]:
    from sglang_kimi_eagle3.tiny.launch import base_args, spec_args

    target, draft = models()
    shape, _ = ROLES[role]
    extra = shlex.split(os.environ.get("GPU_CI_EXTRA_ARGS", ""))
    return base_args(target, tp()) + (spec_args(draft, shape) if shape else []) + extra


def run(role: str) -> dict:
    """Start the role's server, answer the prompts, read the plugin's status file, stop. Cached.

    {'ok', 'error', 'log', 'outputs': [...], 'status': {...} | None, 'port', 'startup_s', 'gen_s'}"""
    if role in _CACHE:
        return _CACHE[role]
    if os.environ.get("GPU_CI_REUSE_RUNS") == "1" and (earlier := _recorded(role)) is not None:
        _CACHE[role] = earlier
        return earlier
    if _CACHE.get("broken") and role != "refused":  # one root cause, reported once: no 5 x startup timeouts
        return {"ok": False, "error": f"not started: the {_CACHE['broken']} server failed first (see its test)",
                "log": "-", "log_text": "", "outputs": [], "status": None}
    _shape, extra = ROLES[role]
    port = int(os.environ.get("GPU_CI_PORT", "30200")) + list(ROLES).index(role)
    status_dir = log_dir() / f"status-{role}"
    srv = Server(role, argv_of(role), port, log_dir(), child_env(extra, status_dir))
    res: dict = {"ok": False, "error": None, "log": str(srv.log), "outputs": [], "status": None, "port": port}
    t0 = time.monotonic()
    try:
        srv.start(float(os.environ.get("GPU_CI_STARTUP_TIMEOUT", "600")),
                  give_up="is greater than the derived context_length" if role == "refused" else None)
        res["startup_s"] = time.monotonic() - t0
        t1 = time.monotonic()
        res["outputs"] = generate(srv.url, prompts())
        res["gen_s"] = time.monotonic() - t1
        if role == "chain":
            res["bench"] = bench(srv.url)
        time.sleep(3)  # the scheduler's status writer rewrites the file within runtime_status.FLUSH_S (2 s)
        path = status_dir / f"port{port}.json"
        res["status"] = json.loads(path.read_text()) if path.is_file() else None
        res["ok"] = True
    except Exception as exc:  # recorded: each test says what it needed
        res["error"] = f"{type(exc).__name__}: {exc}"
        if role != "refused" and "startup_s" not in res:
            _CACHE["broken"] = role
    finally:
        srv.stop()
    res["log_text"] = Path(srv.log).read_text(errors="replace") if Path(srv.log).is_file() else ""
    _CACHE[role] = res
    tmp = log_dir() / f".{role}.json.tmp"  # atomic: a call cut at its limit leaves no half result to reuse
    tmp.write_text(json.dumps({k: v for k, v in res.items() if k != "log_text"}, indent=1))
    tmp.replace(log_dir() / f"{role}.json")
    return res


def _recorded(role: str) -> dict | None:
    """An earlier session's result for `role` from log_dir() (written by run()), with its server log; None
    when there is none or it recorded a startup that never finished (that is run again)."""
    path = log_dir() / f"{role}.json"
    if not path.is_file():
        return None
    res = json.loads(path.read_text())
    if not res.get("ok") and role != "refused":
        return None
    res["log_text"] = Path(res["log"]).read_text(errors="replace") if Path(res["log"]).is_file() else ""
    res["reused"] = True
    return res


def bench(url: str) -> dict:
    """`sglang-kimi-eagle3 bench` once against the live server (text prompts through the tiny tokenizer)."""
    out = log_dir() / "bench-chain.json"
    cmd = [sys.executable, "-m", "sglang_kimi_eagle3.cli", "bench", "--url", url, "--concurrency", "1,4",
           "--categories", "chat,code", "--max-new-tokens", "32", "--ignore-eos", "--rounds", "2", "--min-requests", "4",
           "--warmup", "1", "--template", "raw", "--timeout", "300", "--json", str(out), "--no-progress"]
    cp = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    return {"rc": cp.returncode, "stdout": cp.stdout[-4000:], "stderr": cp.stderr[-4000:],
            "json": json.loads(out.read_text()) if out.is_file() else None}
