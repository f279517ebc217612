"""benchmark/live/device.sh jit-pack / jit-recv / jit-unpack: SGLang's Marlin MoE JIT builds carried from one lease to
the next (the nvcc build took 324-346 s of each never-slower lease). Run here with bash on a made-up cache in SGLang's
layout (DIR/<target>/<module_name>/build-<key>/deps-<key>/<module>.so), the module named as the installed SGLang names
it (run 25 on the H200 packed nothing: the pack looked for the name without SGLang's prefix); nothing of SGLang runs."""

import hashlib
import os
import subprocess
from pathlib import Path

from sglang.kernels.jit.utils.compile.spec import _MODULE_NAME_PREFIX

MARLIN = _MODULE_NAME_PREFIX + "moe_wna16_marlin_bf16_t_false_false_true_true_true"  # as SGLang 0.5.23 names the build
DEVICE_SH = Path(__file__).resolve().parents[2] / "benchmark" / "live" / "device.sh"


def _sh(*args, cwd, **env):
    out = subprocess.run(["bash", str(DEVICE_SH), *args], cwd=cwd, capture_output=True, text=True, timeout=60,
                         env={**os.environ, **env})
    assert out.returncode == 0, out.stderr
    return out.stdout


def _tree(root: Path) -> dict:
    return {str(p.relative_to(root)): hashlib.md5(p.read_bytes()).hexdigest() for p in root.rglob("*") if p.is_file()}


def test_the_marlin_builds_travel_in_pieces_and_unpack_identical(tmp_path):
    cache, out, repo, parts, new = (tmp_path / d for d in ("cache", "out", "repo", "parts", "new"))
    leaf = cache / "sm90a" / MARLIN / "build-ab" / "deps-cd"
    leaf.mkdir(parents=True)
    (leaf / "moe_wna16_marlin.so").write_bytes(os.urandom(2_500_000))  # random: gzip cannot shrink it below 3 pieces
    (leaf / "sgl_deps.json").write_text("[]")
    (cache / "sm90a" / MARLIN / ".staging-1").mkdir()  # a build in progress: left out
    (cache / "sm90a" / "other_module").mkdir()
    (cache / "sm90a" / "other_module" / "x.so").write_bytes(b"x")  # not Marlin: left out
    out.mkdir()
    said = _sh("jit-pack", str(cache), cwd=tmp_path, OUT=str(out), JIT_PART_MB="1")
    assert "1 builds in 3 pieces" in said
    assert sorted(p.name for p in out.iterdir()) == ["jit-marlin.md5"] + [f"jit-marlin.tgz.part-0{i}" for i in range(3)]
    (repo / ".jit").mkdir(parents=True)
    for p in out.iterdir():  # as the carry brings them: .jit/ in the device's copy of the repository
        (repo / ".jit" / p.name).write_bytes(p.read_bytes())
    assert "jit pieces here: 3 of 3" in _sh("jit-recv", cwd=repo, JITPARTS=str(parts))
    assert "into" in _sh("jit-unpack", str(new), cwd=repo, JITPARTS=str(parts))
    assert _tree(new) == {k: v for k, v in _tree(cache).items() if "moe_wna16_marlin" in k}


def test_an_incomplete_set_or_too_many_pieces_changes_nothing(tmp_path):
    cache, out, parts, new = (tmp_path / d for d in ("cache", "out", "parts", "new"))
    leaf = cache / "sm90a" / (MARLIN + "_x") / "build-a" / "deps-b"
    leaf.mkdir(parents=True)
    (leaf / "m.so").write_bytes(os.urandom(3_500_000))
    out.mkdir()
    said = _sh("jit-pack", str(cache), cwd=tmp_path, OUT=str(out), JIT_PART_MB="1", JIT_MAX_PARTS="2")
    assert "not packed" in said and list(out.iterdir()) == []  # 4 pieces of 1 MiB > 2: a call returns 8 files at most
    _sh("jit-pack", str(cache), cwd=tmp_path, OUT=str(out), JIT_PART_MB="1")
    parts.mkdir()
    for p in out.iterdir():
        if not p.name.endswith("part-03"):  # one piece did not travel
            (parts / p.name).write_bytes(p.read_bytes())
    assert "no complete set" in _sh("jit-unpack", str(new), cwd=tmp_path, JITPARTS=str(parts))
    assert not new.exists()


def test_a_build_cut_by_the_prebuilds_timeout_stays_behind_and_a_later_lease_packs_it(tmp_path):
    """Run 44 (2026-12-07): the prebuild's timeout cut one Marlin variant (its folder: SGLang's .lock, no .so) and the
    pack took the empty folder beside the finished one. Only finished builds travel; where a lease finishes a build its
    carried pieces lack, jit-new names it (the launch packs again), and where they hold all, nothing."""
    cache, out, repo, parts = (tmp_path / d for d in ("cache", "out", "repo", "parts"))
    done = cache / "sm90a" / (MARLIN[:-4] + "false_true") / "build-a" / "deps-b"
    done.mkdir(parents=True)
    (done / "m.so").write_bytes(b"so")
    cut = cache / "sm90a" / MARLIN / "build-c"
    cut.mkdir(parents=True)
    (cut / ".lock").write_text("")
    out.mkdir()
    said = _sh("jit-pack", str(cache), cwd=tmp_path, OUT=str(out), JIT_PART_MB="1")
    assert f"not finished (no .so), left out: sm90a/{MARLIN}" in said and "1 builds in 1 pieces" in said, said
    (repo / ".jit").mkdir(parents=True)
    for p in out.iterdir():
        (repo / ".jit" / p.name).write_bytes(p.read_bytes())
    _sh("jit-recv", cwd=repo, JITPARTS=str(parts))
    _sh("jit-unpack", str(tmp_path / "new"), cwd=repo, JITPARTS=str(parts))
    assert sorted(p.name for p in (tmp_path / "new" / "sm90a").iterdir()) == [MARLIN[:-4] + "false_true"]
    assert _sh("jit-new", str(cache), cwd=repo, JITPARTS=str(parts)) == ""  # the carried pieces hold the finished one
    (cut / "deps-d").mkdir()
    (cut / "deps-d" / "m.so").write_bytes(b"so")  # the next lease finishes the other
    assert _sh("jit-new", str(cache), cwd=repo, JITPARTS=str(parts)).split() == [f"sm90a/{MARLIN}"]
    assert _sh("jit-new", str(cache), cwd=repo, JITPARTS=str(tmp_path / "none")).split() == sorted(
        [f"sm90a/{MARLIN}", f"sm90a/{MARLIN[:-4]}false_true"])  # nothing carried: every finished build is new


def test_the_speculative_modules_and_flashinfers_workspace_travel_apart_from_marlin(tmp_path):
    """jit-pack-spec: every SGLang module but Marlin's (the tree and tree-sampling builds the kernel warm-up makes) and
    FlashInfer's JIT workspace (its sampling module) as the jit-spec pieces; jit-recv brings both sets; jit-unpack-spec
    puts the modules back into the JIT cache and the workspace into its own folder, byte for byte (run 32: building them
    took 150 s of the launch before any speculative server could start)."""
    cache, fi, out, repo, parts, new, new_fi = (tmp_path / d for d in ("cache", "fi", "out", "repo", "parts", "new", "nfi"))
    tree = cache / "sm90a" / (_MODULE_NAME_PREFIX + "tree_greedy") / "build-a" / "deps-b"
    tree.mkdir(parents=True)
    (tree / "tree.so").write_bytes(os.urandom(700_000))
    (cache / "sm90a" / MARLIN / "build-c").mkdir(parents=True)
    (cache / "sm90a" / MARLIN / "build-c" / "m.so").write_bytes(b"marlin")  # Marlin's: its own set, left out here
    (cache / "sm90a" / ".staging-2").mkdir()  # a build in progress: left out
    ops = fi / ".cache" / "flashinfer" / "0.7.2" / "90a" / "cached_ops" / "sampling"
    ops.mkdir(parents=True)
    (ops / "sampling.so").write_bytes(os.urandom(900_000))
    (ops / "build.ninja").write_text("rule x\n")
    out.mkdir()
    said = _sh("jit-pack-spec", str(cache), str(fi), cwd=tmp_path, OUT=str(out), JIT_PART_MB="1")
    assert "1 SGLang modules and FlashInfer's workspace in 2 pieces" in said, said
    assert sorted(p.name for p in out.iterdir()) == ["jit-spec.md5", "jit-spec.tgz.part-00", "jit-spec.tgz.part-01"]
    (repo / ".jit").mkdir(parents=True)
    for p in out.iterdir():
        (repo / ".jit" / p.name).write_bytes(p.read_bytes())
    assert "jit pieces here (jit-spec): 2 of 2" in _sh("jit-recv", cwd=repo, JITPARTS=str(parts))
    assert "into" in _sh("jit-unpack-spec", str(new), str(new_fi), cwd=repo, JITPARTS=str(parts))
    assert _tree(new) == {k: v for k, v in _tree(cache).items() if "moe_wna16_marlin" not in k}
    assert _tree(new_fi) == _tree(fi)
    # the Marlin set's own unpack finds no pieces of its own: nothing
    assert "no complete set" in _sh("jit-unpack", str(tmp_path / "m"), cwd=repo, JITPARTS=str(parts))
    # over the pieces a call may still return: not packed, nothing written
    out2 = tmp_path / "out2"
    out2.mkdir()
    said = _sh("jit-pack-spec", str(cache), str(fi), cwd=tmp_path, OUT=str(out2), JIT_PART_MB="1", JIT_MAX_PARTS="1")
    assert "not packed" in said and list(out2.iterdir()) == []
