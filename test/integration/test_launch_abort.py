"""Fail fast at launch: SGLang's real `python -m sglang.launch_server` entry, in a subprocess.

This machine has no GPU and the bundled folders hold configs only, so a launch that passes our
preflight goes on and dies later (loading the multimodal processor, which needs files a config-only
folder lacks). A launch with errors must stop inside SGLang's argument resolution, with the whole
list, before any of that.
"""

import subprocess

import pytest

from helpers import AQ_K2_DRAFT, KIMI_K25, clean_env, python

pytestmark = pytest.mark.slow

BAD = ["--model-path", str(KIMI_K25), "--trust-remote-code", "--tp-size", "8",
       "--speculative-algorithm", "EAGLE",  # EAGLE-3 drafter with EAGLE: error 1
       "--speculative-draft-model-path", str(AQ_K2_DRAFT), "--speculative-num-steps", "3",
       "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4",
       "--speculative-draft-context-policy", "strict",  # 131072 < 262144 refused: error 2
       "--device", "cuda", "--port", "31871"]


def launch(**env) -> subprocess.CompletedProcess:
    return python(["-m", "sglang.launch_server", *BAD], timeout=400, env=clean_env(**env))


def test_errors_abort_the_launch_during_argument_resolution_with_the_full_list():
    cp = launch()
    err = cp.stderr
    assert cp.returncode != 0
    # a third where this machine's GPU cannot hold Kimi-K2.5's 72 GiB per GPU at TP 8 (an 80-GB H100)
    n = 3 if "[error] memory:" in err else 2
    assert f"sglang-kimi-eagle3: error: sglang-kimi-eagle3 preflight found {n} error(s); nothing was loaded" in err
    assert "[error] algorithm:" in err and "[error] context:" in err
    assert "Traceback" not in err  # our refusal reads as its message
    assert "image processor" not in err and "Load weight" not in err  # before run_server launched anything
    debug = launch(SGLANG_KIMI_EAGLE3_DEBUG="1").stderr
    assert "resolve_once" in debug  # the traceback, on request: raised from SGLang's own resolution


def test_a_garbage_plugin_variable_aborts_an_eagle3_launch_in_one_line():
    cp = launch(SGLANG_KIMI_EAGLE3_KERNELS="fastest")
    lines = [ln for ln in cp.stderr.splitlines() if ln.strip()]
    assert cp.returncode != 0 and "Traceback" not in cp.stderr
    assert lines[-1] == ("sglang-kimi-eagle3: error: SGLANG_KIMI_EAGLE3_KERNELS='fastest' is not one of "
                         "auto|ours|upstream; unset it or pick one")
    assert "image processor" not in cp.stderr


def test_warn_mode_logs_the_errors_and_lets_the_launch_continue():
    cp = launch(SGLANG_KIMI_EAGLE3_PREFLIGHT="warn")
    err = cp.stderr
    assert "[error] algorithm:" in err  # still reported
    assert "preflight found" not in err  # but not raised
    assert cp.returncode != 0 and "image processor" in err  # it went on, to the next (non-preflight) failure
