"""benchmark/live/device.sh env: the exports every lease call evaluates. The device image sets PYTHONDONTWRITEBYTECODE
and the carried stack is installed without byte-code (pip --no-compile), so with the variable kept every server
process and every test subprocess compiled SGLang's imports from source again; the exports unset it, so the first
process to import a module leaves its byte-code for the others."""

import subprocess

from helpers import ROOT


def test_the_exports_use_the_carried_stack_and_let_python_write_byte_code(tmp_path):
    script = ('eval "$(bash benchmark/live/device.sh env)"; '
              'echo "site=$PYTHONPATH"; echo "nobytecode=${PYTHONDONTWRITEBYTECODE-unset}"')
    cp = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60, cwd=str(ROOT),
                        env={"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1", "DEVICE_SITE": str(tmp_path)})
    assert cp.returncode == 0, cp.stderr
    lines = dict(line.split("=", 1) for line in cp.stdout.split())
    assert lines["site"].split(":")[0] == str(tmp_path) and lines["nobytecode"] == "unset", cp.stdout
