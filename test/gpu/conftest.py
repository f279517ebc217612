"""GPU suite. test_spec_server.py: one speculative and one plain server of the same target, one after the
other (a Kimi-K2.5 copy fills 8 GPUs), each measured at concurrency 1 on the bundled prompts; skipped,
with the reason, when no CUDA device or no model paths are given (gpu_env.py lists the variables).
test_live_tiny.py: the tiny random-weight pair it builds itself; skipped only without a CUDA device."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from gpu_env import from_env  # noqa: E402
from server import Server  # noqa: E402

ENV, SKIP_REASON = from_env()


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.fspath).parents:
            item.add_marker(pytest.mark.gpu)
            # the model-path suite needs GPU_CI_* paths; test_live_tiny builds its own models (own skip)
            if ENV is None and Path(item.fspath).name == "test_spec_server.py":
                item.add_marker(pytest.mark.skip(reason=SKIP_REASON))


def _hook_status(env: dict) -> dict:
    """`sglang-kimi-eagle3 status --json` in a fresh process with the servers' environment."""
    cp = subprocess.run([sys.executable, "-m", "sglang_kimi_eagle3.cli", "status", "--json"], capture_output=True,
                        text=True, timeout=600, env=env)
    start = cp.stdout.find("{")
    if start < 0:
        raise RuntimeError(f"status --json printed no JSON (exit {cp.returncode}):\n{cp.stdout[-2000:]}\n{cp.stderr[-4000:]}")
    return json.loads(cp.stdout[start:])


def _measure(server: Server, env) -> dict:
    from sglang_kimi_eagle3.bench import prompts as P
    from sglang_kimi_eagle3.bench.client import server_info
    from sglang_kimi_eagle3.bench.runner import SweepConfig, run_level
    from sglang_kimi_eagle3.bench.stats import summarize

    info = server_info(server.url)
    cfg = SweepConfig([1], max_new_tokens=env.max_new_tokens, temperature=0.0, timeout_s=600, keep_output=True)
    prompt_set = P.load(env.categories)
    template = P.guess_template(info.get("model_path"))
    run_level(server.url, prompt_set[:1], 1, 1, cfg, template)  # warm-up, not counted
    results, wall = run_level(server.url, prompt_set, len(prompt_set), 1, cfg, template)
    return {"info": info, "results": results, "summary": summarize(results, wall, info.get("speculative_num_steps"))}


@pytest.fixture(scope="session")
def runs():
    """{'spec': {...}, 'plain': {...}, 'status': {...}}; a server that fails to start fails every test with its log."""
    assert ENV is not None
    import os

    log_dir = Path(ENV.log_dir or tempfile.mkdtemp(prefix="gpu-ci-"))
    base = ["--model-path", ENV.target, "--tp-size", str(ENV.tp), *ENV.extra_args]
    out: dict = {"log_dir": str(log_dir), "errors": {}}
    child_env = {k: v for k, v in os.environ.items() if k not in ("SGLANG_KIMI_EAGLE3", "SGLANG_PLUGINS")}
    for role, argv in (("spec", base + ["--speculative-draft-model-path", ENV.draft, *ENV.spec_args]), ("plain", base)):
        srv = Server(role, argv, ENV.port, log_dir, child_env)
        try:
            srv.start(ENV.startup_timeout)
            out[role] = _measure(srv, ENV)
            if role == "spec":
                out["status"] = _hook_status(child_env)
        except Exception as exc:  # recorded; each test reports what it needed
            out["errors"][role] = f"{type(exc).__name__}: {exc}"
        finally:
            srv.stop()
    return out
