"""Compile SGLang's JIT kernels a server builds at its start, ahead of the server and in parallel, into
SGLANG_JIT_CACHE_DIR (default ~/.cache/sglang/jit).

Why: on the H200 (2026-12-03, SGLang 0.5.23) a lone server of the deployment-shaped pair (`tiny --preset deploy
--int4`) sat in its first decode-graph capture (bs 128) for over 6 minutes: SGLang JIT-compiles its Marlin MoE GEMM
(`moe_wna16_marlin`) there, one variant per expert-output mode, each a single-threaded nvcc run of about 5 minutes,
one after the other. Two processes compile the two variants side by side; a server started afterwards with the same
cache directory finds them (SGLang's cache is content-addressed: same sources, flags, compilers and versions).

--spec VOCAB builds instead what this plugin's kernel warm-up builds inside every speculative server before it
listens: SGLang's tree and tree-sampling JIT modules and FlashInfer's sampling module (into FLASHINFER_WORKSPACE_BASE,
--flashinfer to set it), three processes side by side, with the warm-up's own calls. On an H100 (2026-12-05, a fresh
box, two speculative servers starting together) that part of the warm-up took 167-172 s of each server's start; built
while the plain server starts, the speculative servers find them.

--local DIR builds the Marlin variants here, on a machine without a GPU but with the CUDA toolkit (nvcc), for
--arch (9.0: the H100 and the H200), and packs their libraries into DIR as the jit-local pieces (jit-local.tgz.part-NN +
jit-local.md5, the format of benchmark/live/device.sh's pieces); a lease carries them, and on the GPU machine --adopt
hands each library to SGLang's own JIT cache in place of the nvcc run: SGLang computes its keys there, the compile step
only lists the dependencies (`nvcc -M`, under a second) and the link step copies the carried library, then SGLang loads
it and publishes it as its own build. Adopted only where the GPU machine's nvcc names the same release as the one that
built it (else built there as before). The nvcc runs move off the lease: 324-450 s of device time where no finished
`jit-marlin` pieces are carried.

    python3 benchmark/live/prebuild_jit.py [--cache DIR] [--timeout S] [--adopt DIR]  (on the GPU machine)
    python3 benchmark/live/prebuild_jit.py --spec 20480 [--draft-tokens 4 --steps 3 --topk 1] [--flashinfer DIR]
    python3 benchmark/live/prebuild_jit.py --local .jit [--arch 9.0]      (here: nvcc, no GPU)

Exit 0 when every module is in the cache (--spec without CUDA: nothing to build, said so), 1 when one failed (its error
printed), 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import hashlib
import multiprocessing as mp
import os
import pathlib
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

# (dtype, is_ep, has_bias, expert_ids_are_sorted, zero_inactive_output, has_inactive_prefix_count): the variants the
# deploy-pair server built on 2026-12-03 (their cache folders: moe_wna16_marlin_bf16_t_false_false_true_{true,false}_true)
MARLIN_VARIANTS = ((False, False, True, True, True), (False, False, True, False, True))


BUILT_WITH = "BUILT_WITH"  # in the jit-local pieces: the nvcc release line and SGLang's version that built them
# SGLang 0.5.23's rules (kernels/jit/utils/compile/ninja.py) and what adoption runs instead: the dependency list only
# (what SGLang's cache hashes), an empty object for ninja, and the carried library as the link's output
_ADOPT_SWAPS = (
    ('  command = $nvcc -MD -MF "$out.d" $cudaflags -c "$in" -o "$out"',
     '  command = $nvcc -M -MT "$out" -MF "$out.d" $cudaflags "$in" && touch "$out"'),
    ('  command = $cxx -MD -MF "$out.d" $cxxflags -c "$in" -o "$out"',
     '  command = $cxx -M -MT "$out" -MF "$out.d" $cxxflags "$in" && touch "$out"'),
)
_LINK = '  command = $cxx $in $ldflags -o "$out"'


def adopt_rules(build_file: str, library: str) -> str | None:
    """SGLang's build file with its compile rules listing dependencies only and its link copying `library`; None where
    a rule is not SGLang 0.5.23's (the build then runs as SGLang wrote it)."""
    for old, new in _ADOPT_SWAPS + ((_LINK, f'  command = cp {shlex.quote(library).replace("$", "$$")} "$out"'),):
        if build_file.count(old) != 1:
            return None
        build_file = build_file.replace(old, new)
    return build_file


def nvcc_release(nvcc: str) -> str:
    """The `release` line of `nvcc --version` ('' where it cannot run)."""
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    return next((ln.strip() for ln in out.splitlines() if "release" in ln), "")


def _adoption(adopt: str) -> str | None:
    """Why the libraries in `adopt` cannot be taken here (None: they can): another nvcc release built them, or no
    record of which did."""
    from sglang.kernels.jit.utils.compile import toolchain

    have = nvcc_release(toolchain.device_compiler_path())
    try:
        built = (pathlib.Path(adopt) / BUILT_WITH).read_text().splitlines()[0].strip()
    except (OSError, IndexError):
        return f"no {BUILT_WITH} in {adopt}"
    if not have or have != built:
        return f"built with nvcc '{built}', this machine's is '{have or 'not found'}'"
    return None


def _build(flags: tuple, adopt: str | None = None) -> str:
    """One Marlin variant into SGLang's JIT cache: found there, adopted from `adopt` (see --adopt), or compiled."""
    import torch
    from sglang.kernels.jit.utils.compile import cache, ninja
    from sglang.kernels.ops.moe import moe_wna16_marlin as m

    t0 = time.time()
    why = (_adoption(adopt) if adopt else "none carried")
    may_adopt, how = [why is None], []
    build = ninja.build

    def build_or_adopt(*, spec, build_dir, build_file):  # called by SGLang only where its cache has no build
        lib = pathlib.Path(adopt or "") / cache._target_tag() / f"{spec.module_name}.so"
        text = adopt_rules(build_file, str(lib.resolve())) if may_adopt[0] and lib.is_file() else None
        how.append("compiled" if text is None else "adopted")
        return build(spec=spec, build_dir=build_dir, build_file=build_file if text is None else text)

    ninja.build = build_or_adopt
    try:
        try:
            m._jit_moe_wna16_marlin_module(torch.bfloat16, *flags)
        except Exception as exc:  # an adopted library that does not load: compiled here after all
            if how[-1:] != ["adopted"]:
                raise
            may_adopt[0], why = False, f"the carried library failed ({type(exc).__name__}: {str(exc)[:200]})"
            m._jit_moe_wna16_marlin_module(torch.bfloat16, *flags)
    finally:
        ninja.build = build
    took = f"{time.time() - t0:.0f} s"
    if not how:
        return f"moe_wna16_marlin bf16 {flags}: in SGLang's JIT cache already ({took})"
    if how[-1] == "adopted":
        return f"adopted moe_wna16_marlin bf16 {flags} (a library built elsewhere, its dependencies listed here): {took}"
    return f"built moe_wna16_marlin bf16 {flags}: {took} (adoption: {why or 'no library for this variant'})"


def _build_local(flags: tuple, arch: tuple, into: str) -> str:
    """One Marlin variant compiled on this machine for `arch` (no GPU needed), its library copied to
    `into`/<target>/<module>.so; SGLang's own JIT path, only its load (which needs the GPU) left out."""
    import torch
    from sglang.kernels.jit.utils import arch as jit_arch
    from sglang.kernels.jit.utils.compile import cache, loader
    from sglang.kernels.ops.moe import moe_wna16_marlin as m

    def keep(library):  # the freshly built library, or the cache's own from an earlier run
        library = pathlib.Path(library)
        dest = pathlib.Path(into) / cache._target_tag() / library.name
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(dest.name + ".tmp")
        shutil.copyfile(library, tmp)
        os.replace(tmp, dest)
        return None

    loader._load = keep
    t0 = time.time()
    with jit_arch.override_jit_cuda_arch(*arch):
        m._jit_moe_wna16_marlin_module(torch.bfloat16, *flags)
        target = cache._target_tag()
    return f"built moe_wna16_marlin bf16 {flags} for {target}: {time.time() - t0:.0f} s"


def pack_local(src: pathlib.Path, dest: pathlib.Path, part_mb: int = 15) -> list:
    """`src` (BUILT_WITH and <target>/<module>.so) as dest/jit-local.tgz.part-NN + jit-local.md5 (device.sh's format);
    the md5 list written last, each file by rename. Returns the names written."""
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest) as tmp:
        tgz = pathlib.Path(tmp) / "jit-local.tgz"
        with tarfile.open(tgz, "w:gz") as tar:
            for p in sorted(src.rglob("*")):
                if p.is_file():
                    tar.add(p, arcname=str(p.relative_to(src)))
        data, size = tgz.read_bytes(), part_mb * 1048576
        names, lines = [], []
        for i in range(0, max(len(data), 1), size):
            name = f"jit-local.tgz.part-{i // size:02d}"
            (pathlib.Path(tmp) / name).write_bytes(data[i:i + size])
            names.append(name)
            lines.append(f"{hashlib.md5(data[i:i + size]).hexdigest()}  {name}\n")
        for name in names:  # an old set stays whole until a piece is replaced; mixed, its md5s no longer match
            os.replace(pathlib.Path(tmp) / name, dest / name)
        (pathlib.Path(tmp) / "jit-local.md5").write_text("".join(lines))
        os.replace(pathlib.Path(tmp) / "jit-local.md5", dest / "jit-local.md5")
        for old in dest.glob("jit-local.tgz.part-*"):  # an older, longer set's last pieces
            if old.name not in names:
                old.unlink()
    return names + ["jit-local.md5"]


def _shapes(a):
    from sglang_kimi_eagle3.ops.warmup import LaunchShapes

    return LaunchShapes(max_bs=1, topk=a.topk, num_steps=a.steps, num_draft_tokens=a.draft_tokens, target_vocab=a.spec)


def _build_spec(part: str, a) -> str:
    """One of the kernel warm-up's SGLang builds (integration/hooks/kernel_warmup.py), in this child process."""
    import torch

    from sglang_kimi_eagle3.integration.hooks import kernel_warmup as kw

    fn = {"tree": kw.warm_sglang_tree, "sampling": kw.warm_sglang_sampling, "flashinfer": kw.warm_flashinfer_sampling}[part]
    t0 = time.time()
    built = fn(_shapes(a), torch.device(a.device))
    if built is None:
        return f"{part}: nothing to build (not CUDA, or SGLang has no such kernel here)"
    return f"built {built}: {time.time() - t0:.0f} s"


SPEC_PARTS = ("tree", "sampling", "flashinfer")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", help="SGLANG_JIT_CACHE_DIR to fill (default: the environment's, else SGLang's default)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for all variants (default 900; "
                    "--local on a 2-core box: give it 2400)")
    ap.add_argument("--spec", type=int, metavar="VOCAB", help="the speculative servers' modules instead, for a target "
                    "of this vocabulary (the verify logits' width)")
    ap.add_argument("--draft-tokens", type=int, default=4, help="--speculative-num-draft-tokens (default 4)")
    ap.add_argument("--steps", type=int, default=3, help="--speculative-num-steps (default 3)")
    ap.add_argument("--topk", type=int, default=1, help="--speculative-eagle-topk (default 1)")
    ap.add_argument("--flashinfer", help="FLASHINFER_WORKSPACE_BASE to fill (with --spec; default: the environment's)")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"),
                    help="with --spec: cpu runs the same processes and calls, which build nothing (a rehearsal)")
    ap.add_argument("--adopt", metavar="DIR", help="take the Marlin libraries in DIR (the jit-local pieces unpacked: "
                    f"{BUILT_WITH}, <target>/<module>.so) instead of compiling them, where nvcc's release matches")
    ap.add_argument("--local", metavar="DIR", help="compile the Marlin variants here for --arch (nvcc, no GPU) and pack "
                    "them into DIR as the jit-local pieces")
    ap.add_argument("--arch", default="9.0", help="with --local: the compute capability to build for (default 9.0)")
    args = ap.parse_args(argv)
    if args.local is not None:
        return _main_local(args, ap)
    if args.spec is not None:
        try:
            _shapes(args)
        except ValueError as exc:
            ap.error(f"--spec / --draft-tokens / --steps / --topk: {exc}")
    if args.cache:
        os.environ["SGLANG_JIT_CACHE_DIR"] = args.cache
    if args.flashinfer:
        os.environ["FLASHINFER_WORKSPACE_BASE"] = args.flashinfer
    where = os.environ.get("SGLANG_JIT_CACHE_DIR") or "~/.cache/sglang/jit"
    if args.spec is not None:
        import torch

        if args.device == "cuda" and not torch.cuda.is_available():
            print("prebuild_jit --spec: no CUDA device here: nothing to build", flush=True)
            return 0
        jobs = [(p, (p, args)) for p in SPEC_PARTS]
        fn = _build_spec
        print(f"prebuild_jit: SGLang's speculative modules ({', '.join(SPEC_PARTS)}; vocab {args.spec}, N "
              f"{args.draft_tokens}) into {where}", flush=True)
    else:
        if args.adopt and not os.path.isdir(args.adopt):
            ap.error(f"--adopt {args.adopt}: no such folder (the jit-local pieces unpacked: device.sh jit-unpack-local)")
        jobs = [(f"moe_wna16_marlin {v}", (v, args.adopt)) for v in MARLIN_VARIANTS]
        fn = _build
        print(f"prebuild_jit: {len(MARLIN_VARIANTS)} variants of moe_wna16_marlin into {where}"
              + (f", adopting the libraries in {args.adopt}" if args.adopt else ""), flush=True)
    return _run(jobs, fn, args.timeout)


def _run(jobs, fn, timeout: float) -> int:
    ctx = mp.get_context("spawn")  # CUDA is initialised in each child, never in this parent
    with ctx.Pool(len(jobs)) as pool:
        started = [(name, pool.apply_async(fn, fargs)) for name, fargs in jobs]
        bad = 0
        deadline = time.time() + timeout
        for name, j in started:
            try:
                print(j.get(max(1.0, deadline - time.time())), flush=True)
            except Exception as exc:  # one line per module that did not build; the others still count
                bad += 1
                print(f"prebuild_jit: {name} failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
    return 1 if bad else 0


def _main_local(args, ap) -> int:
    try:
        arch = tuple(int(x) for x in args.arch.split("."))
        assert len(arch) == 2
    except (ValueError, AssertionError):
        ap.error(f"--arch {args.arch}: a compute capability such as 9.0")
    from sglang.kernels.jit.utils.compile import toolchain

    nvcc = toolchain.device_compiler_path()
    release = nvcc_release(nvcc)
    if not release:
        ap.error(f"--local: no nvcc at {nvcc} (set CUDA_HOME to the CUDA toolkit)")
    from importlib.metadata import version

    with tempfile.TemporaryDirectory() as tmp:
        src = pathlib.Path(tmp) / "local"
        src.mkdir()
        (src / BUILT_WITH).write_text(f"{release}\nsglang {version('sglang')}\ncompute capability {args.arch}\n")
        print(f"prebuild_jit --local: {len(MARLIN_VARIANTS)} variants of moe_wna16_marlin for compute capability {args.arch} "
              f"with {nvcc} ({release}), one process each; then packed into {args.local}", flush=True)
        rc = _run([(f"moe_wna16_marlin {v}", (v, arch, str(src))) for v in MARLIN_VARIANTS], _build_local,
                  args.timeout)
        if rc:
            print("prebuild_jit --local: nothing packed", flush=True)
            return rc
        names = pack_local(src, pathlib.Path(args.local))
        print(f"prebuild_jit --local: packed {' '.join(names)} into {args.local}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
