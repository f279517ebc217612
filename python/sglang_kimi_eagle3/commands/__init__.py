"""One module per `sglang-kimi-eagle3` subcommand; cli.py (the entry point) dispatches to them.

  check.py (+ check_report.py, its human output)   status.py   tune.py   plan.py   bench.py
`check`, `status` and `tune` parse launch_server flags or load SGLang's plugins, so they call into
integration/ (and import sglang); `plan` and `bench` stay pure (plan imports SGLang's adaptive-config
reader lazily, through integration/adaptive_check, unless --no-sglang-check).
"""


def quiet_sglang_arch_warning() -> None:
    """SGLang's import on a box without a GPU logs "Cannot detect CUDA architecture.": `check` is about the target GPU
    (--for-gpu or the embedded default's), and `status` and `tune` print their own line about this machine's GPU."""
    import logging

    logging.getLogger("sglang.kernels.jit.utils.arch").setLevel(logging.ERROR)
