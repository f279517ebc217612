"""The servers test_live_tiny.py compares: the tiny pairs built by sglang_kimi_eagle3.tiny, served by `python -m
sglang.launch_server` with this plugin (SGLang loads it through its entry point), CONCURRENTLY on the GPU(s):
up to GPU_CI_PARALLEL servers at once (each on its own HTTP and NCCL port, each KV pool capped by
--max-total-tokens), each started once per session for the roles the collected tests need (so `-k` runs only
what it needs), answering the same greedy prompts, then stopped.

  targets (GPU_CI_TARGETS, comma-separated, default int4,wrapper,text; the first is the main target):
          int4      KimiK25ForConditionalGeneration, routed experts compressed-tensors INT4 (the seed's model)
          wrapper   KimiK25ForConditionalGeneration, bf16
          text      DeepseekV3ForCausalLM, bf16
  roles:  plain-T   target T alone
          chain-T   EAGLE3 steps 3 / topk 1 / 4 tokens (the seed's shape), our kernels on every call
                    (SGLANG_KIMI_EAGLE3_KERNELS=ours); on the main target also `bench`
          tree-T    EAGLE3 steps 3 / topk 4 / 8 tokens, ours likewise
          upstream  chain on the main target with SGLANG_KIMI_EAGLE3_KERNELS=upstream (SGLang's own kernels)
          refused   chain on the main target with SGLANG_KIMI_EAGLE3=0: must fail to start
          agree-Q   chain on the main target with a drafter built with --draft-agreement Q (0.6, 0.3)
A role is a Role row (target, spec shape, environment, extra flags, drafter agreement): a new one, with its own
environment (e.g. PYTHONPATH to a patched SGLang tree) or launch flags, is one more entry in EXTRA_ROLES.

Variables: GPU_CI_TINY_DIR (where the models go; default a temporary folder), GPU_CI_LOG_DIR (server logs,
status files, per-role JSON, bench JSON), GPU_CI_PORT (first HTTP port, default 30200; role i gets +10 i and
NCCL port 25200 + 10 i), GPU_CI_PARALLEL (servers at once, default 6), GPU_CI_STARTUP_TIMEOUT (seconds per
server, default 600), GPU_CI_TP (default: 2 when two GPUs are visible, else 1), GPU_CI_EXTRA_ARGS (more
launch_server flags for every server), GPU_CI_REUSE_RUNS=1 (take a role's result from GPU_CI_LOG_DIR when an
earlier session recorded one: lets the lent device split the roles over several 10-minute calls; the
assertions still run on that result and its server log).
"""

from __future__ import annotations

import atexit
import json
import os
import random
import shlex
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from gpu_env import gpu_count
from server import Server

N_PROMPTS, MAX_NEW_TOKENS, SEED = 24, 48, 1234
# target -> (builder options, what SGLang must report building it)
TARGETS = {"int4": ({"int4": True}, "KimiK25ForConditionalGeneration"),
           "wrapper": ({}, "KimiK25ForConditionalGeneration"),
           "text": ({"text_only": True}, "DeepseekV3ForCausalLM")}
AGREEMENTS = (0.6, 0.3)
LONG_TOKENS = 192  # agree-q: 24 x 192 tokens walk the 1024-token cycle about 4 times (per-position statistics)
REFUSED_LINE = "is greater than the derived context_length"
_STRIP = ("SGLANG_KIMI_EAGLE3", "SGLANG_KIMI_EAGLE3_KERNELS", "SGLANG_KIMI_EAGLE3_CONTEXT_POLICY",
          "SGLANG_KIMI_EAGLE3_PREFLIGHT", "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", "SGLANG_PLUGINS",
          "SGLANG_IS_IN_CI", "SGLANG_SIMULATE_ACC_LEN", "SGLANG_KIMI_EAGLE3_ADAPTIVE",
          "SGLANG_KIMI_EAGLE3_ADAPTIVE_MAX_GB")


@dataclass(frozen=True, slots=True)
class Role:
    name: str
    target: str  # a TARGETS key
    shape: str | None = None  # tiny.launch.SPEC_SHAPES key; None: the target alone
    env: dict = field(default_factory=dict)  # added to the server's environment
    args: tuple[str, ...] = ()  # added to its launch flags
    agreement: float = 1.0  # the drafter's --draft-agreement
    bench: bool = False  # run `sglang-kimi-eagle3 bench` against it
    long_tokens: int = 0  # also answer the prompts with this many tokens ('long_outputs': acceptance statistics)
    give_up: str | None = None  # a log line after which the start has failed (SGLang may linger instead of exiting)
    adaptive_config: dict | None = None  # --speculative-adaptive with this --speculative-adaptive-config (JSON)

    @property
    def plain(self) -> str:
        """The role whose greedy ids this one's must equal."""
        return f"plain-{self.target}"

    @property
    def expected_tau(self) -> float:
        """The mean accept length the planted drafter gives: 1 + q + q^2 + ... over the draft depth."""
        from sglang_kimi_eagle3.tiny.launch import SPEC_SHAPES

        steps = SPEC_SHAPES[self.shape][0]
        return sum(self.agreement ** k for k in range(steps + 1))


EXTRA_ROLES: list[Role] = []  # more roles (own env / flags); served like the others, on request by a test

_CACHE: dict = {}
_LOCK = threading.RLock()


def selected_targets() -> list[str]:
    names = [t.strip() for t in os.environ.get("GPU_CI_TARGETS", ",".join(TARGETS)).split(",") if t.strip()]
    bad = [t for t in names if t not in TARGETS]
    if bad or not names:
        raise ValueError(f"GPU_CI_TARGETS={os.environ.get('GPU_CI_TARGETS')!r}: expected a comma list of {', '.join(TARGETS)}")
    return names


def main_target() -> str:
    return selected_targets()[0]


# chain, tree and agree roles run our kernels on every call (SGLANG_KIMI_EAGLE3_KERNELS=ours): they are what these
# tests check live. Under the default `auto` the bundled H200 table runs ours only at the shapes it lists (tree
# sampling, argmax + verify at bs >= 16), and the tiny pair's draft head has no measured shape.
OURS = {"SGLANG_KIMI_EAGLE3_KERNELS": "ours"}
# the agree roles measure the drafter's per-position acceptance of the fixed 3-step chain: adaptive steps (on by
# default for chain launches) could move them off it; the chain role keeps the default
FIXED = {"SGLANG_KIMI_EAGLE3_ADAPTIVE": "off"}
# the steps-0 off-state for good (as device_adaptive.sh's `off` server): candidates 0 and 1 at steps 1, this plugin's
# controller with steps 1 priced out and no probe, so it drops to 0 after the first decode batch and stays there
OFF_STEPS = ("--speculative-num-steps", "1", "--speculative-num-draft-tokens", "2")
OFF_CONFIG = {"1": {"candidate_steps": [0, 1], "kimi_eagle3": {
    "base_us": 1.0, "round_us": {"1": 1e9}, "dwell_batches": 1, "probe_batches": 1, "measure": False,
    "probe_wait_batches": 10**9, "probe_wait_max_batches": 10**9}}}


def all_roles() -> dict[str, Role]:
    """Every role, for every target (selected or not): the order is the start order and fixes the ports."""
    main = main_target()
    roles = [Role(f"chain-{main}", main, "chain", dict(OURS), bench=True), Role(f"tree-{main}", main, "tree", dict(OURS)),
             Role(f"plain-{main}", main), Role("refused", main, "chain", {"SGLANG_KIMI_EAGLE3": "0"}, give_up=REFUSED_LINE)]
    for t in TARGETS:
        if t != main:
            roles += [Role(f"chain-{t}", t, "chain", dict(OURS)), Role(f"tree-{t}", t, "tree", dict(OURS)), Role(f"plain-{t}", t)]
    roles.append(Role("upstream", main, "chain", {"SGLANG_KIMI_EAGLE3_KERNELS": "upstream"}))
    roles += [Role(f"agree-{q:g}", main, "chain", {**OURS, **FIXED}, agreement=q, long_tokens=LONG_TOKENS)
              for q in AGREEMENTS]
    # the off-state's draft extend deferred (SGLANG_KIMI_EAGLE3_OFFSTATE_EXTEND=defer) through SGLang's real extend
    roles.append(Role("defer", main, "chain", {"SGLANG_KIMI_EAGLE3_OFFSTATE_EXTEND": "defer"}, args=OFF_STEPS,
                      adaptive_config=OFF_CONFIG))
    return {r.name: r for r in roles + EXTRA_ROLES}


def role(name: str) -> Role:
    return all_roles()[name]


def log_dir() -> Path:
    with _LOCK:
        if "log_dir" not in _CACHE:
            d = os.environ.get("GPU_CI_LOG_DIR")
            _CACHE["log_dir"] = Path(d) if d else Path(tempfile.mkdtemp(prefix="gpu-ci-tiny-"))
            _CACHE["log_dir"].mkdir(parents=True, exist_ok=True)
        return _CACHE["log_dir"]


def models(target: str = "int4", agreement: float = 1.0) -> tuple[Path, Path]:
    """The built (target, draft) folders for a target kind and drafter agreement (built once, under a lock)."""
    key = ("models", target, agreement)
    with _LOCK:
        lock = _CACHE.setdefault(("lock",) + key, threading.Lock())
    with lock:
        if key not in _CACHE:
            from sglang_kimi_eagle3.tiny import build

            root = Path(os.environ.get("GPU_CI_TINY_DIR") or log_dir() / "models")
            name = target if agreement == 1.0 else f"{target}-q{agreement:g}"
            _CACHE[key] = build(root / name, seed=0, draft_agreement=agreement, **TARGETS[target][0])
        return _CACHE[key]


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


def ports(name: str) -> tuple[int, int]:
    """(HTTP port, NCCL port) of a role: distinct for every role, so any of them can run side by side."""
    i = list(all_roles()).index(name)
    base = int(os.environ.get("GPU_CI_PORT", "30200"))
    return base + 10 * i, 25200 + 10 * i


def argv_of(name: str) -> list[str]:
    from sglang_kimi_eagle3.tiny.launch import base_args, spec_args

    r = role(name)
    target, draft = models(r.target, r.agreement)
    extra = shlex.split(os.environ.get("GPU_CI_EXTRA_ARGS", ""))
    if r.adaptive_config is not None:  # written beside the logs
        from sglang_kimi_eagle3.atomic import write_atomic

        path = write_atomic(log_dir() / f"adaptive-{name}.json", json.dumps(r.adaptive_config))
        extra = ["--speculative-adaptive", "--speculative-adaptive-config", str(path)] + extra
    return (base_args(target, tp()) + (spec_args(draft, r.shape) if r.shape else []) + ["--nccl-port", str(ports(name)[1])]
            + int4_moe_args(r.target) + list(r.args) + extra)


def int4_moe_args(target: str) -> list[str]:
    """GPU_CI_INT4_MOE (default triton): the MoE runner of the INT4 targets. SGLang 0.5.23 picks its Marlin
    WNA16 MoE on SM90/SM120 by default, a JIT CUDA module (sglang.kernels.ops.moe.moe_wna16_marlin) that nvcc
    built for over 5 minutes at the first start on the H200 (2026-12-01), past a 10-minute device call with
    seven servers compiling it at once; `triton` takes SGLang's CompressedTensorsWNA16TritonMoE (same
    checkpoint, same loader). `auto` (or `marlin`) passes no flag: SGLang's own choice."""
    if not TARGETS[target][0].get("int4"):
        return []
    moe = os.environ.get("GPU_CI_INT4_MOE", "triton")
    return [] if moe in ("auto", "marlin") else ["--moe-runner-backend", moe]


def parallel() -> int:
    return max(1, int(os.environ.get("GPU_CI_PARALLEL", "6")))


def _pool() -> ThreadPoolExecutor:
    with _LOCK:
        if "pool" not in _CACHE:
            _CACHE["pool"] = ThreadPoolExecutor(max_workers=parallel(), thread_name_prefix="tiny-role")
        return _CACHE["pool"]


def start(names) -> None:
    """Queue these roles (in all_roles() order, at most GPU_CI_PARALLEL servers at once); returns at once."""
    order = list(all_roles())
    with _LOCK:
        for name in sorted(set(names), key=order.index):
            if name not in _CACHE and ("future", name) not in _CACHE:
                _CACHE[("future", name)] = _pool().submit(_run, name)


def run(name: str) -> dict:
    """The role's result (its server started, queried and stopped once; queued now if it was not).

    {'ok', 'error', 'log', 'log_text', 'outputs': [...], 'status': {...} | None, 'port', 'startup_s', 'gen_s', ...}"""
    with _LOCK:
        if name in _CACHE:
            return _CACHE[name]
    start([name])
    fut: Future = _CACHE[("future", name)]
    return fut.result()


def stop_all() -> None:
    """Drop the roles not yet started and stop every server still up (the session's end, or an interrupt)."""
    with _LOCK:
        _CACHE["stopping"] = True
        pool, live = _CACHE.get("pool"), list(_CACHE.get("live", {}).values())
    if pool is not None:
        pool.shutdown(wait=False, cancel_futures=True)
    for srv in live:
        srv.stop()


atexit.register(stop_all)


def _run(name: str) -> dict:
    if os.environ.get("GPU_CI_REUSE_RUNS") == "1" and (earlier := _recorded(name)) is not None:
        with _LOCK:
            _CACHE[name] = earlier
        return earlier
    r = role(name)
    broken = _CACHE.setdefault("broken", {})
    if broken.get(r.target) and r.give_up is None:  # one root cause, reported once: no N x startup timeouts
        return {"ok": False, "error": f"not started: the {broken[r.target]} server failed first (see its test)",
                "log": "-", "log_text": "", "outputs": [], "status": None}
    if _CACHE.get("stopping"):
        return {"ok": False, "error": "not started: the session is ending", "log": "-", "log_text": "", "outputs": [],
                "status": None}
    port = ports(name)[0]
    status_dir = log_dir() / f"status-{name}"
    srv = Server(name, argv_of(name), port, log_dir(), child_env(r.env, status_dir))
    with _LOCK:
        _CACHE.setdefault("live", {})[name] = srv
    res: dict = {"ok": False, "error": None, "log": str(srv.log), "outputs": [], "status": None, "port": port,
                 "started_at": time.strftime("%H:%M:%S")}
    t0 = time.monotonic()
    try:
        srv.start(float(os.environ.get("GPU_CI_STARTUP_TIMEOUT", "600")), give_up=r.give_up)
        res["startup_s"] = time.monotonic() - t0
        t1 = time.monotonic()
        res["outputs"] = generate(srv.url, prompts())
        res["gen_s"] = time.monotonic() - t1
        if r.long_tokens:
            res["long_outputs"] = generate(srv.url, prompts(), r.long_tokens)
        if r.bench:
            res["bench"] = bench(srv.url, name)
        time.sleep(3)  # the scheduler's status writer rewrites the file within runtime_status.FLUSH_S (2 s)
        path = status_dir / f"port{port}.json"
        res["status"] = json.loads(path.read_text()) if path.is_file() else None
        # the other TP/PP ranks' schedulers write port<P>-tp<R>.json (runtime_status.status_path)
        res["rank_status"] = {p.stem.split("-", 1)[1]: json.loads(p.read_text())
                              for p in sorted(status_dir.glob(f"port{port}-*.json"))}
        res["ok"] = True
    except Exception as exc:  # recorded: each test says what it needed
        res["error"] = f"{type(exc).__name__}: {exc}"
        if _CACHE.get("stopping"):  # stopped from outside (the session's end, an interrupt): not its result
            res["interrupted"] = True
        elif r.give_up is None and "startup_s" not in res:
            broken.setdefault(r.target, name)
    finally:
        srv.stop()
        with _LOCK:
            _CACHE.get("live", {}).pop(name, None)
    res["log_text"] = Path(srv.log).read_text(errors="replace") if Path(srv.log).is_file() else ""
    res["finished_at"] = time.strftime("%H:%M:%S")
    with _LOCK:
        _CACHE[name] = res
    tmp = log_dir() / f".{name}.json.tmp"  # atomic: a call cut at its limit leaves no half result to reuse
    tmp.write_text(json.dumps({k: v for k, v in res.items() if k != "log_text"}, indent=1))
    tmp.replace(log_dir() / f"{name}.json")
    return res


def _recorded(name: str) -> dict | None:
    """An earlier session's result for `name` from log_dir() (written by _run()), with its server log; None
    when there is none or it recorded a startup that never finished (that is run again)."""
    path = log_dir() / f"{name}.json"
    if not path.is_file():
        return None
    res = json.loads(path.read_text())
    if res.get("interrupted") or (not res.get("ok") and not (name in all_roles() and role(name).give_up)):
        return None
    res["log_text"] = Path(res["log"]).read_text(errors="replace") if Path(res["log"]).is_file() else ""
    res["reused"] = True
    return res


def bench(url: str, name: str) -> dict:
    """`sglang-kimi-eagle3 bench --stream` once against the live server (text prompts through the tiny tokenizer):
    SGLang's real event stream, its last chunk's spec fields."""
    out = log_dir() / f"bench-{name}.json"
    cmd = [sys.executable, "-m", "sglang_kimi_eagle3.cli", "bench", "--url", url, "--concurrency", "1,4",
           "--categories", "chat,code", "--max-new-tokens", "32", "--ignore-eos", "--rounds", "2", "--min-requests", "4",
           "--warmup", "1", "--template", "raw", "--timeout", "300", "--stream", "--json", str(out), "--no-progress"]
    cp = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    return {"rc": cp.returncode, "stdout": cp.stdout[-4000:], "stderr": cp.stderr[-4000:],
            "json": json.loads(out.read_text()) if out.is_file() else None}


def needed(items) -> list[str]:
    """The roles the collected (not skipped) test items ask for: their `role` parameter, and the plain run of
    that role's target for those that compare with it."""
    out = []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        name = params.get("role")
        if name is None or item.get_closest_marker("skip"):
            continue
        out.append(name)
        if role(name).shape:
            out.append(role(name).plain)
    return out


def skip_reason(name: str) -> str | None:
    """Why a role's tests are skipped here (its target not in GPU_CI_TARGETS), or None."""
    t = role(name).target
    return None if t in selected_targets() else f"target {t} not in GPU_CI_TARGETS={','.join(selected_targets())}"
