"""The never-slower lease, rehearsed on a CPU box: the three calls of docs/gpu-ci.md's plan (device_adaptive_launch.sh
starting the servers detached with a suite beside, then two DA_STEP=measure calls, the first keeping the servers,
the second with the load step) run the real scripts end to end, with SGLang's server replaced by the bench's protocol
stub and the pair's build and the JIT prebuild by nothing (a `python3` shim first on PATH; every other python3 call
is the real interpreter). A script error (a wrong variable, a server list that breaks, an exit status that says
failure, a server left running, more than 8 files in a call's $OUT) shows here instead of in a device lease."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import ROOT, clean_env

pytestmark = pytest.mark.slow

SHIM = """#!/bin/bash
# rehearsal: SGLang's server -> the protocol stub (spec or not, on its port); the pair and the JIT prebuild -> nothing
if [ "$1" = "-m" ] && [ "$2" = "sglang.launch_server" ]; then
  port=30000; spec=--no-spec; prev=
  for a in "$@"; do [ "$prev" = "--port" ] && port=$a; [ "$a" = "--speculative-algorithm" ] && spec=; prev=$a; done
  exec "{py}" test/bench/stub_server.py --port "$port" $spec --pass-ms 2 --sglang-log
fi
if [ "$1" = "-m" ] && [ "$2" = "sglang_kimi_eagle3.tiny" ]; then mkdir -p "$3/target" "$3/draft"; exit 0; fi
exec "{py}" "$@"
"""
STEP_CLOCK = ("steps 0: 1863 steps read; medians per step of the last 1863: wall 77.19 ms, launch 4.27 (verify 2.43, "
              "draft extend 1.40; graph launches 0.14), waiting on the GPU 67.08: GPU-bound; by batch size, wall / GPU "
              "wait ms (steps): 5-8: 77.19 / 67.08 (1000)")
PLAIN_CLOCK = ("plain decoding: 900 steps read; medians per step of the last 900: wall 49.54 ms: GPU-bound; by batch size, "
               "wall / GPU wait ms (steps): 5-8: 49.54 / 45.72 (900)")
PORTS = {"plain": 30501, "fixed": 30502, "ours": 30504, "pinned": 30510, "upkern": 30511, "ours_q2": 30514,
         "nores": 30516}


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _stop(work: Path) -> None:
    """Every server the start left (their process groups: pid-q0.3-NAME)."""
    for pid_file in work.glob("pid-q0.3-*"):
        try:
            os.killpg(int(pid_file.read_text()), signal.SIGKILL)
        except (OSError, ValueError):
            pass


def _call(env: dict, out: Path, script: str, **extra) -> subprocess.CompletedProcess:
    out.mkdir()
    e = {**env, "OUT": str(out), **{k: str(v) for k, v in extra.items()}}
    return subprocess.run(["bash", script], capture_output=True, text=True, timeout=400, env=e, cwd=str(ROOT))


def test_the_never_slower_lease_runs_end_to_end_with_stub_servers(tmp_path):
    if any(_listening(p) for p in PORTS.values()):
        pytest.skip("a port of the rehearsal's servers is taken on this machine")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(SHIM.format(py=sys.executable))
    (bin_dir / "python3").chmod(0o755)
    site = tmp_path / "site"
    site.mkdir()
    (site / ".installed").write_text("rehearsal\n")  # device.sh install: "already installed"
    work = tmp_path / "da"
    jit = tmp_path / "jitparts"  # both JIT sets as a lease carries them (device.sh jit-recv): the servers start at once
    jit.mkdir()
    for name, member in (("jit-marlin", "sm90a/moe"), ("jit-spec", "sm90a/tree")):
        src = tmp_path / f"src-{name}"
        (src / member).mkdir(parents=True)
        subprocess.run(["tar", "czf", str(jit / f"{name}.tgz.part-00"), "-C", str(src), "sm90a"], check=True)
        subprocess.run(f"md5sum {name}.tgz.part-00 > {name}.md5", shell=True, cwd=jit, check=True)
    env = clean_env(PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", DEVICE_SITE=str(site), DA_WORK=str(work),
                    DA_START_OUT=str(tmp_path / "start"), JITPARTS=str(jit), DA_Q="0.3",
                    DA_PREBUILD="0", DA_MOE="triton")
    try:
        c1 = _call(env, tmp_path / "o1", "benchmark/serving/device_adaptive_launch.sh", DA_SKIP="sglang", DA_PINNED=1, DA_UPKERN=1,
                   DA_NORES=1, DA_Q2="0.9", DA_SUITE="test/planner/test_calibration.py", DA_SUITE_N=1, LAUNCH_WAIT_S=120,
                   DA_PIN=1)
        assert c1.returncode == 0, c1.stdout[-3000:] + c1.stderr[-2000:]
        start_log = (tmp_path / "start" / "device_adaptive-q0.3.log").read_text()
        assert "started plain" in start_log
        assert "the second drafter built" in start_log, start_log[-3000:]  # DA_Q2: built beside the first pair
        assert "both JIT sets carried: every server starts at once (DA_FIRST_S=0)" in start_log, start_log[-3000:]
        assert (work / "cache" / "jit-shared" / "sm90a" / "moe").is_dir()  # unpacked where the servers look
        assert (tmp_path / "o1" / "start.tgz").is_file()
        assert "7 of 7 servers answer /health" in c1.stdout, c1.stdout[-3000:]  # the launch call waited for them
        # ours' status file as a live server writes it (the stub writes none): the log must carry its rows
        (work / "status" / "ours").mkdir(parents=True, exist_ok=True)
        (work / "status" / "ours" / "port30504.json").write_text(json.dumps({"hooks": [
            {"name": "adaptive_control", "state": "applied", "counters": {"ours": {"steps 3->0": 7}},
             "detail": "measured step time / modelled: bs 8: steps 0 x4.05"},
            {"name": "step_clock", "state": "applied", "detail": STEP_CLOCK}]}))
        # the markers a live server writes beside it (run 28: the first of them, read as the status file, hid every row)
        (work / "status" / "ours" / "moe-port30504.json").write_text(json.dumps({"pid": 1, "ladder": False}))
        (work / "status" / "ours" / "warmup-port30504.json").write_text(json.dumps({"pid": 1, "detail": "applied"}))
        (work / "status" / "plain" / "clock").mkdir(parents=True, exist_ok=True)  # as plain_clock writes it
        (work / "status" / "plain" / "clock" / "plain-pid1.txt").write_text(PLAIN_CLOCK + "\n")
        # the step clock's ledgers (one copy, taken before the rounds: no copy closes them, and the log says so)
        before = [[time.time() - 100, {"decode": [1.0, 10, 40]}]]
        (work / "status" / "plain" / "clock" / "ledger-plain-pid1.json").write_text(json.dumps({"copies": before}))
        (work / "status" / "ours" / "ledger-port30504.json").write_text(json.dumps({"copies": before}))
        c2 = _call(env, tmp_path / "o2", "benchmark/serving/device_adaptive.sh", DA_STEP="measure", DA_KEEP=1,
                   STARTUP_S=120, DA_ANATOMY=1, DA_ANATOMY_SERVERS="ours plain", DA_ANATOMY_LEVELS=8, CONC="1,8",
                   ROUNDS=1, BUDGET_S=50, DA_FREEZE_GC="plain ours", DA_SERVER_GAP_S="0.5")
        assert c2.returncode == 0, c2.stdout[-3000:]
        assert json.loads((tmp_path / "o2" / "e2e-q0.3.json").read_text())["config"]["server_gap_s"] == 0.5
        assert "plain /freeze_gc: 200" in c2.stdout and "ours /freeze_gc: 200" in c2.stdout, c2.stdout[-3000:]
        assert "ours_q2 /freeze_gc" not in c2.stdout
        for n in ("fixed", "ours", "pinned", "upkern", "ours_q2", "nores"):
            assert f"greedy check {n} vs plain: 8/8 prompts identical" in c2.stdout, n
        assert f"ours step_clock: applied: {STEP_CLOCK}" in c2.stdout, c2.stdout[-3000:]
        for n in ("plain", "ours"):  # the round ledger over both ledgers, each found where its writer puts it
            assert f"round ledger:   {n:<10} round 1: no ledger copy after the round" in c2.stdout, c2.stdout[-3000:]
        assert "round ledger:   ours_q2" not in c2.stdout  # (no ledger written for it)
        # the servers' logs against the rounds (round_logs.py, SGLang's log lines as the stub prints them, in UTC):
        # parsed, and every request of every round found in its server's log
        assert "round logs: round_logs.py" not in c2.stdout, c2.stdout[-3000:]
        logs = [f"{n}={work / 'logs' / f'{n}-q0.3.log'}" for n in PORTS]
        rl = subprocess.run([sys.executable, "benchmark/serving/round_logs.py", str(tmp_path / "o2" / "e2e-q0.3.json"),
                             *logs, "--json", str(tmp_path / "rl.json")], capture_output=True, text=True, cwd=str(ROOT))
        assert rl.returncode == 0, rl.stdout[-2000:] + rl.stderr[-2000:]
        rounds = json.loads((tmp_path / "rl.json").read_text())["rounds"]
        assert {r["server"] for r in rounds} == set(PORTS), rounds
        assert all(r["prefill_seqs"] >= r["requests"] > 0 and r["decode_lines"] for r in rounds), rounds
        assert "ours status: adaptive_control applied {'steps 3->0': 7}" in c2.stdout, c2.stdout[-3000:]
        assert ("ours step_clock over plain's: steps 0 / plain decoding: bs 5-8: 1.558 (77.19 / 49.54 ms)"
                in c2.stdout), c2.stdout[-3000:]
        e2e = json.loads((tmp_path / "o2" / "e2e-q0.3.json").read_text())
        assert set(PORTS) <= set(e2e["servers"]) and e2e["rows"], list(e2e["servers"])
        assert all(_listening(p) for p in PORTS.values())  # DA_KEEP=1: still serving for the next call
        # DA_PIN=1 (the launch call): every server started on the servers' CPUs (the start script's exec chain keeps
        # the pid: setsid bash -> cpu_sets.py --run -> env -> the server) and, re-pinned by the measure call (a stub is
        # no scheduler), on the servers' other CPUs now; the client's set is in the spec; the log says each
        spec = json.loads((work / "spec-q0.3.json").read_text())
        assert spec["client_cpus"] and "pinned (DA_PIN=1): plain " in c2.stdout, c2.stdout[-3000:]
        for srv in spec["servers"]:
            assert f"{srv['name']} pinned: 1 process pinned, 0 schedulers on {spec['scheduler_cpus']}" in c2.stdout
            pid = (work / f"pid-q0.3-{srv['name']}").read_text().strip()
            allowed = [ln for ln in Path(f"/proc/{pid}/status").read_text().splitlines()
                       if ln.startswith("Cpus_allowed_list:")][0].split()[1]
            assert allowed == spec["rest_cpus"] and srv["cpus"], (srv, allowed)
        c3 = _call(env, tmp_path / "o3", "benchmark/serving/device_adaptive.sh", DA_STEP="measure", STARTUP_S=60,
                   DA_LOADSTEP=1, DA_LOADSTEP_SCHEDULE="1:3,128:4,1:3", DA_LOADSTEP_ROUNDS=1, CONC="32",
                   ROUNDS=1, BUDGET_S=50, DA_TEMPS="0.7", DA_SERVER_GAP_S="0.5")
        assert c3.returncode == 0, c3.stdout[-3000:]
        rows = json.loads((tmp_path / "o3" / "e2e-q0.3.json").read_text())["rows"]
        assert rows and {r["temperature"] for r in rows} == {0.7}, rows  # DA_TEMPS: the rounds' temperature
        assert "load_step.py exit 0" in c3.stdout and (tmp_path / "o3" / "load-step-q0.3.json").is_file()
        for o in ("o1", "o2", "o3"):  # a device call returns at most 8 files
            assert len(list((tmp_path / o).iterdir())) <= 8, o
        starts = {n: (work / f"start-{n}.sh").read_text() for n in PORTS}
        assert all("cpu_sets.py --run " in t for t in starts.values()), starts
        assert "PINNED_LENS=1" in starts["pinned"] and "plain_clock" in starts["pinned"]
        assert "STEP_CLOCK_DIR=" in starts["plain"] and "PINNED_LENS" not in starts["ours"]
        assert "SGLANG_KIMI_EAGLE3_KERNELS=upstream" in starts["upkern"] and "KERNELS=" not in starts["ours"]
        assert "SGLANG_KIMI_EAGLE3_ADAPTIVE_RESERVE=off" in starts["nores"] and "_RESERVE=" not in starts["ours"]
        # DA_Q2: the second drafter beside the first pair's target
        assert f"{work}/q0.9/draft" in starts["ours_q2"] and f"{work}/q0.3/target" in starts["ours_q2"]
        assert not any(_listening(p) for p in PORTS.values())  # the last call stopped them
    finally:
        _stop(work)


STAGE_SHIM = """#!/bin/bash
# the staged start: SGLang's server -> the protocol stub; the pair -> a target config with its vocabulary; the JIT
# prebuilds -> done at once (the speculative one with SPEC_RC), the Marlin one after 3 s (a build behind the servers)
if [ "$1" = "-m" ] && [ "$2" = "sglang.launch_server" ]; then
  port=30000; spec=--no-spec; prev=
  for a in "$@"; do [ "$prev" = "--port" ] && port=$a; [ "$a" = "--speculative-algorithm" ] && spec=; prev=$a; done
  exec "{py}" test/bench/stub_server.py --port "$port" $spec --pass-ms 2
fi
if [ "$1" = "-m" ] && [ "$2" = "sglang_kimi_eagle3.tiny" ]; then
  mkdir -p "$3/target" "$3/draft"; echo '{{"vocab_size": 20480}}' > "$3/target/config.json"; exit 0
fi
if [ "$1" = "benchmark/live/prebuild_jit.py" ]; then
  case " $* " in *" --spec "*) exit $SPEC_RC;; *) sleep 3; exit 0;; esac
fi
exec "{py}" "$@"
"""


@pytest.mark.parametrize("spec_rc", [0, 1])
def test_servers_start_together_once_nothing_is_left_to_build(tmp_path, spec_rc):
    """No JIT pieces carried (run 44, 2026-12-07): the speculative prebuild ended long before the Marlin one, yet the
    start kept its staged wait (ours only after plain answered) and ours missed the measure call. Once the speculative
    prebuild has ended well every server starts at once; where it failed the first starts alone, as before."""
    if any(_listening(PORTS[n]) for n in ("plain", "ours")):
        pytest.skip("a port of the rehearsal's servers is taken on this machine")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(STAGE_SHIM.format(py=sys.executable))
    (bin_dir / "python3").chmod(0o755)
    site, work = tmp_path / "site", tmp_path / "da"
    site.mkdir()
    (site / ".installed").write_text("rehearsal\n")
    env = clean_env(PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", DEVICE_SITE=str(site), DA_WORK=str(work),
                    DA_START_OUT=str(tmp_path / "start"), JITPARTS=str(tmp_path / "none"), DA_Q="0.3", DA_PIN="0",
                    SPEC_RC=str(spec_rc))
    try:
        c = _call(env, tmp_path / "o1", "benchmark/serving/device_adaptive_launch.sh", DA_SKIP="sglang fixed",
                  LAUNCH_WAIT_S=60, LAUNCH_HEALTHY_S=60)
        assert c.returncode == 0, c.stdout[-3000:] + c.stderr[-2000:]
        log = (tmp_path / "start" / "device_adaptive-q0.3.log").read_text()
        assert "JIT prebuild exit 0" in log, log[-3000:]
        if spec_rc == 0:
            assert "the speculative JIT prebuild ended (exit 0): every server starts at once" in log, log[-3000:]
            assert "plain: 000 after the staged wait" in log, log[-3000:]  # no wait: ours started before plain answered
        else:
            assert "the speculative JIT prebuild exit 1: the first server starts alone" in log, log[-3000:]
            assert "plain: 200 after the staged wait" in log, log[-3000:]
        assert "2 of 2 servers answer /health" in c.stdout, c.stdout[-3000:]
    finally:
        _stop(work)
        end = time.time() + 15  # the next case binds the same ports
        while any(_listening(PORTS[n]) for n in ("plain", "ours")) and time.time() < end:
            time.sleep(0.2)
