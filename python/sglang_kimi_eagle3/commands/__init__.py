"""One module per `sglang-kimi-eagle3` subcommand; cli.py (the entry point) dispatches to them.

  check.py (+ check_report.py, its human output)   status.py   tune.py   plan.py   bench.py
`check`, `status` and `tune` parse launch_server flags or load SGLang's plugins, so they call into
integration/ (and import sglang); `plan` and `bench` stay pure (plan imports SGLang's adaptive-config
reader lazily, through integration/adaptive_check, unless --no-sglang-check).
"""
