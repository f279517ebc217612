"""Preflight checks on how the pair is launched: capture layers, context, speculative params, TP. Pure."""

from __future__ import annotations

from ..configs import require_known_rope
from ..errors import UserError
from ..policy.context import ENV_POLICY, FLAG, decide
from .model import Deployment, Finding

# --- aux (capture) layer ids -------------------------------------------------------------------
# What SGLang 0.5.23 does with eagle_config.eagle_aux_hidden_state_layer_ids (the value i means "the
# residual stream entering layer i", i.e. the output of layer i-1; deepseek_v2.py:3174-3199):
#   DeepSeek/Kimi targets (deepseek_v2.py:3458-3473): none -> [2, n//2, n-3]; first id == 1 -> +1 on
#     every id; otherwise used as-is.
#   Llama targets (llama.py:929-941): none -> [2, n//2, n-3]; otherwise +1 on every id.
# Conventions of the training tools (what their ids mean):
#   EAGLE repo (SafeAILab/EAGLE, eagle/traineagle3/modeling_llama_kv.py ~l.1137): collects the hidden
#     state *entering* layers {2, n//2, n-3} - SGLang's default, no ids in the config.
#   SpecForge (sgl-project/SpecForge, specforge/modeling/target/eagle3_target_model.py): HF backend
#     hooks the *output* of layers, default [1, n//2-1, n-4] (the same tensors); its SGLang backend
#     passes ids straight to SGLang's set_eagle3_layers_to_capture (SGLang's convention).
#   TorchSpec: output-of-layer ids, [1, 29, 57] for a 61-layer Kimi/DeepSeek target (project reference).
# So the canonical capture is "entering [2, n//2, n-3]"; a captured set that is that set shifted by one
# layer is the silent acceptance collapse of tokenspeed #526 (tau 1.00 vs 2.39).

DEEPSEEK_FAMILY = ("DeepseekV3ForCausalLM", "DeepseekV2ForCausalLM", "DeepseekV32ForCausalLM", "KimiK25ForConditionalGeneration")


def captured_layers(target_arch: str, ids: list[int] | None, n_layers: int) -> list[int]:
    """The layer indices SGLang 0.5.23 will capture (residual entering layer i) for this target class."""
    if ids is None:
        return [2, n_layers // 2, n_layers - 3]
    if target_arch in DEEPSEEK_FAMILY or "Deepseek" in target_arch or "Kimi" in target_arch:
        return [i + 1 for i in ids] if ids and ids[0] == 1 else list(ids)
    return [i + 1 for i in ids]  # Llama rule (and the Llama-derived targets)


def check_aux_layers(d: Deployment) -> list[Finding]:
    t, dr = d.target, d.draft
    if dr is None or d.algorithm != "EAGLE3":
        return []
    n = t.num_hidden_layers
    f = d.sglang
    if f is not None and f.use_aux is False:
        return []  # SGLang captures nothing (checks_draft.check_aux_agreement says so)
    ids = dr.aux_layer_ids
    if f is not None and f.captured_layers is not None:  # SGLang's own target class decided
        ids, cap = f.capture_ids, f.captured_layers
        if not cap:
            return []  # check_aux_agreement reports the empty capture
    else:
        cap = captured_layers(t.text_arch if t.arch.startswith("Kimi") else t.arch, ids, n)
    canonical = [2, n // 2, n - 3]
    desc = (f"declared {ids}" if ids is not None else "none declared (SGLang default)") + \
        f" -> SGLang captures the residual entering layers {cap} (outputs of {[c - 1 for c in cap]}) of {n}"
    out = []
    bad = [c for c in cap if not 0 <= c < n]
    if bad:
        return [Finding("error", "aux_layers", desc + f"; {bad} out of range", f"every captured layer in [0, {n - 1}]",
                        f"fix eagle_config.eagle_aux_hidden_state_layer_ids in {dr.file}")]
    if cap == canonical:
        out.append(Finding("info", "aux_layers", desc + " = the canonical EAGLE-3 layers [2, n//2, n-3]"))
    elif (len(cap) == len(canonical) and all(abs(c - k) == 1 for c, k in zip(cap, canonical))
          and len({c - k for c, k in zip(cap, canonical)}) == 1):
        shift = cap[0] - canonical[0]
        want = [i - shift for i in ids] if ids is not None else None
        out.append(Finding("warning", "aux_layers", desc + f": every layer is {shift:+d} from the canonical {canonical}",
                           "the layers the drafter was trained on; a one-layer shift silently collapses acceptance "
                           "(tokenspeed #526: tau 1.00 vs 2.39)",
                           f"if the drafter was trained with the EAGLE repo / SpecForge defaults, set "
                           f"eagle_aux_hidden_state_layer_ids to {want} in {dr.file}"))
    else:
        out.append(Finding("info", "aux_layers", desc + f" (custom; canonical would be {canonical}) - make sure the "
                           "drafter was trained on exactly these"))
    if ids is not None and len(ids) != 3:
        out.append(Finding("info", "aux_layers", f"{len(ids)} aux layers (EAGLE-3 drafters usually use 3)"))
    return out


# --- context ---------------------------------------------------------------------------------
def check_context(d: Deployment) -> list[Finding]:
    t, dr = d.target, d.draft
    out = []
    t_len = t.derived_context
    if d.context_length is not None and (not isinstance(d.context_length, int) or d.context_length < 1):
        return [Finding("error", "context", f"--context-length {d.context_length}", "a positive number of tokens "
                        f"(at most the target's {t_len})", f"--context-length {t_len}, or leave it out")]
    if d.context_length is not None and d.context_length > t_len:
        if d.sglang is not None and d.sglang.context_override:  # ModelConfig._derive_context_length warns, serves
            out.append(Finding("warning", "context", f"--context-length {d.context_length} > the target's {t_len}: "
                               "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN is set, so SGLang serves it; positions past "
                               f"{t_len} were never trained and may give wrong output or CUDA errors",
                               f"<= {t_len} (the target's own limit)", f"--context-length {t_len}, or keep it knowing "
                               "the risk"))
        else:
            out.append(Finding("error", "context", f"--context-length {d.context_length} > the target's {t_len}",
                               f"<= {t_len} (the target's own limit; no context policy lifts it)",
                               f"--context-length {t_len}, or set SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 to "
                               "serve it at your own risk"))
            return out
    if dr is None:
        return out
    serve = d.context_length or t_len
    if dr.derived_context < serve and d.global_override_set:
        return out + [Finding("warning", "context", f"draft {dr.derived_context} < served {serve} and "
                              "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN is set: SGLang's global override applies (it "
                              "also silences the target's own context check); this plugin's policy stands aside",
                              "a draft-scoped decision", f"unset SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN; "
                              f"{FLAG} picks the policy")]
    if dr.derived_context < serve and not d.context_hook_active:
        return out + [Finding("error", "context", f"draft {dr.derived_context} < served {serve}, and this plugin's "
                              "context_policy hook is not active: SGLang raises ValueError when the draft worker starts, "
                              "after the target's weights have loaded", "the plugin's context policy in effect",
                              "unset SGLANG_KIMI_EAGLE3=0 (see `sglang-kimi-eagle3 status`)")]
    try:
        require_known_rope(dr)
        dec = decide(target_len=serve, draft_len=dr.derived_context, policy=d.context_policy, draft_rope_type=dr.rope_type,
                     draft_rope_theta=dr.rope_theta, rope_margin=d.rope_margin, draft_name=f"the draft {dr.path}")
    except UserError as exc:
        return out + [Finding("error", "context", str(exc), "", "")]
    if dec.action == "refuse":
        out.append(Finding("error", "context", dec.explanation, "a policy that can serve this pair",
                           f"{FLAG} extend|yarn|cap (or {ENV_POLICY})"))
    elif dec.action == "none":
        out.append(Finding("info", "context", dec.explanation))
    else:
        sev = dec.severity
        out.append(Finding(sev, "context", dec.explanation, "",
                           "" if sev == "info" else f"{FLAG} cap, or a longer-context drafter"))
    return out


# --- speculative parameters -------------------------------------------------------------------
# SGLang 0.5.23 arg_groups/speculative_hook.py `_PAGE_TREE_SPEC_BACKENDS`: the backends that run a topk > 1
# tree over pages larger than one token; and arg_groups/overrides.py `_mla_backend_page_constraints`: the
# backends that set their own page size (32/64/128), so --page-size 1 does not reach them.
PAGE_TREE_BACKENDS = ("flashinfer", "fa3", "triton")
FIXED_PAGE_BACKENDS = {"flashmla", "trtllm_mla", "cutedsl_mla", "trtllm_mha", "hpc_ops"}


def tree_backend(sm: int) -> str:
    """A PAGE_TREE_BACKENDS member for this GPU: FA3 on Hopper, flashinfer on SM100, else triton (flashinfer
    has a CUDA-graph replay fault on SM120)."""
    return {9: "fa3", 10: "flashinfer"}.get(sm // 10, "triton")


def check_spec_params(d: Deployment) -> list[Finding]:
    if d.algorithm not in ("EAGLE", "EAGLE3", "NEXTN"):
        return []
    out = []
    s, k, n = d.steps, d.topk, d.draft_tokens
    if d.adaptive and s is not None and k in (None, 1) and n is None:
        k, n = 1, s + 1  # _init_adaptive_speculative_params: topk 1, draft tokens = steps + 1
    if s is None and k is None and n is None:
        out.append(Finding("info", "spec_params", "no --speculative-num-steps/-eagle-topk/-num-draft-tokens: SGLang "
                           "chooses them per architecture (3/1/4 for DeepSeek/Kimi)"))
        return out
    if s is None or k is None or n is None:
        # _handle_eagle_family asserts topk and draft tokens are None when steps is None.
        fix = "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4"
        if isinstance(s, int) and isinstance(k, int) and k > 1 and n is None and s >= 1:
            fix = f"--speculative-num-draft-tokens {min(2 * s + 2, k + (s - 1) * k * k + 1)}"
        out.append(Finding("error", "spec_params", f"steps={s} topk={k} draft_tokens={n}: only some given",
                           "all three speculative parameters, or none", fix))
        return out
    for name, v, lo in (("--speculative-num-steps", s, 1), ("--speculative-eagle-topk", k, 1), ("--speculative-num-draft-tokens", n, 2)):
        if v < lo:
            out.append(Finding("error", "spec_params", f"{name} {v}", f">= {lo}", f"{name} {max(lo, 1)}"))
    if out:
        return out
    typed = d.draft_tokens_typed if d.draft_tokens_typed is not None else n
    cap = d.sglang.tree_capacity if d.sglang is not None else None
    if k == 1 and typed != s + 1 and not d.adaptive:
        out.append(Finding("warning", "spec_params", f"topk 1 with {typed} draft tokens and {s} steps",
                           f"draft tokens = steps + 1 = {s + 1} for a chain (SGLang silently changes it)",
                           f"--speculative-num-draft-tokens {s + 1}"))
    elif k > 1 and cap is not None and n > cap:
        # organize_draft_results keeps the top (draft tokens - 1) of topk + (steps - 1) * topk^2 scored candidates
        out.append(Finding("error", "spec_params", f"{n} draft tokens from topk {k} and {s} steps",
                           f"<= {cap}: SGLang's draft tree scores topk + (steps - 1) x topk^2 = {cap - 1} candidates "
                           "(eagle_utils.organize_draft_results), plus the verified token",
                           f"--speculative-num-draft-tokens {cap}"))
    if k > 1 and d.use_rejection_sampling:
        out.append(Finding("error", "spec_params", "--speculative-use-rejection-sampling with topk > 1",
                           "topk 1 (SGLang rejects it)", "--speculative-eagle-topk 1"))
    if k > 1 and d.target_decode_backend == "trtllm_mha":
        out.append(Finding("error", "spec_params", "topk > 1 on the trtllm_mha backend", "topk 1 (SGLang rejects it)",
                           "--speculative-eagle-topk 1"))
    if k > 1 and (d.page_size or 1) > 1 and d.target_decode_backend not in (None, *PAGE_TREE_BACKENDS):
        be = d.target_decode_backend
        # a backend that sets its own page size keeps it whatever --page-size says: change the backend
        fix = f"--attention-backend {tree_backend(d.gpu.sm if d.gpu else 90)}" if be in FIXED_PAGE_BACKENDS \
            else "--page-size 1"
        out.append(Finding("error", "spec_params", f"topk > 1 with page size {d.page_size} on {be}",
                           "page size 1, or flashinfer/fa3/triton (SGLang rejects it)"
                           + (f"; {be} sets page size {d.page_size} itself" if be in FIXED_PAGE_BACKENDS else ""), fix))
    if k > 8 or s > 8 or n > 64:
        out.append(Finding("warning", "spec_params", f"steps {s} / topk {k} / {n} draft tokens",
                           "steps <= 8, topk <= 8, draft tokens <= 64 (what this plugin's kernels cover; SGLang's run)",
                           "smaller values"))
    if not out:
        out.append(Finding("info", "spec_params", f"steps {s} / topk {k} / {n} draft tokens ({'chain' if k == 1 else 'tree'})"))
    return out


# --- launch flags SGLang parses but never range-checks ------------------------------------------
# SGLang 0.5.23's parser takes any string for --device and any integer for --page-size and
# --max-running-requests; the launch then fails (or misbehaves) after the weights load.
DEVICES = ("cuda", "cpu", "xpu", "npu", "hpu", "mps", "musa")  # what SGLang's platforms name (utils get_device)


def check_launch_flags(d: Deployment) -> list[Finding]:
    out = []
    if d.device is not None and str(d.device).split(":", 1)[0] not in DEVICES:
        out.append(Finding("error", "launch_flags", f"--device {d.device}",
                           f"one of {', '.join(DEVICES)} (or leave it out: SGLang detects the platform)",
                           "--device cuda, or drop --device"))
    for flag, v in (("--page-size", d.page_size), ("--max-running-requests", d.max_running_requests)):
        if isinstance(v, int) and not isinstance(v, bool) and v < 1:
            out.append(Finding("error", "launch_flags", f"{flag} {v}", ">= 1 (SGLang accepts the flag, then fails "
                               "after loading the weights)", f"{flag} 1" if flag == "--page-size" else
                               f"drop {flag} (SGLang sizes it from memory)"))
    return out


# --- tensor parallel ---------------------------------------------------------------------------
def check_tensor_parallel(d: Deployment) -> list[Finding]:
    out = []
    tp = d.tp
    if not isinstance(tp, int) or tp < 1:
        return [Finding("error", "tensor_parallel", f"--tp-size {tp}", "a positive number of GPUs",
                        "--tp-size 1 (or the number of GPUs per node)")]
    for role, m in (("target", d.target), ("draft", d.draft)):
        if m is None or tp <= 1:
            continue
        if m.num_attention_heads % tp:
            out.append(Finding("error", "tensor_parallel", f"{role} has {m.num_attention_heads} attention heads, tp {tp}",
                               "heads divisible by --tp-size", f"--tp-size dividing {m.num_attention_heads}"))
        kv = m.num_key_value_heads
        if not m.is_mla and kv % tp and tp % kv:
            out.append(Finding("error", "tensor_parallel", f"{role} has {kv} KV heads, tp {tp}",
                               "KV heads divisible by tp, or tp divisible by KV heads (replicated)", f"--tp-size dividing {kv}"))
    # SGLang resolves both, then fails as the ranks start: its MoE EP groups (tp // ep ranks apart) leave ranks in
    # none (an assertion in GroupCoordinator), and initialize_model_parallel raises for a DCP width not dividing tp
    for flag, width, what in (("--ep-size", d.ep_size, "expert-parallel"), ("--dcp-size", d.dcp_size,
                                                                          "decode context-parallel")):
        if width > 1 and tp % width:
            fits = [w for w in range(1, tp + 1) if tp % w == 0]
            out.append(Finding("error", "tensor_parallel", f"{flag} {width} with --tp-size {tp}",
                               f"a {what} width dividing --tp-size (SGLang accepts the flag, then fails as the "
                               "ranks start)", f"{flag} one of {', '.join(map(str, fits))}"))
    dr = d.draft
    if dr is not None and tp > 1:
        rows = dr.draft_vocab_size or dr.vocab_size
        shard = -(-rows // tp)
        note = "" if rows % tp == 0 else f" (padded: {rows} is not divisible by {tp})"
        out.append(Finding("info", "tensor_parallel", f"draft lm_head {rows} rows -> {shard} per GPU at tp {tp}{note}"))
    return out


def check_sglang_error(d: Deployment) -> list[Finding]:
    if not d.sglang_error:
        return []
    return [Finding("error", "sglang", f"SGLang's own argument resolution refuses this launch: {d.sglang_error}",
                    "a launch SGLang accepts", "see the message; the other findings still apply")]
