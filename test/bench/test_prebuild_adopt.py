"""benchmark/live/prebuild_jit.py --local / --adopt: SGLang's Marlin MoE libraries compiled on the CPU box and handed to
SGLang's own JIT cache on the GPU machine, so that a lease spends no device time on the nvcc runs (324-450 s where no
finished `jit-marlin` pieces were carried, runs 24 and 44).

Runs the installed SGLang's real JIT path (its build spec, its ninja file, its cache keys and publication) for sm90a
on this CPU box, with a toolkit whose nvcc refuses to compile (`-c`) and passes everything else (`--version`, `-M`) to
the real one: an adoption that compiled would fail here. The `--local` test's nvcc compiles an empty object instead of
SGLang's CUDA (minutes of ptxas); only SGLang's load of the library, which needs a GPU, is left out."""

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PREBUILD = REPO / "benchmark" / "live" / "prebuild_jit.py"
DEVICE_SH = REPO / "benchmark" / "live" / "device.sh"
REAL = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))
pytestmark = pytest.mark.skipif(not (REAL / "bin" / "nvcc").exists(), reason=f"no nvcc under {REAL} (CUDA_HOME)")
TRUE_VARIANT = "sgl_kernel_jit_moe_wna16_marlin_bf16_t_false_false_true_true_true"
FALSE_VARIANT = "sgl_kernel_jit_moe_wna16_marlin_bf16_t_false_false_true_false_true"

# -c (a compile): refused, or an empty object where $COMPILE_EMPTY is set; anything else to the real nvcc
NVCC = """#!/usr/bin/env bash
for a in "$@"; do [ "$a" = -c ] && compile=1; done
if [ -n "${{compile:-}}" ]; then
  [ -n "${{COMPILE_EMPTY:-}}" ] || {{ echo "compile refused: $*" >&2; exit 1; }}
  while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done
  echo 'int sgl_empty;' | gcc -x c -fPIC -c - -o "$out"; exit
fi
exec "{real}/bin/nvcc" "$@"
"""


def _toolkit(tmp_path: Path) -> Path:
    kit = tmp_path / "cuda"
    if kit.exists():
        return kit
    (kit / "bin").mkdir(parents=True)
    (kit / "bin" / "nvcc").write_text(NVCC.format(real=REAL))
    (kit / "bin" / "nvcc").chmod(0o755)
    (kit / "lib64").symlink_to(REAL / "lib64")
    return kit


def _env(tmp_path: Path, **extra) -> dict:
    return {**os.environ, "CUDA_HOME": str(_toolkit(tmp_path)), "SGLANG_JIT_CACHE_DIR": str(tmp_path / "jit"),
            "PYTHONPATH": str(PREBUILD.parent), **extra}


# in a fresh process (SGLang memoises its toolchain and keys): the GPU-side prebuild of one variant for sm90a, SGLang's
# load of the library recorded instead of run, then the cache's own lookup of what it published
ADOPT = """
import json, sys
from sglang.kernels.jit.utils import arch
from sglang.kernels.jit.utils.compile import cache, loader
loaded = []
loader._load = lambda lib: loaded.append(str(lib))
import prebuild_jit
flags = tuple(bool(int(x)) for x in sys.argv[2].split(","))
with arch.override_jit_cuda_arch(9, 0):
    try:
        said = prebuild_jit._build(flags, sys.argv[1] or None)
    except Exception as exc:
        said = f"raised {type(exc).__name__}: {exc}"
    import pathlib
    scope = [p for p in pathlib.Path(cache.cache_root(), "sm90a").glob("*/build-*")]
    hit = [str(cache.find_prebuilt(scope=s, module_name=s.parent.name)) for s in scope]
print(json.dumps({"said": said, "loaded": loaded, "hit": hit}))
"""


def _adopt(tmp_path: Path, adopt, flags="0,0,1,1,1", **env) -> dict:
    out = subprocess.run([sys.executable, "-c", ADOPT, str(adopt or ""), flags], capture_output=True, text=True,
                         timeout=300, env=_env(tmp_path, **env))
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _carried(tmp_path: Path, release: str | None = None) -> Path:
    """An unpacked jit-local set: BUILT_WITH naming this machine's nvcc release, and a library for the true variant."""
    sys.path.insert(0, str(PREBUILD.parent))
    import prebuild_jit

    d = tmp_path / "jit-local"
    (d / "sm90a").mkdir(parents=True)
    (d / "BUILT_WITH").write_text(f"{release or prebuild_jit.nvcc_release(str(REAL / 'bin' / 'nvcc'))}\nsglang x\n")
    (d / "sm90a" / f"{TRUE_VARIANT}.so").write_bytes(b"\x7fELF carried library " + os.urandom(64))
    return d


def test_a_carried_library_becomes_sglangs_own_cached_build_without_a_compile(tmp_path):
    carried = _carried(tmp_path)
    got = _adopt(tmp_path, carried)
    assert got["said"].startswith("adopted moe_wna16_marlin"), got
    assert len(got["loaded"]) == 1 and ".staging-" in got["loaded"][0], got  # loaded once before publication
    assert len(got["hit"]) == 1, got  # SGLang's own lookup takes the published leaf from now on
    leaf = Path(got["hit"][0]).parent
    assert leaf.name.startswith("deps-") and leaf.parent.name.startswith("build-"), got
    assert (leaf / f"{TRUE_VARIANT}.so").read_bytes() == (carried / "sm90a" / f"{TRUE_VARIANT}.so").read_bytes()
    assert (leaf / "cuda_0.o").stat().st_size == 0  # nothing compiled: the object is ninja's placeholder
    deps = json.loads((leaf / "sgl_deps.json").read_text())
    assert ["kernels", "csrc/gemm/marlin_moe/moe_wna16_marlin.cuh"] in [d[:2] for d in deps]
    assert len(deps) > 100  # the closure nvcc -M listed, system and toolkit headers with it
    again = _adopt(tmp_path, carried)  # the next process (a server, or a later prebuild) finds it in the cache
    assert "in SGLang's JIT cache already" in again["said"] and again["loaded"] == got["hit"], again


def test_a_library_from_another_nvcc_release_or_none_carried_is_not_adopted(tmp_path):
    got = _adopt(tmp_path, _carried(tmp_path, release="Cuda compilation tools, release 12.9, V12.9.41"))
    assert got["said"].startswith("raised RuntimeError: Failed to build JIT module") and "compile refused" in got["said"]
    assert not got["loaded"]
    got = _adopt(tmp_path, _carried(tmp_path / "b"), flags="0,0,1,0,1")  # carried: the other variant only
    assert "compile refused" in got["said"] and not got["loaded"], got


def test_the_adopted_rules_are_sglangs_rules():
    """Adoption rewrites three rules of SGLang's ninja file by their exact text: where SGLang changes them the rewrite
    must refuse (the build then runs as SGLang wrote it), not half-apply."""
    sys.path.insert(0, str(PREBUILD.parent))
    import prebuild_jit
    from sglang.kernels.jit.utils.arch import override_jit_cuda_arch
    from sglang.kernels.jit.utils.compile import ninja
    from sglang.kernels.jit.utils.compile.spec import BuildSpec, resolve_sources

    spec = BuildSpec(module_args=("t",), cpp_files=(), cuda_files=resolve_sources(["gemm/marlin_moe/moe_wna16_marlin.cuh"]),
                     cpp_wrappers=(), cuda_wrappers=(("f", "g"),), cflags=(), cuda_cflags=(), ldflags=(),
                     include_paths=(), header_only=True)
    with override_jit_cuda_arch(9, 0):
        text = ninja.generate(spec)
    got = prebuild_jit.adopt_rules(text, "/carried/lib $x.so")
    assert got is not None and " -c " not in got and "cp '/carried/lib $$x.so' \"$out\"" in got
    assert "-M -MT" in got and "touch" in got
    assert prebuild_jit.adopt_rules(text.replace("-MD -MF", "-MMD -MF"), "/l.so") is None


def test_local_build_packs_pieces_that_travel_and_are_adopted(tmp_path):
    """--local with an nvcc that compiles empty objects: both variants built by SGLang's JIT path for sm90a, packed as
    jit-local pieces; device.sh jit-recv and jit-unpack-local bring them to the GPU side, where --adopt takes them."""
    jit = tmp_path / "repo" / ".jit"
    out = subprocess.run([sys.executable, str(PREBUILD), "--local", str(jit), "--timeout", "240"], capture_output=True,
                         text=True, timeout=300, env=_env(tmp_path, COMPILE_EMPTY="1"))
    assert out.returncode == 0, out.stderr[-3000:]
    assert sorted(p.name for p in jit.iterdir()) == ["jit-local.md5", "jit-local.tgz.part-00"], out.stdout
    with tarfile.open(jit / "jit-local.tgz.part-00") as tar:
        names = sorted(tar.getnames())
    assert names == ["BUILT_WITH", f"sm90a/{FALSE_VARIANT}.so", f"sm90a/{TRUE_VARIANT}.so"]
    parts, unpacked = tmp_path / "parts", tmp_path / "unpacked"
    run = dict(cwd=tmp_path / "repo", capture_output=True, text=True, timeout=60, env={**os.environ, "JITPARTS": str(parts)})
    said = subprocess.run(["bash", str(DEVICE_SH), "jit-recv"], **run).stdout
    assert "jit pieces here (jit-local): 1 of 1" in said
    said = subprocess.run(["bash", str(DEVICE_SH), "jit-unpack-local", str(unpacked)], **run).stdout
    assert f"sm90a/{TRUE_VARIANT}.so" in said and "release" in said
    shutil.rmtree(tmp_path / "jit")  # the GPU machine's cache starts empty
    got = _adopt(tmp_path, unpacked)
    assert got["said"].startswith("adopted"), got


def test_unpack_local_without_pieces_changes_nothing(tmp_path):
    said = subprocess.run(["bash", str(DEVICE_SH), "jit-unpack-local", str(tmp_path / "d")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "JITPARTS": str(tmp_path / "none")}).stdout
    assert "nothing to adopt" in said and not (tmp_path / "d").exists()
