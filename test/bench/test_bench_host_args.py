"""benchmark/kernels/bench_host.py's provider selection (the GPU measurement itself runs on a lent GPU only): a lease
with little time left measures the providers it names, and a name no op has is one line naming the flag, exit 2."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_keep_selects_each_ops_named_providers_in_its_order():
    sys.path.insert(0, str(ROOT))
    from benchmark.kernels import bench_host as bh

    provs = {"sglang": 1, "ours": 2, "ours_hook": 3, "pr02": 4}
    assert list(bh.keep(provs, ["pr02", "sglang"])) == ["sglang", "pr02"]
    assert bh.keep(provs, None) == provs and bh.keep(provs, ["ours_2launch"]) == {}  # an op without it: none of its
    assert set(bh.PROVIDERS) >= set(provs)


def test_an_unknown_provider_is_one_line_exit_2():
    r = subprocess.run([sys.executable, "-m", "benchmark.kernels.bench_host", "--providers", "sglang", "nope"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "--providers 'nope': not a provider; choose from sglang, ours" in r.stderr
