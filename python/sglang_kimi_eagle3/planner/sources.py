"""Where acceptance comes from (pure): published presets, command-line numbers, or a bench JSON.

Published numbers give one mean acceptance length, not a per-position curve; a preset turns it into
the i.i.d. alpha with the same tau at the same depth (an assumption, stated in its label).
"""

from __future__ import annotations

from ..errors import UserError
from ..validate import is_int
from .acceptance import alpha_from_tau, alphas_from_histogram, expected_tokens
from .model import Acceptance

# name -> (tau, at steps, source). tau counts the bonus token (SGLang's spec_accept_length).
PRESETS: dict[str, tuple[float, int, str]] = {
    "aq-medai-k25-gsm8k": (1 + 4 * 0.5178, 4, "vLLM issue #35966 (github.com/vllm-project/vllm): 51.78% draft acceptance "
                           "on GSM8K with 4 speculative tokens, AQ-MedAI/Kimi-K25-eagle3 on Kimi-K2.5; tau = 1 + 4 x 0.5178"),
    "aq-medai-k2-gsm8k": (3.27, 3, "SpecForge docs/spec_bundle/public/raw_data/data.json (github.com/sgl-project/SpecForge): "
                          "AQ-MedAI/Kimi-K2-Instruct-eagle3 on Kimi-K2-Instruct (its training target), H200, bs 8, steps 3 / "
                          "topk 1, GSM8K accept length 3.27; on Kimi-K2.5 no number is published: expect lower"),
    "aq-medai-k2-mtbench": (2.39, 3, "SpecForge docs/spec_bundle/public/raw_data/data.json: AQ-MedAI/Kimi-K2-Instruct-eagle3 "
                            "on Kimi-K2-Instruct, H200, bs 8, steps 3 / topk 1, MT-Bench accept length 2.39; on Kimi-K2.5 "
                            "expect lower"),
    "lightseek-k25-mtbench": (2.69, 3, "lightseekorg/kimi-k2.5-eagle3 model card (huggingface.co): tau 2.69 on MT-Bench at "
                              "steps 3 / topk 1"),
    "lightseek-k25-gsm8k": (3.20, 3, "lightseekorg/kimi-k2.5-eagle3 model card (huggingface.co): tau 3.20 on GSM8K at "
                            "steps 3 / topk 1"),
    "lightseek-k25-humaneval": (3.29, 3, "lightseekorg/kimi-k2.5-eagle3 model card (huggingface.co): tau 3.29 on HumanEval "
                                "at steps 3 / topk 1"),
    "lightseek-k25-mla-mtbench": (2.94, 3, "lightseekorg/kimi-k2.5-eagle3-mla model card (huggingface.co): tau 2.94 on "
                                  "MT-Bench at steps 3 / topk 1"),
    "lightseek-k25-mla-gsm8k": (3.02, 3, "lightseekorg/kimi-k2.5-eagle3-mla model card (huggingface.co): tau 3.02 on GSM8K "
                                "at steps 3 / topk 1"),
    "eagle3-paper-llama31-8b": (6.23, 8, "EAGLE-3 paper (arXiv 2503.01840), LLaMA-3.1-8B, tau 6.23 at temperature 0 "
                                "with a depth-8 tree; read here as a depth-8 chain (optimistic)"),
}


def from_preset(name: str) -> Acceptance:
    if name not in PRESETS:
        raise UserError(f"unknown acceptance preset {name!r}; presets: {', '.join(PRESETS)}")
    tau, steps, src = PRESETS[name]
    a = alpha_from_tau(tau, steps)
    return Acceptance([a] * steps, f"preset {name}: i.i.d. alpha {a:.3f} (ASSUMPTION: equal at every position) "
                           f"from tau {tau:.2f} at {steps} steps; {src}")


def from_numbers(alphas: list[float], flag: str = "--acceptance-conditional") -> Acceptance:
    """Conditional per-position acceptance alpha_i = P(draft i accepted | 1..i-1 accepted)."""
    if not alphas or any(not isinstance(a, (int, float)) or not 0.0 <= a <= 1.0 for a in alphas):
        raise UserError(f"{flag} wants per-position acceptance values in [0, 1], got {alphas}")
    tau = expected_tokens(alphas)
    return Acceptance(list(alphas), f"given per position, conditional: {', '.join(f'{a:.3f}' for a in alphas)} "
                                    f"(tau {tau:.2f} at {len(alphas)} steps)")


def from_cumulative(reach: list[float], flag: str = "--acceptance-cumulative") -> Acceptance:
    """Cumulative per-position acceptance p_i = P(drafts 1..i all accepted) (vLLM's per-position rates).

    alpha_1 = p_1, alpha_i = p_i / p_(i-1): tau = 1 + sum p_i either way (0.645,0.393,0.240 -> 2.28)."""
    if not reach or any(not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0 for p in reach):
        raise UserError(f"{flag} wants per-position acceptance values in [0, 1], got {reach}")
    if any(b > a + 1e-12 for a, b in zip(reach, reach[1:])):
        raise UserError(f"{flag} {','.join(f'{p:g}' for p in reach)}: cumulative rates P(first i drafts accepted) "
                        "cannot rise with i; if these are conditional rates, pass them as --acceptance-conditional")
    alphas = [reach[0]] + [b / a if a > 0 else 0.0 for a, b in zip(reach, reach[1:])]
    tau = 1.0 + sum(reach)
    return Acceptance(alphas, f"given per position, cumulative {', '.join(f'{p:.3f}' for p in reach)} -> conditional "
                              f"{', '.join(f'{a:.3f}' for a in alphas)} (tau {tau:.2f} at {len(reach)} steps)")


def load_bench(path: str) -> dict:
    """A bench JSON, every number the planner uses checked (bench/document.py)."""
    from ..bench.document import load

    return load(path, "--bench")


def bench_setting(doc: dict, path: str | None = None) -> tuple[int, int, int]:
    """(steps, topk, draft tokens) the speculative server ran: the `setting` bench trusted (its /server_info
    checked against its answers), else its /server_info, else the histograms."""
    info = (doc.get("servers") or {}).get("spec") or {}
    trusted = doc.get("setting")
    if isinstance(trusted, dict) and all(is_int(trusted.get(k)) and trusted[k] > 0 for k in ("steps", "topk", "draft_tokens")):
        info = {"speculative_num_steps": trusted["steps"], "speculative_eagle_topk": trusted["topk"],
                "speculative_num_draft_tokens": trusted["draft_tokens"],
                "speculative_adaptive": bool(trusted.get("adaptive"))}
    steps = info.get("speculative_num_steps") or (doc.get("overall") or {}).get("drafts_per_verify")
    topk = info.get("speculative_eagle_topk") or 1
    n = info.get("speculative_num_draft_tokens") or (steps + 1 if steps else None)
    if not steps:
        raise UserError(f"{'--bench ' + str(path) if path else 'bench JSON'}: the speculative server's steps are unknown "
                        "(no /server_info and no spec fields): give a bench JSON of a run against the speculating "
                        "server, or the acceptance itself (--acceptance-conditional, --alpha)")
    dpv = (doc.get("overall") or {}).get("drafts_per_verify")
    if info.get("speculative_num_steps") and dpv and not info.get("speculative_adaptive") and dpv != int(n) - 1:
        raise UserError(f"bench JSON: the server's /server_info says steps {steps} / topk {topk} / {n} draft tokens "
                        f"({int(n) - 1} drafts a verify), but its answers averaged {dpv} drafts a verify: the "
                        "file mixes runs or servers; bench the server again")
    return int(steps), int(topk), int(n)


def from_bench(doc: dict, path: str) -> Acceptance:
    """Pool every speculative request's histogram (acceptance is a property of drafter and data, not of load)."""
    steps, topk, n = bench_setting(doc, path)
    hist: list[int] = []
    for lv in doc["levels"]:
        h = (lv.get("spec") or {}).get("histogram") or []
        hist = [a + b for a, b in zip(hist + [0] * (len(h) - len(hist)), h + [0] * (len(hist) - len(h)))]
    if not sum(hist):
        raise UserError(f"{path}: no request carried spec_correct_drafts_histogram (speculation off on that server?)")
    if any(hist[steps + 1:]):
        raise UserError(f"{path}: the pooled histogram {hist} counts verify passes that accepted more than the "
                        f"{steps} drafts the server makes a verify; not a measurement of this server")
    alphas = alphas_from_histogram(hist, steps)
    measured = [a for a in alphas if a is not None]
    alphas = measured + [0.0] * (steps - len(measured))  # a position never reached was never accepted
    label = f"measured in {path}: {sum(hist)} verify passes at steps {steps} / topk {topk} / {n} draft tokens"
    if topk == 1:
        return Acceptance(alphas, label)
    return Acceptance(None, label, {(steps, topk, n): alphas})
