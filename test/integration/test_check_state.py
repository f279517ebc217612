"""`check` keeps no module state (issue 10, point 4): one public function, `check_cmd.check_launch`, used by
the CLI and benchmark/preflight/bench_check.py; the launch step collects into a ContextVar box that is
reset on every exit path - after unusable input (UserError) the next resolution in the same process is a
real launch again, and two checks in a row do not leak labels or findings into each other."""

import pytest

from helpers import run_json

pytestmark = pytest.mark.slow

CODE = r'''
import json, warnings
warnings.filterwarnings("ignore")
from sglang.srt.plugins import load_plugins
load_plugins()
from sglang_kimi_eagle3.errors import UserError
from sglang_kimi_eagle3.integration import preflight_launch
from sglang_kimi_eagle3.integration.check_cmd import check_launch, parse_gpu, resolve_model_paths
out = {}
gpu = parse_gpu("sm90", "test")
base = ["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
        "--speculative-num-draft-tokens", "4", "--device", "cuda"]
argv, labels = resolve_model_paths(["--model-path", "llama-3.1-8b-instruct", "--speculative-draft-model-path",
                                    "llama-3.1-8b-eagle3"] + base)
try:
    check_launch(argv + ["--speculative-draft-context-policy", "cap"], gpu, labels)  # fine
    import os
    os.environ["SGLANG_KIMI_EAGLE3_KERNELS"] = "turbo"
    check_launch(argv, gpu, labels)
    out["raised"] = None
except UserError as exc:
    out["raised"] = str(exc)
finally:
    import os
    os.environ.pop("SGLANG_KIMI_EAGLE3_KERNELS", None)
out["collector_after_error"] = preflight_launch.collector()
r1 = check_launch(argv, gpu, labels)
argv2, labels2 = resolve_model_paths(["--model-path", "kimi-k2.5", "--trust-remote-code", "--tp-size", "8",
                                      "--speculative-draft-model-path", "aq-medai/kimi-k2-eagle3"] + base)
r2 = check_launch(argv2, gpu, labels2)
found = lambda r: " ".join(f.found for f in r["findings"])
out["llama_labels"] = "llama-3.1-8b-eagle3" in found(r1) and "kimi" not in found(r1)
out["kimi_labels"] = "aq-medai/kimi-k2-eagle3" in found(r2) and "llama" not in found(r2)
out["collector_after"] = preflight_launch.collector()
print(json.dumps(out))
'''


def test_check_state_is_reset_on_every_exit_path():
    r = run_json(CODE)
    assert r["raised"] and "SGLANG_KIMI_EAGLE3_KERNELS='turbo'" in r["raised"], r
    assert r["collector_after_error"] is None and r["collector_after"] is None
    assert r["llama_labels"] and r["kimi_labels"], r
