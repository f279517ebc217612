"""Launch step part: SGLang's adaptive mode on by default for this plugin's chain launches, with a table of ours.

Upstream target: SGLang's resolution step `handle_speculative_decoding` (arg_groups/speculative_hook.py, 0.5.23):
  with `speculative_adaptive` it resolves the steps from --speculative-adaptive-config
  (`_init_adaptive_speculative_params`: topk 1, steps among the candidates, draft tokens = steps + 1) and the
  worker builds one runtime state per candidate step. launch_step._step calls `apply` BEFORE SGLang's step.
Why: a fixed chain runs below plain decoding where drafting does not pay (large batches, low acceptance): on the
  H200 (2026-12-02) EAGLE3 3/1/4 ran 0.38-0.78x of plain at c 8-128. SGLang's adaptive mode can fall back to
  steps 0, but its default table is one guess and its slots thrash; ours (planner/adaptive_table.py) comes from
  the planner's costs and carries the controller's costs (integration/hooks/adaptive_control.py).
When: our launches (EAGLE/EAGLE3 with a draft) whose operator typed --speculative-eagle-topk 1 and neither
  --speculative-adaptive nor --speculative-adaptive-config (theirs wins), no --speculative-num-draft-tokens other
  than steps + 1 (adaptive mode would override it; preflight reports it instead), SGLANG_KIMI_EAGLE3_ADAPTIVE not `off`,
  SGLANG_ENABLE_PP_SPEC not set (SGLang refuses adaptive with it). The table is written atomically under the
  user cache (sglang-kimi-eagle3/adaptive/), checked by SGLang's own loader first, and declared on the record:
  speculative_adaptive = True, speculative_adaptive_config = that file. The operator's --speculative-num-steps
  stays a candidate (SGLang requires it) and is where every slot starts.
Costs: the planner's bundled profile of the embedded default deployment (Kimi-K2.5 INT4 + drafter, TP 8, RTX
  PRO 6000), or the profile named by SGLANG_KIMI_EAGLE3_ADAPTIVE_PROFILE (a bundled name or a JSON path).
"""

from __future__ import annotations

import hashlib
import json
import os

from ..base import (
    ENV_ADAPTIVE,
    ENV_ADAPTIVE_MAX_GB as ENV_MAX_GB,
    adaptive_max_gb as max_gb,
    env_choice,
    env_flag,
    offstate_min_bs,
    user_cache_dir,
)
from .launch_record import CAPPED_ATTR, DEFAULT_OFF_ATTR, KEPT_ATTR, raw_input

ENV_PROFILE = "SGLANG_KIMI_EAGLE3_ADAPTIVE_PROFILE"
GRAPH_BS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)  # SGLang's largest default decode CUDA-graph batch: 512
BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
MAX_STATES = 3
SOURCE = "sglang-kimi-eagle3.adaptive_default"


def decide(server_args, operator_flags: bool = True) -> str | None:
    """Why this launch keeps SGLang's own choice (None: ours applies). operator_flags=False: as if the operator's
    --speculative-adaptive / --speculative-adaptive-config were left out (preflight: would ours serve it then?)."""
    if env_choice(ENV_ADAPTIVE) == "off":
        return f"{ENV_ADAPTIVE}=off"
    if operator_flags and (raw_input(server_args, "speculative_adaptive")
                           or raw_input(server_args, "speculative_adaptive_config")):
        return "the operator's --speculative-adaptive / --speculative-adaptive-config"
    topk = raw_input(server_args, "speculative_eagle_topk")
    if topk is None or int(topk) != 1:
        return f"--speculative-eagle-topk {topk} (adaptive steps are chain-only: topk 1)"
    steps, n = raw_input(server_args, "speculative_num_steps"), raw_input(server_args, "speculative_num_draft_tokens")
    if steps is not None and n is not None and int(n) != int(steps) + 1:
        return f"--speculative-num-draft-tokens {n} is not steps + 1 (adaptive mode would override what was typed)"
    if env_flag("SGLANG_ENABLE_PP_SPEC"):
        return "SGLANG_ENABLE_PP_SPEC (SGLang refuses adaptive speculation with it)"
    return None


def named_profile():
    """The planner profile SGLANG_KIMI_EAGLE3_ADAPTIVE_PROFILE names (a bundled name or a JSON path), read and checked:
    a UserError naming the variable where it is missing or malformed; None where it is unset or adaptive steps are off
    (SGLANG_KIMI_EAGLE3_ADAPTIVE=off: no launch reads it). `status` calls it as the launch does."""
    from ..planner import profiles

    name = os.environ.get(ENV_PROFILE, "").strip()
    if not name or env_choice(ENV_ADAPTIVE) == "off":
        return None
    return profiles.load(name, ENV_PROFILE)


def table_for(server_args, top: int | None = None, fixed_above: int | None = None) -> dict:
    """The table for this launch: the profile's costs; its states chosen within the memory budget (max_gb) at this
    launch's vocabulary and largest decode CUDA-graph batch (`top` instead: the table with graphs up to it; unknown
    vocabulary: no budget here, and memory_refusal then keeps SGLang's choice); `fixed_above`: the slots above it run
    the launch's chain only (planner/adaptive_table.table)."""
    from ..planner import profiles
    from ..planner.adaptive_table import state_memory_gb, table
    from ..planner.costs import from_profile

    prof = named_profile() or profiles.load(profiles.DEFAULT_PROFILE)
    steps = raw_input(server_args, "speculative_num_steps")
    mem = _vocab_and_graph_bs(server_args, top)
    budget = {}
    if mem is not None:
        vocab, graph_bs = mem
        budget = {"state_gb": lambda s: state_memory_gb(s, vocab, max(graph_bs)), "budget_gb": max_gb()}
    return table(from_profile(prof), list(BATCH_SIZES), operator_steps=int(steps) if steps else None,
                 max_states=MAX_STATES, source=f"planner profile {prof.name}", hooked_from=offstate_min_bs(),
                 fixed_above=fixed_above, **budget)


def _vocab_and_graph_bs(server_args, top: int | None = None) -> tuple[int, list[int]] | None:
    """The target's vocabulary and the decode CUDA-graph batch sizes SGLang will capture, up to `top` when given
    (None: unreadable)."""
    from ..configs import read_config
    from .preflight.inputs import local_config_dir

    try:
        vocab = read_config(local_config_dir(raw_input(server_args, "model_path"), "--model-path")).vocab_size
    except Exception:  # preflight reports an unreadable model config on its own
        return None
    top = top or graph_top(server_args)
    return vocab, [b for b in GRAPH_BS if b < top] + [top]


def graph_top(server_args) -> int:
    """The largest decode CUDA-graph batch SGLang will capture for this launch: --cuda-graph-max-bs-decode (its default:
    512), at most --max-running-requests where typed (SGLang 0.5.23's get_batch_sizes_to_capture keeps no batch size
    above its request pool)."""
    from ..preflight.memory import captured_graph_bs

    top = int(raw_input(server_args, "cuda_graph_max_bs_decode") or raw_input(server_args, "cuda_graph_max_bs") or 512)
    reqs = raw_input(server_args, "max_running_requests")
    return max(captured_graph_bs([top], int(reqs) if reqs else None))


def write_table(cfg: dict) -> str:
    from ..planner.adaptive import write
    from .adaptive_check import sglang_loader

    digest = hashlib.sha256(json.dumps(cfg, sort_keys=True).encode()).hexdigest()[:16]
    path = user_cache_dir("adaptive", f"table-{digest}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    return write(cfg, str(path), sglang_check=sglang_loader())


def apply(server_args) -> str:
    """Main process, before SGLang's step. Returns one phrase for the launch step's detail."""
    from sglang.srt.arg_groups.overrides import declare_resolution

    # for preflight: would our default serve this launch without the operator's adaptive flags (the fix it may name)
    setattr(server_args, DEFAULT_OFF_ATTR, {"why": decide(server_args, operator_flags=False)})
    why = decide(server_args)
    if why is not None:
        return f"adaptive steps: SGLang's choice kept ({why})"
    from ..planner.adaptive_table import states

    cfg = table_for(server_args)
    too_big = memory_refusal(server_args, cfg)
    partial = ""
    if too_big is not None:
        # for preflight's finding (integration/preflight/inputs.py -> preflight/checks_memory.adaptive_states)
        fix = memory_fix(server_args)
        capped = capped_table(server_args)
        if capped is None:
            setattr(server_args, KEPT_ATTR, {"found": too_big, "fix": fix})
            return f"adaptive steps: SGLang's choice kept ({too_big}; fix: {fix})"
        cfg, top, extra = capped
        found = (f"up to batch {top} only ({extra:.1f} GB of extra runtime states there; at every batch {too_big})")
        setattr(server_args, CAPPED_ATTR, {"found": found, "fix": fix, "top": top})
        partial = f" up to batch {top}, the fixed chain above it ({too_big}; fix: {fix})"
    path = write_table(cfg)
    declare_resolution(server_args, SOURCE, speculative_adaptive=True, speculative_adaptive_config=path)
    return f"adaptive steps on{partial}: states {states(cfg)} from {cfg['_generated_by']['costs']} ({path})"


def capped_table(server_args) -> tuple[dict, int, float] | None:
    """Where the table's extra states do not fit the budget at the launch's largest decode CUDA-graph batch: (the
    table whose slots above `top` run the launch's chain only, top, its extra GB) for the largest slot batch `top` at
    which they fit (SGLang then captures the other states' graphs only up to it: never slower up to `top`, the fixed
    chain above, where otherwise the fixed chain runs everywhere); None where the launch's steps or vocabulary are
    unknown or no top fits."""
    from ..preflight.memory import adaptive_extra_gb

    steps = raw_input(server_args, "speculative_num_steps")
    mem = _vocab_and_graph_bs(server_args)
    if steps is None or mem is None:
        return None
    steps, (vocab, graph_bs) = int(steps), mem
    for top in sorted((b for b in BATCH_SIZES if b < max(graph_bs)), reverse=True):
        cfg = table_for(server_args, top, fixed_above=top)
        extra = adaptive_extra_gb(cfg, vocab, graph_bs, steps)
        if extra <= max_gb():
            return cfg, top, extra
    return None


def memory_fix(server_args) -> str:
    """The flag that makes our table's extra states fit: the largest smaller decode CUDA-graph batch at which they do
    (SGLang captures no graph above it: larger batches run eagerly), else the budget variable."""
    from ..preflight.memory import adaptive_extra_gb

    steps = raw_input(server_args, "speculative_num_steps")
    steps = int(steps) if steps is not None else None
    for top in sorted((b for b in GRAPH_BS if b < graph_top(server_args)), reverse=True):
        mem = _vocab_and_graph_bs(server_args, top)
        if mem is None:
            break
        extra = adaptive_extra_gb(table_for(server_args, top), mem[0], mem[1], steps)
        if extra <= max_gb():
            return (f"--cuda-graph-max-bs-decode {top} (its extra states modelled at {extra:.1f} GB; batches above {top} "
                    f"run without CUDA graphs), or {ENV_MAX_GB} set to the GB the GPU can spare")
    return f"{ENV_MAX_GB} set to the GB the GPU can spare beside the weights and the KV pool"


def memory_refusal(server_args, cfg: dict) -> str | None:
    """Why the table's extra runtime states do not fit the budget (None: they do). SGLang builds one state per
    candidate step, each with its CUDA graphs (modelled in preflight/memory.py from an H200 measurement); the
    launch's own steps state exists anyway. Beside a 1T-parameter target the memory left after the weights and
    the KV pool is a few GB: a launch that would run out of memory while building the states, after every weight
    has loaded, keeps the fixed chain instead."""
    from ..preflight.memory import adaptive_extra_gb

    mem = _vocab_and_graph_bs(server_args)
    if mem is None:
        return "the target's vocabulary is unknown here, so the states' memory is too"
    vocab, graph_bs = mem
    top = max(graph_bs)
    steps = raw_input(server_args, "speculative_num_steps")
    extra = adaptive_extra_gb(cfg, vocab, graph_bs, int(steps) if steps is not None else None)
    cap = max_gb()
    if extra > cap:
        return (f"its extra runtime states are modelled at {extra:.1f} GB at vocab {vocab} and CUDA-graph batch "
                f"sizes up to {top}, over the {cap:g} GB budget")
    return None
