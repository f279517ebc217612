"""Re-make the README's `sglang-kimi-eagle3 check` transcript from what the CLI prints (COLUMNS=80, no GPU
visible, none of this plugin's switches set). test/preflight/test_check_output.py checks that they agree.

    python benchmark/make_readme_check.py
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BLOCK = re.compile(r"```\n\$ \.venv/bin/sglang-kimi-eagle3 check +# exit code \d \(COLUMNS=\d+\)\n.*?```", re.S)


def transcript() -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SGLANG_KIMI_EAGLE3", "SGLANG_ALLOW"))}
    env.update(COLUMNS="80", CUDA_VISIBLE_DEVICES="")
    cp = subprocess.run([sys.executable, "-m", "sglang_kimi_eagle3.cli", "check"], capture_output=True, text=True,
                        env=env, cwd=str(ROOT), timeout=600)
    if cp.returncode not in (0, 1):
        sys.exit(f"check failed (exit {cp.returncode}):\n{cp.stderr[-3000:]}")
    return f"```\n$ .venv/bin/sglang-kimi-eagle3 check        # exit code {cp.returncode} (COLUMNS=80)\n{cp.stdout}```"


def main() -> None:
    text = README.read_text()
    if not BLOCK.search(text):
        sys.exit(f"{README}: no `check` transcript block to replace")
    new = BLOCK.sub(lambda _: transcript(), text, count=1)
    tmp = README.with_suffix(".md.tmp")
    tmp.write_text(new)
    os.replace(tmp, README)  # atomic
    print(f"wrote {README.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
