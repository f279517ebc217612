"""Re-make the command transcripts in the README and docs from what the CLI prints (no GPU visible, none of
this plugin's switches set, the width each block states):

- README.md: `sglang-kimi-eagle3 check` on the embedded default (COLUMNS=80);
  test/commands/test_check_report.py checks that it is what the CLI prints;
- docs/planner.md: `sglang-kimi-eagle3 plan` on the default profile (COLUMNS=100), run in a scratch folder.

    python benchmark/make_doc_transcripts.py
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# (file, the block to replace, command, COLUMNS)
TRANSCRIPTS = [
    (ROOT / "README.md", re.compile(r"```\n\$ \.venv/bin/sglang-kimi-eagle3 check +# exit code \d \(COLUMNS=\d+\)\n.*?```", re.S),
     ".venv/bin/sglang-kimi-eagle3 check", ["check"], 80),
    (ROOT / "docs" / "planner.md", re.compile(r"(?<=## Output\n\n)(.*?\n\n)```\n.*?```", re.S),
     "sglang-kimi-eagle3 plan", ["plan"], 100),
]


def transcript(shown: str, argv: list[str], columns: int) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SGLANG_KIMI_EAGLE3", "SGLANG_ALLOW"))}
    env.update(COLUMNS=str(columns), CUDA_VISIBLE_DEVICES="",
               PYTHONPATH=os.pathsep.join([str(ROOT / "python"), *filter(None, [os.environ.get("PYTHONPATH")])]))
    with tempfile.TemporaryDirectory() as scratch:
        cwd = str(ROOT) if argv[0] == "check" else scratch  # plan writes its config where it runs
        cp = subprocess.run([sys.executable, "-m", "sglang_kimi_eagle3.cli", *argv], capture_output=True, text=True,
                            env=env, cwd=cwd, timeout=600)
    if cp.returncode not in (0, 1):
        sys.exit(f"{shown} failed (exit {cp.returncode}):\n{cp.stderr[-3000:]}")
    pad = " " * max(1, 44 - len(shown) - 2)
    return f"```\n$ {shown}{pad}# exit code {cp.returncode} (COLUMNS={columns})\n{cp.stdout}```"


def main() -> None:
    for path, block, shown, argv, columns in TRANSCRIPTS:
        text = path.read_text()
        m = block.search(text)
        if not m:
            sys.exit(f"{path}: no `{shown}` transcript block to replace")
        keep = m.group(1) if block.groups else ""
        new = text[:m.start()] + keep + transcript(shown, argv, columns) + text[m.end():]
        tmp = path.with_suffix(".md.tmp")
        tmp.write_text(new)
        os.replace(tmp, path)  # atomic
        print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
