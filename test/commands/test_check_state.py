"""`check` keeps no module state (issue 10, point 4): one public function, `commands/check.check_launch`, used by
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
from sglang_kimi_eagle3.integration.preflight import launch as preflight_launch
from sglang_kimi_eagle3.commands.check import check_launch, parse_gpu, resolve_model_paths
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


# Outside the hook table (docs/hooks.md, "Outside the hook table"): while `check` resolves a launch it makes
# SGLang's GPU-capacity readers see the named GPU, and the fc-width probe builds the draft's LlamaModel on the
# meta device under a TP-1 parallel override. Both are scoped: after check - also when SGLang's resolution
# raises inside the patched block - the readers are SGLang's own functions again and the parallel state and
# torch's default device are as before.
SCOPED = r'''
import contextlib, io, json, sys, warnings
warnings.filterwarnings("ignore")
import torch
from sglang_kimi_eagle3.cli import main
from sglang_kimi_eagle3.integration.preflight import gpu_memory, sglang_facts
from sglang.srt.runtime_context import get_parallel
import importlib
readers = {n: importlib.import_module(n) for n in gpu_memory._READERS}
before = {n: m.get_device_memory_capacity for n, m in readers.items()}
par_before = (dict(get_parallel()._overrides), dict(get_parallel()._stamp))
inside, fc = [], []
real_cm, real_fc = gpu_memory.sglang_sees_gpu_memory, sglang_facts.fc_in_features

@contextlib.contextmanager
def spy_cm(mib):
    with real_cm(mib):
        inside.append({n: m.get_device_memory_capacity() for n, m in readers.items()})
        yield

def spy_fc(*a, **k):
    fc.append(real_fc(*a, **k))
    return fc[-1]

gpu_memory.sglang_sees_gpu_memory, sglang_facts.fc_in_features = spy_cm, spy_fc
out = {"rc": []}
for argv in (["--for-gpu", "H200"], ["--for-gpu", "B200", "--speculative-eagle-topk", "4"]):  # the 2nd: SGLang raises
    with contextlib.redirect_stdout(io.StringIO()):
        out["rc"].append(main(["check", "--json", *argv]))
out["inside"] = inside
out["fc"] = fc
out["readers_restored"] = all(m.get_device_memory_capacity is before[n] for n, m in readers.items())
out["parallel_restored"] = (dict(get_parallel()._overrides), dict(get_parallel()._stamp)) == par_before
out["default_device"] = str(torch.get_default_device())
print(json.dumps(out))
'''


def test_check_restores_sglangs_gpu_capacity_readers_and_parallel_state():
    r = run_json(SCOPED)
    assert r["rc"] == [0, 1], r
    h200, b200 = 143771.0, 183359.0  # preflight/memory.py KNOWN_GPUS (MiB)
    assert [set(x.values()) for x in r["inside"]] == [{h200}, {b200}], r["inside"]  # the patch was in force
    assert r["fc"] and all(isinstance(x, int) and x > 0 for x in r["fc"]), r["fc"]  # the meta-device probe ran
    assert r["readers_restored"] and r["parallel_restored"] and r["default_device"] == "cpu", r
