"""`check` and SGLang agree on whether a launch starts: a table of launches, each the issue's hostile input
or its correct twin, run once through `check` and once through SGLang's own start-up path on CPU.

SGLang's side (in one fresh interpreter, our preflight off, every other plugin hook on, as a real launch):
  prepare_server_args + resolve_once as on sm90; publish; the target and draft ModelConfig as the
  TpModelWorker / draft worker build them; get_model_architecture for the draft; the aux-state config
  SGLang resolves (resolve_spec_aux_hidden_state_config), the layers the target class captures, the
  buffer width (get_draft_input_from_target_hidden_dim) and the draft fc SGLang constructs (meta device);
  the weights through SGLang's shard filter, safetensors' reader, the draft class's own load_weights for
  d2t and the worker's `hot_token_id[topk_index]` -> target embedding lookup, ParallelLMHead's weight
  loader for lm_head; for trees organize_draft_results at the resolved sizes.
`check` agrees when it finds errors (or refuses the input, exit 2) exactly where SGLang fails.
"""

from __future__ import annotations

import contextlib
import io
import json
import shlex
import struct

import pytest
from helpers import AQ_K2_DRAFT, EMULATED_SM90_PREFLIGHT, KIMI_K25, LLAMA_8B, LLAMA_8B_DRAFT, edited_copy, run_json

from sglang_kimi_eagle3.cli import main as cli_main
from sglang_kimi_eagle3.planner.profiles import names as profile_names
from sglang_kimi_eagle3.planner.sources import PRESETS

pytestmark = pytest.mark.slow

CODE = r'''
import json, os, sys, types, warnings
warnings.filterwarnings("ignore")
import logging
from sglang.srt.plugins import load_plugins
load_plugins()
logging.getLogger().setLevel(logging.ERROR)
import torch
from sglang.srt.server_args import prepare_server_args
from sglang.srt.configs.model_config import ModelConfig
from sglang.srt.runtime_context import override_platform, publish, get_model, get_spec, get_parallel
from sglang_kimi_eagle3.errors import UserError
from sglang_kimi_eagle3.commands import check as check_cmd
SM90 = check_cmd.platform_facts(90)
#EMULATED_SM90_PREFLIGHT

class env_set:
    def __init__(self, env): self.env = env
    def __enter__(self):
        self.saved = {k: os.environ.get(k) for k in self.env}
        os.environ.update(self.env)
    def __exit__(self, *a):
        for k, v in self.saved.items():
            if v is None: os.environ.pop(k, None)
            else: os.environ[k] = v

def check_verdict(argv, env):
    with env_set(env):
        try:
            res = check_cmd.run(argv + ["--for-gpu", "sm90"])
        except UserError as exc:
            return {"verdict": "input", "errors": [str(exc)[:400]]}
        except BaseException as exc:
            return {"verdict": "crash", "errors": [f"{type(exc).__name__}: {exc}"[:600]]}
    errs = [f.one_line()[:400] for f in res["findings"] if f.severity == "error"]
    return {"verdict": "refuse" if errs else "start", "errors": errs}

def launch_verdict(argv, env):
    """The launch-time preflight (SGLANG_KIMI_EAGLE3_PREFLIGHT=on, the default): resolve_once refuses or not."""
    with env_set(env):
        try:
            sa = prepare_server_args(argv + ["--device", "cuda"])
            with override_platform(**SM90):
                sa.resolve_once()
        except BaseException as exc:
            return {"verdict": "refuse", "error": f"{type(exc).__name__}: {exc}"[:300]}
    return {"verdict": "start"}

def stand_in(fn, n_layers):
    s = type("S", (), {"set_eagle3_layers_to_capture": fn})()
    s.pp_group = types.SimpleNamespace(is_last_rank=True)
    s.config = types.SimpleNamespace(num_hidden_layers=n_layers)
    s.model = types.SimpleNamespace(layers_to_capture=None)
    return s

def tp1():
    return get_parallel().override(tp_size=1, tp_rank=0, tp_group=None, attn_tp_size=1, attn_tp_rank=0,
                                   attn_tp_group=None, attn_dp_size=1, attn_dp_rank=0, attn_cp_size=1, attn_cp_rank=0,
                                   moe_ep_size=1, moe_dp_size=1, moe_tp_size=1)

def fc_width(cls, hf):
    import copy
    name = cls.__name__
    if name == "LlamaForCausalLMEagle3":
        from sglang.srt.models import llama_eagle3
        cfg = copy.deepcopy(hf); cfg.num_hidden_layers = 0
        with torch.device("meta"), tp1():
            return llama_eagle3.LlamaModel(cfg).fc.in_features
    if name == "Eagle3DeepseekV2ForCausalLM":
        from sglang.srt.models.kimi_k25_eagle3 import _get_eagle_aux_layer_count
        return (getattr(hf, "target_hidden_size", None) or hf.hidden_size) * _get_eagle_aux_layer_count(hf)
    raise ValueError(f"{name} builds no EAGLE-3 fc for the aux hidden states")

def weights(folder, draft_cls, draft_hf, target_vocab):
    import glob
    from safetensors import safe_open
    from sglang.srt.model_loader.weight_utils import filter_duplicate_safetensors_files
    files = sorted(glob.glob(os.path.join(folder, "*.safetensors")))
    if not files:
        return
    files = filter_duplicate_safetensors_files(files, folder, "model.safetensors.index.json")
    tensors = {}
    for f in files:
        with safe_open(f, "pt") as fh:
            for k in fh.keys():
                tensors[k] = fh.get_tensor(k)
    if "d2t" in tensors:
        model = types.SimpleNamespace(named_parameters=lambda: [], hot_token_id=None)
        draft_cls.load_weights(model, [("d2t", tensors["d2t"])])
        hot = model.hot_token_id
        topk_index = torch.tensor([[0, draft_hf.draft_vocab_size - 1]])  # what the draft's top-k yields
        ids = hot[topk_index]  # eagle_worker_v2: topk_index = self.hot_token_id[topk_index]
        if ids.shape != topk_index.shape:
            raise ValueError(f"hot_token_id[topk_index] has shape {tuple(ids.shape)}")
        torch.nn.functional.embedding(ids, torch.zeros(target_vocab, 1))  # the target embeds them at verify
    if "lm_head.weight" in tensors:
        from sglang.srt.layers.vocab_parallel_embedding import ParallelLMHead
        with tp1():
            head = ParallelLMHead(draft_hf.draft_vocab_size, draft_hf.hidden_size)
            head.weight_loader(head.weight, tensors["lm_head.weight"])

def tree(steps, topk, n):
    from sglang.srt.speculative import spec_utils
    from sglang.srt.speculative.eagle_utils import organize_draft_results
    later = spec_utils._select_top_k_tokens_later._torchdynamo_orig_callable
    p, idx = torch.rand(1, topk), torch.zeros(1, topk, dtype=torch.long)
    _, _, scores, info = spec_utils.select_top_k_tokens(0, p, idx, None, None, topk)
    lists = [[info[0]], [info[1]], [info[2]]]
    for i in range(1, steps):
        p, idx = torch.rand(topk, topk), torch.zeros(topk, topk, dtype=torch.long)
        _, _, scores, info = later(i, p, idx, None, scores, topk)
        for acc, x in zip(lists, info):
            acc.append(x)
    organize_draft_results(*lists, n)

def sglang_verdict(argv, env):
    from sglang.srt.model_loader.utils import get_model_architecture
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
    from sglang.srt.speculative.eagle_utils import get_draft_input_from_target_hidden_dim
    from sglang.srt.model_executor.model_runner_components.spec_aux_hidden_state import (
        resolve_spec_aux_hidden_state_config)
    stage = "resolve"
    with env_set({**env, "SGLANG_KIMI_EAGLE3_PREFLIGHT": "off"}):
        try:
            sa = prepare_server_args(argv + ["--device", "cuda"])
            with override_platform(**SM90):
                sa.resolve_once()
            publish(sa, role="scheduler")
            stage = "target ModelConfig"
            target = ModelConfig.from_server_args(sa, model_path=get_model().model_path, is_draft_model=False,
                                                  context_length=None)
            stage = "draft ModelConfig"
            draft = ModelConfig.from_server_args(sa, model_path=get_spec().speculative_draft_model_path,
                                                 model_revision=get_spec().speculative_draft_model_revision,
                                                 is_draft_model=True, context_length=target.context_len)
            stage = "draft class"
            draft_cls, _ = get_model_architecture(draft)
            target_cls, _ = get_model_architecture(target)
            algo = SpeculativeAlgorithm.from_string(get_spec().speculative_algorithm)
            steps, topk, n = (get_spec().speculative_num_steps, get_spec().speculative_eagle_topk,
                              get_spec().speculative_num_draft_tokens)
            if topk > 1:
                stage = "draft tree"
                tree(steps, topk, n)
            if algo.is_eagle3():
                stage = "aux hidden states"
                aux = resolve_spec_aux_hidden_state_config(server_args=sa, model_config=target, spec_algorithm=algo,
                                                           is_draft_worker=False)
                if aux.eagle_use_aux_hidden_state:
                    outer = stand_in(target_cls.set_eagle3_layers_to_capture, target.num_hidden_layers)
                    inner = outer
                    text = getattr(target.hf_config, "text_config", None)
                    if text is not None:
                        inner_cls, _ = get_model_architecture(types.SimpleNamespace(
                            hf_config=text, quantization=None, model_impl=target.model_impl, model_path=target.model_path,
                            revision=None, is_embedding_gemma=False))
                        inner = outer.language_model = stand_in(inner_cls.set_eagle3_layers_to_capture,
                                                                text.num_hidden_layers)
                    outer.set_eagle3_layers_to_capture(aux.eagle_aux_hidden_state_layer_ids)
                    captured = inner.model.layers_to_capture
                    buffer = get_draft_input_from_target_hidden_dim(types.SimpleNamespace(model_config=draft,
                                                                                          spec_algorithm=algo))
                    fc = fc_width(draft_cls, draft.hf_config)
                    widths = {len(captured) * target.hidden_size, buffer, fc}
                    if not captured or len(widths) != 1:
                        raise ValueError(f"captured {captured} x {target.hidden_size}, buffer {buffer}, fc {fc}")
            stage = "draft weights"
            weights(draft.model_path, draft_cls, draft.hf_config, target.vocab_size)
        except BaseException as exc:
            return {"verdict": "fail", "stage": stage, "error": f"{type(exc).__name__}: {exc}"[:500]}
    return {"verdict": "start"}

checks = {name: check_verdict(argv, env) for name, (argv, env) in CASES.items()}
launches = {name: launch_verdict(argv, env) for name, (argv, env) in CASES.items()}
truths = {name: sglang_verdict(argv, env) for name, (argv, env) in CASES.items()}
try:
    from sglang_kimi_eagle3.integration.preflight.sglang_facts import tree_capacity
    trees = {f"{s},{k}": tree_capacity(s, k) for s in range(1, 7) for k in range(2, 9)}
except ImportError:
    trees = {}
print(json.dumps({"_tree_capacity": trees, **{name: {"check": checks[name], "launch": launches[name], "sglang": truths[name]}
                                        for name in CASES}}))
'''

V = 64  # draft vocabulary of the weight cases: small tensors, the same code paths as 32000
HIDDEN = 7168


def safetensors_bytes(tensors: dict) -> bytes:
    """name -> (dtype, shape, raw bytes) as one safetensors file (the format's own layout)."""
    header, blob = {}, b""
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(blob), len(blob) + len(raw)]}
        blob += raw
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)
    return len(head).to_bytes(8, "little") + head + blob


def d2t(hot: list[int], dtype="I64", shape=None):
    vals = [h - i for i, h in enumerate(hot)]
    raw = struct.pack(f"<{len(vals)}q", *vals) if dtype == "I64" else struct.pack(f"<{len(vals)}f", *vals)
    return (dtype, shape if shape is not None else [len(vals)], raw)


def lm_head(rows: int):
    return ("BF16", [rows, HIDDEN], bytes(2 * rows * HIDDEN))


GOOD_HOT = [i * 100 for i in range(V)]


def weights_folder(root, name, files: dict, index: dict | None = None, truncate: int = 0, **edits):
    folder = edited_copy(AQ_K2_DRAFT, root / name, draft_vocab_size=V, **edits)
    for fname, tensors in files.items():
        data = safetensors_bytes(tensors)
        (folder / fname).write_bytes(data[:len(data) - truncate] if truncate else data)
    if index is not None:
        (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": index}))
    return str(folder)


MLA = dict(architectures=["Eagle3DeepseekV2ForCausalLM"], kv_lora_rank=512, q_lora_rank=1536, qk_nope_head_dim=128,
           qk_rope_head_dim=64, v_head_dim=128, num_key_value_heads=64)


def build_cases(root):
    d = lambda name, **kw: str(edited_copy(AQ_K2_DRAFT, root / name, **kw))  # noqa: E731
    no_ids = {"use_aux_hidden_state": True}
    adaptive = root / "adaptive.json"
    adaptive.write_text(json.dumps({"1": {"candidate_steps": [0, 3, 7]}, "8": {"candidate_steps": [0, 3]}}))
    home = root / "home"
    home.mkdir()
    edited_copy(AQ_K2_DRAFT, home / "drafter")
    (root / "target-link").symlink_to(KIMI_K25)

    def kimi(draft=str(AQ_K2_DRAFT), spec=("3", "1", "4"), extra=(), model=str(KIMI_K25)):
        argv = ["--model-path", model, "--trust-remote-code", "--tp-size", "8", "--speculative-algorithm", "EAGLE3",
                "--speculative-draft-model-path", draft]
        for flag, v in zip(("--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens"), spec):
            if v is not None:
                argv += [flag, v]
        return argv + list(extra)

    ok = {"model.safetensors": {"d2t": d2t(GOOD_HOT), "lm_head.weight": lm_head(V)}}
    c = {
        "default": (kimi(), {}),
        # draft classes
        "class_qwen3_eagle3": (kimi(d("q3", architectures=["Qwen3ForCausalLMEagle3"])), {}),
        "class_eagle3_llama": (kimi(d("e3l", architectures=["Eagle3LlamaForCausalLM"])), {}),
        "class_mla": (kimi(d("mla", **MLA)), {}),
        # aux ids / num_aux_hidden_states / fc width / capture
        "aux_top_level_4": (kimi(d("t4", eagle_config=no_ids, eagle_aux_hidden_state_layer_ids=[2, 20, 40, 58])), {}),
        "aux_top_level_3": (kimi(d("t3", eagle_config=no_ids, eagle_aux_hidden_state_layer_ids=[2, 30, 58])), {}),
        "aux_num_aux_4": (kimi(d("n4", num_aux_hidden_states=4)), {}),
        "aux_num_aux_3": (kimi(d("n3", num_aux_hidden_states=3)), {}),
        "aux_empty_ids": (kimi(d("e0", eagle_config__eagle_aux_hidden_state_layer_ids=[])), {}),
        "aux_four_ids": (kimi(d("i4", eagle_config__eagle_aux_hidden_state_layer_ids=[2, 20, 40, 58])), {}),
        "aux_use_aux_false": (kimi(d("ua", eagle_config__use_aux_hidden_state=False)), {}),
        "aux_target_hidden_4096": (kimi(d("th", target_hidden_size=4096)), {}),
        "aux_narrow_draft_declared": (kimi(d("nd", hidden_size=4096, target_hidden_size=HIDDEN)), {}),
        "aux_mla_num_aux_4": (kimi(d("mla4", num_aux_hidden_states=4, **MLA)), {}),
        # draft weights
        "w_ok": (kimi(weights_folder(root, "w_ok", ok)), {}),
        "w_d2t_float32": (kimi(weights_folder(root, "w_f32", {"model.safetensors": {
            "d2t": d2t(GOOD_HOT, "F32"), "lm_head.weight": lm_head(V)}})), {}),
        "w_d2t_column": (kimi(weights_folder(root, "w_col", {"model.safetensors": {
            "d2t": d2t(GOOD_HOT, shape=[V, 1]), "lm_head.weight": lm_head(V)}})), {}),
        "w_d2t_scalar": (kimi(weights_folder(root, "w_0d", {"model.safetensors": {
            "d2t": ("I64", [], struct.pack("<q", 0)), "lm_head.weight": lm_head(V)}})), {}),
        "w_d2t_short": (kimi(weights_folder(root, "w_short", {"model.safetensors": {
            "d2t": d2t(GOOD_HOT[:-1]), "lm_head.weight": lm_head(V)}})), {}),
        "w_d2t_out_of_vocab": (kimi(weights_folder(root, "w_oov", {"model.safetensors": {
            "d2t": d2t([163840 + i for i in range(V)]), "lm_head.weight": lm_head(V)}})), {}),
        "w_lm_head_rows": (kimi(weights_folder(root, "w_rows", {"model.safetensors": {
            "d2t": d2t(GOOD_HOT), "lm_head.weight": lm_head(V + 1)}})), {}),
        "w_truncated": (kimi(weights_folder(root, "w_trunc", ok, truncate=4096)), {}),
        "w_index_ok": (kimi(weights_folder(root, "w_idx", {"a.safetensors": {"d2t": d2t(GOOD_HOT)},
                                                            "b.safetensors": {"lm_head.weight": lm_head(V)}},
                                          index={"d2t": "a.safetensors", "lm_head.weight": "b.safetensors"})), {}),
        "w_index_missing_shard": (kimi(weights_folder(root, "w_miss", {"b.safetensors": {"lm_head.weight": lm_head(V)}},
                                                      index={"d2t": "a.safetensors", "lm_head.weight": "b.safetensors"})), {}),
        # the draft path is the target
        "draft_is_target": (kimi(str(KIMI_K25)), {}),
        "draft_is_target_via_link": (kimi(str(root / "target-link")), {}),
        # paths as SGLang takes them
        "path_tilde": (kimi("~/drafter"), {}),
        "path_home_spelled_out": (kimi(str(home / "drafter")), {}),
        # tree size: topk + (steps - 1) * topk^2 + 1
        "tree_5_8_64": (kimi(spec=("5", "8", "64")), {}),
        "tree_3_4_16": (kimi(spec=("3", "4", "16")), {}),
        "tree_3_4_37": (kimi(spec=("3", "4", "37")), {}),
        "tree_3_4_38": (kimi(spec=("3", "4", "38")), {}),
        "tree_2_2_7": (kimi(spec=("2", "2", "7")), {}),
        "tree_2_2_8": (kimi(spec=("2", "2", "8")), {}),
        "tree_no_draft_tokens": (kimi(spec=("3", "4", None)), {}),
        # --context-length and SGLang's escape hatch
        "ctx_300000": (kimi(extra=["--context-length", "300000"]), {}),
        "ctx_300000_escape": (kimi(extra=["--context-length", "300000"]), {"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1"}),
        "ctx_262144": (kimi(extra=["--context-length", "262144"]), {}),
        # speculative parameters: what `plan` prints, and partial sets
        "plan_adaptive_flags": (kimi(spec=("7", "1", None), extra=["--speculative-adaptive", "--speculative-adaptive-config",
                                                                    str(adaptive)]), {}),
        "plan_adaptive_steps_not_a_candidate": (kimi(spec=("5", "1", None), extra=[
            "--speculative-adaptive", "--speculative-adaptive-config", str(adaptive)]), {}),
        "spec_topk1_no_draft_tokens": (kimi(spec=("3", "1", None)), {}),
        "spec_steps_only": (kimi(spec=("3", None, None)), {}),
        "spec_none_given": (kimi(spec=()), {}),
        # the Llama pair (SGLang's own defaults for it: 5 / 4 / 8)
        "llama_default": (["--model-path", str(LLAMA_8B), "--speculative-algorithm", "EAGLE3",
                           "--speculative-draft-model-path", str(LLAMA_8B_DRAFT)], {}),
    }
    c.update(plan_cases(root, kimi))
    return c, str(home)


PLAN_RUNS = {f"plan_preset_{p}": ["--preset", p] for p in PRESETS} | {
    f"plan_profile_{p}": ["--profile", p] for p in profile_names()}


def plan_cases(root, kimi) -> dict:
    """The launch flags `plan` prints, for every acceptance preset and every bundled hardware profile."""
    out = {}
    for name, args in PLAN_RUNS.items():
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            rc = cli_main(["plan", *args, "-o", str(root / f"{name}.json"), "--no-sglang-check"])
        assert rc == 0, buf.getvalue()[-2000:]
        printed = buf.getvalue().replace(" \\\n", " ")  # shell() continues a long command on the next line
        for key, prefix in ((name, "launch flags: "), (f"{name}_file", "the ")):
            # the recommended launch, then the written file's flags (SGLang's own slot logic), printed after it
            line = next(ln for ln in printed.splitlines() if ln.startswith(prefix) and "--speculative-" in ln
                        and (key == name or "file instead" in ln))
            flags = shlex.split(line.split(": ", 1)[1])
            assert "--speculative-algorithm" in flags, line  # every preset gains somewhere
            if key != name:
                assert "--speculative-adaptive-config" in flags, line
            out[key] = (kimi(spec=()) + [f for f in flags if f not in ("--speculative-algorithm", "EAGLE3")], {})
    return out


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    root = tmp_path_factory.mktemp("agree")
    cases, home = build_cases(root)
    code = CODE.replace("#EMULATED_SM90_PREFLIGHT", EMULATED_SM90_PREFLIGHT, 1)  # preflight's GPU: helpers.py
    return cases, run_json(f"CASES = {cases!r}\n" + code, timeout=900, HF_HUB_OFFLINE="1", HOME=home)


NAMES = ("default", "class_qwen3_eagle3", "class_eagle3_llama", "class_mla", "aux_top_level_4", "aux_top_level_3",
         "aux_num_aux_4", "aux_num_aux_3", "aux_empty_ids", "aux_four_ids", "aux_use_aux_false", "aux_target_hidden_4096",
         "aux_narrow_draft_declared", "aux_mla_num_aux_4", "w_ok", "w_d2t_float32", "w_d2t_column", "w_d2t_scalar",
         "w_d2t_short", "w_d2t_out_of_vocab", "w_lm_head_rows", "w_truncated", "w_index_ok", "w_index_missing_shard",
         "draft_is_target", "draft_is_target_via_link", "path_tilde", "path_home_spelled_out", "tree_5_8_64",
         "tree_3_4_16", "tree_3_4_37", "tree_3_4_38", "tree_2_2_7", "tree_2_2_8", "tree_no_draft_tokens", "ctx_300000",
         "ctx_300000_escape", "ctx_262144", "plan_adaptive_flags", "plan_adaptive_steps_not_a_candidate",
         "spec_topk1_no_draft_tokens", "spec_steps_only", "spec_none_given", "llama_default") + tuple(PLAN_RUNS) + \
    tuple(f"{n}_file" for n in PLAN_RUNS)


def test_the_table_is_the_one_parametrized(table):
    assert sorted(table[0]) == sorted(NAMES) and len(NAMES) >= 40


@pytest.mark.parametrize("name", NAMES)
def test_check_and_sglang_agree(table, name):
    ck, sg = table[1][name]["check"], table[1][name]["sglang"]
    assert ck["verdict"] != "crash", ck  # no exit 3 from any input of the table
    assert (ck["verdict"] == "start") == (sg["verdict"] == "start"), (ck, sg)
    # the launch-time preflight (the same step, raising) refuses exactly what check refuses
    assert table[1][name]["launch"]["verdict"] == ("start" if ck["verdict"] == "start" else "refuse"), table[1][name]


@pytest.mark.parametrize("name,verdict", [
    ("default", "start"), ("class_qwen3_eagle3", "fail"), ("class_eagle3_llama", "fail"), ("aux_top_level_4", "fail"),
    ("aux_num_aux_4", "fail"), ("aux_empty_ids", "fail"), ("w_d2t_float32", "fail"), ("w_d2t_column", "fail"),
    ("w_d2t_scalar", "fail"), ("w_lm_head_rows", "fail"), ("w_truncated", "fail"), ("w_index_missing_shard", "fail"),
    ("path_tilde", "fail"), ("tree_5_8_64", "start"), ("tree_3_4_16", "start"), ("ctx_300000_escape", "start"),
    ("plan_adaptive_flags", "start"), ("draft_is_target", "fail"),
])
def test_sglang_side_sees_what_the_issue_says(table, name, verdict):
    """The SGLang emulation itself is not vacuous: the issue's cases fail or start there as reported."""
    assert table[1][name]["sglang"]["verdict"] == verdict, table[1][name]["sglang"]


def test_check_names_the_cause(table):
    got = table[1]
    want = {"class_qwen3_eagle3": "not a model class", "aux_top_level_4": "widths disagree",
            "aux_empty_ids": "captures no layer", "w_d2t_float32": "d2t tensor is F32", "w_d2t_column": "shape [64, 1]",
            "w_d2t_scalar": "shape []", "w_d2t_out_of_vocab": "target ids", "w_lm_head_rows": "lm_head.weight",
            "w_truncated": "truncated download", "w_index_missing_shard": "a.safetensors", "path_tilde": "expand '~'",
            "draft_is_target": "target's own folder", "tree_3_4_38": "<= 37"}
    for name, needle in want.items():
        assert any(needle in e for e in got[name]["check"]["errors"]), (name, got[name]["check"])
    for name in ("aux_top_level_3",):  # serves, but the ids the operator wrote are not the ones used
        assert got[name]["check"]["verdict"] == "start"
    # SGLang refuses the adaptive start value; the message is SGLang's, not a bogus "only some given"
    assert not any("only some given" in e for e in got["plan_adaptive_steps_not_a_candidate"]["check"]["errors"])


def test_planner_tree_bound_is_sglangs(table):
    """planner.model.tree_nodes (pure) against the capacity derived from SGLang's organize_draft_results."""
    from sglang_kimi_eagle3.planner.model import tree_nodes

    caps = table[1]["_tree_capacity"]
    assert caps and all(v is not None for v in caps.values())
    assert {k: tree_nodes(*map(int, k.split(","))) for k in caps} == caps
