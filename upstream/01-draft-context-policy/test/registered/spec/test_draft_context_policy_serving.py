"""Serve an EAGLE-3 pair whose draft is shorter than the target with --speculative-draft-context-policy.

Greedy outputs with the draft (extend) must equal the target's alone: the policy only lifts the draft's
limit, the target verifies every token. With `strict` a shorter draft must not start.
Models: SGLANG_TEST_DRAFT_CONTEXT_TARGET / SGLANG_TEST_DRAFT_CONTEXT_DRAFT (default: the EAGLE-3 pair
of SGLang's CI); SGLANG_TEST_DRAFT_CONTEXT_ARGS adds launch flags to every server.
"""

import json
import os
import shlex
import unittest
import urllib.request

from sglang.test.ci.ci_register import register_cuda_ci

register_cuda_ci(est_time=300, stage="base-b", runner_config="1-gpu-small")

try:
    import torch

    HAS_CUDA = torch.cuda.is_available()
except Exception:  # an environment without torch
    HAS_CUDA = False

PROMPTS = [[1, 17 + i, 29 + 3 * i, 101 + 7 * i, 5 + i] for i in range(8)]
MAX_NEW_TOKENS = 32


def _models():
    from sglang.test.test_utils import (
        DEFAULT_DRAFT_MODEL_EAGLE3,
        DEFAULT_TARGET_MODEL_EAGLE3,
    )

    return (
        os.environ.get("SGLANG_TEST_DRAFT_CONTEXT_TARGET", DEFAULT_TARGET_MODEL_EAGLE3),
        os.environ.get("SGLANG_TEST_DRAFT_CONTEXT_DRAFT", DEFAULT_DRAFT_MODEL_EAGLE3),
    )


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
        from sglang.test.test_utils import (
            DEFAULT_TIMEOUT_FOR_SERVER_LAUNCH,
            DEFAULT_URL_FOR_TEST,
            popen_launch_server,
        )

        target, _ = _models()
        args = shlex.split(os.environ.get("SGLANG_TEST_DRAFT_CONTEXT_ARGS", ""))
        proc = popen_launch_server(
            target,
            DEFAULT_URL_FOR_TEST,
            timeout=DEFAULT_TIMEOUT_FOR_SERVER_LAUNCH,
            other_args=["--trust-remote-code", *args, *extra],
            env=env,
        )
        return proc, DEFAULT_URL_FOR_TEST

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
        from sglang.srt.utils import kill_process_tree

        proc, url = self._serve(extra, env)
        try:
            return self._greedy(url)
        finally:
            kill_process_tree(proc.pid)

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
