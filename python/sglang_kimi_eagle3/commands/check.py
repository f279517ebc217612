"""`sglang-kimi-eagle3 check [launch_server flags]`: every problem of a deployment, at once.

The flags are parsed by SGLang's own `prepare_server_args` (so they can never drift from
launch_server's) after SGLang's `load_plugins()` (so this plugin's hooks are in place exactly as at
launch), then resolved by SGLang's own `resolve_once()` as it would be on the *target* GPU - via
SGLang's `override_platform(...)` - and checked by the same resolution-step hook that guards a real
launch (integration/hooks/launch_step.py -> integration/preflight/launch.report), which here collects instead of raising.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
import warnings

from ..errors import UserError
from ..integration.launch_flags import canonical_flags, merge_config_file, parse_with_sglang, refuse_nonpositive
from ..preflight import GpuTarget, has_errors, run_checks
from ..profiles import DEFAULT_ARGV, DEFAULT_DEPLOYMENT_NAME, DEFAULT_GPU, profile_path

MODEL_FLAGS = ("--model-path", "--model", "--speculative-draft-model-path", "--speculative-draft-model")

# Device names -> compute capability (sm = 10*major + minor).
GPU_NAMES = [
    (r"rtx\s*pro\s*[456]000|rtx\s*50[6-9]0|blackwell\s*workstation|rtx\s*pro\s*\d+\s*blackwell", 120),
    (r"dgx\s*spark|gb10\b", 121),
    (r"gb?300|b300", 103), (r"gb?200|b200|b100", 100),
    (r"h100|h200|h800|h20\b|gh200", 90),
    (r"l40s?|l4\b|rtx\s*40[6-9]0|rtx\s*6000\s*ada", 89), (r"a100|a800|a30\b|a10\b", 80),
]
HELP = """usage: sglang-kimi-eagle3 check [--for-gpu GPU] [--json] [--verbose] [launch_server flags ...]

Checks a draft/target deployment the way launch_server would start it, and lists every problem at once. \
With no --model-path it checks the embedded default (the Kimi-K2.5 INT4 + AQ-MedAI drafter launch on 8x RTX PRO \
6000), with any launch_server flags given replacing its own: `check --tp-size 4`. It prints the errors and \
warnings with their fixes, a count of the info rows, and whether launch_server would start.

  --for-gpu GPU   the GPU the deployment runs on: sm90 | sm100 | sm120 | a device name ("H200", "RTX PRO \
6000"); default: this machine's GPU, else sm90 (H100/H200) and it says so
  --json          machine-readable output (every finding, info rows included)
  --verbose       the full table (info rows too, with every hook's state) and SGLang's own log lines
  --speculative-draft-context-policy auto|strict|extend|yarn|cap
                  also SGLANG_KIMI_EAGLE3_CONTEXT_POLICY; on an SGLang with this flag of its own: \
strict|extend|yarn|cap, unset = auto

Model paths may be local folders, Hugging Face repo ids in the local cache, or bundled profile names \
(`sglang-kimi-eagle3 profiles`). Exit: 0 no errors, 1 errors found, 2 unusable input."""


def parse_gpu(value: str | None, how: str) -> GpuTarget:
    if value is None:
        from ..integration.preflight.launch import local_gpu

        return local_gpu("assumed: no local GPU and no --for-gpu")
    v = value.strip().lower()
    if not v:
        raise UserError("--for-gpu is empty; use sm90, sm100, sm120 or a device name such as H200, B200, 'RTX PRO 6000'")
    m = re.fullmatch(r"sm_?(\d{2,3})[af]?", v)
    if m:
        known = (70, 75, 80, 86, 87, 89, 90, 100, 101, 103, 110, 120, 121)  # CUDA compute capabilities
        if int(m.group(1)) not in known:
            raise UserError(f"--for-gpu {value!r}: no GPU has compute capability {m.group(1)}; use one of "
                            f"{', '.join(f'sm{k}' for k in known)} or a device name such as H200")
        return GpuTarget(f"sm{m.group(1)}", int(m.group(1)), how)
    # every GPU the value names ("H200 sm120", "H100 or H200": more than one, refused rather than read as the first)
    named = {re.sub(r"\s+", "", hit.group(0)): sm for pat, sm in GPU_NAMES for hit in re.finditer(pat, v)}
    if len(named) > 1:
        named.pop("blackwellworkstation", None)  # a descriptor of the RTX PRO name beside it, not a second GPU
    archs = {int(a) for a in re.findall(r"\bsm_?(\d{2,3})[af]?\b", v)}
    if len(named) > 1 or (named and archs - set(named.values())):
        raise UserError(f"--for-gpu {value!r}: names more than one GPU ({', '.join(list(named) + [f'sm{a}' for a in sorted(archs)])}); "
                        "give the one the deployment runs on, e.g. H200 or 'RTX PRO 6000'")
    for pat, sm in GPU_NAMES:
        if re.search(pat, v):
            return GpuTarget(value, sm, how)
    raise UserError(f"--for-gpu {value!r}: unknown GPU; use sm90, sm100, sm120 or a device name such as H200, B200, "
                    f"'RTX PRO 6000'")


def table_device_name(name: str) -> str | None:
    """The device name a `--for-gpu` value stands for in the launch tables ("H200" -> "NVIDIA H200"; an
    architecture such as sm90 names none), so `check` shows the table that GPU would read."""
    if re.fullmatch(r"sm_?\d{2,3}[af]?(\s*\(.*\))?", name.strip().lower()):
        return None
    return name if name.upper().startswith("NVIDIA") else f"NVIDIA {name.strip().upper()}"


def platform_facts(sm: int) -> dict:
    """SGLang platform facts (runtime_context.override_platform) for a CUDA GPU of this capability."""
    major = sm // 10
    return dict(is_cuda=True, is_hip=False, is_npu=False, is_xpu=False, is_musa=False, is_mps=False, has_amx=False,
                has_flashinfer=True, is_sm90=major == 9, is_hopper_with_cuda_12_3=major == 9,
                is_sm100=major == 10, is_sm110=major == 11, is_sm100_or_sm110=major in (10, 11), is_sm120=major == 12,
                is_blackwell=major in (10, 11, 12), device_sm=sm, device_capability=(major, sm % 10))


def _split(argv: list[str]) -> tuple[dict, list[str]]:
    ours, rest, i = {"json": False, "verbose": False, "for_gpu": None}, [], 0
    while i < len(argv):
        a = argv[i]
        if a in ("-h", "--help"):
            ours["help"] = True
        elif a == "--json":
            ours["json"] = True
        elif a == "--verbose":
            ours["verbose"] = True
        elif a.startswith(("--json=", "--verbose=")):  # else SGLang's parser takes --json= for --json-model-override-args
            raise UserError(f"{a}: {a.split('=', 1)[0]} takes no value; write {a.split('=', 1)[0]} alone")
        elif a == "--for-gpu" or a.startswith("--for-gpu="):
            if "=" in a:
                ours["for_gpu"] = a.split("=", 1)[1]
            elif i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                ours["for_gpu"] = argv[i + 1]
                i += 1
            else:
                raise UserError("--for-gpu needs a value: sm90, sm100, sm120 or a device name")
            parse_gpu(ours["for_gpu"], "--for-gpu")  # '' or sm999: refused here, before SGLang is imported
        else:
            rest.append(a)
        i += 1
    refuse_nonpositive(rest)
    return ours, rest


def resolve_model_paths(argv: list[str]) -> tuple[list[str], dict[str, str]]:
    """Bundled profile names -> their folders; folders and cached repo ids checked now (exit 2 early).
    Returns (argv with folders, {folder: the name the operator typed})."""
    from ..configs import read_config
    from ..integration.preflight.inputs import local_config_dir

    out, labels, i = [], {}, 0
    while i < len(argv):
        a = argv[i]
        flag, val = (a.split("=", 1) + [None])[:2] if a.startswith("--") and "=" in a else (a, None)
        if flag in MODEL_FLAGS:
            if val is None:
                if i + 1 >= len(argv):
                    raise UserError(f"{flag} needs a value")
                val = argv[i + 1]
                i += 1
            prof = profile_path(val)
            path = str(prof) if prof is not None else str(local_config_dir(val, flag))
            labels[path] = val
            read_config(path)  # missing / malformed config.json -> one-line error now
            out += [flag, path]
        else:
            out.append(a)
        i += 1
    return out, labels


def check_launch(argv: list[str], gpu: GpuTarget, labels: dict[str, str] | None = None) -> dict:
    """Parse `argv` with SGLang's parser, resolve it as on `gpu`, and check it with the launch step.

    The one public entry (CLI and benchmark/preflight/bench_check.py). Plugins must be loaded first.
    No module state: the launch step collects into a ContextVar box that is reset on every exit.
    Returns {"findings", "deployment", "server_args", "sglang_error"}; UserError for unusable input.
    """
    from sglang.srt.runtime_context import override_platform

    from ..integration.preflight.gpu_memory import gpu_memory, sglang_sees_gpu_memory
    from ..integration.preflight.inputs import build_deployment
    from ..integration.preflight.launch import collecting, describe_error

    server_args = parse_with_sglang(argv)
    sglang_error = None
    mib = gpu_memory(gpu)[0] if gpu.how != "local GPU" else None  # the local GPU: SGLang reads it itself
    with collecting(gpu, labels) as box:
        try:
            with override_platform(**platform_facts(gpu.sm)), sglang_sees_gpu_memory(mib):
                server_args.resolve_once()
        except UserError:
            raise
        except Exception as exc:
            sglang_error = exc
    findings, dep = box.get("findings"), box.get("deployment")
    if findings is None:  # our step did not check (SGLang stopped before it, or the plugin is off)
        why = describe_error(sglang_error) if sglang_error is not None else None
        dep = build_deployment(server_args, gpu, sglang_error=why, labels=labels)
        findings = run_checks(dep)
    return {"findings": findings, "deployment": dep, "server_args": server_args, "sglang_error": sglang_error}


def _pairs(argv: list[str]) -> list[tuple[str, str | None]]:
    """argv as (flag, value or None): a token after a flag is its value unless it is itself a flag."""
    out, i = [], 0
    while i < len(argv):
        a = argv[i]
        if a.startswith("--") and "=" in a:
            out.append(tuple(a.split("=", 1)))
        elif i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            out.append((a, argv[i + 1]))
            i += 1
        else:
            out.append((a, None))
        i += 1
    return out


def overlay_default(flags: list[str]) -> list[str]:
    """The embedded default's launch with `flags` replacing its values or added (`check --tp-size 4`)."""
    given = dict(_pairs(flags))
    merged = [(f, given.pop(f, v)) for f, v in _pairs(list(DEFAULT_ARGV))] + list(given.items())
    return [x for f, v in merged for x in ((f,) if v is None else (f, v))]


def run(argv: list[str]) -> dict:
    """Check a launch; returns {"title", "gpu", "findings", "hooks", "table", "timing"} (no printing)."""
    ours, typed = _split(argv)
    rest = merge_config_file(typed)  # --config FILE: its options, as launch_server reads them
    rest = canonical_flags(rest)  # a prefix SGLang's parser takes (--model-p): read as the flag it is
    refuse_nonpositive(rest)
    # no model path: the embedded default, with any flags given replacing its own (`check --tp-size 4`)
    embedded = not any(a in ("--model-path", "--model") or a.startswith(("--model-path=", "--model=")) for a in rest)
    title = f"the embedded default: {DEFAULT_DEPLOYMENT_NAME}" if embedded else "launch_server " + " ".join(typed)
    if embedded and typed:
        title += " - with " + " ".join(typed)
    if embedded:
        rest = overlay_default(rest)
    gpu = parse_gpu(ours["for_gpu"] or (DEFAULT_GPU if embedded else None),
                    "embedded default" if embedded and not ours["for_gpu"] else f"--for-gpu {ours['for_gpu']}")
    rest, labels = resolve_model_paths(rest)
    if not any(a == "--device" or a.startswith("--device=") for a in rest):
        rest += ["--device", "cuda"]  # the target is a GPU server even when this machine has none
    t0 = time.perf_counter()
    from sglang.srt.plugins import load_plugins

    from ..integration.registry import refresh

    if not ours["verbose"]:
        logging.getLogger("sglang_kimi_eagle3").setLevel(logging.WARNING)
    from . import quiet_sglang_arch_warning

    quiet_sglang_arch_warning()
    load_plugins()
    t_import = time.perf_counter() - t0
    if not ours["verbose"]:
        logging.getLogger().setLevel(logging.ERROR)
    t1 = time.perf_counter()
    res = check_launch(rest, gpu, labels)
    from ..preflight.checks_speedup import check_expected_speedup

    res["findings"] = res["findings"] + check_expected_speedup(res["deployment"])  # a prediction: check only
    t_check = time.perf_counter() - t1
    from ..base import enabled
    from ..integration.hooks.delegation import ensure_for_architectures
    from ..integration.hooks.draft_head_kernels import bind_worker_topk_outside_a_server
    from ..integration.hooks.runtime_status import table_in_effect

    if enabled() and res["deployment"] is not None:  # as the scheduler's hook does for the target's class
        ensure_for_architectures([res["deployment"].target.arch])
    bind_worker_topk_outside_a_server()  # as `status` does: applied or failed, not `registered`
    device = None if gpu.how == "local GPU" else (table_device_name(gpu.name), (gpu.sm // 10, gpu.sm % 10))
    return {"title": title, "gpu": gpu, "findings": res["findings"], "hooks": refresh(), "table": table_in_effect(device),
            "timing": {"sglang_import_s": t_import, "parse_resolve_and_checks_s": t_check}}


def _print_human(res: dict, verbose: bool = False) -> None:
    from ..base import enabled
    from ..versions import version_note
    from .check_report import print_check

    verdict = "refuse to start" if has_errors(res["findings"]) else "start"
    who = "with this plugin" if enabled() else "with this plugin switched off (SGLANG_KIMI_EAGLE3=0)"
    print_check(res, f"{who}, launch_server would {verdict}", verbose, version_note())


def main(argv: list[str]) -> int:
    if any(a in ("-h", "--help") for a in argv):
        from ..terminal import echo

        echo(HELP)
        return 0
    warnings.filterwarnings("ignore")
    res = run(argv)
    if "--json" in argv:
        out = {"title": res["title"], "gpu": {"name": res["gpu"].name, "sm": res["gpu"].sm, "how": res["gpu"].how},
               "errors": sum(f.severity == "error" for f in res["findings"]),
               "findings": [f.as_dict() for f in res["findings"]],
               "hooks": [{"name": r.name, "state": r.state, "target": r.target, "detail": r.detail} for r in res["hooks"]],
               "kernel_table": res["table"], "timing": res["timing"]}
        json.dump(out, sys.stdout, indent=1)
        print()
    else:
        _print_human(res, "--verbose" in argv)
    return 1 if has_errors(res["findings"]) else 0
