"""Serve an EAGLE-3 pair whose draft is shorter than the target with --speculative-draft-context-policy.

Greedy outputs with the draft (extend) must equal the target's alone: the policy only lifts the draft's
limit, the target verifies every token. With `strict` a shorter draft must not start.
Models: SGLANG_TEST_DRAFT_CONTEXT_TARGET / SGLANG_TEST_DRAFT_CONTEXT_DRAFT (default: the EAGLE-3 pair
of SGLang's CI); SGLANG_TEST_DRAFT_CONTEXT_ARGS adds launch flags to every server.
The servers are launched and health-checked here, not with sglang.test.test_utils: that module imports
the benchmark stack (datasets), which a serving-only environment need not have.
"""

import json
import os
import shlex
import socket
import subprocess
import sys
import time
import unittest
import urllib.error
import urllib.request

from sglang.test.ci.ci_register import register_cuda_ci

register_cuda_ci(est_time=420, stage="base-b", runner_config="1-gpu-small")

try:
    import torch

    HAS_CUDA = torch.cuda.is_available()
except Exception:  # an environment without torch
    HAS_CUDA = False

PROMPTS = [[1, 17 + i, 29 + 3 * i, 101 + 7 * i, 5 + i] for i in range(8)]
MAX_NEW_TOKENS = 32


SERVER_LAUNCH_TIMEOUT_S = 600


def _models():
    target = os.environ.get("SGLANG_TEST_DRAFT_CONTEXT_TARGET")
    draft = os.environ.get("SGLANG_TEST_DRAFT_CONTEXT_DRAFT")
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
    """Start `sglang.launch_server` and wait until /health_generate answers 200.

    Raises RuntimeError when the server exits first or is not healthy within `timeout`.
    """
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


def _positions(path):
    from sglang.srt.utils.hf_transformers_utils import (
        get_config,
        get_context_length,
        get_hf_text_config,
    )

    return get_context_length(get_hf_text_config(get_config(path, trust_remote_code=True)))


@unittest.skipUnless(HAS_CUDA, "needs a CUDA GPU")
class TestDraftContextPolicyServing(unittest.TestCase):
    def _serve(self, extra, env=None):
        target, _ = _models()
        args = shlex.split(os.environ.get("SGLANG_TEST_DRAFT_CONTEXT_ARGS", ""))
        return _launch_server(target, ["--trust-remote-code", *args, *extra], env)

    def _greedy(self, url):
        body = {
            "input_ids": PROMPTS,
            "sampling_params": {
                "temperature": 0.0,
                "max_new_tokens": MAX_NEW_TOKENS,
                "ignore_eos": True,
            },
        }
        req = urllib.request.Request(
            url + "/generate",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=600) as r:
            return [o["output_ids"] for o in json.loads(r.read())]

    def _run(self, extra, env=None):
        proc, url = self._serve(extra, env)
        try:
            return self._greedy(url)
        finally:
            _kill(proc)

    def _spec(self, policy):
        _, draft = _models()
        return [
            "--speculative-algorithm", "EAGLE3",
            "--speculative-draft-model-path", draft,
            "--speculative-num-steps", "3",
            "--speculative-eagle-topk", "1",
            "--speculative-num-draft-tokens", "4",
            "--speculative-draft-context-policy", policy,
        ]  # fmt: skip

    def test_extend_serves_greedy_outputs_identical_to_the_target(self):
        target, draft = _models()
        self.assertLess(_positions(draft), _positions(target), "the pair must have a shorter draft")
        plain = self._run([])
        spec = self._run(self._spec("extend"))
        self.assertEqual(spec, plain)

    def test_strict_refuses_a_shorter_draft(self):
        with self.assertRaises(Exception):
            self._run(self._spec("strict"), env={"SGLANG_IS_IN_CI": "0"})


if __name__ == "__main__":
    unittest.main()
