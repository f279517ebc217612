"""python -m sglang_kimi_eagle3.tiny OUT [--seed N]: build the tiny target/draft pair under OUT."""

from __future__ import annotations

import argparse
import sys
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sglang_kimi_eagle3.tiny", description=__doc__)
    ap.add_argument("out", help="folder to write target/ and draft/ into")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    from . import build

    t0 = time.monotonic()
    target, draft = build(a.out, seed=a.seed)
    print(f"tiny target: {target}\ntiny draft:  {draft}\n({time.monotonic() - t0:.1f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
