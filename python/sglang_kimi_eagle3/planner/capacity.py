"""Which planned batch sizes fit the deployment's KV cache (pure).

A batch of `bs` requests holds bs x (prompt + output) tokens in SGLang's KV pool at its longest; a level
that needs more than the pool cannot run at that batch size (SGLang admits fewer requests, or retracts
them), so its prediction is not a plan. The pool is preflight's own number - `checks_memory.budget()` of
the deployment the profile names, the "KV pool ... = N tokens" that `sglang-kimi-eagle3 check` prints for
that launch - or SGLang's `max_total_num_tokens` from a server log (`--kv-tokens`). No second estimate.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..configs import read_config
from ..errors import UserError
from ..preflight.checks_memory import budget, memory_deployment
from ..preflight.memory import gib, known_gpu_memory_mib
from ..profiles import profile_path
from ..validate import check_float, check_int, check_str, int_flag, show

DEPLOYMENT_KEYS = ("target", "draft", "gpu", "tp_size", "mem_fraction_static", "kv_cache_dtype")


@dataclass(slots=True)
class Capacity:
    kv_tokens: int | None  # tokens the KV pool holds per GPU; None: not checked
    request_tokens: int  # KV tokens one request holds at its longest (prompt + output)
    source: str  # where kv_tokens came from, or why it was not checked
    check_command: str = ""  # the `check` launch that prints the same pool
    excluded: dict[int, int] = field(default_factory=dict)  # bs -> tokens it needs, for levels that do not fit

    def needed(self, bs: int) -> int:
        return bs * self.request_tokens

    def fits(self, bs: int) -> bool:
        return self.kv_tokens is None or self.needed(bs) <= self.kv_tokens

    def as_dict(self) -> dict:
        return {"checked": self.kv_tokens is not None, "kv_tokens": self.kv_tokens,
                "request_tokens": self.request_tokens, "source": self.source, "check_command": self.check_command,
                "max_batch_size": self.kv_tokens // self.request_tokens if self.kv_tokens is not None else None,
                "excluded": {str(bs): {"kv_tokens_needed": n} for bs, n in sorted(self.excluded.items())}}


def check_deployment(value, path: str) -> dict:
    """A profile's `deployment.value`: the launch its numbers describe (checked when the profile loads)."""
    where = "deployment.value"
    if not isinstance(value, dict):
        raise UserError(f"{path}: field {where!r} = {show(value)}; expected an object with {', '.join(DEPLOYMENT_KEYS)}")
    unknown = sorted(set(value) - set(DEPLOYMENT_KEYS))
    if unknown:
        raise UserError(f"{path}: {where} has unknown key {unknown[0]!r}; known: {', '.join(DEPLOYMENT_KEYS)}")
    out = {"target": check_str(value.get("target"), path, f"{where}.target"),
           "draft": check_str(value["draft"], path, f"{where}.draft") if value.get("draft") is not None else None,
           "gpu": check_str(value.get("gpu"), path, f"{where}.gpu"),
           "tp_size": check_int(value.get("tp_size"), path, f"{where}.tp_size", lo=1),
           "mem_fraction_static": check_float(value.get("mem_fraction_static"), path, f"{where}.mem_fraction_static",
                                              lo=0, hi=1, lo_open=True),
           "kv_cache_dtype": check_str(value.get("kv_cache_dtype", "auto"), path, f"{where}.kv_cache_dtype")}
    if known_gpu_memory_mib(out["gpu"]) is None:
        raise UserError(f"{path}: {where}.gpu {out['gpu']!r} is not a GPU model with a known memory size; use H200, "
                        "B200, H100 or 'RTX PRO 6000'")
    return out


def _model(name: str):
    p = profile_path(name)
    return read_config(p if p is not None else name, label=name)


def check_command(dep: dict) -> str:
    """The `check` launch with the same memory inputs (steps 3 / topk 1: the pool does not depend on them)."""
    q = (lambda s: f"'{s}'" if " " in s else s)
    parts = ["sglang-kimi-eagle3 check", "--for-gpu", q(dep["gpu"]), "--model-path", dep["target"],
             "--trust-remote-code", "--tp-size", str(dep["tp_size"]),
             "--mem-fraction-static", f"{dep['mem_fraction_static']:g}"]
    if dep["draft"]:
        parts += ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", dep["draft"],
                  "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]
    if dep["kv_cache_dtype"] != "auto":
        parts += ["--kv-cache-dtype", dep["kv_cache_dtype"]]
    return " ".join(parts)


def from_deployment(dep: dict, request_tokens: int, profile_name: str) -> Capacity:
    """The KV pool of the profile's deployment, as `check` computes it (checks_memory.budget)."""
    mib, label = known_gpu_memory_mib(dep["gpu"])
    target = _model(dep["target"])
    draft = _model(dep["draft"]) if dep["draft"] else None
    d = memory_deployment(target, draft, gpu_memory_mib=float(mib), gpu_memory_source=label, tp=dep["tp_size"],
                          mem_fraction_static=dep["mem_fraction_static"], kv_cache_dtype=dep["kv_cache_dtype"])
    b = budget(d)
    cmd = check_command(dep)
    if b.kv_budget <= 0:
        raise UserError(f"profile {profile_name}: its deployment does not fit in memory (weights {gib(b.weights)} per "
                        f"GPU > the static pool {gib(b.static)} on {label}, TP {dep['tp_size']}), so nothing can be "
                        f"planned for it; `{cmd}` gives the fix")
    src = (f"the KV pool of the profile's deployment: {b.kv_tokens} tokens ({gib(b.kv_budget)} at "
           f"{b.kv_cell:.0f} B/token; {dep['target']}" + (f" + {dep['draft']}" if dep["draft"] else "") +
           f", TP {dep['tp_size']}, {label}, --mem-fraction-static {dep['mem_fraction_static']:g})")
    return Capacity(b.kv_tokens, request_tokens, src, cmd)


def add_arguments(group) -> None:
    group.add_argument("--request-tokens", metavar="N",
                       help="KV tokens one request holds at its longest, prompt + output (default: --context, else "
                            "the profile's context tokens); a batch size needing more than the KV pool is excluded")
    group.add_argument("--kv-tokens", metavar="N",
                       help="the KV pool in tokens (SGLang's max_total_num_tokens from the server's log) instead of "
                            "the pool of the profile's deployment")


def resolve(a, profile, context_tokens: int, costs_from: str | None = None) -> Capacity:
    """From the flags (`add_arguments`) and the profile; checked before any planning. `costs_from`: the flag the
    costs came from when they are not the profile's (a bench of the operator's own server, a cost table): then the
    profile's deployment is not the one planned for, and only --kv-tokens checks the pool."""
    req = int_flag(a.request_tokens, "--request-tokens", 1, 100_000_000) if a.request_tokens is not None else None
    req = req or max(1, context_tokens)
    if a.kv_tokens is not None:
        return Capacity(int_flag(a.kv_tokens, "--kv-tokens", 1, 1 << 40), req, "--kv-tokens")
    if costs_from is not None:
        return Capacity(None, req, f"not checked: the costs come from {costs_from}, not from profile {profile.name}'s "
                                   "deployment; --kv-tokens N (SGLang's max_total_num_tokens from the server log) "
                                   "checks it")
    dep = getattr(profile, "deployment", None)
    if dep is None:
        return Capacity(None, req, f"not checked: profile {profile.name} names no deployment; --kv-tokens N "
                                   "(SGLang's max_total_num_tokens from the server log) checks it")
    return from_deployment(dep, req, profile.name)


def split(plan: dict, cap: Capacity) -> dict:
    """The levels that fit; those that do not are recorded in `cap.excluded`. UserError when none fits."""
    cap.excluded = {bs: cap.needed(bs) for bs in plan if not cap.fits(bs)}
    kept = {bs: v for bs, v in plan.items() if bs not in cap.excluded}
    if not kept:
        most = cap.kv_tokens // cap.request_tokens
        fix = (f"--batch-sizes 1-{most}" if most >= 1 else
               f"--request-tokens {cap.kv_tokens} or fewer, or a deployment with a larger KV pool")
        raise UserError(f"no batch size fits the KV pool of {cap.kv_tokens} tokens ({cap.source}) at "
                        f"{cap.request_tokens} tokens per request: the smallest, {min(plan)}, needs "
                        f"{cap.needed(min(plan))}; plan {fix}")
    return kept


def lines(cap: Capacity) -> list[str]:
    """What `plan` prints about the capacity."""
    if cap.kv_tokens is None:
        return [f"KV capacity {cap.source}"]
    out = [f"KV capacity: {cap.source}; at {cap.request_tokens} tokens per request (prompt + output) it holds "
           f"{cap.kv_tokens // cap.request_tokens} requests"]
    if cap.check_command:
        out.append(f"  the same pool: {cap.check_command}")
    if cap.excluded:
        out.append("excluded, the batch does not fit the KV pool (not in the adaptive config): " + ", ".join(
            f"bs {bs} needs {bs} x {cap.request_tokens} = {n} tokens > {cap.kv_tokens}"
            for bs, n in sorted(cap.excluded.items())))
    return out
