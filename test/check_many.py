"""Run `sglang-kimi-eagle3 check --json` on many launches in one interpreter (one SGLang import).

    python test/check_many.py < launches.json > results.json

stdin: a JSON list of argv lists (check's own arguments); stdout: a JSON list of {"rc", "out"} with the
check's parsed --json output (or {"rc", "stderr"} when it exits 2). Each call goes through the CLI's own
`main`, as `sglang-kimi-eagle3 check` does; the check keeps no state between calls (commands/check.check_launch).
"""

import contextlib
import io
import json
import sys


def main() -> None:
    from sglang_kimi_eagle3.cli import main as cli_main

    launches = json.load(sys.stdin)
    results = []
    for argv in launches:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = cli_main(["check", "--json", *argv])
        try:
            results.append({"rc": rc, "out": json.loads(out.getvalue())})
        except json.JSONDecodeError:
            results.append({"rc": rc, "stderr": err.getvalue()[-2000:], "stdout": out.getvalue()[-2000:]})
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
