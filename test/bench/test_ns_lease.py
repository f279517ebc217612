"""benchmark/live/ns.sh, the never-slower lease's long calls in a few words: each call's budget comes from B0 (the
device budget call 0's reply showed) less the seconds since call 0, and bad input stops it with one line, exit 2."""

import subprocess
import time

from helpers import ROOT, clean_env


def _ns(tmp_path, *args, ago=0, **env_extra):
    t0 = tmp_path / "lease_t0"
    t0.write_text(f"{int(time.time()) - ago}\n")
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    env = clean_env(OUT=str(out), LEASE_T0=str(t0), NS_DRY="1", **env_extra)
    return subprocess.run(["bash", "benchmark/live/ns.sh", *args], capture_output=True, text=True, env=env,
                          cwd=str(ROOT), timeout=30)


def test_a_measure_call_takes_the_lease_budget_left_less_the_hook_tests_and_both_levels_where_it_holds_them(tmp_path):
    r = _ns(tmp_path, "measure", "1176", ago=300)  # run 40: B0 1176, the measure call about 300 s after call 0
    assert r.returncode == 0, r.stderr
    budget = int(r.stdout.split("budget ")[1].split(" s")[0])
    assert 1176 - 300 - 370 - 2 <= budget <= 1176 - 300 - 370 and "conc 8,32" in r.stdout, r.stdout
    assert "would run: bash benchmark/serving/device_adaptive.sh" in r.stdout
    r = _ns(tmp_path, "measure", "1176", ago=500)  # later: one level
    assert "conc 8, second" in r.stdout, r.stdout
    r = _ns(tmp_path, "measure", "5000", ago=0)
    assert "budget 560 s" in r.stdout  # one device call's limit


def test_the_hook_tests_stop_before_the_budget_runs_out(tmp_path):
    r = _ns(tmp_path, "hooks", "1176", ago=870)
    assert r.returncode == 0, r.stderr
    limit = int(r.stdout.split("at most ")[1].split(" s")[0])
    assert 1176 - 870 - 25 - 2 <= limit <= 1176 - 870 - 25
    ran = (tmp_path / "out" / "hooks.txt").read_text()
    assert "would run: timeout -s INT" in ran and ran.rstrip().endswith("--dist loadfile test/integration/hooks"), ran
    files = "test/integration/hooks/test_step_clock.py test/integration/hooks/test_deferred_extend.py"
    _ns(tmp_path, "hooks", "1176", ago=870, HOOK_FILES=files)  # a short lease: some of them
    assert (tmp_path / "out" / "hooks.txt").read_text().rstrip().endswith("--dist loadfile " + files)


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    for args, says in ((["measure"], "B0"), (["hooks", "12a"], "not a number"), (["lanch"], "unknown step 'lanch'")):
        r = _ns(tmp_path, *args)
        assert r.returncode == 2 and says in r.stderr and len(r.stderr.strip().splitlines()) == 1, (args, r.stderr)


def test_the_second_drafter_is_on_by_default_and_an_empty_da_q2_leaves_it_out(tmp_path):
    """`DA_Q2= DA_KEEPEXT=1`: plain / ours / `keepext` (ours with SGLang's per-step draft extend), to A/B the deferral
    beside ours where the q 0.9 server would stand."""
    assert "second drafter 0.9\n" in _ns(tmp_path, "measure", "1176").stdout
    r = _ns(tmp_path, "measure", "1176", DA_Q2="", DA_KEEPEXT="1")
    assert r.returncode == 0 and "second drafter none, keepext" in r.stdout, (r.stdout, r.stderr)


def test_the_launch_call_runs_the_named_hook_tests_beside_the_build_and_none_unless_named(tmp_path):
    """`LAUNCH_HOOK_FILES`: a short lease (no hooks call) runs some hook tests beside the launch's JIT prebuild, bounded
    by `LAUNCH_HOOK_S` so that they end before the servers size their GPU memory."""
    r = _ns(tmp_path, "launch")
    assert r.returncode == 0, r.stderr
    assert "would run: bash benchmark/live/device.sh install" in r.stdout
    assert "would run: bash benchmark/serving/device_adaptive_launch.sh" in r.stdout and "pytest" not in r.stdout
    files = "test/integration/hooks/test_step_clock.py test/integration/hooks/test_runtime_status_writer.py"
    r = _ns(tmp_path, "launch", LAUNCH_HOOK_FILES=files, LAUNCH_HOOK_S="150")
    assert r.returncode == 0, r.stderr
    beside = [ln for ln in r.stdout.splitlines() if ln.startswith("would run beside the launch: ")]
    assert beside == ["would run beside the launch: env OMP_NUM_THREADS=2 MKL_NUM_THREADS=2 timeout -s INT 150 "
                      "python3 -m pytest -q -rf -p no:cacheprovider -n 4 --dist loadfile " + files], r.stdout
    assert r.stdout.index("device.sh install") < r.stdout.index(beside[0]) < r.stdout.index("device_adaptive_launch.sh")
