"""Preflight checks that compare a drafter with what SGLang will build and feed it. Pure.

The SGLang side comes from `Deployment.sglang` (SglangFacts, gathered from SGLang's own code by
integration/preflight/sglang_facts.py); the checkpoint side from `Deployment.draft_weights`
(preflight/checkpoint.py). Each rule below names the SGLang 0.5.23 code it stands for.
"""

from __future__ import annotations

from .checkpoint import INT_DTYPES
from .model import Deployment, Finding

REDOWNLOAD = "re-download the drafter (huggingface-cli download <repo> --local-dir <folder>)"


def check_draft_class(d: Deployment) -> list[Finding]:
    """The draft worker builds the draft through ModelRegistry: an unregistered class never loads."""
    f = d.sglang
    if d.draft is None or f is None or not f.draft_class_error:
        return []
    known = "LlamaForCausalLMEagle3 (MHA) or Eagle3DeepseekV2ForCausalLM (MLA)"
    return [Finding("error", "draft_class", f.draft_class_error, f"an EAGLE-3 draft class SGLang registers: {known}",
                    f"point --speculative-draft-model-path at a drafter whose config.json 'architectures' is one of "
                    f"them (fix 'architectures' in {d.draft.file} only if the weights really are that layout)")]


def check_same_model(d: Deployment) -> list[Finding]:
    if d.draft is None or not d.same_model_folder:
        return []
    return [Finding("error", "draft_path", f"--speculative-draft-model-path names the target's own folder "
                    f"({d.target.path}): SGLang would load the {d.target.num_hidden_layers}-layer target a second time "
                    "as the draft", "a separate EAGLE-3 drafter checkpoint (one decoder layer)",
                    "--speculative-draft-model-path <drafter folder or repo id>")]


def check_aux_agreement(d: Deployment) -> list[Finding]:
    """What the target captures, the buffer SGLang sizes for it and the draft's fc must all agree.

    target:  set_eagle3_layers_to_capture(eagle_config ids) -> c layers, each target hidden wide
    buffer:  get_draft_input_from_target_hidden_dim -> (target_hidden_size | draft hidden) x num_aux
    fc:      the draft class's fc in-width (llama_eagle3.LlamaModel / kimi_k25_eagle3.Eagle3MLAModel)
    weights: fc.weight's second dimension must equal the fc SGLang builds, or loading fails
    """
    f, dr, t = d.sglang, d.draft, d.target
    if f is None or dr is None or d.algorithm != "EAGLE3" or f.draft_class is None:
        return []
    out = []
    if f.top_level_ids is not None and f.capture_ids is None:
        out.append(Finding("warning", "aux_layers", f"top-level eagle_aux_hidden_state_layer_ids {f.top_level_ids} in "
                           f"{dr.file}: SGLang's target reads only eagle_config.eagle_aux_hidden_state_layer_ids and "
                           f"captures its default layers instead", "the ids inside eagle_config",
                           f"move them into \"eagle_config\": {{\"eagle_aux_hidden_state_layer_ids\": "
                           f"{f.top_level_ids}}} in {dr.file}"))
    if f.use_aux is False:
        out.append(Finding("info", "aux_layers", "eagle_config.use_aux_hidden_state is false: SGLang feeds the draft "
                           f"one hidden state of width {dr.hidden_size}, captures no aux layers and skips the fc"))
        return out
    cap = f.captured_layers
    if cap is not None and not cap:
        out.append(Finding("error", "aux_layers", f"eagle_config.eagle_aux_hidden_state_layer_ids {f.capture_ids}: "
                           "the target captures no layer at all", "the 3 layers the drafter was trained on",
                           f"set eagle_aux_hidden_state_layer_ids in {dr.file}, or remove it for SGLang's default"))
        return out
    widths = []
    if cap is not None:
        widths.append(("the target captures", len(cap) * t.hidden_size, f"{len(cap)} layers x {t.hidden_size}"))
    if f.draft_input_width is not None:
        widths.append(("SGLang sizes the draft-input buffer", f.draft_input_width,
                       "get_draft_input_from_target_hidden_dim: (target_hidden_size or draft hidden) x num_aux"))
    if f.fc_in_features is not None:
        widths.append((f"SGLang builds the draft fc ({f.draft_class}) for", f.fc_in_features,
                       "target_hidden_size x num_aux_hidden_states / eagle_config ids"))
    fc_w = next((v for k, v in (d.draft_tensor_shapes or {}).items() if k in ("fc.weight", "model.fc.weight")), None)
    if fc_w is not None and len(fc_w) == 2:
        widths.append(("the checkpoint's fc.weight takes", fc_w[1], f"shape {fc_w}"))
    if len({w for _, w, _ in widths}) > 1:
        found = "; ".join(f"{who} {w} ({how})" for who, w, how in widths)
        fix = (f"make num_aux_hidden_states, eagle_config.eagle_aux_hidden_state_layer_ids and target_hidden_size "
               f"in {dr.file} describe the same {len(cap) if cap else 3} x {t.hidden_size} input the drafter was "
               "trained on")
        out.append(Finding("error", "aux_layers", "aux hidden-state widths disagree: " + found,
                           "one width everywhere, or the launch fails when the draft first runs", fix))
    elif widths:
        out.append(Finding("info", "aux_layers", f"aux input {widths[0][1]} wide everywhere SGLang looks "
                           f"({', '.join(who for who, _, _ in widths)})"))
    for note in f.notes:
        out.append(Finding("info", "sglang_facts", note + " (not checked)"))
    return out


def check_draft_weights(d: Deployment) -> list[Finding]:
    """The draft checkpoint against SGLang's loader: shards, file sizes, d2t, lm_head rows."""
    dr, w, shapes = d.draft, d.draft_weights, d.draft_tensor_shapes
    if dr is None:
        return []
    out = []
    if w is not None and w.missing_shards:
        out.append(Finding("error", "draft_weights", f"model.safetensors.index.json names shard(s) missing from "
                           f"{w.folder}: {', '.join(w.missing_shards)} (incomplete download)",
                           "every shard the index names (SGLang refuses to load without them)", REDOWNLOAD))
    for t in (w.truncated if w is not None else []):
        out.append(Finding("error", "draft_weights", f"{t} (truncated download)",
                           "each file at least as long as its header's data offsets", REDOWNLOAD))
    dv = dr.draft_vocab_size
    pruned = dv is not None and dv < d.target.vocab_size
    if shapes is None:
        if pruned:
            out.append(Finding("info", "vocab", f"pruned draft vocabulary {dv} of {d.target.vocab_size}: d2t not "
                               "checked (no weights next to the config)"))
        return out
    d2t = next(((k, v) for k, v in shapes.items() if k == "d2t" or k.endswith(".d2t")), None)
    if d2t is None:
        shard = w.missing_shard_of("d2t") if w is not None else None
        if pruned and shard is None:
            out.append(Finding("error", "vocab", f"pruned draft vocabulary ({dv}) but no d2t tensor in the draft weights",
                               "a d2t tensor [draft_vocab_size] mapping draft ids to target ids",
                               "export the drafter with its d2t (SpecForge saves it)"))
    else:
        name, shape = d2t
        dtype = w.tensors[name].dtype if w is not None and name in w.tensors else None
        if dtype is not None and dtype not in INT_DTYPES:
            out.append(Finding("error", "vocab", f"the d2t tensor is {dtype}: SGLang turns it into target token ids "
                               "(d2t + arange) and indexes with them", "an integer tensor (I64)", "re-export the drafter"))
        if len(shape) != 1:
            out.append(Finding("error", "vocab", f"the d2t tensor has shape {shape}",
                               f"[{dv if dv is not None else 'draft_vocab_size'}] (one target offset per draft id)",
                               "re-export the drafter"))
        elif dv is not None and shape[0] != dv:
            entries = "1 entry" if shape[0] == 1 else f"{shape[0]} entries"
            out.append(Finding("error", "vocab", f"the d2t tensor has {entries}", f"{dv} (draft_vocab_size)",
                               "re-export the drafter"))
        elif w is not None and w.hot_id_range is not None:
            lo, hi = w.hot_id_range
            if lo < 0 or hi >= d.target.vocab_size:
                out.append(Finding("error", "vocab", f"d2t maps draft ids to target ids {lo}..{hi}",
                                   f"ids in [0, {d.target.vocab_size - 1}] (the target's vocabulary)",
                                   "re-export the drafter for this target's tokenizer"))
    head = next(((k, v) for k, v in shapes.items() if k in ("lm_head.weight", "model.lm_head.weight")), None)
    if head is not None and not dr.tie_word_embeddings:
        rows = dv if dv is not None else dr.vocab_size  # llama_eagle3: ParallelLMHead(draft_vocab_size or vocab_size)
        if not head[1] or head[1][0] != rows:
            out.append(Finding("error", "draft_weights", f"lm_head.weight has shape {head[1]}",
                               f"{rows} rows (draft_vocab_size; SGLang's vocab weight loader asserts it)",
                               f"fix draft_vocab_size in {dr.file} to the checkpoint's, or re-download the drafter"))
    return out
