"""The adaptive decode KV reserve, live (SGLANG_SPEC_ADAPTIVE_RESERVE_FOLLOWS_STEPS=true).

An EAGLE-3 server under --speculative-adaptive with a table that switches fast (candidates
[0, 1, 3] at every batch size, a one-batch warm-up and interval) and the variable on, beside the
same target without speculation. Greedy outputs must equal the target's alone, one request at a
time, before and after a burst of 32 concurrent requests (whose batches step between 0 and 3 as
the drafter agrees; a reserve short of what a batch writes would fail its allocation or corrupt
another request's KV); every request of the burst answers with all its tokens.
Models: SGLANG_TEST_ADAPTIVE_RESERVE_TARGET / SGLANG_TEST_ADAPTIVE_RESERVE_DRAFT (default: the
EAGLE-3 pair of SGLang's CI); SGLANG_TEST_ADAPTIVE_RESERVE_ARGS adds launch flags to both servers.
The servers are launched and health-checked here, not with sglang.test.test_utils: that module
imports the benchmark stack (datasets), which a serving-only environment need not have.
"""

import json
import os
import shlex
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from sglang.test.ci.ci_register import register_cuda_ci

register_cuda_ci(est_time=420, stage="base-b", runner_config="1-gpu-small")

try:
    import torch

    HAS_CUDA = torch.cuda.is_available()
except Exception:  # an environment without torch
    HAS_CUDA = False

PROMPTS = [[1, 17 + i, 29 + 3 * i, 101 + 7 * i, 5 + i] for i in range(8)]
MAX_NEW_TOKENS = 32
BURST = 32
BURST_NEW_TOKENS = 96
SERVER_LAUNCH_TIMEOUT_S = 600
TABLE = {
    str(bs): {"candidate_steps": [0, 1, 3], "warmup_batches": 1, "update_interval": 1}
    for bs in (1, 8, 32)
}


def _models():
    target = os.environ.get("SGLANG_TEST_ADAPTIVE_RESERVE_TARGET")
    draft = os.environ.get("SGLANG_TEST_ADAPTIVE_RESERVE_DRAFT")
    if target and draft:
        return target, draft
    from sglang.test.test_utils import (  # SGLang's CI pair (its CI has the benchmark stack)
        DEFAULT_DRAFT_MODEL_EAGLE3,
        DEFAULT_TARGET_MODEL_EAGLE3,
    )

    return target or DEFAULT_TARGET_MODEL_EAGLE3, draft or DEFAULT_DRAFT_MODEL_EAGLE3


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch_server(model, other_args, env=None, timeout=SERVER_LAUNCH_TIMEOUT_S):
    """Start `sglang.launch_server` and wait until /health_generate answers 200."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [
        sys.executable, "-m", "sglang.launch_server", "--model-path", model,
        "--host", "127.0.0.1", "--port", str(port), *other_args,
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, env={**os.environ, **(env or {})})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with code {proc.returncode}: {shlex.join(cmd)}")
        try:
            with urllib.request.urlopen(url + "/health_generate", timeout=5) as r:
                if r.status == 200:
                    return proc, url
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(2)
    _kill(proc)
    raise RuntimeError(f"server not healthy within {timeout} s: {shlex.join(cmd)}")


def _kill(proc):
    from sglang.srt.utils import kill_process_tree

    kill_process_tree(proc.pid)


def _generate(url, input_ids, max_new_tokens):
    body = {
        "input_ids": input_ids,
        "sampling_params": {
            "temperature": 0.0,
            "max_new_tokens": max_new_tokens,
            "ignore_eos": True,
        },
    }
    req = urllib.request.Request(
        url + "/generate",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=600) as r:
        out = json.loads(r.read())
    return [o["output_ids"] for o in out] if isinstance(out, list) else out["output_ids"]


def _one_at_a_time(url):
    return [_generate(url, p, MAX_NEW_TOKENS) for p in PROMPTS]


@unittest.skipUnless(HAS_CUDA, "needs a CUDA GPU")
class TestAdaptiveDecodeReserve(unittest.TestCase):
    def _args(self):
        return ["--trust-remote-code", *shlex.split(os.environ.get("SGLANG_TEST_ADAPTIVE_RESERVE_ARGS", ""))]

    def test_greedy_outputs_and_a_burst_with_the_reserve_following_the_steps(self):
        target, draft = _models()
        proc, url = _launch_server(target, self._args())
        try:
            plain = _one_at_a_time(url)
        finally:
            _kill(proc)

        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(TABLE, f)
        try:
            spec = [
                "--speculative-algorithm", "EAGLE3",
                "--speculative-draft-model-path", draft,
                "--speculative-num-steps", "1",
                "--speculative-eagle-topk", "1",
                "--speculative-num-draft-tokens", "2",
                "--speculative-adaptive",
                "--speculative-adaptive-config", f.name,
            ]  # fmt: skip
            env = {"SGLANG_SPEC_ADAPTIVE_RESERVE_FOLLOWS_STEPS": "true"}
            proc, url = _launch_server(target, self._args() + spec, env)
            try:
                self.assertEqual(_one_at_a_time(url), plain)
                prompts = [PROMPTS[i % len(PROMPTS)] + [7 + i] for i in range(BURST)]
                with ThreadPoolExecutor(BURST) as pool:
                    burst = list(pool.map(lambda p: _generate(url, p, BURST_NEW_TOKENS), prompts))
                self.assertEqual([len(o) for o in burst], [BURST_NEW_TOKENS] * BURST)
                self.assertEqual(_one_at_a_time(url), plain)
            finally:
                _kill(proc)
        finally:
            os.remove(f.name)


if __name__ == "__main__":
    unittest.main()
