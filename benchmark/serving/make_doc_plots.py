"""Re-make the example plots in docs/img (needs the 'plot' extra). Two kinds, labelled as what they are:

1. bench_stub_*.png: `sglang-kimi-eagle3 bench` run against two protocol stubs on 127.0.0.1
   (ProtocolStub of test/bench/stub_server.py), one "speculative" with SYNTHETIC per-position acceptance
   0.8 / 0.6 / 0.45 and one plain, with SYNTHETIC timing. It shows what the tool reports; it measures
   no model and no GPU.
2. planner_*.png: `sglang-kimi-eagle3 plan` PREDICTIONS for the two bundled hardware profiles with the
   default published acceptance preset.

    python benchmark/serving/make_doc_plots.py
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
REL = HERE.relative_to(ROOT)
sys.path.insert(0, str(ROOT / "test" / "bench"))  # stub_server.py: the protocol stub

from stub_server import ProtocolStub, StubConfig  # noqa: E402

from sglang_kimi_eagle3.cli import main as cli  # noqa: E402

IMG = Path("docs") / "img"  # relative to the repository root (main() changes there): paths in outputs stay portable


def main() -> None:
    import os

    os.chdir(ROOT)
    IMG.mkdir(parents=True, exist_ok=True)
    out = REL / "example"  # the run behind the plots: bench JSON, adaptive configs
    out.mkdir(parents=True, exist_ok=True)
    spec, plain = StubConfig(alphas=[0.8, 0.6, 0.45], pass_ms=2.0), StubConfig(alphas=None, pass_ms=2.0)
    bench_json, plots = out / "bench_protocol_stub.json", Path(tempfile.mkdtemp())
    with ProtocolStub(spec) as s_url, ProtocolStub(plain) as p_url:
        cli(["bench", "--url", s_url, "--baseline-url", p_url, "--max-new-tokens", "64", "--json", str(bench_json),
             "--plots", str(plots), "--no-progress",
             "--caption", "PROTOCOL STUB: synthetic acceptance (0.8/0.6/0.45) and synthetic timing, no model, no GPU"])
    for name in ("tau_speedup", "acceptance"):
        (IMG / f"bench_stub_{name}.png").write_bytes((plots / f"{name}.png").read_bytes())
    doc = json.loads(bench_json.read_text())
    doc.pop("requests")  # keep the summaries; the per-request rows of a synthetic run are noise in git
    bench_json.write_text(json.dumps(doc, indent=1) + "\n")
    for profile, tag in (("kimi-k2.5_8xh200_tp8", "h200"), ("kimi-k2.5_8xrtxpro6000_tp8", "rtxpro6000")):
        cli(["plan", "--profile", profile, "-o", str(out / f"adaptive_{tag}.json"), "--plot", str(IMG / f"planner_{tag}.png")])


if __name__ == "__main__":
    main()
