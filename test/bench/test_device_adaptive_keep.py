"""The lease's measure steps (device_adaptive.sh, device_e2e.sh) never stop a server that is still starting when the
call measured nothing.

On 2026-12-05 (H100, a fresh box) the spec servers were still starting when a measure call's STARTUP_S ran out; that
call (DA_KEEP unset) stopped them, and the next call waited on nothing. Here the real script runs its measure step over a spec of two servers: one whose process group
lives but never answers /health (a server still starting), one that is gone."""

import json
import os
import signal
import socket
import subprocess
import time
import sys
from pathlib import Path

import pytest
from helpers import ROOT, clean_env

pytestmark = pytest.mark.slow  # bash and Python processes (the prep step's prebuild imports SGLang)

SHIM = """#!/bin/bash
# no GPU here: nvidia-smi answers nothing; every python3 call is the real interpreter
exec "{py}" "$@"
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _measure(tmp_path: Path, work: Path, **extra) -> subprocess.CompletedProcess:
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "python3").write_text(SHIM.format(py=sys.executable))
    (bin_dir / "python3").chmod(0o755)
    (bin_dir / "nvidia-smi").write_text("#!/bin/bash\nexit 0\n")
    (bin_dir / "nvidia-smi").chmod(0o755)
    env = clean_env(PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", OUT=str(out), DA_WORK=str(work), DA_Q="0.3",
                    **{"DA_STEP": "measure", "STARTUP_S": "1", "BUDGET_S": "3", "CONC": "8", "ROUNDS": "1",
                       **{k: str(v) for k, v in extra.items()}})
    return subprocess.run(["bash", "benchmark/serving/device_adaptive.sh"], capture_output=True, text=True, timeout=120,
                          env=env, cwd=str(ROOT))


@pytest.fixture
def work(tmp_path):
    """A work folder as DA_STEP=start leaves it: the spec, and 'ours' a live process group that never listens."""
    w = tmp_path / "da"
    (w / "logs").mkdir(parents=True)
    (w / "status").mkdir()
    servers = [{"name": n, "url": f"http://127.0.0.1:{_free_port()}", "log": f"{w}/logs/{n}.log"} for n in ("plain", "ours")]
    (w / "spec-q0.3.json").write_text(json.dumps({"servers": servers}))
    starting = subprocess.Popen(["sleep", "300"], start_new_session=True)
    (w / "pid-q0.3-ours").write_text(f"{starting.pid}\n")
    yield w, starting
    try:
        os.killpg(starting.pid, signal.SIGKILL)
    except OSError:
        pass
    starting.wait()


def test_a_measure_call_that_measured_nothing_keeps_a_starting_server(tmp_path, work):
    w, starting = work
    cp = _measure(tmp_path, w)
    assert "ours NOT healthy after 1 s" in cp.stdout, cp.stdout[-3000:]
    assert "kept every server running: this call measured nothing and ours still starting" in cp.stdout, cp.stdout[-3000:]
    assert starting.poll() is None  # still alive: the next measure call finds it


def test_with_no_server_starting_the_measure_call_stops_them_as_before(tmp_path, work):
    w, starting = work
    os.killpg(starting.pid, signal.SIGKILL)
    starting.wait()
    cp = _measure(tmp_path, w)
    assert "kept every server running" not in cp.stdout, cp.stdout[-3000:]
    assert "done; $OUT:" in cp.stdout


def test_da_keep_keeps_them_without_the_line(tmp_path, work):
    w, starting = work
    cp = _measure(tmp_path, w, DA_KEEP=1)
    assert "kept every server running" not in cp.stdout, cp.stdout[-3000:]
    assert starting.poll() is None


PREP_SHIM = """#!/bin/bash
# the pair's build -> its target config.json only, as the builder writes it for --preset deploy --int4
if [ "$1" = "-m" ] && [ "$2" = "sglang_kimi_eagle3.tiny" ]; then
  mkdir -p "$3/target" "$3/draft"
  exec "{py}" -c "import json, sys; from sglang_kimi_eagle3.tiny.spec import preset, wrapper_config; \\
json.dump(wrapper_config(preset('deploy'), int4=True), open(sys.argv[1], 'w'))" "$3/target/config.json"
fi
exec "{py}" "$@"
"""


def test_the_start_prebuilds_sglangs_speculative_modules_for_the_pairs_vocabulary(tmp_path):
    """Step 1b: after the pair is built, prebuild_jit.py --spec with the target's vocabulary (text_config, as the
    Kimi-K2.5 wrapper stores it) into the JIT and FlashInfer caches every server is started with."""
    bin_dir, w, out = tmp_path / "bin", tmp_path / "da", tmp_path / "out"
    bin_dir.mkdir()
    out.mkdir()
    (bin_dir / "python3").write_text(PREP_SHIM.format(py=sys.executable))
    (bin_dir / "python3").chmod(0o755)
    (bin_dir / "nvidia-smi").write_text("#!/bin/bash\nexit 0\n")
    (bin_dir / "nvidia-smi").chmod(0o755)
    env = clean_env(PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", OUT=str(out), DA_WORK=str(w), DA_Q="0.3",
                    DA_STEP="prep", DA_MOE="triton", JITPARTS=str(tmp_path / "none"))
    cp = subprocess.run(["bash", "benchmark/serving/device_adaptive.sh"], capture_output=True, text=True, timeout=300,
                        env=env, cwd=str(ROOT))
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-2000:]
    assert "prebuilding SGLang's speculative JIT modules (vocab 20480)" in cp.stdout, cp.stdout[-3000:]
    log = w / "prebuild-spec.log"
    for _ in range(120):  # detached (setsid): it outlives the prep call, as on the GPU
        if "nothing to build" in log.read_text():
            break
        time.sleep(0.5)
    assert "prebuild_jit --spec: no CUDA device here: nothing to build" in log.read_text()
    spec_start = (ROOT / "benchmark/serving/device_adaptive.sh").read_text()
    assert '"FLASHINFER_WORKSPACE_BASE": f"{w}/cache/flashinfer-shared"' in spec_start  # the folder step 1b fills


def test_device_e2e_keeps_a_starting_server_the_same_way(tmp_path, work):
    """device_e2e.sh (the auto / upstream lease) shares the rule: its measure step, servers from spec.json and pid-NAME."""
    w, starting = work
    spec = json.loads((w / "spec-q0.3.json").read_text())
    (w / "spec.json").write_text(json.dumps(spec))
    (w / "pid-ours").write_text((w / "pid-q0.3-ours").read_text())
    bin_dir, out = tmp_path / "bin", tmp_path / "out"
    for d in (bin_dir, out):
        d.mkdir()
    (bin_dir / "python3").write_text(SHIM.format(py=sys.executable))
    (bin_dir / "nvidia-smi").write_text("#!/bin/bash\nexit 0\n")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    env = clean_env(PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", OUT=str(out), E2E_WORK=str(w), E2E_STEP="measure",
                    STARTUP_S="1", READY_S="0", BUDGET_S="3", CONC="1", TEMPS="0", ROUNDS="1")
    cp = subprocess.run(["bash", "benchmark/serving/device_e2e.sh"], capture_output=True, text=True, timeout=180, env=env,
                        cwd=str(ROOT))
    assert "kept every server running: this call measured nothing and ours still starting" in cp.stdout, cp.stdout[-3000:]
    assert starting.poll() is None


def test_a_server_still_starting_is_waited_for_past_startup_s_while_the_budget_allows(tmp_path):
    """Run 44 (2026-12-07): ours answered just after the measure call's 200-s start-up wait, the rounds ran over plain
    alone (e2e.py exit 2) and the call measured nothing. A server whose process group lives is waited for past STARTUP_S
    while DA_MEASURE_MIN_S of the budget would remain, and then it is in the rounds."""
    w = tmp_path / "da"
    (w / "logs").mkdir(parents=True)
    (w / "status").mkdir()
    ports = {n: _free_port() for n in ("plain", "ours")}
    servers = [{"name": n, "url": f"http://127.0.0.1:{p}", "log": f"{w}/logs/{n}.log"} for n, p in ports.items()]
    (w / "spec-q0.3.json").write_text(json.dumps({"servers": servers}))
    stub = [sys.executable, "test/bench/stub_server.py", "--pass-ms", "1"]
    procs = [subprocess.Popen([*stub, "--no-spec", "--port", str(ports["plain"])], cwd=str(ROOT),
                              stdout=subprocess.DEVNULL, start_new_session=True),
             subprocess.Popen(["bash", "-c", f"sleep 4; exec {' '.join(stub)} --port {ports['ours']}"], cwd=str(ROOT),
                              stdout=subprocess.DEVNULL, start_new_session=True)]  # answers only after STARTUP_S
    for n, p in zip(ports, procs):
        (w / f"pid-q0.3-{n}").write_text(f"{p.pid}\n")
    try:
        cp = _measure(tmp_path, w, BUDGET_S=40, DA_MEASURE_MIN_S=25, CONC=1, MIN_ROUND_S=2)
        assert "ours NOT healthy after 1 s" in cp.stdout, cp.stdout[-3000:]
        assert "ours still starting: waited for until 15 s of this call" in cp.stdout, cp.stdout[-3000:]
        assert f"--server ours=http://127.0.0.1:{ports['ours']}" in cp.stdout, cp.stdout[-3000:]  # in the rounds
        assert "e2e.py exit 0" in cp.stdout, cp.stdout[-3000:]
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
            p.wait()
